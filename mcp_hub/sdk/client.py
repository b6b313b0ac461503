"""SDK internals: the client side (sessions, transports, the stdio spawn).

What upstream/ needs of the SDK's client beyond its public API:

- the stream types a transport yields (`ReadStream`, `WriteStream`, `TransportStreams`), which the SDK
  defines in a private module;
- a session's stamp (`stamp_of`, `restamp`): the function that puts the negotiated headers and `_meta`
  on each request, which the hub's own requests past the session are stamped with too;
- the pipes of a stdio child (`StdioClient`, `StdioChild`): the SDK's stdio client spawns the child and
  reads its stdout itself, and offers no way to reach the process; `install()` wraps its spawn and the
  stream it reads stdout through, and each hands the pipes to the `StdioChild` of the `StdioClient` that
  is starting in the same context (none: the SDK's own, unchanged);
- the asyncio streams under anyio's wrappers of a child's pipes (`asyncio_writer_of`, `asyncio_reader_of`);
- the legacy SSE client's cap of 1 MiB per event, lifted by `install()` (`sse_client` has no parameter).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from contextvars import ContextVar
from types import TracebackType
from typing import IO, Any, Protocol

import mcp.client.sse
import mcp.client.stdio
from anyio.abc import ObjectReceiveStream
from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp_hub.sdk.process import spawn, spawn_supported

__all__ = [
    "SURFACE",
    "ReadStream",
    "StdioChild",
    "StdioClient",
    "TransportStreams",
    "WriteStream",
    "asyncio_reader_of",
    "asyncio_writer_of",
    "install",
    "restamp",
    "stamp_of",
]

SURFACE: tuple[str, ...] = (
    "mcp.client._transport:ReadStream",
    "mcp.client._transport:WriteStream",
    "mcp.client._transport:TransportStreams",
    "mcp.client.session:ClientSession",  # `_stamp`, set on each instance (checked by `stamp_of`)
    "mcp.client.stdio:_create_platform_compatible_process",
    "mcp.client.stdio:TextReceiveStream",
    "mcp.client.sse:sse_within_origin",
    "anyio._backends._asyncio:StreamReaderWrapper",  # `_stream`, a field (checked by `asyncio_reader_of`)
    "anyio._backends._asyncio:StreamWriterWrapper",  # `_stream`, a field (checked by `asyncio_writer_of`)
)
"""What this module names, as "module:qualified.name"."""

Stamp = Callable[[dict[str, Any], Any], None]
"""A session's stamp: puts the negotiated headers (in the options) and `_meta` (in the data) on a request."""


# -- a session's stamp -------------------------------------------------------------------------------------------


def stamp_of(session: ClientSession) -> Stamp | None:
    """The function `session` stamps each request with (None: this SDK release has none)."""
    stamp = getattr(session, "_stamp", None)
    return stamp if callable(stamp) else None


def restamp(session: ClientSession, stamp: Stamp) -> None:
    """Have `session` stamp its requests with `stamp` from now on."""
    session._stamp = stamp  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]


# -- a stdio child's pipes ---------------------------------------------------------------------------------------


class StdioChild(Protocol):
    """Told of the pipes of the child a `StdioClient` starts."""

    def spawned(self, stdin: Any, stdout: Any, process: Any = None) -> None:
        """The child has started: its stdin and stdout, as anyio streams (None where it has none), and its
        process (a `process.ChildProcess` where the hub spawned it, else anyio's)."""

    def reading(self, stdout: Any, encoding: str, errors: str) -> ObjectReceiveStream[str]:
        """The text stream the SDK's reader reads the child's stdout through."""
        ...


_CHILD: ContextVar[StdioChild | None] = ContextVar("mcp_hub_stdio_child", default=None)
"""The child whose `StdioClient` is being entered in this context (its spawn and reader task see it)."""


class StdioClient:
    """The SDK's stdio client, which tells `child` of the child's pipes as it opens them.

    `errlog` is the child's stderr (None: the SDK's default, the hub's stderr).
    """

    def __init__(self, params: StdioServerParameters, child: StdioChild, errlog: IO[Any] | None = None) -> None:
        self._inner = stdio_client(params) if errlog is None else stdio_client(params, errlog)  # type: ignore[arg-type]
        self._child = child

    async def __aenter__(self) -> TransportStreams:
        token = _CHILD.set(self._child)  # the spawn, and the reader task started with it, run in this context
        try:
            return await self._inner.__aenter__()
        finally:
            _CHILD.reset(token)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)


def asyncio_writer_of(stream: Any) -> asyncio.StreamWriter | None:
    """The asyncio writer under anyio's stream over a pipe (None: the stream is not that wrapper)."""
    writer = getattr(stream, "_stream", None)
    return writer if isinstance(writer, asyncio.StreamWriter) else None


def asyncio_reader_of(stream: Any) -> asyncio.StreamReader | None:
    """The asyncio reader under anyio's stream over a pipe (None: the stream is not that wrapper)."""
    reader = getattr(stream, "_stream", None)
    return reader if isinstance(reader, asyncio.StreamReader) else None


# -- the patches -------------------------------------------------------------------------------------------------

_ORIGINAL_TEXT_STREAM = mcp.client.stdio.TextReceiveStream  # pyright: ignore[reportPrivateImportUsage]
_ORIGINAL_SPAWN = mcp.client.stdio._create_platform_compatible_process  # pyright: ignore[reportPrivateUsage]
_ORIGINAL_SSE_WITHIN_ORIGIN = mcp.client.sse.sse_within_origin  # pyright: ignore[reportPrivateImportUsage]


async def spawn_telling_child(
    command: str,
    args: list[str],
    env: dict[str, str] | None = None,
    errlog: Any = sys.stderr,
    cwd: Any = None,
) -> Any:
    """The SDK's stdio spawn, which hands the new process's pipes to the context's `StdioChild`: by the
    standard library's `subprocess` where it can (see process.py), else the SDK's own."""
    if spawn_supported():
        process: Any = await spawn([command, *args], env=env, stderr=errlog, cwd=cwd)
    else:
        process = await _ORIGINAL_SPAWN(command=command, args=args, env=env, errlog=errlog, cwd=cwd)
    child = _CHILD.get()
    if child is not None:
        child.spawned(process.stdin, process.stdout, process)
    return process


def text_stream_of_child(transport_stream: Any, encoding: str = "utf-8", errors: str = "strict") -> Any:
    """The stream the SDK's stdio reader reads a child's stdout through: the context's `StdioChild`'s, else
    anyio's `TextReceiveStream` (as the SDK has it)."""
    child = _CHILD.get()
    if child is None:
        return _ORIGINAL_TEXT_STREAM(transport_stream, encoding=encoding, errors=errors)
    return child.reading(transport_stream, encoding, errors)


def sse_within_origin_uncapped(*args: Any, **kwargs: Any) -> Any:
    """The SDK's legacy SSE client's event source, with no cap on one event's size.

    `sse_client` opens its stream through `sse_within_origin` with that helper's default cap of 1 MiB
    per event and offers no parameter to change it, so one large tool result would break the connection.
    """
    kwargs.setdefault("max_event_size", None)
    return _ORIGINAL_SSE_WITHIN_ORIGIN(*args, **kwargs)


def install() -> None:
    """Apply the client side's patches, once; calling it again changes nothing.

    The hub's upstreams are the only clients in its process, so the names are rebound for the process.
    """
    stdio = mcp.client.stdio
    if stdio._create_platform_compatible_process is not spawn_telling_child:  # pyright: ignore[reportPrivateUsage]
        stdio._create_platform_compatible_process = spawn_telling_child  # pyright: ignore[reportPrivateUsage]
    if stdio.TextReceiveStream is not text_stream_of_child:  # pyright: ignore[reportPrivateImportUsage]
        stdio.TextReceiveStream = text_stream_of_child  # type: ignore[assignment, misc]
    if mcp.client.sse.sse_within_origin is not sse_within_origin_uncapped:  # pyright: ignore[reportPrivateImportUsage]
        mcp.client.sse.sse_within_origin = sse_within_origin_uncapped  # type: ignore[assignment]
