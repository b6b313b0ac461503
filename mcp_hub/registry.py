"""An MCP server registry, as `mcp-hub add` and `mcp-hub registry search` read it.

The registry API of github.com/modelcontextprotocol/registry (docs/reference/api/openapi.yaml), which the
official registry (https://registry.modelcontextprotocol.io) and its subregistries serve, on its stable path
`/v0.1` (the official registry serves the same at `/v0`, which may change):

- `GET /v0.1/servers?search=TEXT&version=latest&limit=N`: the latest version of each server whose name contains
  TEXT, as `{"servers": [{"server": <server.json>, "_meta": {...}}, ...], "metadata": {"nextCursor": ...}}`;
- `GET /v0.1/servers/{name}/versions/{version}`: one version (`latest`: the latest) as `{"server": ..., "_meta":
  ...}`; 404 when the server or the version is not there;
- `GET /v0.1/servers/{name}/versions`: every version of a server, newest first (to say which there are when the
  version asked for is not).

Names and versions are percent-encoded in paths. Reading needs no authentication. Every request is bounded
(`TIMEOUT`). What a `server.json` becomes in hub.toml is `server_json.py`'s business, not this module's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2

from mcp_hub import __version__
from mcp_hub.config import OFFICIAL_REGISTRY, is_registry_url, parse_toml
from mcp_hub.errors import ConfigError
from mcp_hub.shown import shown
from mcp_hub.tls import verifying

OFFICIAL = OFFICIAL_REGISTRY

API = "/v0.1"
TIMEOUT = 30.0
"""Seconds for one request to the registry, connecting included."""

OFFICIAL_META = "io.modelcontextprotocol.registry/official"
"""The key of a listing's `_meta` under which the registry says a version's status and whether it is the latest."""

_NAME = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+\Z")
"""A registry name: reverse-DNS namespace, one slash, the server's name (the schema's pattern)."""
VERSION_RANGE = re.compile(r"[\^~<>=*|,\s]|(?:^|\.)[xX](?:\.|$)")
"""What marks a version range rather than one version (`^1.2`, `>=1`, `1.x`, `1.*`): the registry refuses them."""


class RegistryError(ConfigError):
    """The registry cannot be reached, answers with something else than its API, or has no such server or version.
    The message names the registry, what went wrong and what to do."""


def registry_url(url: str, file: str, key: str = "") -> str:
    """`url` checked as a registry's base URL, without a trailing slash. `file` and `key` name where it was given
    (`--registry`; a hub.toml and `hub.registry`), for the error."""
    if not is_registry_url(url):
        raise ConfigError(file, key, f"{url!r} is not a registry's base URL (http or https); give one like {OFFICIAL}")
    return url.rstrip("/")


def configured_registry(config: Path) -> str:
    """The registry a hub.toml names in `[hub] registry` (checked), else the official one; also where the file does
    not exist. Only that key is read: the rest of the file need not be valid, nor its variables set."""
    if not config.is_file():
        return OFFICIAL
    try:
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(config), "", f"cannot read it ({exc}); make it a readable UTF-8 text file") from None
    hub = parse_toml(text, str(config)).get("hub", {})
    configured = hub.get("registry", OFFICIAL) if isinstance(hub, dict) else OFFICIAL
    if not isinstance(configured, str):
        raise ConfigError(str(config), "hub.registry", f'must be a URL in quotes, like "{OFFICIAL}"')
    return registry_url(configured, str(config), "hub.registry")


def split_reference(reference: str) -> tuple[str, str]:
    """`NAME[@VERSION]` as (name, version); `latest` where no version is given."""
    name, at, version = reference.partition("@")
    if not _NAME.match(name):
        reason = (
            "a registry name is NAMESPACE/NAME, like io.github.user/weather (add NAME@VERSION for a version); "
            "`mcp-hub registry search TEXT` finds names"
        )
        raise ConfigError(reference, "", reason)
    if at and (not version or VERSION_RANGE.search(version)):
        reason = f"{version!r} is not one version; write NAME@1.2.3 for that version, or NAME for the latest"
        raise ConfigError(reference, "", reason)
    return name, version or "latest"


class Registry:
    """A registry's read API at `url` (its base URL, checked by `registry_url`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client = httpx2.Client(
            verify=verifying(), base_url=url + API, timeout=TIMEOUT, headers={"User-Agent": f"mcp-hub/{__version__}"}
        )

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def search(self, text: str, limit: int) -> tuple[list[dict[str, Any]], bool]:
        """The latest version of the servers whose name contains `text` (at most `limit`), as listings
        (`{"server": ..., "_meta": ...}`), and whether the registry has more."""
        body = self._get("/servers", params={"search": text, "version": "latest", "limit": limit})
        listings = _listings(body, self.url, "/servers")
        metadata = body.get("metadata")
        more = isinstance(metadata, dict) and bool(metadata.get("nextCursor"))
        return listings[:limit], more or len(listings) > limit

    def server(self, name: str, version: str) -> dict[str, Any]:
        """Version `version` (or `latest`) of server `name`, as a listing: `{"server": <server.json>, "_meta": ...}`."""
        path = f"/servers/{quote(name, safe='')}/versions/{quote(version, safe='')}"
        body = self._get(path, missing=lambda: self._missing(name, version))
        if not isinstance(body.get("server"), dict):
            raise _not_the_api(self.url, path, 'an object with "server"')
        return body

    def versions(self, name: str) -> list[str] | None:
        """The versions of server `name`, newest first; None if the registry has no such server."""
        path = f"/servers/{quote(name, safe='')}/versions"
        try:
            body = self._get(path, missing=_Missing)
        except _Missing:
            return None
        found = [listing["server"].get("version") for listing in _listings(body, self.url, path)]
        return [version for version in found if isinstance(version, str)]

    def _missing(self, name: str, version: str) -> RegistryError:
        versions = self.versions(name)
        if versions is None:
            reason = f"has no server named {name}; `mcp-hub registry search TEXT` finds names"
        elif version == "latest":
            reason = f"has no current version of {name}; add one of its versions: {', '.join(versions)}"
        else:
            listed = ", ".join(versions[:10]) + (", ..." if len(versions) > 10 else "")
            reason = f"has no version {version} of {name}; it has {listed or 'none'} (add {name} for the latest)"
        return RegistryError(self.url, "", reason)

    def _get(
        self, path: str, params: dict[str, Any] | None = None, missing: Callable[[], Exception] | None = None
    ) -> dict[str, Any]:
        """The JSON object the registry answers GET `path` with; a 404 raises `missing()` where given."""
        try:
            response = self._client.get(path, params=params)
        except httpx2.HTTPError as exc:
            reason = f"cannot reach the registry ({exc}); check the network, or the URL (--registry, [hub] registry)"
            raise RegistryError(self.url, "", reason) from None
        if response.status_code == 404 and missing is not None:
            raise missing()
        if response.status_code != 200:
            reason = f"answered HTTP {response.status_code} to GET {API}{path}; try again later, or another registry"
            raise RegistryError(self.url, "", reason)
        try:
            body = response.json()
        except ValueError:
            raise _not_the_api(self.url, path, "JSON") from None
        if not isinstance(body, dict):
            raise _not_the_api(self.url, path, "a JSON object")
        return body


class _Missing(Exception):
    """A 404 where the caller has something to say about it."""


def _listings(body: dict[str, Any], url: str, path: str) -> list[dict[str, Any]]:
    servers = body.get("servers")
    if not isinstance(servers, list) or not all(
        isinstance(item, dict) and isinstance(item.get("server"), dict) for item in servers
    ):
        raise _not_the_api(url, path, 'an object with "servers", a list of {"server": ...}')
    return servers


def _not_the_api(url: str, path: str, expected: str) -> RegistryError:
    reason = (
        f"answered GET {API}{path} with something else than the registry API (expected {expected}); "
        "check the registry's URL (--registry, [hub] registry)"
    )
    return RegistryError(url, "", reason)


def status(listing: dict[str, Any]) -> tuple[str, str]:
    """The registry's status of a listed version (`active`, `deprecated`, `deleted`; `active` where it says none),
    and its message ("" if none)."""
    meta = listing.get("_meta")
    official = meta.get(OFFICIAL_META) if isinstance(meta, dict) else None
    if not isinstance(official, dict):
        return "active", ""
    state, message = official.get("status"), official.get("statusMessage")
    return (state if isinstance(state, str) else "active"), (message if isinstance(message, str) else "")


def kinds(entry: dict[str, Any]) -> list[str]:
    """What a server.json offers to run, in its order: its packages' registry types (npm, pypi, oci, or another),
    then `remote` if it has remotes."""
    found = [package.get("registryType") for package in _objects(entry.get("packages"))]
    found += ["remote"] * bool(_objects(entry.get("remotes")))
    return list(dict.fromkeys(kind for kind in found if isinstance(kind, str)))


def search_table(listings: list[dict[str, Any]]) -> list[str]:
    """The lines of `registry search`: name, version, kinds and description of each listing, in aligned columns
    under a header; the registry's text shown with deceiving characters escaped."""
    rows = [("NAME", "VERSION", "KINDS", "DESCRIPTION")]
    for listing in listings:
        entry = listing["server"]
        cells = (entry.get("name"), entry.get("version"), ",".join(kinds(entry)), entry.get("description"))
        rows.append(tuple(shown(cell) if isinstance(cell, str) else "" for cell in cells))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    return ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[3]]) for row in rows]


def _objects(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
