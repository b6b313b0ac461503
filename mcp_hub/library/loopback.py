"""An in-process hub's HTTP endpoint on a loopback port of its own, taking one API key only, made up
here for one principal: so that a library caller acting as that principal goes through the same HTTP
authentication, policy and audit as a client connecting with that principal's key."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import uvicorn

from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app

STARTUP_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


class _Server(uvicorn.Server):
    """Uvicorn without its signal handling: the caller's process owns its signals."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def loopback_endpoint(hub: Hub, principal: str) -> AsyncIterator[tuple[str, str]]:
    """Serve `hub`'s endpoint on 127.0.0.1 (a free port) for `principal` alone; yield (URL, its API key)."""
    key = secrets.token_urlsafe(32)
    path = hub.config.http.path
    app = build_app(hub.endpoint.server, host="127.0.0.1", path=path, health=hub.health, api_keys={principal: key})
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    stopped = anyio.Event()

    async def serve() -> None:
        try:
            await server.serve()
        finally:
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        with anyio.fail_after(STARTUP_TIMEOUT):
            while not server.started:
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}{path}", key
        finally:  # a graceful stop (its sockets closed), even when the caller's block raised
            server.should_exit = True
            with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_TIMEOUT):
                await stopped.wait()
