"""Streamable HTTP: the MCP endpoint, `/healthz` and `/readyz` in one Starlette app.

With API keys configured, every request to the MCP endpoint must carry one
(`Authorization: Bearer KEY` or `X-API-Key: KEY`); the key's name becomes the
request's principal, which the policy maps to a profile. Without keys, HTTP
clients are the principal "anonymous".
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.server.endpoint import PRINCIPAL_KEY

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


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
        await self._app(scope, receive, send)

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
) -> Starlette:
    """The ASGI app: MCP at `path`, hub and mount status at `/healthz` and `/readyz`.

    `/healthz` answers 503 when the hub is down; `/readyz` answers the same report,
    with 503 until `ready()` (without `ready`: when `/healthz` does).

    Bound to a loopback address, the endpoint refuses other Host and Origin
    headers (DNS rebinding protection), as the SDK does for its own servers.
    """
    security = None
    if host in _LOOPBACK:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)

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

    endpoint: ASGIApp = StreamableHTTPASGIApp(manager)
    if api_keys:
        endpoint = ApiKeys(endpoint, api_keys)
    return Starlette(
        routes=[
            Route(path, endpoint=endpoint),
            Route("/healthz", endpoint=healthz, methods=["GET"]),
            Route("/readyz", endpoint=readyz, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
