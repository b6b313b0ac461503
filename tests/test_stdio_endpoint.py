"""The hub's own stdio endpoint, as a process a client launches: what a call sends on its way, questions,
cancellation, and many calls at once, in both protocol eras (a client's requests are served past the SDK's
loop: a handshake-era client's once it has initialized, a 2026-07-28 client's after its first)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError

from mcp_hub.server import stdio
from mcp_hub.server.stdio import _is_stream, _Lines
from tests.conftest import fixture_server, hub_command, hub_environment, wait_for, write_config
from tests.harness.people import EXPECTED, Person

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "2026-07-28"]


@asynccontextmanager
async def stdio_hub(tmp_path: Path, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
    """`mcp-hub serve` over stdio with one fixture server, `srv`, once its tools are listed."""
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    command = hub_command("serve", "--config", str(config))
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        cwd=str(tmp_path),
        env=hub_environment(),  # the session's state folder: no catalog snapshot of an earlier run
    )
    async with Client(params, mode=mode, cache=None, **options) as client:

        async def listed() -> bool:
            return "srv_echo" in {tool.name for tool in (await client.list_tools()).tools}

        await wait_for(listed)
        yield client


@pytest.mark.slow
@pytest.mark.parametrize("mode", ERAS)
async def test_what_a_call_sends_arrives_before_its_answer(tmp_path: Path, mode: str) -> None:
    heard: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(f"progress {progress:g}/{total:g}")

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(f"log {params.data}")

    options: dict[str, Any] = {"logging_callback": on_log}
    if mode != "legacy":
        options["log_level"] = "debug"  # the 2026-07-28 opt-in, with each request
    async with stdio_hub(tmp_path, mode, **options) as client:
        with anyio.fail_after(20):
            slow = await client.call_tool("srv_slow", {"seconds": 0.2, "steps": 3}, progress_callback=on_progress)
            heard.append("answered slow")
            await client.call_tool("srv_log", {"text": "hi"})
            heard.append("answered log")
    assert slow.content[0].text == "done"  # type: ignore[union-attr]
    assert heard[:4] == ["progress 1/3", "progress 2/3", "progress 3/3", "answered slow"]
    assert heard[4:] == ["log debug: hi", "log info: hi", "log warning: hi", "answered log"]


@pytest.mark.parametrize("what", list(EXPECTED))
async def test_a_servers_question_mid_call_reaches_the_stdio_client(tmp_path: Path, what: str) -> None:
    ada = Person("ada")
    async with stdio_hub(tmp_path, **ada.options()) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("srv_ask", {"what": what, "text": "hello"})
    assert result.content[0].text == EXPECTED[what]  # type: ignore[union-attr]
    assert ada.asked == [what]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_stdio_client_cancelling_a_call_cancels_it_on_the_server(tmp_path: Path, mode: str) -> None:
    marker = tmp_path / "call"

    async def exists(path: Path) -> bool:
        return path.exists()

    async with stdio_hub(tmp_path, mode) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "srv_wait", {"marker": str(marker)})
            await wait_for(lambda: exists(Path(f"{marker}.started")))
            tg.cancel_scope.cancel()
        await wait_for(lambda: exists(Path(f"{marker}.cancelled")), timeout=10)
        echo = await client.call_tool("srv_echo", {"text": "after"})
    assert echo.structured_content == {"text": "after", "server": "srv"}


@pytest.mark.parametrize("mode", ERAS)
async def test_many_calls_at_once_each_get_their_own_answer(tmp_path: Path, mode: str) -> None:
    answers: dict[int, Any] = {}

    async def call(i: int) -> None:
        if i % 10 == 9:
            try:
                await client.call_tool("srv_nope", {})
            except MCPError as exc:
                answers[i] = exc.error.message
            return
        answers[i] = (await client.call_tool("srv_echo", {"text": f"call {i}"})).structured_content

    async with stdio_hub(tmp_path, mode) as client:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(100):
                    tg.start_soon(call, i)
    for i in range(100):
        if i % 10 == 9:
            assert answers[i] == "Unknown tool: srv_nope"
        else:
            assert answers[i] == {"text": f"call {i}", "server": "srv"}


def test_only_pipes_and_sockets_are_read_on_the_event_loop(tmp_path: Path) -> None:
    """A terminal or a file on standard input is left to the SDK's own reader."""
    read, write = os.pipe()
    path = tmp_path / "requests.jsonl"
    path.write_text("{}\n")
    try:
        with path.open("rb") as file:
            assert _is_stream(read) and _is_stream(write)
            assert not _is_stream(file.fileno())
    finally:
        os.close(read)
        os.close(write)


@pytest.mark.slow
async def test_a_2026_stdio_client_listens_and_closes_its_subscription(tmp_path: Path) -> None:
    """A `subscriptions/listen` request stays open past the SDK's loop: its events arrive on it, and closing
    it (the client's cancel) ends it while the connection serves on."""
    note = "srv+fixture://notes/1"
    async with stdio_hub(tmp_path, "2026-07-28") as client:
        await client.call_tool("srv_echo", {"text": "first"})  # the first request opens the era; the rest are ours
        for _ in range(2):
            async with client.listen(resource_subscriptions=[note], tools_list_changed=True) as subscription:
                assert subscription.honored.resource_subscriptions == [note]
                event = None
                with anyio.fail_after(10):
                    while event is None:  # the hub subscribes upstream as the stream opens
                        await client.call_tool("srv_touch", {"key": "1"})
                        with anyio.move_on_after(0.5):
                            event = await subscription.__anext__()
                assert event == ResourceUpdated(uri=note)
        with anyio.fail_after(10):
            echo = await client.call_tool("srv_echo", {"text": "after"})
    assert echo.structured_content == {"text": "after", "server": "srv"}


# -- standard input, line by line -----------------------------------------------------------------------------


class _Taker:
    """Takes the lines that mention "mine", as the endpoint takes the requests it serves."""

    def __init__(self) -> None:
        self.taken: list[bytes] = []

    def take(self, line: bytes) -> bool:
        if b"mine" in line:
            self.taken.append(line)
            return True
        return False


class _Pipe(asyncio.ReadTransport):
    """A read transport that records whether it was asked to stop reading."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


async def _read_all(lines: _Lines) -> list[str]:
    return [line async for line in lines]


async def test_lines_are_whole_in_order_and_those_taken_stay_with_the_taker() -> None:
    lines = _Lines(asyncio.get_running_loop())
    taker = _Taker()
    lines.requests = taker  # type: ignore[assignment]
    lines.connection_made(_Pipe())
    for chunk in [b'{"a":1}\n{"mine":1}\n{"b"', b":2}", b'\n{"mine"', b":2}\n{\xc3\xa9}\n", b'{"last":3}']:
        lines.data_received(chunk)
    lines.eof_received()
    assert await _read_all(lines) == ['{"a":1}\n', '{"b":2}\n', "{é}\n", '{"last":3}']
    assert taker.taken == [b'{"mine":1}\n', b'{"mine":2}\n']


async def test_an_overlong_line_is_dropped_and_reads_as_one_that_is_not_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio, "MAX_LINE_BYTES", 100)
    lines = _Lines(asyncio.get_running_loop())
    lines.connection_made(_Pipe())
    lines.data_received(b"x" * 80)
    lines.data_received(b"x" * 80)  # over the limit: dropped from here on, not held
    lines.data_received(b"x" * 80 + b'\n{"after":1}\n')
    lines.data_received(b"y" * 101 + b"\n")
    lines.eof_received()
    assert await _read_all(lines) == [
        "dropped a 240-byte line (limit 100)\n",
        '{"after":1}\n',
        "dropped a 101-byte line (limit 100)\n",
    ]


async def test_lines_waiting_for_the_sdk_stop_the_pipe_being_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio, "MAX_LINE_BYTES", 100)
    lines = _Lines(asyncio.get_running_loop())
    pipe = _Pipe()
    lines.connection_made(pipe)
    lines.data_received(b"a" * 60 + b"\n")
    assert not pipe.paused
    lines.data_received(b"b" * 60 + b"\n")
    assert pipe.paused  # 122 bytes wait for the SDK's reader
    assert await lines.__anext__() == "a" * 60 + "\n"
    assert not pipe.paused
    lines.connection_lost(None)
    assert await _read_all(lines) == ["b" * 60 + "\n"]
