"""Open the SDK client transport a mount's config asks for.

One function per kind (stdio child process, streamable HTTP, legacy SSE), each
returning the SDK's `Transport`, wrapped so the supervisor learns the moment
the connection's read side ends (a child exited, a stream broke).

A stdio child's stdout is read in whole lines, in time linear in their length,
and a line longer than `MAX_LINE_BYTES` is discarded rather than held; bytes
that are not UTF-8 spoil only their own line.

A streamable HTTP upstream's responses are read to their end before they are
closed (`_DrainOnClose`), so its TCP connection is kept and used again: the
SDK closes a POST's SSE response as soon as the JSON-RPC response event has
arrived, a moment before the body's last chunk, and a connection closed with
its response unfinished cannot be reused, so every call paid for a new one.
The hub's own requests on a streamable HTTP session are POSTed by the hub
itself (`posts.DirectPosts`), and on a stdio session answered past the SDK
session (`lines.DirectLines`), their answers taken off the child's stdout as
the pipe delivers them (`ArrivingLines`). The legacy SSE transport is left as
it is: the SDK gives it a client of its own, whose POSTs are read whole.
"""

from __future__ import annotations

import asyncio
import codecs
import datetime
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import mcp.client.sse
import mcp.client.stdio
from anyio.abc import AnyByteReceiveStream, ByteReceiveStream, ByteSendStream, ObjectReceiveStream
from mcp.client._transport import ReadStream, Transport, TransportStreams
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from mcp_hub.config import ServerConfig
from mcp_hub.streams import LineStart, ReadStreamBase
from mcp_hub.upstream.lines import DirectLines
from mcp_hub.upstream.stderr import stderr_for_child

if TYPE_CHECKING:
    from mcp_hub.upstream.posts import DirectPosts

# Per-request deadlines are the supervisor's (`ServerConfig.timeout`); the HTTP
# client's own read timeout only guards a stream that goes silent for good.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)

# How long and how much `_DrainOnClose` reads of a response closed before its end
# to keep its connection; past either bound the connection is dropped instead.
_DRAIN_SECONDS = 0.5
_DRAIN_BYTES = 64 * 1024

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line a stdio server may write to stdout (one JSON-RPC message); longer ones are discarded."""

_READ_BYTES = 1024 * 1024
"""The most read off a child's stdout at once. Reading all that asyncio has buffered (up to 256 KiB
per pipe read) copies it once; reading it 64 KiB at a time, as the SDK does, moves the rest of the
buffer down after each read."""


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


def _read_stdio_in_lines() -> None:
    """Have the SDK's stdio client read a child's stdout one whole line at a time.

    The SDK's reader appends each chunk read from the pipe (64 KiB at most) to the
    text of the unfinished line and splits the result again, which takes time
    quadratic in a line's length (a 30 MB line costs seconds of the event loop) and
    holds a line of any length in memory. It wraps the pipe in `TextReceiveStream`,
    looked up by that name when a child starts; rebinding the name to
    `_LineReceiveStream` hands it whole lines only, so its own buffer never grows.
    The hub's upstreams are the only stdio clients in its process.
    """
    if mcp.client.stdio.TextReceiveStream is not _LineReceiveStream:  # pyright: ignore[reportPrivateImportUsage]
        mcp.client.stdio.TextReceiveStream = _LineReceiveStream  # pyright: ignore[reportPrivateImportUsage]
    spawn = mcp.client.stdio._create_platform_compatible_process  # pyright: ignore[reportPrivateUsage]
    if not getattr(spawn, "_noted", False):

        async def noted(*args: Any, **kwargs: Any) -> Any:
            async with stderr_for_child() as errlog:  # see stderr.py
                process = await spawn(*args, **(kwargs if errlog is None else {**kwargs, "errlog": errlog}))
            pipes = _PIPES.get()
            if pipes is not None and process.stdin is not None:
                pipes.stdin = StdinLines(process.stdin)
            reader = getattr(process.stdout, "_stream", None)  # anyio's wrapper of asyncio's reader
            if pipes is not None and isinstance(reader, asyncio.StreamReader):
                pipes.arriving = ArrivingLines(reader, pipes)
            return process

        noted._noted = True  # type: ignore[attr-defined]
        mcp.client.stdio._create_platform_compatible_process = noted  # pyright: ignore[reportPrivateUsage]


_PIPES: ContextVar[Pipes | None] = ContextVar("mcp_hub_stdio_pipes", default=None)
"""The pipes of the stdio child the SDK is starting in this context (see `_Stdio`)."""


_HELD_BYTES = 64 * 1024
"""Up to this much of the last text it read, the SDK's reader may hold while every line is taken."""


class _LineReceiveStream(ObjectReceiveStream[str]):
    """A byte stream decoded to text that ends only at line ends.

    The unfinished line is kept as a list of chunks and joined once, when its end
    arrives. A line longer than `MAX_LINE_BYTES` is dropped as it arrives and stands
    in the text as a one-line notice (which is not JSON, so the session reports it
    as unreadable and reads on); the request it may have answered then runs into
    its deadline, and the other requests on the connection are unaffected.
    """

    def __init__(self, transport_stream: AnyByteReceiveStream, encoding: str = "utf-8", errors: str = "strict") -> None:
        self._stream = transport_stream
        self._receive: Callable[[], Awaitable[bytes]] = (
            partial(transport_stream.receive, _READ_BYTES)
            if isinstance(transport_stream, ByteReceiveStream)
            else transport_stream.receive
        )
        self._pipes = _PIPES.get()
        """The child's pipes, whose `take` is offered each line first (None: a stdio client not the hub's)."""
        self._decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
        self._start = LineStart(MAX_LINE_BYTES)
        self._held = 0
        """The length of the last text the SDK's reader read, which it holds until it reads another."""

    async def receive(self) -> str:
        while True:
            chunk = await self._receive()
            if self._pipes is not None and (arriving := self._pipes.arriving) is not None:
                # Bytes the child wrote before `ArrivingLines` took its reader over were never counted.
                arriving.unread = max(0, arriving.unread - len(chunk))
            first = chunk.find(b"\n")
            if first < 0:
                self._start.extend(chunk)
                continue
            last = chunk.rfind(b"\n")
            if not self._start.fits(first):
                notice = f"dropped a {self._start.length(first)}-byte line (limit {MAX_LINE_BYTES})\n"
                text = notice.encode() + chunk[first + 1 : last + 1]
            else:
                text = self._untaken(self._start.join(chunk[: last + 1]))
            self._start.restart(chunk[last + 1 :])
            if not text and self._held <= _HELD_BYTES:
                continue  # every line taken: the SDK's reader has nothing to read, and holds little
            # With every line taken (""), the SDK's reader takes a turn only to let go of the last text it
            # read, which it would hold until a line it does read arrives.
            self._held = len(text)
            return self._decoder.decode(text)

    def _untaken(self, text: bytes) -> bytes:
        """`text` (whole lines), less its leading lines that the child's pipes take (answers to the hub's own
        requests, and their progress).

        Taking stops at the first line left to the SDK (`Pipes.handing_on`), and the answers of the
        hub's requests waiting then follow the SDK's reader, which hands on in order
        (`lines._TakingReadStream`): an answer never overtakes a message the server sent before it (a log
        message about the same request, say).
        """
        take = self._pipes.take if self._pipes is not None else None
        if take is None:
            return text
        start = 0
        while start < len(text):  # a line is copied only to be offered, and only if it names a hub- id
            end = text.index(b"\n", start) + 1
            line = text if end - start == len(text) else text[start:end]
            if text.find(b'"hub-', start, end) < 0 or not take(line):
                assert self._pipes is not None
                if self._pipes.handing_on is not None:
                    self._pipes.handing_on()
                break
            start = end
        return text[start:] if start else text

    async def aclose(self) -> None:
        await self._stream.aclose()


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


def open_transport(config: ServerConfig, kind: str | None = None) -> WatchedTransport:
    """A fresh, not yet entered transport for one connection attempt.

    `kind` overrides the config's (a URL mount with no `transport` is opened as
    streamable HTTP first, and as legacy SSE if that is refused; see connection.py).
    """
    kind = kind or config.kind
    if kind == "stdio":
        assert config.command is not None
        _read_stdio_in_lines()
        params = StdioServerParameters(
            command=resolve_command(config.command),
            args=list(config.args),
            env=dict(config.env) or None,
            cwd=config.cwd,
            # "strict" would end the SDK's reader at the first byte that is not UTF-8 and
            # leave the connection open but deaf; "replace" spoils only that line.
            encoding_error_handler="replace",
        )
        return WatchedTransport(_Stdio(stdio_client(params)))
    assert config.url is not None
    if kind == "sse":
        _lift_sse_event_cap()
        return WatchedTransport(sse_client(config.url, headers=dict(config.headers), sse_read_timeout=300.0))
    return WatchedTransport(_StreamableHttp(config.url, dict(config.headers)))


class StdinLines:
    """A child's stdin as the hub writes its own lines to it: straight to the event loop's pipe.

    anyio's stream over the pipe (what the SDK writes through) checks for cancellation
    before each write and, after it, yields to the event loop once more in a shielded
    cancel scope: a loop turn and two scopes per request written, on the path of every
    call. A whole line is one write, so lines written here and by the SDK never
    interleave. A pipe the child closed fails as anyio's stream fails (`OSError` or
    `BrokenResourceError`). A stream that is not anyio's wrapper of an asyncio
    writer is written as it is.
    """

    def __init__(self, stream: ByteSendStream) -> None:
        self._stream = stream
        writer = getattr(stream, "_stream", None)
        self._writer = writer if isinstance(writer, asyncio.StreamWriter) else None

    async def send(self, line: bytes) -> None:
        if self._writer is None:
            await self._stream.send(line)
            return
        try:
            self._writer.write(line)
            await self._writer.drain()  # returns at once unless the pipe is full
        except RuntimeError as exc:  # uvloop's write to a closed pipe
            raise anyio.BrokenResourceError from exc


class ArrivingLines:
    """A child's stdout, whose whole lines the hub's requests take as the pipe delivers them.

    asyncio hands each chunk the child writes to its `StreamReader` (`feed_data`),
    which wakes the SDK's reader task to read it, and only then are the lines
    offered to `Pipes.take` (`_LineReceiveStream`). Here each whole line that
    names one of the hub's ids is offered at once, in the event loop's callback,
    and only what is not taken is fed to the reader: an answer reaches its
    waiting call without a turn of the SDK's reader first.

    Order is kept as `_LineReceiveStream._untaken` keeps it: at the first line not
    taken, `Pipes.handing_on` is told, and that line and the rest of the chunk go
    to the reader. While anything fed to the reader is unread there, or the line
    it last got is unfinished, every line goes to the reader too (which offers
    them itself), so no line is taken ahead of one before it. An unfinished line
    is held up to `_HELD_BYTES`; a longer one goes on to the reader as it comes.
    """

    def __init__(self, reader: asyncio.StreamReader, pipes: Pipes) -> None:
        self._feed = reader.feed_data
        self._feed_eof = reader.feed_eof
        self._pipes = pipes
        self._held = b""
        """The start of a line not ended yet, up to `_HELD_BYTES` (not yet fed to the reader)."""
        self.unread = 0
        """Bytes fed to the reader that its consumer (`_LineReceiveStream`) has not read yet."""
        self._open_line = False
        """Whether the last byte fed to the reader was not a line's end."""
        reader.feed_data = self.feed_data  # type: ignore[method-assign]
        reader.feed_eof = self.feed_eof  # type: ignore[method-assign]

    def feed_data(self, data: bytes) -> None:
        if self._held:
            data, self._held = self._held + data, b""
        take = self._pipes.take
        if take is None or self.unread or self._open_line:
            self._pass(data)
            return
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            line = data if start == 0 and end == len(data) - 1 else data[start : end + 1]
            if data.find(b'"hub-', start, end) < 0 or not take(line):
                if self._pipes.handing_on is not None:
                    self._pipes.handing_on()
                self._pass(data[start:] if start else data)
                return
            start = end + 1
        if start < len(data):
            rest = data[start:] if start else data
            if len(rest) > _HELD_BYTES:
                self._pass(rest)
            else:
                self._held = rest

    def feed_eof(self) -> None:
        if self._held:
            self._pass(self._held)
            self._held = b""
        self._feed_eof()

    def _pass(self, data: bytes) -> None:
        if data:
            self.unread += len(data)
            self._open_line = not data.endswith(b"\n")
            self._feed(data)


class Pipes:
    """A stdio child's pipes as the hub reaches them past the SDK's transport.

    The SDK's stdio client writes each message through a writer task and reads
    each line through a reader task that parses it into a model and hands it on
    through a stream. The hub's own requests skip both (`lines.DirectLines`):
    they are written to the child's `stdin` at once (one write per line, so they
    never interleave with the SDK's), and each line the child writes is offered
    to `take` before the SDK's reader sees it.
    """

    def __init__(self) -> None:
        self.stdin: StdinLines | None = None
        """Set when the SDK has started the child (None: it has not, or not through the usual spawn)."""
        self.take: Callable[[bytes], bool] | None = None
        """Set by `DirectLines`: takes a line that answers (or reports progress on) one of its requests."""
        self.handing_on: Callable[[], None] | None = None
        """Set by `DirectLines`: told before a line goes to the SDK's reader."""
        self.arriving: ArrivingLines | None = None
        """Set when the SDK has started the child: its stdout, offering lines as they arrive."""


class _Stdio:
    """The SDK's stdio client, with the hub's requests answered past its session (`direct`, see lines.py)."""

    def __init__(self, inner: Transport | Any) -> None:
        self._inner = inner
        self.direct: DirectLines | None = None

    async def __aenter__(self) -> TransportStreams:
        pipes = Pipes()
        token = _PIPES.set(pipes)  # the child's spawn and its stdout reader are started in this context
        try:
            read_stream, write_stream = await self._inner.__aenter__()
        finally:
            _PIPES.reset(token)
        self.direct = DirectLines(write_stream, pipes)
        return self.direct.wrap(read_stream), write_stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if self.direct is not None:
            self.direct.close()
        return await self._inner.__aexit__(exc_type, exc, tb)


class _StreamableHttp:
    """Streamable HTTP with an owned client and no cap on one SSE event's size.

    The SDK caps one SSE event at 1 MiB by default; a proxy must pass results
    of any size, so the cap is lifted here. The client's responses keep their
    connection when closed early (`_DrainOnClose`). The hub's requests go out
    through `direct`, without the SDK's per-request machinery (see posts.py);
    the session reads both its transport's messages and those it hands over.
    """

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self._url = url
        self._headers = headers
        self._stack = AsyncExitStack()
        self.direct: DirectPosts | None = None
        self.refused: int | None = None
        """The 4xx status the server answered every POST with so far (None: none, or one was accepted)."""
        self._accepted = False

    async def __aenter__(self) -> TransportStreams:
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(httpx2.AsyncClient(headers=self._headers, timeout=_HTTP_TIMEOUT))
            # aiohttp is imported only once a streamable HTTP server is mounted (about 0.2 s and 10 MiB).
            from mcp_hub.upstream.posts import DirectPosts

            posts = DirectPosts(self._url, self._headers)

            async def learn(response: httpx2.Response) -> None:
                posts.learn(response.headers)
                if response.request.method == "POST" and not self._accepted:
                    self._note_post(response.status_code)

            client.event_hooks = {"response": [_drain_on_close, learn]}
            read_stream, write_stream = await stack.enter_async_context(
                streamable_http_client(self._url, http_client=client, max_sse_event_size=None)
            )
            merged = await stack.enter_async_context(posts.merging(read_stream))
            self._stack = stack.pop_all()
            self.direct = posts
            return merged, write_stream

    def _note_post(self, status: int) -> None:
        """Keep the status of a refused POST until one is accepted (see `refused`)."""
        if 400 <= status < 500:
            self.refused = status
        else:
            self._accepted, self.refused = True, None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._stack.__aexit__(exc_type, exc, tb)


async def _drain_on_close(response: httpx2.Response) -> None:
    """Response hook: give the response a body that is read to its end when closed early."""
    assert isinstance(response.stream, httpx2.AsyncByteStream)
    response.stream = _DrainOnClose(response.stream)


class _DrainOnClose(httpx2.AsyncByteStream):
    """A response body that, closed before its end, first reads the rest, so its connection is kept.

    httpcore2 returns a connection to the pool only if the response on it was
    read to its end; closed earlier, the connection is dropped. The SDK's
    streamable HTTP client closes a POST's SSE response (and a resumed GET's) as
    soon as the JSON-RPC response event arrives, after it has handed that event
    to the session; the server ends the stream right after it, so the rest is
    normally one empty chunk already on its way. Reading it here, at most
    `_DRAIN_BYTES` within `_DRAIN_SECONDS`, costs the call nothing and spares
    the next one a TCP (and TLS) handshake. Past either bound, or on a read
    error, the response is closed as it would have been (connection dropped).
    A response never iterated (a 202, an error status) is read from its start.

    It wraps the client's body stream from a response hook rather than the
    client's transport, so the client still builds its own transports, with
    the environment's proxy settings. It keeps `elapsed`, which httpx2's
    `Response.elapsed` reads from the stream.
    """

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._chunks: AsyncIterator[bytes] | None = None
        self._ended = False

    @property
    def elapsed(self) -> datetime.timedelta | None:
        return getattr(self._inner, "elapsed", None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self._chunks = chunks = self._inner.__aiter__()
        async for chunk in chunks:
            yield chunk
        self._ended = True

    async def aclose(self) -> None:
        try:
            if not self._ended:
                await self._drain()
        finally:
            await self._inner.aclose()

    async def _drain(self) -> None:
        # Resumes the inner iterator where the reader left it; the reader's own
        # generators stay suspended and are finalized as they would be anyway.
        chunks = self._chunks if self._chunks is not None else self._inner.__aiter__()
        received = 0
        with anyio.move_on_after(_DRAIN_SECONDS):
            try:
                async for chunk in chunks:
                    received += len(chunk)
                    if received > _DRAIN_BYTES:
                        return
            except httpx2.TransportError:
                return
            self._ended = True


class WatchedTransport:
    """A transport whose `closed` event fires when its read side ends."""

    def __init__(self, inner: Transport | Any) -> None:
        self._inner = inner
        self.closed = anyio.Event()

    @property
    def direct(self) -> DirectPosts | DirectLines | None:
        """Where the hub's requests go past the SDK session, once entered (streamable HTTP and stdio)."""
        return getattr(self._inner, "direct", None)

    @property
    def refused(self) -> int | None:
        """The HTTP 4xx status a streamable HTTP server answered every POST with (None: it accepted one,
        none was sent, or the transport is not streamable HTTP)."""
        return getattr(self._inner, "refused", None)

    async def __aenter__(self) -> TransportStreams:
        read_stream, write_stream = await self._inner.__aenter__()
        return _WatchedReadStream(read_stream, self.closed), write_stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self.closed.set()
        return await self._inner.__aexit__(exc_type, exc, tb)


class _WatchedReadStream(ReadStreamBase):
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

    async def aclose(self) -> None:
        self._closed.set()
        await self._inner.aclose()
