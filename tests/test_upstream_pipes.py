"""A stdio child's stdin as the hub writes its own requests to it (`transports.StdinLines`), on real pipes of
real processes, on asyncio's own event loop and on uvloop (which `mcp-hub serve` runs)."""

from __future__ import annotations

import sys

import anyio
import pytest

from mcp_hub.upstream.transports import StdinLines

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
