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

A line longer than `MAX_LINE_BYTES` is dropped rather than held, and what is left
of it reads as a line that is not JSON, which the SDK reports and reads past.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

import mcp.server.stdio
from mcp.server.stdio import stdio_server

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line read from the client (the HTTP endpoint takes request bodies up to half this)."""


@contextlib.asynccontextmanager
async def stdio_endpoint() -> AsyncIterator[tuple[Any, Any]]:
    """`(read_stream, write_stream)` for `Server.run`, over the process's standard input and output."""
    claim = getattr(mcp.server.stdio, "_claim_fd", None)
    if claim is None or not _is_stream(0) or not _is_stream(1) or not _on_asyncio():
        async with stdio_server() as streams:
            yield streams
        return
    with contextlib.ExitStack() as claims:
        stdin_file = _claimed(claims, claim, 0, sys.stdin, "rb", mcp.server.stdio._open_stdin_diversion)  # pyright: ignore[reportPrivateUsage]
        stdout_file = _claimed(claims, claim, 1, sys.stdout, "wb", mcp.server.stdio._open_stdout_diversion)  # pyright: ignore[reportPrivateUsage]
        async with (
            _pipes(stdin_file, stdout_file) as (lines, output),
            stdio_server(stdin=lines, stdout=output) as streams,  # pyright: ignore[reportArgumentType]
        ):
            yield streams


def _claimed(claims: contextlib.ExitStack, claim: Any, fd: int, *args: Any) -> BinaryIO:
    """Claim standard stream `fd` with the SDK's `_claim_fd`: its private duplicate, released on exit."""
    file, release = claim(fd, *args)
    if release is not None:
        claims.callback(release)
    return file


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


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
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES, loop=loop)
    in_fd, out_fd = stdin_file.fileno(), stdout_file.fileno()
    in_blocking, out_blocking = os.get_blocking(in_fd), os.get_blocking(out_fd)
    protocol_in = asyncio.StreamReaderProtocol(reader, loop=loop)
    read_transport, _ = await loop.connect_read_pipe(lambda: protocol_in, stdin_file)
    try:
        write_transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout_file)
        try:
            yield _Lines(reader), _Output(asyncio.StreamWriter(write_transport, protocol, None, loop))
        finally:
            write_transport.close()
            with contextlib.suppress(OSError):
                os.set_blocking(out_fd, out_blocking)
    finally:
        read_transport.close()
        with contextlib.suppress(OSError):
            os.set_blocking(in_fd, in_blocking)


class _Lines:
    """Standard input as the text lines `stdio_server` iterates over."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readline()
        except ValueError:  # longer than the limit: dropped so far; the rest reads as a line that is not JSON
            return f"dropped a line longer than {MAX_LINE_BYTES} bytes\n"
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Output:
    """Standard output as the text file `stdio_server` writes each message to and flushes."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode())

    async def flush(self) -> None:
        await self._writer.drain()
