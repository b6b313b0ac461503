"""Browser clients: CORS for the origins the administrator allows (`[http] cors_origins`).

A web page's MCP client (the TypeScript SDK's, say) sends headers no simple
request may carry (`Content-Type: application/json`, `Mcp-Session-Id`,
`MCP-Protocol-Version`, ...), so its browser first asks the endpoint with an
`OPTIONS` preflight whether the page's origin may send them, and shows the
page only the response headers the answer exposes. `BrowserOrigins` answers
for the allowed origins with starlette's `CORSMiddleware`: the methods the
endpoint serves, the request headers MCP clients send (the `Mcp-Param-*`
headers a tool's schema names included), and the response headers a client
reads (`Mcp-Session-Id`, `WWW-Authenticate` for a 401, ...). It sits in front
of the API key check: a preflight carries no credentials, and a 401 must be
readable by the page that has to send one.

Other origins get no CORS headers: their preflight is answered 400, so their
browser sends nothing more. Requests without an `Origin` header (clients that
are not browsers) pass untouched. Bound to a loopback address, the endpoint
still refuses a request whose `Origin` is neither loopback nor allowed
(DNS rebinding protection, in `http.build_app`).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

METHODS = ("GET", "POST", "DELETE", "OPTIONS")
"""What the endpoint serves: POST for messages, GET for a session's stream, DELETE to end a session."""

REQUEST_HEADERS = frozenset(
    {
        "accept",
        "content-type",
        "authorization",
        "x-api-key",
        "mcp-protocol-version",
        "mcp-session-id",
        "mcp-method",
        "mcp-name",
        "last-event-id",
        "traceparent",
        "tracestate",
        "baggage",
    }
)
"""The request headers an MCP client sends the hub, besides `Mcp-Param-*` (lowercase)."""

PARAM_HEADER_PREFIX = "mcp-param-"

EXPOSED_HEADERS = ("Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "WWW-Authenticate")
"""The response headers a page's client may read."""

MAX_AGE = 600
"""Seconds a browser may keep a preflight's answer."""


def allowed_request_header(name: str) -> bool:
    name = name.strip().lower()
    return name in REQUEST_HEADERS or (name.startswith(PARAM_HEADER_PREFIX) and len(name) > len(PARAM_HEADER_PREFIX))


class BrowserOrigins:
    """Pure ASGI middleware: CORS for `origins` (exact `scheme://host[:port]` values, as browsers send them)."""

    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        self._app = app
        # "*": each preflight's requested headers are echoed, once `_preflight_headers_allowed` has checked them
        # (the names of `Mcp-Param-*` headers are the tools' own, so no fixed list holds them).
        self._cors = CORSMiddleware(
            app,
            allow_origins=tuple(origins),
            allow_methods=METHODS,
            allow_headers=("*",),
            expose_headers=EXPOSED_HEADERS,
            max_age=MAX_AGE,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not any(name == b"origin" for name, _ in scope["headers"]):
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            requested = headers.get("access-control-request-headers", "")
            refused = [name.strip() for name in requested.split(",") if name.strip()]
            refused = [name for name in refused if not allowed_request_header(name)]
            if refused:
                response = PlainTextResponse(
                    f"Disallowed CORS headers: {', '.join(refused)}", status_code=400, headers={"Vary": "Origin"}
                )
                await response(scope, receive, send)
                return
        await self._cors(scope, receive, send)
