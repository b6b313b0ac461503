"""An MCP server registry for the tests: the read API of github.com/modelcontextprotocol/registry
(docs/reference/api/openapi.yaml, `/v0.1`), serving `server.json` entries shaped like the registry's own examples
(docs/reference/server-json/generic-server-json.md) and real entries: npm, PyPI, OCI and remote, with and without
environment variables, secrets and arguments, several versions of one server, and malformed ones.

The npm and PyPI entries name packages the tests have on this machine at those versions (npm's
`@modelcontextprotocol/server-sequential-thinking` in tests/npm, PyPI's `mcp-server-time` beside the hub), so the
tables `mcp-hub add` makes of them start without the network.

    GET /v0.1/servers?search=&version=latest&limit=&cursor=
    GET /v0.1/servers/{name}/versions
    GET /v0.1/servers/{name}/versions/{version}      (`latest`: the latest)
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
OFFICIAL = "io.modelcontextprotocol.registry/official"

THINKING = "2026.8.31"
"""The version of @modelcontextprotocol/server-sequential-thinking in tests/npm/package.json."""
TIME = version("mcp-server-time")
"""The version of mcp-server-time installed beside the hub."""


def _stdio(**package: Any) -> dict[str, Any]:
    return {"transport": {"type": "stdio"}, **package}


def _server(name: str, server_version: str, description: str, **fields: Any) -> dict[str, Any]:
    return {"$schema": SCHEMA, "name": name, "description": description, "version": server_version, **fields}


def _thinking(server_version: str) -> dict[str, Any]:
    return _server(
        "io.github.modelcontextprotocol/sequential-thinking",
        server_version,
        "Dynamic and reflective problem-solving through thought sequences",
        title="Sequential Thinking",
        repository={"url": "https://github.com/modelcontextprotocol/servers", "source": "github"},
        packages=[
            _stdio(
                registryType="npm",
                registryBaseUrl="https://registry.npmjs.org",
                identifier="@modelcontextprotocol/server-sequential-thinking",
                version=server_version,
                environmentVariables=[
                    {
                        "name": "DISABLE_THOUGHT_LOGGING",
                        "description": "Set to true to stop logging thoughts to stderr",
                        "default": "false",
                        "choices": ["true", "false"],
                    }
                ],
            )
        ],
    )


ENTRIES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    # (server.json, the registry's _meta for it)
    (_thinking("2025.7.1"), {"status": "active", "isLatest": False}),
    (_thinking(THINKING), {"status": "active", "isLatest": True}),
    (
        _server(
            "io.github.modelcontextprotocol/time",
            TIME,
            "Time and timezone conversion capabilities",
            packages=[
                _stdio(
                    registryType="pypi",
                    registryBaseUrl="https://pypi.org",
                    identifier="mcp-server-time",
                    version=TIME,
                    runtimeHint="uvx",
                    packageArguments=[
                        {
                            "type": "named",
                            "name": "--local-timezone",
                            "description": "IANA timezone name to use as the local one",
                            "default": "UTC",
                        }
                    ],
                )
            ],
        ),
        {"status": "active", "isLatest": True},
    ),
    (
        _server(
            "io.modelcontextprotocol.anonymous/brave-search",
            "1.0.2",
            "MCP server for Brave Search API integration",
            packages=[
                _stdio(
                    registryType="npm",
                    registryBaseUrl="https://registry.npmjs.org",
                    identifier="@modelcontextprotocol/server-brave-search",
                    version="1.0.2",
                    environmentVariables=[
                        {
                            "name": "BRAVE_API_KEY",
                            "description": "Brave Search API Key",
                            "isRequired": True,
                            "isSecret": True,
                        }
                    ],
                )
            ],
        ),
        {"status": "active", "isLatest": True},
    ),
    (
        _server(
            "io.github.example/database-manager",
            "3.1.0",
            "MCP server for database operations with support for multiple database types",
            packages=[
                _stdio(
                    registryType="oci",
                    identifier="docker.io/example/database-manager-mcp:3.1.0",
                    runtimeArguments=[
                        {"type": "named", "name": "--network", "value": "host", "description": "Use host network mode"},
                        {
                            "type": "named",
                            "name": "-e",
                            "value": "DB_TYPE={db_type}",
                            "description": "Database type to connect to",
                            "isRepeated": True,
                            "variables": {
                                "db_type": {
                                    "description": "Type of database",
                                    "choices": ["postgres", "mysql", "mongodb", "redis"],
                                    "isRequired": True,
                                }
                            },
                        },
                    ],
                    packageArguments=[
                        {
                            "type": "named",
                            "name": "--host",
                            "description": "Database host",
                            "default": "localhost",
                            "isRequired": True,
                        },
                        {"type": "named", "name": "--port", "description": "Database port", "format": "number"},
                        {
                            "type": "positional",
                            "valueHint": "database_name",
                            "description": "Name of the database to connect to",
                            "isRequired": True,
                        },
                    ],
                    environmentVariables=[
                        {"name": "DB_USERNAME", "description": "Database username", "isRequired": True},
                        {
                            "name": "DB_PASSWORD",
                            "description": "Database password",
                            "isRequired": True,
                            "isSecret": True,
                        },
                        {
                            "name": "SSL_MODE",
                            "description": "SSL connection mode",
                            "default": "prefer",
                            "choices": ["disable", "prefer", "require"],
                        },
                        {"name": "DB_LOG_FILE", "description": "Where to log queries"},
                    ],
                )
            ],
        ),
        {"status": "active", "isLatest": True},
    ),
    (
        _server(
            "io.modelcontextprotocol.anonymous/hybrid-mcp",
            "1.5.0",
            "MCP server available as both local package and remote service",
            packages=[
                _stdio(
                    registryType="npm",
                    registryBaseUrl="https://registry.npmjs.org",
                    identifier="@example/hybrid-mcp-server",
                    version="1.5.0",
                    runtimeHint="npx",
                    packageArguments=[
                        {
                            "type": "named",
                            "name": "--mode",
                            "description": "Operation mode",
                            "default": "local",
                            "choices": ["local", "cached", "proxy"],
                        }
                    ],
                )
            ],
            remotes=[
                {
                    "type": "streamable-http",
                    "url": "https://mcp.anonymous.modelcontextprotocol.io/http",
                    "headers": [
                        {
                            "name": "X-API-Key",
                            "description": "API key for authentication",
                            "isRequired": True,
                            "isSecret": True,
                        },
                        {
                            "name": "X-Region",
                            "description": "Service region",
                            "default": "us-east-1",
                            "choices": ["us-east-1", "eu-west-1", "ap-southeast-1"],
                        },
                    ],
                },
                {"type": "sse", "url": "https://mcp.anonymous.modelcontextprotocol.io/sse"},
            ],
        ),
        {"status": "active", "isLatest": True},
    ),
    (
        _server(
            "com.example/weather",
            "2.0.0",
            "Weather forecasts, served from the region you choose",
            remotes=[
                {
                    "type": "sse",
                    "url": "https://{region}.weather.example.com/sse",
                    "variables": {"region": {"description": "Your region", "default": "eu", "choices": ["eu", "us"]}},
                    "headers": [
                        {
                            "name": "Authorization",
                            "value": "Bearer {token}",
                            "variables": {"token": {"description": "Your weather.example.com token", "isSecret": True}},
                        }
                    ],
                }
            ],
        ),
        {"status": "deprecated", "statusMessage": "use com.example/weather2", "isLatest": True},
    ),
    (
        _server(
            "io.github.joelverhagen/knapcode-samplemcpserver",
            "0.5.0",
            "Sample NuGet MCP server for a random number and random weather",
            packages=[
                _stdio(registryType="nuget", identifier="Knapcode.SampleMcpServer", version="0.5.0", runtimeHint="dnx")
            ],
        ),
        {"status": "active", "isLatest": True},
    ),
    (
        _server("com.example/embedded", "0.1.0", "MCP server embedded in a desktop app", websiteUrl="https://e.com"),
        {"status": "active", "isLatest": True},
    ),
    # Malformed: the registry validates what it publishes, but a subregistry may not.
    (
        _server(
            "com.example/no-version",
            "1.0.0",
            "A package without a version",
            packages=[_stdio(registryType="npm", identifier="no-version-mcp")],
        ),
        {"isLatest": True},
    ),
    (
        _server(
            "com.example/ranged",
            "1.0.0",
            "A package with a version range",
            packages=[_stdio(registryType="pypi", identifier="ranged-mcp", version="^1.2.0")],
        ),
        {"isLatest": True},
    ),
    (
        _server(
            "com.example/gem",
            "1.0.0",
            "A package of an unknown registry",
            packages=[_stdio(registryType="gem", identifier="gem-mcp", version="1.0.0")],
        ),
        {"isLatest": True},
    ),
    (
        _server(
            "com.example/no-identifier",
            "1.0.0",
            "A package without an identifier",
            packages=[_stdio(registryType="npm", version="1.0.0")],
        ),
        {"isLatest": True},
    ),
    (
        _server(
            "com.example/untagged",
            "1.0.0",
            "An image without a tag",
            packages=[_stdio(registryType="oci", identifier="docker.io/example/untagged")],
        ),
        {"isLatest": True},
    ),
    (
        {"name": "com.example/nameless-version", "description": "No version at all"},
        {"isLatest": True},
    ),
]


def _listing(server: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    published = {"publishedAt": "2026-09-01T10:00:00Z", "updatedAt": "2026-09-01T10:00:00Z"}
    return {"server": server, "_meta": {OFFICIAL: {**published, **meta}}}


def _not_found() -> JSONResponse:
    return JSONResponse({"error": "Server not found"}, status_code=404)


def registry_app(entries: list[tuple[dict[str, Any], dict[str, Any]]] = ENTRIES) -> Starlette:
    """The registry's read API over `entries` (server.json, the registry's `_meta` for it)."""
    listings = [_listing(server, meta) for server, meta in entries]

    def versions_of(name: str) -> list[dict[str, Any]]:
        return [listing for listing in reversed(listings) if listing["server"]["name"] == name]

    async def servers(request: Request) -> JSONResponse:
        search = request.query_params.get("search", "").lower()
        found = [listing for listing in listings if search in listing["server"]["name"].lower()]
        if request.query_params.get("version") == "latest":
            found = [listing for listing in found if listing["_meta"][OFFICIAL]["isLatest"]]
        found.sort(key=lambda listing: listing["server"]["name"])
        start = int(request.query_params.get("cursor") or 0)
        limit = int(request.query_params.get("limit") or 30)
        page = found[start : start + limit]
        metadata: dict[str, Any] = {"count": len(page)}
        if start + limit < len(found):
            metadata["nextCursor"] = str(start + limit)
        return JSONResponse({"servers": page, "metadata": metadata})

    def encoded(request: Request) -> bool:
        """Whether the request's path has the server's name percent-encoded, as the API asks (its `/` as %2F)."""
        raw = request.scope["raw_path"].decode("ascii")
        return quote(request.path_params["name"], safe="") in raw

    async def versions(request: Request) -> JSONResponse:
        if not encoded(request):
            return _not_found()
        found = versions_of(request.path_params["name"])
        return JSONResponse({"servers": found, "metadata": {"count": len(found)}}) if found else _not_found()

    async def one_version(request: Request) -> JSONResponse:
        wanted = request.path_params["version"]
        if not encoded(request):
            return _not_found()
        for listing in versions_of(request.path_params["name"]):
            latest = wanted == "latest" and listing["_meta"][OFFICIAL]["isLatest"]
            if latest or listing["server"].get("version") == wanted:
                return JSONResponse(listing)
        return _not_found()

    return Starlette(
        routes=[
            Route("/v0.1/servers", servers),
            Route("/v0.1/servers/{name:path}/versions/{version}", one_version),
            Route("/v0.1/servers/{name:path}/versions", versions),
        ]
    )
