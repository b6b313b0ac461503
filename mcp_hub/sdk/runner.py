"""SDK internals: the runner's steps a call is served with, a server session's connection, and the SDK's
span middleware.

The hub's lane (server/lane.py) serves calls as `ServerRunner.on_request` would, less the steps that
serve any other method; it reuses the runner's own context building and result shaping, which the SDK
keeps private.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server._otel import OpenTelemetryMiddleware  # pyright: ignore[reportPrivateUsage]
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import DispatchContext
from mcp.shared.transport_context import TransportContext
from mcp_types import RequestParamsMeta

SURFACE: tuple[str, ...] = (
    "mcp.server.runner:ServerRunner._make_context",
    "mcp.server.runner:ServerRunner._serialize",
    "mcp.server._otel:OpenTelemetryMiddleware",
    "mcp.server.session:ServerSession._connection",
    "mcp.server.session:ServerSession._request_outbound",
    "mcp.shared.direct_dispatcher:_DirectDispatchContext._on_progress",
)
"""What this module names, as "module:qualified.name"."""


def make_context(
    runner: ServerRunner[Any],
    dctx: DispatchContext[TransportContext],
    method: str,
    params: Mapping[str, Any] | None,
    meta: RequestParamsMeta | None,
    version: str,
) -> ServerRequestContext[Any, Any]:
    """The request context `runner` gives a handler: its session, lifespan state and dispatch context."""
    return runner._make_context(dctx, method, params, meta, version)  # pyright: ignore[reportPrivateUsage]


def serialize(runner: ServerRunner[Any], method: str, version: str, result: Any) -> dict[str, Any]:
    """A handler's result shaped for the wire as `runner` shapes it for `version`."""
    return runner._serialize(method, version, result)  # pyright: ignore[reportPrivateUsage]


def drop_sdk_spans(server: Server[Any]) -> None:
    """Remove the SDK's own span middleware from `server` (the hub's observer takes its place)."""
    server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]


def connection_of(session: ServerSession) -> Connection:
    """The connection a server session belongs to."""
    return session._connection  # pyright: ignore[reportPrivateUsage]


def has_progress_callback(session: ServerSession) -> bool:
    """Whether the session's request came from an in-process client with a progress callback (the SDK's
    direct dispatcher, which sends no progress token and calls the callback itself)."""
    outbound = getattr(session, "_request_outbound", None)
    outbound = getattr(outbound, "_inner", outbound)  # under the 2026-07-28 era's no-server-requests wrapper
    return getattr(outbound, "_on_progress", None) is not None
