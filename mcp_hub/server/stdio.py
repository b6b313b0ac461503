"""The hub's own stdio endpoint: the SDK's stdio transport, its pipes read and written on the event loop.

The SDK's `stdio_server()` reads standard input and writes standard output through
`anyio.wrap_file`, which runs every line read, every write and every flush in a
worker thread: three hand-offs to a thread and back per call, the largest part of
what a call costs the hub over stdio. When both standard streams are pipes or
sockets (as they are when a client launches the hub), `stdio_endpoint()` claims them
as the SDK does (standard input then reads the null device, standard output goes to
standard error, so stray output cannot corrupt the wire) and hands the SDK's
transport a line reader and a writer on asyncio's pipe transports instead. Messages
are parsed, framed and written exactly as before. Anything else (a terminal, a
regular file, the trio backend, an SDK without the claim) gets the SDK's own.

A line longer than `MAX_LINE_BYTES` is dropped rather than held, and stands in the
input as a line that is not JSON, which the SDK reports and reads past.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import stat
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from functools import partial
from typing import Any, BinaryIO
from weakref import WeakKeyDictionary

import anyio
from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp.server.stdio import stdio_server
from mcp.shared.dispatcher import CallOptions, OnRequest, coerce_request_id
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import (
    JSONRPCDispatcher,
    progress_token_from_params,
)
from mcp.shared.message import SessionMessage
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCRequest, RequestId

from mcp_hub import wire
from mcp_hub.scopes import cancel_scope, on_asyncio
from mcp_hub.sdk import server as sdk_server
from mcp_hub.sdk.server import Cancellable, HandshakeContext
from mcp_hub.server.hub_server import client_opened, session_connections
from mcp_hub.server.lane import lane_of, serving
from mcp_hub.server.serving import (
    Envelopes,
    ModernContext,
    cancelled_id_of,
    encode_answer,
    has_modern_envelope,
    notification,
    request_of,
    run_request,
    runner_for,
    serve_modern,
)
from mcp_hub.streams import Incoming, LineStart, ReadStreamBase

logger = logging.getLogger("mcp_hub.server")

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line read from the client (the HTTP endpoint takes request bodies up to half this)."""


@contextlib.asynccontextmanager
async def stdio_endpoint(server: Server[Any], lifespan_state: Any) -> AsyncIterator[tuple[Any, Any]]:
    """`(read_stream, write_stream)` for serving `server` over the process's standard input and output.

    On the event loop's pipes, a client's requests are served past the SDK's message
    loop (`StdioRequests`), with `lifespan_state`: a handshake-era client's once it
    has initialized, a 2026-07-28 client's after its first.
    """
    with contextlib.ExitStack() as claims:
        on_pipes = _is_stream(0) and _is_stream(1) and on_asyncio()
        claimed = sdk_server.claim_stdio(claims) if on_pipes else None
        if claimed is None:
            async with stdio_server() as (read_stream, write_stream):
                yield _EraWatch(read_stream, partial(client_opened, server)), write_stream
            return
        async with _pipes(*claimed) as (lines, output):
            tasks = _Tasks()
            lines.requests = requests = StdioRequests(server, lifespan_state, tasks, output)
            try:
                async with stdio_server(stdin=lines, stdout=output) as (read_stream, write_stream):  # type: ignore[arg-type]
                    yield _EraWatch(read_stream, requests.opened), write_stream
            finally:
                await tasks.aclose()


def _is_stream(fd: int) -> bool:
    """Whether `fd` is a pipe or a socket, which the event loop can watch (a terminal or a file it should not)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def _pipes(stdin_file: BinaryIO, stdout_file: BinaryIO) -> AsyncIterator[tuple[_Lines, _Output]]:
    loop = asyncio.get_running_loop()
    in_fd, out_fd = stdin_file.fileno(), stdout_file.fileno()
    in_blocking, out_blocking = os.get_blocking(in_fd), os.get_blocking(out_fd)
    lines = _Lines(loop)
    read_transport, _ = await loop.connect_read_pipe(lambda: lines, stdin_file)
    try:
        write_transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout_file)
        try:
            yield lines, _Output(asyncio.StreamWriter(write_transport, protocol, None, loop))
        finally:
            write_transport.close()
            with contextlib.suppress(OSError):
                os.set_blocking(out_fd, out_blocking)
    finally:
        read_transport.close()
        with contextlib.suppress(OSError):
            os.set_blocking(in_fd, in_blocking)


class _Lines(asyncio.Protocol):
    """Standard input as the text lines `stdio_server` iterates over, less those `requests` takes.

    Each whole line is offered to `requests` as it arrives, in the event loop's callback: a request
    served past the SDK's loop starts without waking a reader task first. The lines left to the
    SDK wait here, in order, for its reader; while they hold more than `MAX_LINE_BYTES`, the pipe
    is not read.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.requests: StdioRequests | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._start = LineStart(MAX_LINE_BYTES)
        self._pending: collections.deque[bytes] = collections.deque()
        self._pending_bytes = 0
        self._paused = False
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._line(self._ending(data if start == 0 and end == len(data) - 1 else data[start : end + 1]))
            start = end + 1
        if start < len(data):
            self._start.extend(data[start:] if start else data)
        if not self._paused and self._pending_bytes > MAX_LINE_BYTES and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        if self._ended:
            return
        if self._start:  # a last line without its newline is still a line
            self._line(self._ending(b""))
        self._ended = True
        self._wake()

    def _ending(self, end: bytes) -> bytes:
        """The line that `end` (its newline included, if it has one) ends; an over-long one as a line that is
        not JSON, which the SDK reports and reads past."""
        first = len(end) - 1 if end.endswith(b"\n") else len(end)
        if self._start.fits(first):
            line = self._start.join(end)
        else:
            line = f"dropped a {self._start.length(first)}-byte line (limit {MAX_LINE_BYTES})\n".encode()
        self._start.restart()
        return line

    def _line(self, line: bytes) -> None:
        if self.requests is not None and self.requests.take(line):
            return
        self._pending.append(line)
        self._pending_bytes += len(line)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while not self._pending:
            if self._ended:
                raise StopAsyncIteration
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        line = self._pending.popleft()
        self._pending_bytes -= len(line)
        if self._paused and self._pending_bytes <= MAX_LINE_BYTES and self._transport is not None:
            self._transport.resume_reading()
            self._paused = False
        return line.decode("utf-8", errors="replace")


class _Output:
    """Standard output as the text file `stdio_server` writes each message to and flushes."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode())

    async def flush(self) -> None:
        await self._writer.drain()

    async def send_line(self, line: bytes) -> None:
        """Write one message (a whole line, its newline included, so it cannot interleave with another) and
        flush it."""
        self._writer.write(line)
        await self._writer.drain()


class _Tasks:
    """Bare asyncio tasks for the requests served past the SDK's loop: starting one costs a fraction of an
    anyio task group's `start_soon`, which wraps and tracks every task. A request's failure is logged (each
    handles its own errors; this is a last resort); on exit all are cancelled, and awaited."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()

    def start(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._running.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.error("serving a request failed", exc_info=exc)

    async def aclose(self) -> None:
        running = list(self._running)
        for task in running:
            task.cancel()
        if running:
            with anyio.CancelScope(shield=True):
                await asyncio.wait(running)


class StdioRequests:
    """A client's requests, served past the SDK's message loop.

    The SDK's loop takes each message from standard input through three tasks and
    streams (the reader, the era replay, the dispatcher) before a task of its own
    runs it. Requests are taken here instead, in the era the client's first request
    opened (`opened`, told by `_EraWatch` as the SDK's loop decides it):

    - Handshake era, once the client's `notifications/initialized` has been handled:
      a request (not `initialize`, not an enveloped one) runs at once in the
      connection's `ServerRunner` (a call in the hub's lane, `lane.CallLane`, which
      does what the runner does for it) under a dispatch context of the connection's
      own dispatcher, so progress, log messages, questions and the client's
      cancellation travel as before. Its answer is written straight to standard
      output, or, if it sent the client anything on its way, through the
      connection's ordered channel behind what it sent.
    - 2026-07-28, after the first request: a request runs as the SDK's modern loop
      runs it (`_take_modern`; a call in the hub's lane), its messages and answer
      written straight to standard output; the client's `notifications/cancelled`
      for it is taken here too.

    A request the client cancelled is not answered, as the SDK does not answer it.
    Everything else (notifications, responses, the first request, requests the SDK
    would refuse, a reused in-flight id) goes to the SDK.
    """

    def __init__(self, server: Server[Any], lifespan_state: Any, tasks: _Tasks, output: _Output) -> None:
        self._server = server
        self._lifespan = lifespan_state
        self._tasks = tasks
        self._output = output
        self._connections = session_connections(server)
        self._lane = lane_of(server)
        self._runners: WeakKeyDictionary[Connection, ServerRunner[Any]] = WeakKeyDictionary()
        self._modern: bool | None = None
        """The era the client's first request opened (None: none yet, and every line goes to the SDK)."""
        self._outbound = NotifyOnlyOutbound(_LineOutbound(output))
        self._modern_flight: dict[RequestId, ModernContext] = {}
        self._envelopes = Envelopes()

    def opened(self, modern: bool) -> None:
        """The SDK's loop took the client's first request, which opened the connection in one era for good."""
        self._modern = modern
        client_opened(self._server, modern)

    def take(self, line: bytes) -> bool:
        """Serve `line` here if it is a request this serves (True); else leave it to the SDK (False)."""
        if self._modern is not None:
            return self._take_modern(line) if self._modern else self._take_handshake(line)
        return False

    def _take_handshake(self, line: bytes) -> bool:
        connection = self._connections.get(None)
        if connection is None or not connection.initialize_accepted or b'"method"' not in line:
            return False
        dispatcher = connection.outbound
        message = request_of(line)
        if (
            message is None
            or not isinstance(dispatcher, JSONRPCDispatcher)
            or has_modern_envelope(message.get("params"))
            or sdk_server.in_flight(dispatcher, message["id"])
        ):
            return False
        dctx = sdk_server.handshake_context(
            dispatcher, message["id"], progress_token_from_params(message.get("params"))
        )
        scope = cancel_scope()
        held = Cancellable(dispatcher, dctx, scope)  # from now on, the client can cancel it
        runner = runner_for(self._runners, self._server, connection, self._lifespan)
        self._tasks.start(
            self._serve(serving(self._lane, runner, message["method"]), dispatcher, dctx, scope, held, message)
        )
        return True

    async def _serve(
        self,
        on_request: OnRequest,
        dispatcher: JSONRPCDispatcher[Any],
        dctx: HandshakeContext,
        scope: anyio.CancelScope,
        held: Cancellable,
        message: dict[str, Any],
    ) -> None:
        with held:
            result, error = await run_request(on_request, dctx, scope, message["method"], message.get("params"))
        if dctx.cancel_requested.is_set() or (result is None and error is None):
            return
        request_id = message["id"]
        if not dctx.sent:
            await self._output.send_line(encode_answer(request_id, result, error, line=True))
        elif error is not None:
            await sdk_server.write_error(dispatcher, request_id, error)
        else:
            assert result is not None
            await sdk_server.write_result(dispatcher, request_id, result)

    def _take_modern(self, line: bytes) -> bool:
        """A 2026-07-28 request, run as the SDK's modern loop runs it: `serve_one` with a connection of its own
        envelope, a context that refuses server requests, and errors shaped by `modern_error_data`. Its
        progress and log messages and its answer are written straight to standard output."""
        if b'"notifications/cancelled"' in line:
            return self._cancelled(line)
        if b'"method"' not in line:
            return False
        message = request_of(line)
        if message is None:
            return False
        key = coerce_request_id(message["id"])
        params = message.get("params")
        if key in self._modern_flight:
            return False
        route = classify_inbound_request({"method": message["method"], "params": params})
        if isinstance(route, InboundLadderRejection):
            return False  # the SDK refuses it
        connection = self._envelopes.connection(
            route.protocol_version, route.client_info, route.client_capabilities, outbound=self._outbound
        )
        dctx = self._modern_flight[key] = ModernContext(
            _LINE_TRANSPORT, message["id"], progress_token_from_params(params), self._emit
        )
        self._tasks.start(self._serve_modern(connection, dctx, key, message["method"], params))
        return True

    def _cancelled(self, line: bytes) -> bool:
        """The client's `notifications/cancelled` for a request served here (True): it stops, unanswered."""
        request_id = cancelled_id_of(line)
        dctx = self._modern_flight.get(coerce_request_id(request_id)) if request_id is not None else None
        if dctx is None:
            return False
        dctx.cancel_requested.set()
        dctx.scope.cancel()
        return True

    async def _serve_modern(
        self, connection: Connection, dctx: ModernContext, key: RequestId, method: str, params: dict[str, Any] | None
    ) -> None:
        try:
            result, error = await serve_modern(
                self._server, self._lane, dctx, method, params, connection, self._lifespan
            )
        finally:
            if self._modern_flight.get(key) is dctx:
                del self._modern_flight[key]
        if dctx.cancel_requested.is_set() or (result is None and error is None):
            return
        await self._output.send_line(encode_answer(dctx.request_id, result, error, line=True))

    async def _emit(self, message: dict[str, Any]) -> None:
        await self._output.send_line(wire.dumps_line(message))


_LINE_TRANSPORT = TransportContext(kind="jsonrpc", can_send_request=False)


class _LineOutbound:
    """The connection-scoped channel of a 2026-07-28 client over stdio: notifications, written as lines."""

    def __init__(self, output: _Output) -> None:
        self._output = output

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        await self._output.send_line(wire.dumps_line(notification(method, params)))

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)


class _EraWatch(ReadStreamBase):
    """The SDK transport's read stream, telling `opened` the era of the client's first request as
    `serve_dual_era_loop` decides it: 2026-07-28 when it carries the envelope and is not `initialize`."""

    def __init__(self, stream: Any, opened: Callable[[bool], None]) -> None:
        self._stream = stream
        self._opened: Callable[[bool], None] | None = opened

    @property
    def last_context(self) -> Any:
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Incoming:
        item = await self._stream.receive()
        if self._opened is not None and isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
            opened, self._opened = self._opened, None
            opened(item.message.method != "initialize" and has_modern_envelope(item.message.params))
        return item

    def close(self) -> None:
        self._stream.close()

    async def aclose(self) -> None:
        await self._stream.aclose()
