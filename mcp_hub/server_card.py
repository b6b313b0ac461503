"""Reading a remote MCP server's card (SEP-2127, a draft): what `mcp-hub add URL` turns into a `[servers.X]` table.

The draft reserves `GET <streamable-http-url>/server-card` for a server's card, asked for with
`Accept: application/mcp-server-card+json`. A card is a subset of a registry's `server.json` (name, version,
description, `remotes`, without `packages`), so server_json.py makes the table from it as from a registry
entry's remote: its URL, its transport, its headers as `${VAR}` references.

`card_location(URL)`: the card's URL for an MCP endpoint's URL (a URL already ending in `/server-card` is the
card's). `read_card(URL)`: the card, checked to be one (a JSON object whose `$schema` is a server-card schema);
anything else is a `ConfigError` naming the URL, what came back and what to do instead.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2

from mcp_hub import __version__
from mcp_hub.errors import ConfigError
from mcp_hub.tls import verifying

CARD_MEDIA_TYPE = "application/mcp-server-card+json"
CARD_SUFFIX = "/server-card"
TIMEOUT = 15.0
"""Seconds the card may take to arrive."""
_SCHEMA = re.compile(r"^https://static\.modelcontextprotocol\.io/schemas/v\d+/server-card\.schema\.json$")
"""The `$schema` of a server card, of any `vN` family of the draft's schema."""


def is_url(reference: str) -> bool:
    """Whether `mcp-hub add` was given a URL (a server's endpoint or its card) rather than a registry name."""
    return reference.startswith(("http://", "https://"))


def card_location(url: str) -> str:
    """The URL of the card of the MCP endpoint at `url` (`url` itself when it already names a card)."""
    parts = urlsplit(url)
    if not parts.netloc:
        raise ConfigError(url, "", "is not a URL with a host; give the server's MCP endpoint, like https://host/mcp")
    path = parts.path.rstrip("/")
    if not path.endswith(CARD_SUFFIX):
        path += CARD_SUFFIX
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def read_card(url: str) -> tuple[str, dict[str, Any]]:
    """The card of the MCP endpoint (or at the card URL) `url`: (where it was read, the card). Raises `ConfigError`."""
    location = card_location(url)
    headers = {"Accept": CARD_MEDIA_TYPE, "User-Agent": f"mcp-hub/{__version__}"}
    try:
        with httpx2.Client(verify=verifying(), timeout=TIMEOUT, follow_redirects=True, headers=headers) as http:
            response = http.get(location)
    except httpx2.HTTPError as exc:
        raise ConfigError(location, "", f"cannot read the server card ({exc}); check the URL and the network") from None
    by_hand = "add the server by hand ([servers.NAME] with url = ...), or by its registry name"
    if response.status_code != 200:
        reason = f"answered HTTP {response.status_code}: no server card there (server cards are a draft, SEP-2127)"
        raise ConfigError(location, "", f"{reason}; {by_hand}")
    try:
        card = response.json()
    except ValueError:
        raise ConfigError(location, "", f"answered something other than JSON; {by_hand}") from None
    if not isinstance(card, dict):
        raise ConfigError(location, "", f"answered JSON that is not a server card (an object); {by_hand}")
    schema = card.get("$schema")
    if not isinstance(schema, str) or not _SCHEMA.match(schema):
        wanted = "https://static.modelcontextprotocol.io/schemas/vN/server-card.schema.json"
        reason = f"$schema is {schema!r}, not a server card's ({wanted})"
        raise ConfigError(location, "$schema", f"{reason}; {by_hand}")
    if "packages" in card:
        reason = "a server card has no packages (that is a registry's server.json)"
        raise ConfigError(location, "packages", f"{reason}; {by_hand}")
    return location, card
