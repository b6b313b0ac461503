"""Whether the SDK's streamable HTTP transport takes a POST, by its headers: the SDK's own checks, remembered.

Before it serves a POST, the SDK checks that the client accepts both JSON and SSE (`check_accept_headers`),
its content type, and, with DNS rebinding protection, its `Host` and `Origin` (`TransportSecurityMiddleware`);
the handshake-era transport checks the content type once more its own way. Each check reads only those
four headers, and a server sees few distinct values of them (one or two per client program), so
`Acceptance` runs the SDK's checks once for each combination and remembers the verdict (up to `KEPT`
combinations; past that it starts over): run for every request, they cost it a Starlette `Headers` and a
few dozen string operations. A door that finds a POST refused hands it to the SDK's own path, which refuses
it with the SDK's answer.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcp.server.streamable_http import StreamableHTTPServerTransport, check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings

from mcp_hub.sdk import server as sdk_server

CHECKED = ("accept", "content-type", "host", "origin")
"""The headers the SDK's checks read."""

KEPT = 1024
"""The most combinations of those headers' values remembered at once (per era)."""

Key = tuple[str | None, ...]


class Acceptance:
    """The SDK's checks of a POST's headers under `settings` (the session manager's, which its transports
    take too), each verdict kept. `headers`: lower-case names, the first value of each."""

    def __init__(self, settings: TransportSecuritySettings | None) -> None:
        self._security = TransportSecurityMiddleware(settings)
        self._modern: dict[Key, bool] = {}
        self._handshake: dict[Key, bool] = {}

    async def modern(self, headers: Mapping[str, str]) -> bool:
        """Whether the SDK's 2026-07-28 entry takes a POST with these headers."""
        key = tuple(headers.get(name) for name in CHECKED)
        known = self._modern.get(key)
        if known is None:
            known = _kept(self._modern, key, await self._takes(_HeadersOnly(headers)))
        return known

    async def handshake(self, headers: Mapping[str, str], transport: StreamableHTTPServerTransport) -> bool:
        """Whether the SDK's handshake-era `transport` takes a POST with these headers."""
        key = tuple(headers.get(name) for name in CHECKED)
        known = self._handshake.get(key)
        if known is None:
            shim = _HeadersOnly(headers)
            takes = await self._takes(shim) and sdk_server.content_type_accepted(transport, shim)  # type: ignore[arg-type]
            known = _kept(self._handshake, key, takes)
        return known

    async def _takes(self, shim: _HeadersOnly) -> bool:
        """It accepts JSON and SSE, and passes the transport's security check (content type, host, origin)."""
        has_json, has_sse = check_accept_headers(shim)  # type: ignore[arg-type]
        refused = await self._security.validate_request(shim, is_post=True)  # type: ignore[arg-type]
        return has_json and has_sse and refused is None


def _kept(verdicts: dict[Key, bool], key: Key, verdict: bool) -> bool:
    if len(verdicts) >= KEPT:
        verdicts.clear()
    verdicts[key] = verdict
    return verdict


class _HeadersOnly:
    """What the SDK's checks read of a request: its headers."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self.headers = headers
