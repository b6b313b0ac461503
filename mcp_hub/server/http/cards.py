"""Server cards (SEP-2127, a draft: experimental here): what a client needs to know to connect, before it does.

The extension's current draft (modelcontextprotocol/experimental-ext-server-card, `docs/discovery.md` and
`schema.ts`) reserves `GET <streamable-http-url>/server-card` for a server's card (media type
`application/mcp-server-card+json`, `$schema` the v2 server-card schema) and puts an MCP Catalog of a site's
cards at `/.well-known/mcp/catalog.json`. The hub serves:

- `PATH/server-card`: its own endpoint's card;
- `PATH/NAME/server-card`: each curated endpoint's (`[endpoints.NAME]`);
- `/.well-known/mcp/catalog.json`: the catalog naming them all.

A card names the endpoint (reverse-DNS of the host the request came to, then the hub's name, with `-NAME` for a
curated endpoint), its version, title and description (`[hub] description`, `[endpoints.NAME] description`),
and one remote: streamable HTTP at the endpoint's URL, with the protocol versions the hub serves, and the
`X-API-Key` header where API keys are the way in (required without OAuth; with OAuth, a client finds the
authorization server from the 401, RFC 9728). URLs are absolute, built from the request (scheme and Host), so
a card read through a proxy names the address it was read at. Cards carry no tools, resources or prompts: the
proposal leaves them to the protocol's lists, which the policy filters per caller.

They need no credentials (like `GET /`, which already names the endpoints), are readable from any web page
(`Access-Control-Allow-Origin: *`: public metadata, no credentials taken) and cacheable for an hour, as the
draft recommends. `[http] server_cards = false` turns them off.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_hub import __version__

CARD_MEDIA_TYPE = "application/mcp-server-card+json"
CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json"
CARD_SUFFIX = "/server-card"
CATALOG_PATH = "/.well-known/mcp/catalog.json"
EXPERIMENTAL_META = "io.github.mcp-hub/experimental"
"""The `_meta` key that marks a card as following a draft."""

_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET",
    "Access-Control-Allow-Headers": "Content-Type",
    "Cache-Control": "public, max-age=3600",
}
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9._-]+")


@dataclass(frozen=True)
class Cards:
    """What the hub's cards say: its name, description and version, its endpoints' descriptions (None: a sentence
    of the hub's), and how a client gets in (`api_keys`, `oauth`)."""

    name: str
    description: str
    path: str
    endpoints: Mapping[str, str | None] = field(default_factory=dict)
    api_keys: bool = False
    oauth: bool = False
    version: str = __version__

    def paths(self) -> dict[str, str | None]:
        """Card path -> the curated endpoint it describes (None: the hub's own)."""
        base = self.path.rstrip("/")
        return {base + CARD_SUFFIX: None, **{f"{base}/{name}{CARD_SUFFIX}": name for name in self.endpoints}}

    def card(self, request: Request, endpoint: str | None) -> dict[str, object]:
        """The card of the hub's endpoint (`endpoint` None) or of a curated one, as read through `request`."""
        host = request.url.hostname or "localhost"
        description = self.description
        title = self.name
        if endpoint is not None:
            description = self.endpoints.get(endpoint) or f"Endpoint {endpoint} of {self.name}"[:100]
            title = f"{self.name}: {endpoint}"[:100]
        remote: dict[str, object] = {
            "type": "streamable-http",
            "url": self._endpoint_url(request, endpoint),
            "supportedProtocolVersions": [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS],
        }
        if self.api_keys:
            remote["headers"] = [
                {
                    "name": "X-API-Key",
                    "description": "An API key of this hub"
                    + (" (or sign in with OAuth instead)" if self.oauth else ""),
                    "isRequired": not self.oauth,
                    "isSecret": True,
                }
            ]
        return {
            "$schema": CARD_SCHEMA,
            "name": f"{_namespace(host)}/{self._name_of(endpoint)}",
            "version": self.version,
            "title": title[:100],
            "description": description,
            "remotes": [remote],
            "_meta": {EXPERIMENTAL_META: "SEP-2127 server cards are a draft; this card follows the current one"},
        }

    def catalog(self, request: Request) -> dict[str, object]:
        """The MCP Catalog of the hub's cards."""
        host = request.url.hostname or "localhost"
        entries = []
        for path, endpoint in self.paths().items():
            entries.append(
                {
                    "identifier": f"urn:air:{host}:{self._name_of(endpoint)}",
                    "displayName": self.name if endpoint is None else f"{self.name}: {endpoint}",
                    "type": CARD_MEDIA_TYPE,
                    "url": str(request.url.replace(path=path, query="", fragment="")),
                }
            )
        return {"specVersion": "draft", "entries": entries}

    def routes(self) -> list[Route]:
        """The cards' routes and the catalog's."""

        def card_of(endpoint: str | None) -> Route:
            async def card(request: Request) -> Response:
                return JSONResponse(self.card(request, endpoint), headers=_HEADERS, media_type=CARD_MEDIA_TYPE)

            return card

        routes = [Route(path, endpoint=card_of(endpoint), methods=["GET"]) for path, endpoint in self.paths().items()]

        async def catalog(request: Request) -> Response:
            return JSONResponse(self.catalog(request), headers=_HEADERS)

        routes.append(Route(CATALOG_PATH, endpoint=catalog, methods=["GET"]))
        return routes

    def _name_of(self, endpoint: str | None) -> str:
        name = _NAME_CHARS.sub("-", self.name).strip("-") or "mcp-hub"
        return name if endpoint is None else f"{name}-{endpoint}"

    def _endpoint_url(self, request: Request, endpoint: str | None) -> str:
        path = self.path if endpoint is None else f"{self.path.rstrip('/')}/{endpoint}"
        return str(request.url.replace(path=path, query="", fragment=""))


def _namespace(host: str) -> str:
    """The reverse-DNS namespace of a host name (`mcp.example.com` -> `com.example.mcp`); an address or a
    one-label name (`localhost`) as it is, its `:` (IPv6) as `-`."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        labels = [label for label in host.split(".") if label]
        return ".".join(reversed(labels)) if labels else "localhost"
    return host.replace(":", "-")
