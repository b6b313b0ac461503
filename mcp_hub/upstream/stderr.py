"""The last lines a stdio server wrote to stderr, kept per mount to explain why it did not start.

A stdio child's stderr goes on to the hub's own stderr, as it always did; while
a mount's supervisor connects (`StderrTail.capturing()`), the child is given a
pipe instead of the hub's stderr, read by the event loop (no task, no thread):
each chunk is passed on to the hub's stderr at once, and its last
`StderrTail.size` lines are kept. `mcp-hub check --connect` prints them under a
server that did not come up; the admin console shows them, masked, beside its last error (and /healthz, when
`[http] health_stderr` says so). How the child of the attempt under way ended, when it
exited on its own, is kept beside them (`ended`: "the server exited with status 3"),
for the error that says the connection closed.

The SDK's stdio client takes a child's stderr as a file it hands to the
process; the stdio transport (stdio.py) asks `stderr_for_child(tail)` for it.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import contextlib
import itertools
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import IO, Any

_LINE_CHARS = 500
"""A kept line is cut to this many characters."""


class StderrTail:
    """The last `size` lines of a stdio server's stderr, across its restarts."""

    def __init__(self, size: int = 20) -> None:
        self.size = size
        self._lines: collections.deque[str] = collections.deque(maxlen=size)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._open = ""
        """The start of a line not ended yet."""
        self._cutting = False
        """Whether the line under way was kept cut already (the rest of it is dropped)."""
        self._pipes: set[asyncio.ReadTransport] = set()
        self._kept = 0
        """Lines kept so far, in all (those the deque has let go of too)."""
        self._attempt_began = 0
        """`_kept` when the connection attempt under way (or the last one) began."""
        self._before: tuple[int, int] = (0, 0)
        """The lines the attempt before it kept: `_kept` when it began, and when it ended."""
        self.ended: str | None = None
        """How the child of the current connection attempt ended (None: it has not, or it is not known)."""
        self.limit: str | None = None
        """The sandbox limit that ended it ("its memory limit (1 GiB)"), if one did."""
        self._ended = asyncio.Event()

    def child_exited(self, returncode: int, how: str | None = None, limit: str | None = None) -> None:
        """The child exited with `returncode` (negative: the signal that ended it); `how` says so in words
        where its sandbox knows more, and `limit` names the sandbox limit that ended it."""
        self.ended = how or exit_status(returncode)
        self.limit = limit
        self._ended.set()

    async def wait_ended(self, seconds: float) -> str | None:
        """How the child ended, waiting up to `seconds` for its exit to be reaped (None: still unknown)."""
        if self.ended is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), seconds)
        return self.ended

    def lines(self) -> list[str]:
        """The last lines, oldest first (with the start of an unfinished one, if any)."""
        lines = list(self._lines)
        if self._open.strip():
            lines.append(self._open[:_LINE_CHARS])
        return lines[-self.size :]

    def last_attempt(self) -> list[str]:
        """The last lines the child of the latest connection attempt wrote; when it has written none (yet), those
        of the attempt before it; when that wrote none either, the last lines: a server that fails the same way
        at each restart is shown once."""
        lines = list(self._lines)
        first = self._kept - len(lines)
        """The number of the oldest line still kept."""
        if self._kept > self._attempt_began or self._open.strip():
            shown = lines[max(0, self._attempt_began - first) :]
            return [*shown, self._open[:_LINE_CHARS]] if self._open.strip() else shown
        began, ended = self._before
        if ended > began and ended > first:
            return lines[max(0, began - first) : ended - first]
        return self.lines()

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """Stop reading the stderr of the children given this tail (`stderr_for_child`) on exit; how the
        previous attempt's child ended is forgotten on entry."""
        self.ended = self.limit = None
        self._ended = asyncio.Event()
        if self._open.strip():  # the last child's unfinished line is kept as it is, not continued by the next's
            self._lines.append(self._open[:_LINE_CHARS])
            self._kept += 1
        self._open, self._cutting = "", False
        self._decoder.reset()
        self._before = (self._attempt_began, self._kept)
        self._attempt_began = self._kept
        try:
            yield
        finally:
            for pipe in list(self._pipes):
                pipe.close()

    def feed(self, data: bytes) -> None:
        text = self._decoder.decode(data)
        if self._cutting:  # the rest of a line already kept cut
            end = text.find("\n")
            if end < 0:
                return
            text, self._cutting = text[end + 1 :], False
        *ended, self._open = (self._open + text).split("\n")
        kept = [line.rstrip("\r")[:_LINE_CHARS] for line in ended if line.strip()]
        self._lines.extend(kept)
        self._kept += len(kept)
        if len(self._open) > _LINE_CHARS:  # a line without end is kept cut, not grown
            self._lines.append(self._open[:_LINE_CHARS])
            self._kept += 1
            self._open, self._cutting = "", True

    async def open_pipe(self) -> int:
        """A pipe whose read end feeds this tail; its write end, for the child (the caller closes it)."""
        read_fd, write_fd = os.pipe()
        try:
            loop = asyncio.get_running_loop()
            pipe, _ = await loop.connect_read_pipe(lambda: _Reader(self), os.fdopen(read_fd, "rb", buffering=0))
        except BaseException:
            os.close(write_fd)
            raise
        self._pipes.add(pipe)
        return write_fd

    def pipe_closed(self, pipe: asyncio.ReadTransport) -> None:
        self._pipes.discard(pipe)


def collapsed(lines: Sequence[str]) -> list[str]:
    """`lines`, a run of the same line written once (a server that fails the same way at each restart)."""
    runs = [(line, len(list(run))) for line, run in itertools.groupby(lines)]
    return [line if count == 1 else f"{line} ({count} times)" for line, count in runs]


def exit_status(returncode: int) -> str:
    """A child's return code in words: "the server exited with status 3", "... was killed by signal SIGKILL"."""
    if returncode >= 0:
        return f"the server exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = str(-returncode)
    return f"the server was killed by signal {name}"


class _Reader(asyncio.Protocol):
    """Passes a child's stderr on to the hub's stderr, and keeps its tail."""

    def __init__(self, tail: StderrTail) -> None:
        self._tail = tail
        self._transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._tail.feed(data)
        with contextlib.suppress(OSError, ValueError):
            out = sys.stderr
            buffer = getattr(out, "buffer", None)
            if buffer is not None:
                buffer.write(data)
            else:
                out.write(data.decode("utf-8", "replace"))
            out.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._tail.pipe_closed(self._transport)


@contextlib.asynccontextmanager
async def stderr_for_child(tail: StderrTail | None) -> AsyncIterator[IO[Any] | None]:
    """What to give a stdio child started within as its stderr: a pipe to `tail` (None: no tail, leave
    it as it is).

    The write end is the child's alone once it has started (closed here on exit).
    """
    if tail is None:
        yield None
        return
    write_fd = await tail.open_pipe()
    with open(write_fd, "wb", buffering=0) as errlog:
        yield errlog
