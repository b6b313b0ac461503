"""Streamable HTTP: the MCP endpoint and `/healthz` in one Starlette app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def build_app(server: Server[Any], *, host: str, path: str, health: Callable[[], dict[str, Any]]) -> Starlette:
    """The ASGI app: MCP at `path`, hub and mount status at `/healthz`.

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

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(
        routes=[
            Route(path, endpoint=StreamableHTTPASGIApp(manager)),
            Route("/healthz", endpoint=healthz, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
