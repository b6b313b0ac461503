"""Streamable HTTP: the MCP endpoint, `/healthz` and `/readyz` in one Starlette app.

With API keys configured, every request to the MCP endpoint must carry one
(`Authorization: Bearer KEY` or `X-API-Key: KEY`); the key's name becomes the
request's principal, which the policy maps to a profile. Without keys, HTTP
clients are the principal "anonymous".

The SDK answers a POST as an SSE stream, encoded by sse-starlette; its encoder
scans an event's data for line breaks with a regular expression (about 7 ms for
a 1 MB tool result). `_split_sse_lines_fast` lets it skip that scan for data
without line breaks (the SDK's events are JSON, which has none), with the same
bytes on the wire.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import (
    DEFAULT_SESSION_IDLE_TIMEOUT,
    StreamableHTTPASGIApp,
    StreamableHTTPSessionManager,
)
from mcp.server.transport_security import TransportSecuritySettings
from sse_starlette.event import ServerSentEvent
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.server.cors import BrowserOrigins
from mcp_hub.server.deferred import defer_sse_for_posts
from mcp_hub.server.direct import DirectRequests
from mcp_hub.server.disconnect import CancelOnDisconnect
from mcp_hub.server.endpoint import HTTP_PRINCIPAL, PRINCIPAL_KEY, session_connections
from mcp_hub.server.fields import FieldValues
from mcp_hub.server.modern import ModernRequests

_LOOPBACK = ("127.0.0.1", "localhost", "::1")

MAX_REQUEST_BODY = 32 * 1024 * 1024
"""The largest request body the MCP endpoint takes (larger ones are answered 413).

The SDK's default, 4 MiB, would refuse a tool call carrying a document or an
image that the server behind the hub takes; a stdio server's answers may be
twice this large (`upstream.transports.MAX_LINE_BYTES`).
"""


def _split_sse_lines_fast() -> None:
    """Let sse-starlette's `ServerSentEvent.encode` skip its line split for data without line breaks.

    It splits every event's data (and cleans its id and event name) with the
    class's `_LINE_SEP_EXPR`, `\\r\\n|\\r|\\n`, which takes time to scan even text
    that has no line break: about 7 ms for a 1 MB tool result, where looking for
    the two characters takes 0.03 ms. The change is process-wide, and in the
    hub's process the only SSE server is its own endpoint. The pattern is
    rebound only while it is still that one, to `_LineBreaks`, which answers
    text without line breaks at once and hands any other to the pattern, so
    every event is encoded exactly as before.
    """
    pattern = getattr(ServerSentEvent, "_LINE_SEP_EXPR", None)
    if isinstance(pattern, re.Pattern) and pattern.pattern == r"\r\n|\r|\n":
        ServerSentEvent._LINE_SEP_EXPR = _LineBreaks(pattern)  # type: ignore[assignment]  # pyright: ignore[reportAttributeAccessIssue]


class _LineBreaks:
    """`split` and `sub` of a line-break pattern, without a regular expression scan of text that has no line break."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._pattern = pattern

    def split(self, text: str, maxsplit: int = 0) -> list[str | Any]:
        if "\n" in text or "\r" in text:
            return self._pattern.split(text, maxsplit)
        return [text]

    def sub(self, repl: str, text: str, count: int = 0) -> str:
        if "\n" in text or "\r" in text:
            return self._pattern.sub(repl, text, count)
        return text

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pattern, name)


class ApiKeys:
    """Pure ASGI middleware: who is calling, by API key. Constant-time comparison; keys never logged."""

    def __init__(self, app: ASGIApp, keys: Mapping[str, str]) -> None:
        self._app = app
        self._keys = [(name, key.encode()) for name, key in keys.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        principal = self._principal(Headers(scope=scope))
        if principal is None:
            response = JSONResponse(
                {"error": "unauthorized", "message": "send an API key: Authorization: Bearer KEY, or X-API-Key: KEY"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="mcp-hub"'},
            )
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        token = HTTP_PRINCIPAL.set(principal)
        try:
            await self._app(scope, receive, send)
        finally:
            HTTP_PRINCIPAL.reset(token)

    def _principal(self, headers: Headers) -> str | None:
        presented = headers.get("x-api-key")
        if presented is None:
            scheme, _, token = headers.get("authorization", "").partition(" ")
            presented = token.strip() if scheme.lower() == "bearer" else None
        if not presented:
            return None
        given = presented.encode()
        found = None
        for name, key in self._keys:  # every key compared, so timing says nothing about which matched
            if hmac.compare_digest(given, key):
                found = name
        return found


def build_app(
    server: Server[Any],
    *,
    host: str,
    path: str,
    health: Callable[[], dict[str, Any]],
    ready: Callable[[], bool] | None = None,
    api_keys: Mapping[str, str] | None = None,
    max_request_body: int = MAX_REQUEST_BODY,
    session_idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT,
    cors_origins: Sequence[str] = (),
) -> ASGIApp:
    """The ASGI app: MCP at `path`, hub and mount status at `/healthz` and `/readyz`.

    `/healthz` answers 503 when the hub is down; `/readyz` answers the same report,
    with 503 until `ready()` (without `ready`: when `/healthz` does).

    Bound to a loopback address, the endpoint refuses other Host and Origin
    headers (DNS rebinding protection), as the SDK does for its own servers;
    the origins in `cors_origins` are allowed too. Web pages from those origins
    may call the endpoint from a browser (CORS, see cors.py); no others may.

    Header values reach the endpoint without the whitespace around them (fields.py).

    A handshake-era session with no HTTP request in flight for `session_idle_timeout`
    seconds is closed (its id is then answered 404); None: sessions never expire.
    """
    _split_sse_lines_fast()
    defer_sse_for_posts()
    security = None
    if host in _LOOPBACK:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", *cors_origins],
        )
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=security,
        max_request_body_size=max_request_body,
        session_idle_timeout=session_idle_timeout,
    )

    async def healthz(request: Request) -> JSONResponse:
        report = health()
        return JSONResponse(report, status_code=200 if report["status"] != "down" else 503)

    async def readyz(request: Request) -> JSONResponse:
        report = health()
        is_ready = ready() if ready is not None else report["status"] != "down"
        return JSONResponse(report, status_code=200 if is_ready else 503)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    endpoint: ASGIApp = CancelOnDisconnect(StreamableHTTPASGIApp(manager))
    endpoint = DirectRequests(endpoint, manager, session_connections(server), max_request_body)
    endpoint = ModernRequests(endpoint, manager, max_request_body)
    if api_keys:
        endpoint = ApiKeys(endpoint, api_keys)
    if cors_origins:
        endpoint = BrowserOrigins(endpoint, cors_origins)
    endpoint = FieldValues(endpoint)
    app = Starlette(
        routes=[
            Route(path, endpoint=endpoint),
            Route("/healthz", endpoint=healthz, methods=["GET"]),
            Route("/readyz", endpoint=readyz, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    return _Front(app, path, endpoint)


class _Front:
    """The ASGI app: requests for the MCP endpoint's path go straight to it; everything else (the health
    routes, other paths, the lifespan) to the Starlette app, which routes the endpoint's path the same way.

    Starlette's error and exception middleware and its router cost each MCP request about as much as the
    hub's own routing of a call; the endpoint's middleware handles its own errors."""

    def __init__(self, app: Starlette, path: str, endpoint: ASGIApp) -> None:
        self.app = app
        self._path = path
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == self._path and not scope.get("root_path"):
            await self._endpoint(scope, receive, send)
        else:
            await self.app(scope, receive, send)
