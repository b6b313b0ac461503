"""Open the SDK client transport a mount's config asks for.

One function per kind (stdio child process, streamable HTTP, legacy SSE), each
returning the SDK's `Transport`, wrapped so the supervisor learns the moment
the connection's read side ends (a child exited, a stream broke).
"""

from __future__ import annotations

import shutil
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import httpx2
import mcp.client.sse
from mcp.client._transport import ReadStream, Transport, TransportStreams
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from mcp_hub.config import ServerConfig

# Per-request deadlines are the supervisor's (`ServerConfig.timeout`); the HTTP
# client's own read timeout only guards a stream that goes silent for good.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def _lift_sse_event_cap() -> None:
    """Let the SDK's legacy SSE client take events of any size.

    `sse_client` opens its stream through `sse_within_origin` with that helper's
    default cap of 1 MiB per event and offers no parameter to change it, so one
    large tool result would break the connection. The hub's upstreams are the
    only SSE clients in its process, and the cap is lifted for them by rebinding
    the name `sse_client` looks up.
    """
    original = mcp.client.sse.sse_within_origin  # pyright: ignore[reportPrivateImportUsage]
    if getattr(original, "_uncapped", False):
        return

    def uncapped(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("max_event_size", None)
        return original(*args, **kwargs)

    uncapped._uncapped = True  # type: ignore[attr-defined]
    mcp.client.sse.sse_within_origin = uncapped  # type: ignore[assignment]


def resolve_command(command: str) -> str:
    """Find a bare command beside the hub's own interpreter first, then on PATH.

    Servers installed into the hub's virtualenv (console scripts such as
    `mcp-server-time`) are found even when that virtualenv is not activated,
    as when Claude Desktop launches the hub by absolute path.
    """
    if "/" in command:
        return command
    beside = Path(sys.executable).parent / command
    if beside.is_file():
        return str(beside)
    return shutil.which(command) or command


def open_transport(config: ServerConfig) -> WatchedTransport:
    """A fresh, not yet entered transport for one connection attempt."""
    if config.kind == "stdio":
        assert config.command is not None
        params = StdioServerParameters(
            command=resolve_command(config.command),
            args=list(config.args),
            env=dict(config.env) or None,
            cwd=config.cwd,
        )
        return WatchedTransport(stdio_client(params))
    assert config.url is not None
    if config.kind == "sse":
        _lift_sse_event_cap()
        return WatchedTransport(sse_client(config.url, headers=dict(config.headers), sse_read_timeout=300.0))
    return WatchedTransport(_StreamableHttp(config.url, dict(config.headers)))


class _StreamableHttp:
    """Streamable HTTP with an owned client and no cap on one SSE event's size.

    The SDK caps one SSE event at 1 MiB by default; a proxy must pass results
    of any size, so the cap is lifted here.
    """

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self._url = url
        self._headers = headers
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> TransportStreams:
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(httpx2.AsyncClient(headers=self._headers, timeout=_HTTP_TIMEOUT))
            streams = await stack.enter_async_context(
                streamable_http_client(self._url, http_client=client, max_sse_event_size=None)
            )
            self._stack = stack.pop_all()
            return streams

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._stack.__aexit__(exc_type, exc, tb)


class WatchedTransport:
    """A transport whose `closed` event fires when its read side ends."""

    def __init__(self, inner: Transport | Any) -> None:
        self._inner = inner
        self.closed = anyio.Event()

    async def __aenter__(self) -> TransportStreams:
        read_stream, write_stream = await self._inner.__aenter__()
        return _WatchedReadStream(read_stream, self.closed), write_stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self.closed.set()
        return await self._inner.__aexit__(exc_type, exc, tb)


class _WatchedReadStream:
    """Delegates to the transport's read stream; sets `closed` when it ends."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], closed: anyio.Event) -> None:
        self._inner = inner
        self._closed = closed

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except BaseException:
            self._closed.set()
            raise

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._closed.set()
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None
