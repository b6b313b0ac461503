"""The console's front door: what every request to it passes first.

A foreign `Host` (when the hub is bound to loopback, as the MCP endpoint checks it), an `Origin` that is not
the console's own, or a cross-site request (`Sec-Fetch-Site`) is refused; the cross-site requests taken are the
identity provider sending a browser back to single sign-on's callback (sso.py), or to the sign-in page once it
signed the person out. Every answer carries
headers that keep it out of frames, caches and other origins' scripts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_hub.config import ADMIN_LOGIN, ADMIN_SSO_CALLBACK

logger = logging.getLogger("mcp_hub.admin")

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")

_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


def _returning(scope: Scope) -> bool:
    """Whether a request is the identity provider sending a browser back: to single sign-on's callback (a
    cross-site navigation, which the callback's state, browser binding and PKCE make safe: sso.py), or to the
    sign-in page after signing the person out there (a page that changes nothing)."""
    path = str(scope.get("path", ""))
    return scope.get("method") == "GET" and (path.endswith(ADMIN_SSO_CALLBACK) or path.endswith(ADMIN_LOGIN))


class Guard:
    """Refuses a foreign `Host` (bound to loopback) or `Origin`, and a cross-site request; adds the security headers."""

    def __init__(self, app: ASGIApp, *, loopback: bool) -> None:
        self._app = app
        self._loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        problem = self._problem(scope, headers)
        if problem is not None:
            logger.warning("admin console: refused a request: %s", problem)
            await PlainTextResponse(f"refused: {problem}", status_code=403)(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {key.lower() for key, _ in message.get("headers", [])}
                message = {
                    **message,
                    "headers": [*message.get("headers", []), *((k, v) for k, v in _HEADERS if k not in present)],
                }
            await send(message)

        await self._app(scope, receive, secured)

    def _problem(self, scope: Scope, headers: Mapping[str, str]) -> str | None:
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if self._loopback and name not in _LOOPBACK_HOSTS:
            return f"the Host {host!r} is not this hub's (it serves loopback only)"
        origin = headers.get("origin")
        if origin is not None and origin != f"{scope.get('scheme', 'http')}://{host}":
            return f"the Origin {origin!r} is not the console's own"
        if headers.get("sec-fetch-site") == "cross-site" and not _returning(scope):
            return "a cross-site request"
        return None
