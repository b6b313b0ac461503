"""The issuer's own metadata (RFC 8414, or OpenID Connect discovery): where its keys and endpoints are.

Fetched once, when first needed (the first token to check, or `mcp-hub check --connect`), at the
well-known URLs the MCP SDK's client tries, in the same order; the first document whose `issuer` is the
configured one (RFC 8414 §3.3) is taken: another's keys could be anyone's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import httpx2
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls, issuers_match

from mcp_hub.auth.refusal import Unavailable

FETCH_TIMEOUT = 10.0
"""The longest one request to the authorization server may take."""
MAX_DOCUMENT = 1024 * 1024
"""The largest metadata, key set or introspection answer taken, in bytes."""


async def fetch_json(client: httpx2.AsyncClient, method: str, url: str, **options: Any) -> Any:
    """The JSON an authorization server answers at `url`; `Unavailable` for anything else."""
    try:
        with anyio.fail_after(FETCH_TIMEOUT):
            response = await client.request(method, url, **options)
    except (httpx2.HTTPError, TimeoutError) as exc:
        raise Unavailable(f"{url}: {type(exc).__name__}: {exc}") from exc
    if response.status_code != 200:
        raise Unavailable(f"{url} answered HTTP {response.status_code}")
    if len(response.content) > MAX_DOCUMENT:
        raise Unavailable(f"{url} answered more than {MAX_DOCUMENT} bytes")
    try:
        return response.json()
    except ValueError as exc:
        raise Unavailable(f"{url} answered something that is not JSON") from exc


async def issuer_metadata(client: httpx2.AsyncClient, issuer: str) -> Mapping[str, Any]:
    """The issuer's metadata document, from the first well-known URL that has one."""
    tried: list[str] = []
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
        try:
            document = await fetch_json(client, "GET", url, headers={"Accept": "application/json"})
        except Unavailable as exc:
            tried.append(str(exc))
            continue
        if not isinstance(document, dict):
            tried.append(f"{url}: not a JSON object")
            continue
        found = document.get("issuer")
        if not isinstance(found, str) or not issuers_match(found, issuer):
            tried.append(f"{url} describes the issuer {found!r}, not {issuer!r}")
            continue
        return document
    raise Unavailable(f"no authorization server metadata for {issuer} ({'; '.join(tried)})")
