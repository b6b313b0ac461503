"""A stdio server: the SDK's stdio client for its child process, and the hub's requests on its pipes.

The SDK's stdio client starts the child, writes each message through a writer
task, reads each line of its stdout through a reader task that parses it into a
model, and stops the child at the end; the SDK client's session keeps a waiter
per request, spawns a task per progress notification and validates each result
into a model. The hub forwards results it does not inspect, so once a session
is negotiated, `StdioChannel` writes each of the hub's requests straight to the
child's stdin (`StdinLines`; one write per line, so lines never interleave with
the SDK writer's), and each line the child writes that names one of its ids is
offered to it before the SDK's reader parses it (`ArrivingLines`, as the pipe
delivers it; else `_LineReceiveStream`, as the SDK's reader reads it): the
request's answer, and its progress, go to the waiting call at once; every other
message reaches the session as before. Where the pipes are not at hand, the
transport's streams serve instead (the write stream, and the read stream it
wraps). The child's process, its shutdown and (unless a `StderrTail` captures
it, see stderr.py) its stderr stay the SDK's.

How the pipes reach the channel, one way: `StdioTransport` builds the channel,
then the `ChildPipes` that offer it their lines, and opens the SDK's client
with those pipes as its child (`sdk.client.StdioClient`); the SDK's spawn hands
them the child's stdin and stdout, and the channel, once the client is open,
its stdin.

A child's stdout is read in whole lines, in time linear in their length, and a
line longer than `MAX_LINE_BYTES` is discarded rather than held; bytes that are
not UTF-8 spoil only their own line.

A request abandoned before its answer is followed by `notifications/cancelled`,
which is how both eras cancel over stdio. When the read stream ends, every
waiting call fails at once with `CONNECTION_CLOSED`.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread
import pydantic_core
from anyio.abc import AnyByteReceiveStream, ByteReceiveStream, ByteSendStream, ObjectReceiveStream
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from mcp_hub import sdk, wire
from mcp_hub.config import ServerConfig
from mcp_hub.sdk.client import (
    ReadStream,
    StdioClient,
    TransportStreams,
    WriteStream,
    asyncio_reader_of,
    asyncio_writer_of,
)
from mcp_hub.streams import LineStart, ReadStreamBase, deliver_progress
from mcp_hub.upstream.channel import CANCEL_SECONDS, cancel_notice, closed, raw_result, request_ids, request_message
from mcp_hub.upstream.command import CommandNotFound, find_command
from mcp_hub.upstream.sandbox import Confinement, confine
from mcp_hub.upstream.sandbox import unavailable as sandbox_unavailable
from mcp_hub.upstream.stderr import StderrTail, stderr_for_child

logger = logging.getLogger("mcp_hub.upstream")

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line a stdio server may write to stdout (one JSON-RPC message); longer ones are discarded."""

_READ_BYTES = 1024 * 1024
"""The most read off a child's stdout at once. Reading all that asyncio has buffered (up to 256 KiB
per pipe read) copies it once; reading it 64 KiB at a time, as the SDK does, moves the rest of the
buffer down after each read."""

_HELD_BYTES = 64 * 1024
"""Up to this much of the last text it read, the SDK's reader may hold while every line is taken."""

_PROGRESS_BUFFER = 256
"""Progress notifications one request may have waiting for its caller; more are dropped."""


class StdioTransport:
    """The SDK's stdio client for one mount's child, with the hub's requests on its pipes (`channel`)."""

    def __init__(self, config: ServerConfig, stderr: StderrTail | None = None) -> None:
        assert config.command is not None
        self._command = find_command(config.command, config.cwd)
        self._config = config
        self._params = StdioServerParameters(
            command=self._command or config.command,
            args=list(config.args),
            env=dict(config.env) or None,
            cwd=config.cwd,
            # "strict" would end the SDK's reader at the first byte that is not UTF-8 and
            # leave the connection open but deaf; "replace" spoils only that line.
            encoding_error_handler="replace",
        )
        self._stderr = stderr
        self._inner: StdioClient | None = None
        self.channel: StdioChannel | None = None
        self.confinement: Confinement | None = None
        """The child's sandbox (sandbox.py), where it has one."""

    async def __aenter__(self) -> TransportStreams:
        if self._command is None:
            self._command = find_command(self._config.command or "", self._config.cwd)  # installed since?
            if self._command is None:
                raise CommandNotFound(self._config.command or "", self._config.cwd)
            self._params = self._params.model_copy(update={"command": self._command})
        params = self._params
        if self._config.sandbox is not None:  # bubblewrap's probe (once per process) runs off the event loop
            await anyio.to_thread.run_sync(sandbox_unavailable)
        self.confinement = confine(self._config, params.command, params.args, params.cwd)
        if self.confinement is not None:
            command, *args = self.confinement.argv
            await self.confinement.prepared(get_default_environment(), self._config.connect_timeout)
            env = {**(params.env or {}), **self.confinement.env}  # over the SDK's default environment
            params = params.model_copy(update={"command": command, "args": args, "env": env})
        channel = StdioChannel()
        pipes = ChildPipes(channel.take_line, channel.handing_on)
        pipes.on_exit = self._child_exited
        try:
            async with stderr_for_child(self._stderr) as errlog:  # the child's own once it has started
                self._inner = StdioClient(params, pipes, errlog)
                read_stream, write_stream = await self._inner.__aenter__()
        except BaseException:
            self._release()
            raise
        channel.open(write_stream, pipes.stdin)
        self.channel = channel
        return channel.wrap(read_stream), write_stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if self.channel is not None:
            self.channel.close()
        assert self._inner is not None
        try:
            return await self._inner.__aexit__(exc_type, exc, tb)
        finally:
            self._release()

    def _child_exited(self, returncode: int) -> None:
        """How the child ended (and the sandbox limit that ended it), for the mount's reports."""
        if self._stderr is None:
            return
        if self.confinement is None:
            self._stderr.child_exited(returncode)
        else:
            self._stderr.child_exited(returncode, *self.confinement.ended(returncode))

    def _release(self) -> None:
        if self.confinement is not None:
            self.confinement.release()


# -- the channel ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Answer:
    """A request's answer: its result, or its error."""

    result: Any = None
    error: ErrorData | None = None


_Item = _Answer | Mapping[str, Any]
"""What a waiting request receives: its answer, or the params of a progress notification."""


class StdioChannel:
    """Sends requests to one stdio server and takes their answers directly (see the module docstring).

    Usable once `open`.
    """

    def __init__(self) -> None:
        self._write: WriteStream[SessionMessage] | None = None
        self._stdin: StdinLines | None = None
        self._ids = request_ids()
        self._waiting: dict[str, asyncio.Queue[_Item | None]] = {}
        """The inbox of each request waiting for its answer (None in it: the connection closed)."""
        self._behind: set[str] = set()
        """Requests that were waiting when a line went to the SDK's reader: their answers, and progress,
        follow it there (`take`), behind what the server sent first."""
        self._closed = False

    def open(self, write: WriteStream[SessionMessage], stdin: StdinLines | None) -> None:
        """Write through `stdin`, the child's own (None: through `write`, the transport's write stream)."""
        self._write, self._stdin = write, stdin

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str],
        *,
        on_progress: ProgressFnT | None = None,
        modern: bool = False,
    ) -> dict[str, Any]:
        """Write one request and return the server's raw result (`headers` do not apply to stdio).

        Raises:
            MCPError: the server answered with an error; `CONNECTION_CLOSED` when the
                connection ended before the answer.
        """
        if self._closed:
            raise closed()
        request_id = next(self._ids)
        message = request_message(request_id, method, params, on_progress is not None)
        # An asyncio queue, not an anyio memory stream: a call waits on it once or twice, and the stream's
        # machinery (events, task records) cost more than the rest of taking the answer.
        inbox: asyncio.Queue[_Item | None] = asyncio.Queue()
        self._waiting[request_id] = inbox
        answered = False
        try:
            try:
                await self._send(message)
                while (item := await inbox.get()) is not None:
                    if isinstance(item, _Answer):
                        answered = True
                        if item.error is not None:
                            raise MCPError.from_error_data(item.error)
                        return raw_result(item.result)
                    if on_progress is not None:
                        await deliver_progress(on_progress, item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
            raise MCPError(CONNECTION_CLOSED, f"the connection closed before the answer to {method}")
        finally:
            self._waiting.pop(request_id, None)
            self._behind.discard(request_id)
            if not answered and not self._closed:
                await self._cancel(request_id)

    def wrap(self, read: ReadStream[SessionMessage | Exception]) -> _TakingReadStream:
        """The read stream the session reads: `read`, less the answers and progress taken here."""
        return _TakingReadStream(read, self)

    def take(self, message: SessionMessage | Exception) -> bool:
        """Hand `message` to the request it answers or reports progress on; False if it is for none here."""
        if not isinstance(message, SessionMessage):
            return False
        inner = message.message
        if isinstance(inner, JSONRPCResponse):
            return self._hand(inner.id, _Answer(result=inner.result))
        if isinstance(inner, JSONRPCError):
            return self._hand(inner.id, _Answer(error=inner.error))
        if isinstance(inner, JSONRPCNotification) and inner.method == "notifications/progress":
            return self._hand((inner.params or {}).get("progressToken"), inner.params or {})
        return False

    def take_line(self, line: bytes) -> bool:
        """`take` for a line from the child's stdout, before the SDK's reader parses it into a model."""
        try:
            message = pydantic_core.from_json(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return False
        if "method" in message:
            params = message.get("params")
            if message["method"] != "notifications/progress" or not isinstance(params, dict):
                return False
            token = params.get("progressToken")
            return isinstance(token, str) and token not in self._behind and self._hand(token, params)
        key = message.get("id")
        if not isinstance(key, str) or key in self._behind:
            return False
        if "result" in message and "error" not in message:
            return self._hand(key, _Answer(result=message["result"]))
        if "error" in message and "result" not in message:
            try:
                error = ErrorData.model_validate(message["error"])
            except ValidationError:
                return False  # the SDK's reader reports it
            return self._hand(key, _Answer(error=error))
        return False

    def handing_on(self) -> None:
        """A line goes to the SDK's reader: the answers of the requests waiting now follow it there."""
        self._behind.update(self._waiting)

    def _hand(self, key: Any, item: _Item) -> bool:
        waiting = self._waiting.get(key) if isinstance(key, str) else None
        if waiting is None:
            return False
        if isinstance(item, _Answer) or waiting.qsize() < _PROGRESS_BUFFER:
            waiting.put_nowait(item)
        else:
            logger.debug("dropped a progress notification for %s: its caller is %d behind", key, _PROGRESS_BUFFER)
        return True

    def close(self) -> None:
        """The connection ended: every waiting request fails at once."""
        self._closed = True
        for waiting in list(self._waiting.values()):
            waiting.put_nowait(None)

    async def _send(self, message: dict[str, Any]) -> None:
        """Write one message to the child: straight to its stdin (one write), else through the SDK's writer."""
        if self._stdin is not None:
            await self._stdin.send(wire.dumps_line(message))
        else:
            assert self._write is not None
            await self._write.send(SessionMessage(jsonrpc_message_adapter.validate_python(message)))

    async def _cancel(self, request_id: str) -> None:
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(CANCEL_SECONDS),
            contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError),
        ):
            await self._send(cancel_notice(request_id))


class _TakingReadStream(ReadStreamBase):
    """A transport's read stream, with what `StdioChannel` takes left out; its end fails the waiting requests."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], channel: StdioChannel) -> None:
        self._inner = inner
        self._channel = channel

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)  # the SDK's optional attribute (none on stdio's)

    async def receive(self) -> SessionMessage | Exception:
        try:
            while True:
                message = await self._inner.receive()
                if not self._channel.take(message):
                    return message
        except BaseException:
            self._channel.close()
            raise

    async def aclose(self) -> None:
        self._channel.close()
        await self._inner.aclose()


# -- the child's pipes ---------------------------------------------------------------------------------------------


class ChildPipes:
    """A stdio child's pipes as the hub reaches them past the SDK's transport (an `sdk.client.StdioChild`).

    Each line the child writes is offered to `take` before the SDK's reader sees
    it, and `handing_on` is told before a line goes to that reader; the SDK's
    spawn hands over the child's `stdin` (`spawned`), and its reader reads stdout
    through `reading`.
    """

    def __init__(
        self, take: Callable[[bytes], bool] | None = None, handing_on: Callable[[], None] | None = None
    ) -> None:
        self.take = take
        """Takes a line that answers (or reports progress on) one of the channel's requests."""
        self.handing_on = handing_on
        """Told before a line goes to the SDK's reader."""
        self.stdin: StdinLines | None = None
        """Set when the SDK has started the child (None: it has not, or not through the usual spawn)."""
        self.arriving: ArrivingLines | None = None
        """Set when the SDK has started the child: its stdout, offering lines as they arrive."""
        self.on_exit: Callable[[int], None] | None = None
        """Told the child's return code when it exits (where the hub spawned it itself)."""

    def spawned(self, stdin: Any, stdout: Any, process: Any = None) -> None:
        if self.on_exit is not None and hasattr(process, "on_exit"):  # a `sdk.process.ChildProcess`
            process.on_exit = self.on_exit
        if stdin is not None:
            self.stdin = StdinLines(stdin)
        reader = asyncio_reader_of(stdout) if stdout is not None else None
        if reader is not None:
            self.arriving = ArrivingLines(reader, self)
        else:
            sdk.unavailable("taking a stdio child's answers as they arrive", "asyncio reader under its stdout")

    def reading(self, stdout: Any, encoding: str, errors: str) -> ObjectReceiveStream[str]:
        return _LineReceiveStream(stdout, self, encoding, errors)


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
        self._writer = asyncio_writer_of(stream)
        if self._writer is None:
            sdk.unavailable("writing to a stdio child's stdin directly", "asyncio writer under its stdin")

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
    offered to `ChildPipes.take` (`_LineReceiveStream`). Here each whole line that
    names one of the hub's ids is offered at once, in the event loop's callback,
    and only what is not taken is fed to the reader: an answer reaches its
    waiting call without a turn of the SDK's reader first.

    Order is kept as `_LineReceiveStream._untaken` keeps it: at the first line not
    taken, `ChildPipes.handing_on` is told, and that line and the rest of the chunk
    go to the reader. While anything fed to the reader is unread there, or the line
    it last got is unfinished, every line goes to the reader too (which offers
    them itself), so no line is taken ahead of one before it. An unfinished line
    is held up to `_HELD_BYTES`; a longer one goes on to the reader as it comes.
    """

    def __init__(self, reader: asyncio.StreamReader, pipes: ChildPipes) -> None:
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


class _LineReceiveStream(ObjectReceiveStream[str]):
    """A child's stdout decoded to text that ends only at line ends, as the SDK's stdio reader reads it.

    The SDK's reader appends each chunk read from the pipe (64 KiB at most) to the
    text of the unfinished line and splits the result again, which takes time
    quadratic in a line's length (a 30 MB line costs seconds of the event loop) and
    holds a line of any length in memory. Handed whole lines only, its own buffer
    never grows.

    The unfinished line is kept as a list of chunks and joined once, when its end
    arrives. A line longer than `MAX_LINE_BYTES` is dropped as it arrives and stands
    in the text as a one-line notice (which is not JSON, so the session reports it
    as unreadable and reads on); the request it may have answered then runs into
    its deadline, and the other requests on the connection are unaffected.
    """

    def __init__(
        self, transport_stream: AnyByteReceiveStream, pipes: ChildPipes, encoding: str = "utf-8", errors: str = "strict"
    ) -> None:
        self._stream = transport_stream
        self._receive: Callable[[], Awaitable[bytes]] = (
            partial(transport_stream.receive, _READ_BYTES)
            if isinstance(transport_stream, ByteReceiveStream)
            else transport_stream.receive
        )
        self._pipes = pipes
        """The child's pipes, whose `take` is offered each line first."""
        self._decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
        self._start = LineStart(MAX_LINE_BYTES)
        self._held = 0
        """The length of the last text the SDK's reader read, which it holds until it reads another."""

    async def receive(self) -> str:
        while True:
            chunk = await self._receive()
            if (arriving := self._pipes.arriving) is not None:
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

        Taking stops at the first line left to the SDK (`ChildPipes.handing_on`), and the answers of the
        hub's requests waiting then follow the SDK's reader, which hands on in order
        (`_TakingReadStream`): an answer never overtakes a message the server sent before it (a log
        message about the same request, say).
        """
        take = self._pipes.take
        if take is None:
            return text
        start = 0
        while start < len(text):  # a line is copied only to be offered, and only if it names a hub- id
            end = text.index(b"\n", start) + 1
            line = text if end - start == len(text) else text[start:end]
            if text.find(b'"hub-', start, end) < 0 or not take(line):
                if self._pipes.handing_on is not None:
                    self._pipes.handing_on()
                break
            start = end
        return text[start:] if start else text

    async def aclose(self) -> None:
        await self._stream.aclose()
