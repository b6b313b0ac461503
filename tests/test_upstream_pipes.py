"""A stdio child's stdin as the hub writes its own requests to it (`stdio.StdinLines`), on real pipes of
real processes, on asyncio's own event loop and on uvloop (which `mcp-hub serve` runs); and its stdout as
the hub takes its answers (`stdio.ArrivingLines`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcp_hub.errors import UpstreamUnavailable
from mcp_hub.upstream.connection import connect
from mcp_hub.upstream.relay import InFlight
from mcp_hub.upstream.stderr import StderrTail
from mcp_hub.upstream.stdio import _HELD_BYTES, ArrivingLines, StdinLines, StdioChannel
from mcp_hub.upstream.stdio import ChildPipes as Pipes
from tests.conftest import ROOT, fixture_server, make_config, script_server, wait_for

pytestmark = [pytest.mark.real_processes, pytest.mark.slow]  # the pipes of the stdio servers' own processes

LEAVING = str(ROOT / "tests" / "servers" / "leaving.py")
LOOPS = {"asyncio": {"use_uvloop": False}, "uvloop": {"use_uvloop": True}}

ECHO_LINES = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n"


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_lines_reach_the_child_whole_and_in_order(loop: str) -> None:
    async def main() -> list[bytes]:
        async with await anyio.open_process([sys.executable, "-c", ECHO_LINES]) as process:
            assert process.stdin is not None and process.stdout is not None
            stdin = StdinLines(process.stdin)
            assert stdin._writer is not None  # pyright: ignore[reportPrivateUsage]  # past anyio's stream
            lines = _lines()
            for line in lines:
                await stdin.send(line)
            received = b""
            with anyio.fail_after(10):
                while received.count(b"\n") < len(lines):
                    received += await process.stdout.receive()
            await process.stdin.aclose()
            return [line + b"\n" for line in received.split(b"\n")[:-1]]

    assert anyio.run(main, backend="asyncio", backend_options=LOOPS[loop]) == _lines()


def _lines() -> list[bytes]:
    """Five lines of 0 to 160 KB: the larger ones fill the pipe, and are written on as it drains."""
    return [f'{{"id": {i}, "text": "{"x" * (i * 40_000)}"}}\n'.encode() for i in range(5)]


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_child_that_is_gone_fails_the_write_as_the_caller_expects(loop: str) -> None:
    """The errors `DirectLines.request` turns into a closed connection: `OSError` or anyio's broken stream."""

    async def main() -> None:
        async with await anyio.open_process([sys.executable, "-c", "pass"]) as process:
            assert process.stdin is not None
            await process.wait()
            stdin = StdinLines(process.stdin)
            with pytest.raises((OSError, anyio.BrokenResourceError)):  # on the first write, or a later one
                for _ in range(100):
                    await stdin.send(b'{"jsonrpc": "2.0", "method": "ping", "id": 1}\n')
                    await anyio.sleep(0.01)

    anyio.run(main, backend="asyncio", backend_options=LOOPS[loop])


# -- a child's stdout, its lines taken as they arrive ------------------------------------------------------------


class _Reader:
    """A child's stdout as `ArrivingLines` sees it: asyncio's reader, with what the hub's requests take."""

    def __init__(self) -> None:
        self.stream = asyncio.StreamReader()
        self.pipes = Pipes()
        self.taken: list[bytes] = []
        self.handed_on = 0
        self.pipes.take = self._take
        self.pipes.handing_on = self._handing_on
        self.arriving = ArrivingLines(self.stream, self.pipes)

    def _take(self, line: bytes) -> bool:
        if b"answer" in line:
            self.taken.append(line)
            return True
        return False

    def _handing_on(self) -> None:
        self.handed_on += 1

    def read(self) -> bytes:
        """What the SDK's reader would read now (as `_LineReceiveStream` does, told to `arriving`)."""
        data = bytes(self.stream._buffer)  # pyright: ignore[reportPrivateUsage]
        self.stream._buffer.clear()  # pyright: ignore[reportPrivateUsage]
        self.arriving.unread = max(0, self.arriving.unread - len(data))
        return data


async def test_an_answer_is_taken_as_it_arrives_and_what_is_not_goes_on_in_order() -> None:
    reader = _Reader()
    reader.stream.feed_data(b'{"id":"hub-1","answer":1}\n{"id":"hub-2",')
    reader.stream.feed_data(b'"answer":2}\n')  # the held start of a line, finished
    assert reader.taken == [b'{"id":"hub-1","answer":1}\n', b'{"id":"hub-2","answer":2}\n']
    assert reader.read() == b""
    # A message for the SDK: it and all after it go to the reader, the hub told first.
    reader.stream.feed_data(b'{"method":"log"}\n{"id":"hub-3","answer":3}\n')
    reader.stream.feed_data(b'{"id":"hub-4","answer":4}\n')  # the reader has not read yet: behind it
    assert len(reader.taken) == 2 and reader.handed_on == 1
    assert reader.read() == b'{"method":"log"}\n{"id":"hub-3","answer":3}\n{"id":"hub-4","answer":4}\n'
    reader.stream.feed_data(b'{"id":"hub-5","answer":5}\n')  # read up: taken again
    assert reader.taken[-1] == b'{"id":"hub-5","answer":5}\n'
    assert reader.read() == b""


async def test_a_long_line_goes_on_to_the_reader_as_it_comes() -> None:
    reader = _Reader()
    start = b'{"id":"hub-1","answer":"' + b"x" * (_HELD_BYTES + 1)
    reader.stream.feed_data(start)
    reader.read()
    end = b'","also":"hub-1 answer"}\n'  # looks like an answer, but is the end of the line the reader holds
    reader.stream.feed_data(end)
    assert reader.taken == [] and reader.read() == end
    reader.stream.feed_data(b'{"id":"hub-2","answer":2}\n{"id":"hub-3"')
    reader.stream.feed_eof()  # what is held goes on before the end
    assert reader.taken == [b'{"id":"hub-2","answer":2}\n']
    assert reader.read() == b'{"id":"hub-3"' and reader.stream.at_eof()


# -- a stdio mount, its pipes handed to its channel --------------------------------------------------------------


async def test_a_stdio_mount_hands_its_childs_pipes_to_its_channel(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK's spawn hands the child's pipes over (`sdk.client.StdioClient`): the hub's requests are written
    straight to its stdin and its answers taken as they arrive, and no fast path reports itself off."""

    async def ignore(message: object) -> None:
        pass

    config = make_config(tmp_path, {"up": fixture_server("up")}).servers["up"]
    tail = StderrTail()
    with caplog.at_level(logging.WARNING, logger="mcp_hub.sdk"), anyio.fail_after(30), tail.capturing():
        async with connect(config, inflight=InFlight("up"), message_handler=ignore, on_broken=print, stderr=tail) as up:
            result = await up.send("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            channel = up._channel  # pyright: ignore[reportPrivateUsage]
            assert isinstance(channel, StdioChannel)
            assert channel._stdin is not None  # pyright: ignore[reportPrivateUsage]
    assert "hi" in str(result)
    assert not [r for r in caplog.records if r.name == "mcp_hub.sdk"]


async def test_a_call_to_a_child_whose_stdin_has_no_reader_fails_as_a_closed_connection(tmp_path: Path) -> None:
    """A server died leaving its stdout to a process it started: its stdout has not ended, so nothing says the
    connection closed, but the hub's request cannot be written. The call fails at once as one to a server that
    closed the connection (not hanging until its timeout), and the connection is reported broken."""

    async def ignore(message: object) -> None:
        pass

    keeper = tmp_path / "keeper.pid"
    server = script_server(LEAVING, str(keeper), protocol="legacy", timeout=60)
    config = make_config(tmp_path, {"up": server}).servers["up"]
    tail, broken = StderrTail(), []
    with anyio.fail_after(30), tail.capturing():
        async with connect(
            config, inflight=InFlight("up"), message_handler=ignore, on_broken=broken.append, stderr=tail
        ) as up:
            try:
                assert "hi" in str(await up.send("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
                await up.session.send_notification(types.RootsListChangedNotification())
                await wait_for(lambda: tail.ended is not None and keeper.exists())
                assert not up.closed.is_set()  # its stdout is still open
                with pytest.raises(UpstreamUnavailable) as caught:
                    await up.send("tools/call", {"name": "echo", "arguments": {"text": "again"}})
            finally:
                if keeper.exists():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(keeper.read_text(encoding="utf-8")), signal.SIGKILL)
    assert str(caught.value).endswith("closed the connection during tools/call")
    assert broken == ["connection closed during tools/call"]
