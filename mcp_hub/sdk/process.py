"""Stdio servers' child processes, spawned by the standard library's `subprocess` under any asyncio loop.

anyio's `open_process` asks the event loop to spawn. uvloop (the hub's loop where it is installed) forks, and
then waits until the child has called exec before the loop goes on: on a busy machine, where the child waits
for a core first, starting 20 servers stalled the loop for over a second, and every request the hub was serving
with it. `subprocess` spawns with vfork, which returns as soon as the child has exec'd, without the copy.

`spawn` starts the child with `subprocess.Popen` (its own session, as the SDK's spawn does), connects its
stdin and stdout to the running loop as asyncio streams, wrapped as anyio wraps its own (what reads past those
wrappers, see sdk/client.py, finds what it expects), and learns of the child's exit from a pidfd the loop
watches, which needs no thread per child. Where pidfds are missing (not Linux, or a kernel before 5.3) or the
loop is not asyncio's, `spawn_supported()` says so and the caller spawns through anyio, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from anyio._backends._asyncio import StreamReaderWrapper, StreamWriterWrapper
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

SURFACE: tuple[str, ...] = (
    "anyio._backends._asyncio:StreamReaderWrapper",  # built here over the child's stdout reader
    "anyio._backends._asyncio:StreamWriterWrapper",  # and over its stdin writer
)
"""What this module names, as "module:qualified.name"."""

READ_LIMIT = 2**16
"""The stdout reader's buffer limit, asyncio's for a subprocess's pipes (as anyio's spawn has it)."""


@functools.cache
def _pidfds() -> bool:
    """Whether this system has pidfds (`os.pidfd_open`, Linux 5.3 and later)."""
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def spawn_supported() -> bool:
    """Whether `spawn` can start a child here: on an asyncio loop (uvloop's included), with pidfds."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another async library's loop
        return False
    return _pidfds()


async def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    stderr: IO[Any] | int | None,
    cwd: str | Path | None,
) -> ChildProcess:
    """Start `argv` in a session of its own, its stdin and stdout piped to the running loop; `stderr` as
    `subprocess.Popen` takes it. Raises what `Popen` raises (`FileNotFoundError`, say) when it cannot start."""
    popen = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    try:
        return await ChildProcess.attach(popen)
    except BaseException:
        _discard(popen)
        raise


@dataclass(eq=False)
class PipeReader(StreamReaderWrapper):
    """anyio's wrapper of the stdout reader, which also closes the pipe when closed (the SDK closes a child's
    stdout once it has stopped it, and with asyncio's own spawn closes the transports under it too)."""

    _transport: asyncio.BaseTransport | None = None

    async def aclose(self) -> None:
        await super().aclose()
        if self._transport is not None:
            self._transport.close()


class _ReaderProtocol(asyncio.StreamReaderProtocol):
    """The stdout reader's protocol: at the end of the output the pipe closes (asyncio's subprocess pipes do;
    a stream reader's protocol alone would keep it open, on uvloop)."""

    def eof_received(self) -> bool:
        super().eof_received()
        return False


def _discard(popen: subprocess.Popen[bytes]) -> None:
    """A child the loop could not take on (cancelled while its pipes were being connected): killed, its pipes
    closed, and reaped, by a thread of its own where it has not died yet (the loop is not held up for it)."""
    with contextlib.suppress(OSError):
        os.killpg(popen.pid, signal.SIGKILL)
    for pipe in (popen.stdin, popen.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    try:
        popen.wait(0)
    except subprocess.TimeoutExpired:
        threading.Thread(target=popen.wait, name=f"reaping {popen.pid}", daemon=True).start()


class ChildProcess(Process):
    """A child started by `spawn`: its pipes as anyio's wrappers of asyncio streams, its exit from a pidfd."""

    def __init__(
        self, popen: subprocess.Popen[bytes], stdin: StreamWriterWrapper, stdout: PipeReader, pidfd: int
    ) -> None:
        self._popen = popen
        self._stdin = stdin
        self._stdout = stdout
        self._pidfd = pidfd
        self._exited = asyncio.Event()
        self.on_exit: Callable[[int], None] | None = None
        """Called with the child's return code once it has exited (negative: the signal that ended it)."""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(pidfd, self._reap)

    @classmethod
    async def attach(cls, popen: subprocess.Popen[bytes]) -> ChildProcess:
        """The running loop's streams over `popen`'s pipes, and a watch on its exit."""
        assert popen.stdin is not None and popen.stdout is not None
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(popen.pid)
        pipe: asyncio.ReadTransport | None = None
        try:
            reader = asyncio.StreamReader(limit=READ_LIMIT, loop=loop)
            protocol_of_reader = _ReaderProtocol(reader, loop=loop)
            pipe, _ = await loop.connect_read_pipe(lambda: protocol_of_reader, popen.stdout)
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.streams.FlowControlMixin(loop=loop), popen.stdin
            )
        except BaseException:  # cancelled (the hub stopping as the server starts): the stdout pipe's transport too
            if pipe is not None:
                pipe.close()
            os.close(pidfd)
            raise
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(popen, StreamWriterWrapper(writer), PipeReader(reader, pipe), pidfd)

    def _reap(self) -> None:
        """The pidfd turned readable: the child has exited (reaped here; a spurious wake-up changes nothing)."""
        if self._popen.poll() is None:
            return
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1
        self._exited.set()
        if self.on_exit is not None:
            self.on_exit(self._popen.returncode)

    async def wait(self) -> int:
        await self._exited.wait()
        returncode = self._popen.returncode
        assert returncode is not None
        return returncode

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, signal: int) -> None:
        # Not `Popen.send_signal`, which reaps the child first: its exit is `_reap`'s to take.
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._popen.pid, signal)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    @property
    def stdin(self) -> ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> None:
        return None

    async def aclose(self) -> None:
        """Close the pipes and wait for the child to exit (killed, if this is cancelled meanwhile)."""
        await self._stdin.aclose()
        await self._stdout.aclose()
        try:
            await self.wait()
        except BaseException:
            self.kill()
            raise
