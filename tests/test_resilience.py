"""Resilience: the hub under load and abuse, from both sides, with real processes.

Upstreams are the fixture server as stdio children (forks of a preloaded one, which a test may kill or freeze as
it would a process of its own; launched afresh, marked `real_processes`, where a test measures a process the hub
runs or its children), and in-process over HTTP;
the hub runs in-process behind uvicorn, or as `mcp-hub serve` in a child
process where its memory and its own children are easier to watch; clients are
the SDK's `Client`, or raw HTTP and raw stdio where they must misbehave.

Every scenario checks the same things afterwards: each request got exactly one
answer or a clean JSON-RPC error, the other mounts kept serving, and the hub
holds no more child processes, asyncio tasks or file descriptors than before,
and about as much memory.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import logging
import os
import re
import signal
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import anyio
import httpx2
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)

from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from mcp_hub.upstream import State, supervisor
from mcp_hub.upstream.stdio import MAX_LINE_BYTES
from tests.conftest import (
    fixture_server,
    free_port,
    hub_client,
    make_config,
    running_hub,
    serve_app,
    wait_for,
    write_config,
)
from tests.harness.wire import JSON_HEADERS, MODERN, MODERN_META, legacy_session, modern_call
from tests.servers.fixture import BASE_TOOLS, build_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

MIB = 1024 * 1024
MODES = ["legacy", "2026-07-28"]

# -- what a process holds ----------------------------------------------------------------------------


def _status_kib(pid: int | str, key: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    raise KeyError(key)


def _children(pid: int) -> set[int]:
    """Every child of `pid`, running or zombie (a zombie is a child nobody reaped)."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _describe(task: asyncio.Task[Any]) -> str:
    """A task's name, coroutine and where it waits (for failure messages)."""
    frames = task.get_stack()
    where = f"{frames[-1].f_code.co_filename}:{frames[-1].f_lineno}" if frames else "(no frames)"
    return f"{task.get_name()} {task.get_coro()!r} at {where}"


def _fd_table() -> str:
    """This process's open fds, TCP sockets with their ports and state (for failure messages)."""
    sockets: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in list(rows)[1:]:
                f = row.split()
                sockets[f[9]] = f"{int(f[1].split(':')[1], 16)}->{int(f[2].split(':')[1], 16)} st={f[3]}"
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        inode = target.removeprefix("socket:[").removesuffix("]")
        out.append(f"{fd}: {target} {sockets.get(inode, '')}")
    return "\n".join(out)


def _fds(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass(frozen=True)
class Held:
    """What this process holds: asyncio tasks, open fds, child processes, resident memory (KiB)."""

    tasks: int
    fds: int
    children: frozenset[int]
    rss: int

    @classmethod
    def now(cls) -> Held:
        """Measured after a full collection, with the heap's free pages handed back to the system."""
        gc.collect()
        _LIBC.malloc_trim(0)
        tasks = [task for task in asyncio.all_tasks() if _coro_name(task) not in _LOOP_SINGLETONS]
        return cls(len(tasks), _fds(), frozenset(_children(os.getpid())), _status_kib("self", "VmRSS"))


def _coro_name(task: asyncio.Task[Any]) -> str:
    return getattr(task.get_coro(), "__qualname__", "")


_LOOP_SINGLETONS = {"_shutdown_watcher"}
"""Tasks a library starts once per event loop and keeps, which are not the hub's to end:
sse_starlette's shutdown watcher starts with the first SSE response served on a loop."""


_LIBC = ctypes.CDLL("libc.so.6")

RSS_SLACK_KIB = 48 * 1024
"""How far resident memory may stay above its baseline once a scenario is over.

CPython keeps freed small objects in its own arenas, and a hub in a child
process cannot be asked to collect or trim its heap, so RSS rarely drops all
the way back even with nothing leaked; in-process, `Held.now()` collects and
trims first, and lands within a few MiB. A leak that matters grows with the
traffic: these scenarios move hundreds of MiB, or thousands of requests,
through the hub, so keeping any of it per request or per session shows up far
above this slack.
"""


async def back_to(baseline: Held, *, rss_slack: int = RSS_SLACK_KIB, timeout: float = 15.0) -> Held:
    """Wait until this process holds no more than `baseline` (tasks, fds, children; RSS within slack)."""
    last = baseline

    async def settled() -> bool:
        nonlocal last
        last = Held.now()
        return (
            last.tasks <= baseline.tasks
            and last.fds <= baseline.fds
            and len(last.children) <= len(baseline.children)  # a restarted mount has a new pid
        )

    try:
        await wait_for(settled, timeout=timeout, interval=0.1)
    except TimeoutError:
        tasks = "\n".join(_describe(task) for task in asyncio.all_tasks())
        tasks += "\n" + _fd_table()
        pytest.fail(f"still held after {timeout}s: {last} (baseline {baseline}); tasks:\n{tasks}")
    assert last.rss - baseline.rss < rss_slack, f"RSS {last.rss} KiB vs baseline {baseline.rss} KiB"
    return last


# -- the hub, in-process over HTTP, and as a process ----------------------------------------------------


@asynccontextmanager
async def hub_over_http(hub: Hub) -> AsyncIterator[str]:
    """The hub's HTTP app on a free loopback port; yields the MCP endpoint's URL."""
    app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
    async with serve_app(app) as base:
        yield f"{base}/mcp"


_TLS = ssl.create_default_context()
"""One TLS context for every test client: httpx builds one per client otherwise, loading the system's
CA certificates each time (tens of milliseconds and a few MiB apiece, for hundreds of clients)."""


@asynccontextmanager
async def http_client(url: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """The SDK client over streamable HTTP, on its own connections, taking SSE events of any size."""
    async with httpx2.AsyncClient(verify=_TLS, timeout=httpx2.Timeout(30, read=300)) as http:
        transport = streamable_http_client(url, http_client=http, max_sse_event_size=None)
        async with Client(transport, mode=mode, cache=None) as client:
            yield client


@dataclass
class HubProcess:
    """`mcp-hub serve --transport http` running as a child of the test."""

    process: subprocess.Popen[bytes]
    base: str
    log_path: Path

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def pid(self) -> int:
        return self.process.pid

    def children(self) -> set[int]:
        return _children(self.pid)

    def rss(self) -> int:
        return _status_kib(self.pid, "VmRSS")

    def peak_rss(self) -> int:
        return _status_kib(self.pid, "VmHWM")

    def fds(self) -> int:
        return _fds(self.pid)

    def log(self) -> str:
        return (self.log_path).read_text(errors="replace")

    async def health(self) -> dict[str, Any]:
        async with httpx2.AsyncClient(timeout=5) as http:
            return (await http.get(f"{self.base}/healthz")).json()

    async def all_up(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the hub exited with {self.process.returncode}")
        try:
            report = await self.health()
        except httpx2.HTTPError:
            return False
        return all(server["state"] == "up" for server in report["servers"].values())


@asynccontextmanager
async def hub_process(tmp_path: Path, servers: dict[str, dict[str, Any]]) -> AsyncIterator[HubProcess]:
    """Run the hub as a process until every mount is up; on exit, SIGTERM it and check it reaped its children."""
    port = free_port()
    config = write_config(tmp_path / "hub.toml", servers, log_level="warning")
    command = [sys.executable, "-m", "mcp_hub", "serve", "--config", str(config), "--transport", "http"]
    with open(tmp_path / "hub.log", "wb") as log:
        process = subprocess.Popen([*command, "--port", str(port)], cwd=tmp_path, stderr=log)
    hub = HubProcess(process, f"http://127.0.0.1:{port}", tmp_path / "hub.log")
    try:
        await wait_for(hub.all_up, timeout=30)
        yield hub
        children = hub.children()
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            while process.poll() is None:
                await anyio.sleep(0.05)
        assert process.returncode == 0
        await wait_for(lambda: not any(_alive(pid) for pid in children), timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _text(result: Any) -> str:
    return result.content[0].text


async def _pid(client: Client, tool: str) -> int:
    return int(_text(await client.call_tool(tool, {})))


# -- 200 concurrent sessions -----------------------------------------------------------------------------

SESSIONS = 200


async def _mixed_session(url: str, mode: str, i: int, outcomes: dict[tuple[int, str], list[str]]) -> None:
    """One client session sending seven requests at once, across both mounts; each outcome recorded once."""
    mine, other = ("a", "b") if i % 2 else ("b", "a")
    token = f"session-{i}"

    async def echo(client: Client) -> bool:
        result = await client.call_tool(f"{mine}_echo", {"text": token})
        return result.structured_content == {"text": token, "server": mine}

    async def slow(client: Client) -> bool:
        return _text(await client.call_tool(f"{other}_slow", {"seconds": 0.1, "steps": 2})) == "done"

    async def tools(client: Client) -> bool:
        names = {tool.name for tool in (await client.list_tools()).tools}
        return len(names) == 2 * len(BASE_TOOLS) and {"a_echo", "b_echo"} <= names

    async def read(client: Client) -> bool:
        return (await client.read_resource(f"{mine}+fixture://notes/1")).contents[0].text == "first note"  # type: ignore[union-attr]

    async def prompt(client: Client) -> bool:
        result = await client.get_prompt(f"{other}_greet", {"who": token})
        return result.messages[0].content.text == f"Hello, {token}, from {other}"  # type: ignore[union-attr]

    async def tool_error(client: Client) -> bool:
        result = await client.call_tool(f"{mine}_fail", {"message": token})
        return result.is_error is True and _text(result) == token

    async def unknown(client: Client) -> bool:
        try:
            await client.call_tool("nowhere_tool", {})
        except MCPError as exc:
            return exc.code == INVALID_PARAMS and "nowhere_tool" in exc.message
        return False

    async def record(client: Client, name: str, step: Callable[[Client], Awaitable[bool]]) -> None:
        try:
            outcome = "ok" if await step(client) else "wrong answer"
        except MCPError as exc:
            outcome = f"error {exc.code}: {exc.message}"
        outcomes.setdefault((i, name), []).append(outcome)

    steps = {"echo": echo, "slow": slow, "tools": tools, "read": read, "prompt": prompt, "fail": tool_error}
    steps["unknown"] = unknown
    async with http_client(url, mode) as client, anyio.create_task_group() as tg:
        for name, step in steps.items():
            tg.start_soon(record, client, name, step)


async def _storm(url: str) -> dict[tuple[int, str], list[str]]:
    """SESSIONS sessions at once, half in each protocol era; every request's outcomes."""
    outcomes: dict[tuple[int, str], list[str]] = {}
    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            for i in range(SESSIONS):
                tg.start_soon(_mixed_session, url, MODES[i // 2 % 2], i, outcomes)
    return outcomes


@pytest.mark.real_processes
async def test_two_hundred_concurrent_sessions_get_one_answer_per_request(tmp_path: Path) -> None:
    servers = {"a": fixture_server("a"), "b": fixture_server("b")}
    async with hub_process(tmp_path, servers) as hub:
        children = hub.children()
        fds = hub.fds()
        rounds: list[tuple[int, int]] = []
        for _ in range(2):
            outcomes = await _storm(hub.url)
            assert len(outcomes) == SESSIONS * 7
            wrong = {key: found for key, found in outcomes.items() if found != ["ok"]}
            assert not wrong, f"{len(wrong)} requests without exactly one right answer, e.g. {list(wrong.items())[:5]}"
            # Every session closed: the hub holds what it held before (fds drop as connections close).
            await wait_for(lambda: hub.fds() <= fds, timeout=15)
            assert hub.children() == children
            rounds.append((hub.rss(), hub.fds()))
        assert (await hub.health())["status"] == "ok"
        assert "Traceback" not in hub.log()
    (rss_first, _), (rss_second, _) = rounds
    # The first round grows the hub to its working size; the second, as large, must not grow it further.
    assert rss_second - rss_first < RSS_SLACK_KIB, rounds


# -- an upstream killed mid-call, and one that hangs -------------------------------------------------------


@asynccontextmanager
async def hub_serving(tmp_path: Path, servers: dict[str, dict[str, Any]]) -> AsyncIterator[tuple[Hub, str, Held]]:
    """An in-process hub over HTTP, warmed up by one client; yields it, its URL and what the process holds.

    On exit, checks that stopping the hub gave back every task, fd and child it took.
    """
    before = Held.now()
    config = make_config(tmp_path, servers)
    async with running_hub(config) as hub, hub_over_http(hub) as url:
        async with http_client(url) as client:
            for name in servers:  # every mount up, every code path warm
                assert hub.upstreams[name].state == "up"
            await client.list_tools()
        yield hub, url, Held.now()
    await back_to(before)


@pytest.mark.parametrize("mode", MODES)
async def test_an_upstream_killed_mid_call(tmp_path: Path, mode: str) -> None:
    async with hub_serving(tmp_path, {"a": fixture_server("a"), "b": fixture_server("b")}) as (hub, url, baseline):
        async with http_client(url, mode) as client:
            victim = await _pid(client, "a_pid")
            markers = [tmp_path / f"call-{i}" for i in range(5)]
            outcomes: list[tuple[int, str]] = []

            async def in_flight(marker: Path) -> None:
                try:
                    await client.call_tool("a_wait", {"marker": str(marker)})
                    outcomes.append((0, "answered"))
                except MCPError as exc:
                    outcomes.append((exc.code, exc.message))

            async with anyio.create_task_group() as tg:
                for marker in markers:
                    tg.start_soon(in_flight, marker)
                await wait_for(lambda: all(Path(f"{m}.started").exists() for m in markers))
                os.kill(victim, signal.SIGKILL)
                with anyio.fail_after(5):  # promptly: not the mount's 60 s timeout
                    while len(outcomes) < len(markers):
                        echo = await client.call_tool("b_echo", {"text": "meanwhile"})
                        assert echo.structured_content == {"text": "meanwhile", "server": "b"}
                        await anyio.sleep(0.02)
            assert len(outcomes) == len(markers)
            for code, message in outcomes:
                assert code == CONNECTION_CLOSED and message.startswith("Server 'a'"), message

            async def back_up() -> bool:
                try:
                    return await _pid(client, "a_pid") != victim
                except MCPError:
                    return False

            await wait_for(back_up)
        assert victim not in _children(os.getpid())  # reaped, not a zombie
        assert hub.upstreams["a"].restarts == 1
        await back_to(baseline)


async def test_a_server_that_crashes_again_soon_waits_longer_and_one_that_served_a_while_starts_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Each restart of a server that keeps crashing soon after coming up waits twice as long as the one before
    (`_BACKOFF_FIRST` doubling), unless the connection it lost had served a healthy run (`HEALTHY_RUN`): then it
    is restarted at once, and the next wait is the first one again."""
    monkeypatch.setattr(supervisor, "_BACKOFF_FIRST", 0.1)
    monkeypatch.setattr(supervisor, "HEALTHY_RUN", 0.5)
    caplog.set_level(logging.INFO, logger="mcp_hub.upstream")
    config = make_config(tmp_path, {"a": fixture_server("a")})
    async with running_hub(config) as hub, hub_client(hub) as client:
        upstream = hub.upstreams["a"]
        for crash in range(4):
            if crash == 2:
                await anyio.sleep(supervisor.HEALTHY_RUN)  # this connection serves a healthy run
            with anyio.fail_after(10), pytest.raises(MCPError):
                await client.call_tool("a_crash", {})
            await wait_for(lambda n=crash: upstream.state == State.UP and upstream.restarts == n + 1)
    waits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("server 'a': reconnecting")]
    assert waits[:2] == ["server 'a': reconnecting in 0.1s", "server 'a': reconnecting in 0.2s"], waits
    assert waits[2].startswith("server 'a': reconnecting now (it was up"), waits
    assert waits[3] == "server 'a': reconnecting in 0.1s", waits  # not 0.4 s: the one before served a healthy run


async def test_a_hung_upstream_times_out_and_the_others_serve(tmp_path: Path) -> None:
    servers = {"stuck": fixture_server("stuck", timeout=1.0), "ok": fixture_server("ok")}
    async with hub_serving(tmp_path, servers) as (hub, url, baseline):
        async with http_client(url) as client:
            frozen = await _pid(client, "stuck_pid")
            codes: list[int] = []
            echoes: list[Any] = []

            async def hang() -> None:
                try:
                    await client.call_tool("stuck_hang", {})
                except MCPError as exc:
                    codes.append(exc.code)

            async def echo(i: int) -> None:
                echoes.append((await client.call_tool("ok_echo", {"text": str(i)})).structured_content)

            # A call that never answers, ten times at once, while the other mount serves.
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    for i in range(10):
                        tg.start_soon(hang)
                        tg.start_soon(echo, i)
            assert codes == [REQUEST_TIMEOUT] * 10
            assert sorted(e["text"] for e in echoes) == sorted(str(i) for i in range(10))

            # The whole server freezes (SIGSTOP): every call times out; the other mount serves on.
            os.kill(frozen, signal.SIGSTOP)
            try:
                with anyio.fail_after(5), pytest.raises(MCPError) as caught:
                    await client.call_tool("stuck_echo", {"text": "x"})
                assert caught.value.code == REQUEST_TIMEOUT
                assert caught.value.message == "Server 'stuck' did not answer tools/call within 1s"
                ok = await client.call_tool("ok_echo", {"text": "y"})
                assert ok.structured_content == {"text": "y", "server": "ok"}
            finally:
                os.kill(frozen, signal.SIGCONT)
            # Thawed, it answers again on the same connection (its late answers are dropped).
            thawed = await client.call_tool("stuck_echo", {"text": "thawed"})
            assert thawed.structured_content == {"text": "thawed", "server": "stuck"}
        assert hub.upstreams["stuck"].restarts == 0
        await back_to(baseline)
        # Frozen for good: stopping the hub still reaps it (stdin closed, SIGTERM, then SIGKILL).
        os.kill(frozen, signal.SIGSTOP)
    assert not _alive(frozen)


# -- junk on an upstream's stdout ---------------------------------------------------------------------------


@pytest.mark.parametrize(("what", "size"), [("garbage", 0), ("not-jsonrpc", 0), ("oversized", 30 * MIB)])
async def test_junk_on_an_upstreams_stdout_is_skipped(tmp_path: Path, what: str, size: int) -> None:
    servers = {"bad": fixture_server("bad"), "ok": fixture_server("ok")}
    async with hub_serving(tmp_path, servers) as (hub, url, baseline):
        async with http_client(url) as client:
            echoes: list[Any] = []

            async def echo(i: int) -> None:
                echoes.append((await client.call_tool("ok_echo", {"text": str(i)})).structured_content)

            with anyio.fail_after(15):
                async with anyio.create_task_group() as tg:
                    for i in range(10):
                        tg.start_soon(echo, i)
                    result = await client.call_tool("bad_misbehave", {"what": what, "size": size})
            assert _text(result) == "bad: misbehaved"
            assert len(echoes) == 10
            after = await client.call_tool("bad_echo", {"text": "after"})
            assert after.structured_content == {"text": "after", "server": "bad"}
        assert hub.upstreams["bad"].restarts == 0  # the connection survived it
        await back_to(baseline)


@pytest.mark.real_processes
async def test_a_line_without_end_costs_a_timeout_not_memory(tmp_path: Path) -> None:
    """200 MB and no newline: the hub drops the line past MAX_LINE_BYTES instead of holding it."""
    servers = {"bad": fixture_server("bad", timeout=2.0), "ok": fixture_server("ok")}
    size = 200 * MIB
    async with hub_process(tmp_path, servers) as hub, http_client(hub.url) as client:
        await client.call_tool("bad_echo", {"text": "warm"})
        rss = hub.rss()
        with anyio.fail_after(15), pytest.raises(MCPError) as caught:
            await client.call_tool("bad_misbehave", {"what": "unterminated", "size": size})
        # Its answer was lost in the line; the call ran into the mount's timeout.
        assert caught.value.code == REQUEST_TIMEOUT
        assert (await client.call_tool("ok_echo", {"text": "x"})).structured_content == {"text": "x", "server": "ok"}
        after = await client.call_tool("bad_echo", {"text": "after"})
        assert after.structured_content == {"text": "after", "server": "bad"}
        assert (await hub.health())["servers"]["bad"]["restarts"] == 0
        peak = hub.peak_rss() - rss
        assert peak < MAX_LINE_BYTES // 1024 + RSS_SLACK_KIB, f"peak {peak} KiB over {rss} KiB"
        assert hub.rss() - rss < MAX_LINE_BYTES // 1024 + RSS_SLACK_KIB
        dropped = re.search(r"dropped a (\d+)-byte line", hub.log())
        assert dropped is not None and int(dropped[1]) > size  # the junk, and the answer lost in it


# -- a client that disconnects mid-call -----------------------------------------------------------------------


async def _started(marker: Path) -> bool:
    return Path(f"{marker}.started").exists()


async def _cancelled(marker: Path) -> bool:
    return Path(f"{marker}.cancelled").exists()


async def test_a_client_that_disconnects_mid_call_cancels_the_upstream_call(tmp_path: Path) -> None:
    """2026-07-28: a request is its HTTP exchange, and closing the connection cancels it."""
    servers = {"srv": fixture_server("srv"), "other": fixture_server("other")}
    async with hub_serving(tmp_path, servers) as (hub, url, baseline):
        markers = [tmp_path / f"call-{i}" for i in range(3)]
        async with httpx2.AsyncClient(timeout=30) as http, anyio.create_task_group() as tg:
            for i, marker in enumerate(markers):
                headers, body = modern_call("srv_wait", {"marker": str(marker)}, request_id=i)
                tg.start_soon(lambda h=headers, b=body: http.post(url, json=b, headers=h))
            await wait_for(lambda: all(Path(f"{m}.started").exists() for m in markers))
            tg.cancel_scope.cancel()  # every connection closes mid-request
        for marker in markers:  # well before srv's 60 s timeout
            await wait_for(lambda marker=marker: _cancelled(marker), timeout=10)
        async with http_client(url, MODERN) as client:
            echo = await client.call_tool("srv_echo", {"text": "after"})
            assert echo.structured_content == {"text": "after", "server": "srv"}
        assert hub.upstreams["srv"].restarts == 0
        await back_to(baseline)


async def test_a_handshake_era_client_cancelling_mid_call_cancels_the_upstream_call(tmp_path: Path) -> None:
    """Over HTTP, a handshake-era client cancels with notifications/cancelled; then it leaves (DELETE)."""
    servers = {"srv": fixture_server("srv"), "other": fixture_server("other")}
    async with hub_serving(tmp_path, servers) as (_hub, url, baseline):
        marker = tmp_path / "call"
        async with http_client(url) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "srv_wait", {"marker": str(marker)})
                await wait_for(lambda: _started(marker))
                tg.cancel_scope.cancel()
            await wait_for(lambda: _cancelled(marker), timeout=10)
            echo = await client.call_tool("srv_echo", {"text": "after"})
            assert echo.structured_content == {"text": "after", "server": "srv"}
        await back_to(baseline)


async def test_a_handshake_era_client_that_vanishes_mid_call_cancels_the_upstream_call(tmp_path: Path) -> None:
    """Dropping the connection of a call, with nothing said, cancels it: the hub's streams cannot be resumed."""
    servers = {"srv": fixture_server("srv", timeout=30.0)}
    async with hub_serving(tmp_path, servers) as (_hub, url, baseline):
        markers = [tmp_path / "vanished-1", tmp_path / "vanished-2"]
        async with httpx2.AsyncClient(timeout=30) as http:
            session = await legacy_session(http, url)
            for i, marker in enumerate(markers, start=2):
                call = {"jsonrpc": "2.0", "id": i, "method": "tools/call"}
                call["params"] = {"name": "srv_wait", "arguments": {"marker": str(marker)}}
                async with httpx2.AsyncClient(timeout=30) as dropped, anyio.create_task_group() as tg:
                    tg.start_soon(lambda c=call: dropped.post(url, json=c, headers=session))
                    await wait_for(lambda m=marker: _started(m))
                    tg.cancel_scope.cancel()  # the connection drops; nothing else is said
                await wait_for(lambda m=marker: _cancelled(m), timeout=5)  # well before srv's 30 s timeout
            # The session itself lives on: the client may come back on a new connection.
            echo = {"jsonrpc": "2.0", "id": 9, "method": "tools/call"}
            echo["params"] = {"name": "srv_echo", "arguments": {"text": "back"}}
            (answer,) = _messages(await http.post(url, json=echo, headers=session))
            assert answer["result"]["structuredContent"] == {"text": "back", "server": "srv"}
            assert (await http.delete(url, headers=session)).status_code == 200
        await back_to(baseline)


# -- 10 MB each way -------------------------------------------------------------------------------------------

TEN_MB = 10 * MIB


def _payload(size: int) -> str:
    """`size` characters, some that JSON must escape and some that UTF-8 encodes in two or three bytes."""
    unit = 'ten megabytes, "quoted", back\\slashed,\nnewlined, ünïcødé ✓ \t'
    return (unit * (size // len(unit) + 1))[:size]


@pytest.mark.parametrize(("upstream", "mode"), [("stdio", "legacy"), ("http", MODERN)])
async def test_ten_megabytes_each_way(tmp_path: Path, upstream: str, mode: str) -> None:
    payload = _payload(TEN_MB)
    roomy = build_server("far").streamable_http_app(max_request_body_size=32 * MIB)
    tight = build_server("tight").streamable_http_app()  # the SDK's default: 4 MiB a request
    async with serve_app(roomy) as roomy_base, serve_app(tight) as tight_base:
        servers = {"near": fixture_server("near"), "tight": {"url": f"{tight_base}/mcp"}}
        servers["far"] = fixture_server("far") if upstream == "stdio" else {"url": f"{roomy_base}/mcp"}
        async with hub_serving(tmp_path, servers) as (hub, url, _):
            assert hub.upstreams["far"].transport.kind == ("stdio" if upstream == "stdio" else "streamable-http")
            async with http_client(url, mode) as client, anyio.create_task_group() as tg:
                # Two calls at once, as below: the hub's pool of connections to an HTTP server grows to two.
                for tool in ("far_echo", "far_echo", "tight_echo"):
                    tg.start_soon(client.call_tool, tool, {"text": "warm"})
            baseline = Held.now()
            async with http_client(url, mode) as client:
                results: dict[str, Any] = {}
                echoes: list[Any] = []

                async def call(key: str, tool: str, arguments: dict[str, Any]) -> None:
                    results[key] = await client.call_tool(tool, arguments)

                with anyio.fail_after(60):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(call, "echo", "far_echo", {"text": payload})  # 10 MB in, 20 MB out
                        tg.start_soon(call, "big", "far_big", {"size": TEN_MB})  # 10 MB out
                        for i in range(5):
                            echoes.append((await client.call_tool("near_echo", {"text": str(i)})).structured_content)
                assert results["echo"].structured_content == {"text": payload, "server": "far"}
                assert _text(results["echo"]) == f"far: {payload}"
                assert _text(results["big"]) == "x" * TEN_MB
                assert [e["text"] for e in echoes] == [str(i) for i in range(5)]

                # A server that takes less refuses it; the caller hears so, and the server serves on.
                with anyio.fail_after(30), pytest.raises(MCPError):
                    await client.call_tool("tight_echo", {"text": payload})
                small = await client.call_tool("tight_echo", {"text": "small"})
                assert small.structured_content == {"text": "small", "server": "tight"}
                # The SDK's transports hold the last message each way until the next one passes
                # (their reader and writer loops keep it in a local), so measure once traffic moved on.
                results.clear()
                payload = ""
                for _ in range(3):
                    await client.call_tool("far_echo", {"text": "small"})
            await back_to(baseline)


# -- malformed JSON-RPC from clients, over HTTP ------------------------------------------------------------


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages in an HTTP response: its JSON body, or the data of each SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return [json.loads(item) for item in data if item]
    return [response.json()] if response.content else []


INVALID = {PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS}
"""What a body that is no JSON-RPC request may be answered with (the SDK answers -32602 where
JSON-RPC names -32600 for a valid JSON body that is no request)."""

REFUSED: list[tuple[str, bytes]] = [
    ("not JSON", b"{not json"),
    ("an empty body", b""),
    ("not UTF-8", b"\xff\xfe{}"),
    ("nested 100 000 deep", b"[" * 100_000 + b"]" * 100_000),
    ("an id of 5 000 digits", b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}'),
    ("null", b"null"),
    ("a number", b"42"),
    ("a string", b'"ping"'),
    ("an empty batch", b"[]"),
    ("a batch", b'[{"jsonrpc":"2.0","id":2,"method":"ping"}]'),
    ("no method", b'{"jsonrpc":"2.0","id":3}'),
    ("a method that is a number", b'{"jsonrpc":"2.0","id":4,"method":42}'),
    ("params that are a string", b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"x"}'),
    ("JSON-RPC 1.0", b'{"jsonrpc":"1.0","id":6,"method":"ping"}'),
    ("no jsonrpc member", b'{"id":7,"method":"ping"}'),
]

ANSWERED: list[tuple[str, str, dict[str, Any], int | None]] = [
    ("an unknown method", "no/such/method", {}, METHOD_NOT_FOUND),
    ("a tool name that is a number", "tools/call", {"name": 42}, INVALID_PARAMS),
    ("arguments that are a string", "tools/call", {"name": "a_echo", "arguments": "x"}, INVALID_PARAMS),
    ("an unknown tool", "tools/call", {"name": "a_nope", "arguments": {}}, INVALID_PARAMS),
    ("an unknown prompt", "prompts/get", {"name": "a_nope"}, INVALID_PARAMS),
    ("an unknown resource", "resources/read", {"uri": "nope://x"}, INVALID_PARAMS),
    ("a cursor never handed out", "tools/list", {"cursor": "garbage"}, INVALID_PARAMS),
    ("an unknown completion reference", "completion/complete", {"ref": 42, "argument": {}}, INVALID_PARAMS),
]

ODD_IDS: list[tuple[str, Any]] = [
    ("a 100 000-character id", "x" * 100_000),
    ("an id past 64 bits", 2**70),
    ("a negative id", -5),
    ("an empty string id", ""),
]


async def test_malformed_json_rpc_over_http_is_answered_and_the_hub_serves_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers = {"a": fixture_server("a"), "b": fixture_server("b")}
    async with hub_serving(tmp_path, servers) as (_hub, url, baseline):
        async with httpx2.AsyncClient(timeout=30) as http:
            session = await legacy_session(http, url)
            for label, body in REFUSED:
                response = await http.post(url, content=body, headers=session)
                assert response.status_code == 400, label
                (error,) = _messages(response)
                assert error["id"] is None and error["error"]["code"] in INVALID, (label, error)

            for i, (label, method, params, code) in enumerate(ANSWERED, start=100):
                response = await http.post(
                    url, json={"jsonrpc": "2.0", "id": i, "method": method, "params": params}, headers=session
                )
                assert response.status_code == 200, label
                (answer,) = _messages(response)  # exactly one answer, to this request
                assert answer["id"] == i and answer["error"]["code"] == code, (label, answer)

            for label, request_id in ODD_IDS:
                response = await http.post(
                    url, json={"jsonrpc": "2.0", "id": request_id, "method": "ping"}, headers=session
                )
                (answer,) = _messages(response)
                assert answer == {"jsonrpc": "2.0", "id": request_id, "result": {}}, label

            for label, message in [
                ("an unknown notification", {"jsonrpc": "2.0", "method": "notifications/bogus"}),
                ("a response to nothing", {"jsonrpc": "2.0", "id": 12, "result": {}}),
                ("an error to nothing", {"jsonrpc": "2.0", "id": 13, "error": {"code": 1, "message": "x"}}),
                (
                    "a cancellation of nothing",
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 999}},
                ),
            ]:
                response = await http.post(url, json=message, headers=session)
                assert response.status_code == 202 and not response.content, label

            # The transport's own refusals.
            ping = b'{"jsonrpc":"2.0","id":20,"method":"ping"}'
            no_session = {k: v for k, v in session.items() if k != "Mcp-Session-Id"}
            refusals = {
                "no session": (await http.post(url, content=ping, headers=no_session)).status_code,
                "an unknown session": (
                    await http.post(url, content=ping, headers={**session, "Mcp-Session-Id": "nope"})
                ).status_code,
                "not JSON content": (
                    await http.post(url, content=ping, headers={**session, "Content-Type": "text/plain"})
                ).status_code,
                "a 40 MiB body": (await http.post(url, content=b" " * (40 * MIB), headers=session)).status_code,
                "PUT": (await http.put(url, content=ping, headers=session)).status_code,
            }
            assert refusals == {
                "no session": 400,
                "an unknown session": 404,
                "not JSON content": 400,
                "a 40 MiB body": 413,
                "PUT": 405,
            }

            # 2026-07-28 requests stand alone; the same kinds of mistakes, the same kind of answers.
            modern = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}
            for label, body, headers, code in [
                ("not JSON", b"{not json", modern, PARSE_ERROR),
                ("a batch", json.dumps([listing]).encode(), modern, INVALID_REQUEST),
                ("an id of 1.5", json.dumps({**listing, "id": 1.5}).encode(), modern, INVALID_REQUEST),
                ("no envelope", json.dumps({**listing, "params": {}}).encode(), modern, INVALID_PARAMS),
                (
                    "an unknown method",
                    json.dumps({**listing, "method": "no/such"}).encode(),
                    {**modern, "Mcp-Method": "no/such"},
                    METHOD_NOT_FOUND,
                ),
                (
                    "a header that disagrees",
                    json.dumps(listing).encode(),
                    {**modern, "Mcp-Method": "tools/call"},
                    HEADER_MISMATCH,
                ),
            ]:
                response = await http.post(url, content=body, headers=headers)
                assert 400 <= response.status_code < 500, label
                (error,) = _messages(response)
                assert error["error"]["code"] == code, (label, error)

            # Through all of it, the session and the hub serve on.
            response = await http.post(url, json={"jsonrpc": "2.0", "id": 21, "method": "ping"}, headers=session)
            assert _messages(response) == [{"jsonrpc": "2.0", "id": 21, "result": {}}]
            assert (await http.delete(url, headers=session)).status_code == 200
            async with http_client(url) as client:
                echo = await client.call_tool("b_echo", {"text": "fine"})
                assert echo.structured_content == {"text": "fine", "server": "b"}
        await back_to(baseline)  # with the client's connections closed
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "the hub logged errors for client mistakes"


async def test_a_request_whose_id_is_no_string_or_integer_is_refused(tmp_path: Path) -> None:
    async with hub_serving(tmp_path, {"a": fixture_server("a")}) as (_hub, url, _), httpx2.AsyncClient() as http:
        session = await legacy_session(http, url)
        statuses: dict[str, int] = {}
        for request_id in (1.5, None, True, {"a": 1}):
            response = await http.post(
                url, json={"jsonrpc": "2.0", "id": request_id, "method": "ping"}, headers=session
            )
            statuses[json.dumps(request_id)] = response.status_code
            assert response.json() == {"jsonrpc": "2.0", "id": None, "error": ANY}
            assert response.json()["error"]["code"] == INVALID_REQUEST
        ping = await http.post(url, json={"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers=session)
    assert statuses == dict.fromkeys(statuses, 400)
    assert ping.json() == {"jsonrpc": "2.0", "id": 9, "result": {}}


# -- malformed JSON-RPC from a client, over stdio ------------------------------------------------------------

STDIO_JUNK: list[bytes] = [
    b"{not json",
    b"\xff\xfe not UTF-8",
    b"",
    b"   ",
    b"null",
    b"[]",
    b'[{"jsonrpc":"2.0","id":2,"method":"ping"}]',
    b'{"jsonrpc":"2.0","id":3}',
    b'{"jsonrpc":"2.0","id":4,"method":42}',
    b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
    b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"x"}',
    b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
    b"[" * 100_000 + b"]" * 100_000,
    b"x" * (5 * MIB),
    b'{"jsonrpc":"2.0","id":12,"result":{}}',
    b'{"jsonrpc":"2.0","method":"notifications/bogus"}',
]


@pytest.mark.real_processes
async def test_junk_on_the_hubs_stdin_is_skipped_and_every_request_answered_once(tmp_path: Path) -> None:
    """Lines that are no JSON-RPC message get no answer (or one with id null); requests get exactly one."""
    config = write_config(tmp_path / "hub.toml", {"a": fixture_server("a")}, log_level="warning")
    command = [sys.executable, "-m", "mcp_hub", "serve", "--config", str(config)]
    with open(tmp_path / "hub.log", "wb") as log:
        process = await anyio.open_process(command, stderr=log, cwd=tmp_path)
    async with process:
        assert process.stdin is not None and process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        answers: list[dict[str, Any]] = []

        async def send(message: bytes | dict[str, Any]) -> None:
            data = message if isinstance(message, bytes) else json.dumps(message).encode()
            await process.stdin.send(data + b"\n")  # type: ignore[union-attr]

        async def answer_to(request_id: int) -> dict[str, Any]:
            while not any(a.get("id") == request_id for a in answers):
                answers.append(json.loads(await lines.receive_until(b"\n", 64 * MIB)))
            return next(a for a in answers if a.get("id") == request_id)

        with anyio.fail_after(30):
            await send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "0"},
                    },
                }
            )
            assert "result" in await answer_to(1)
            await send({"jsonrpc": "2.0", "method": "notifications/initialized"})

            async def mount_up() -> bool:
                request_id = 1000 + len(answers)
                await send({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
                return any(t["name"] == "a_echo" for t in (await answer_to(request_id))["result"]["tools"])

            await wait_for(mount_up)
            children = _children(process.pid)
            answers.clear()

            expected: dict[int, int | None] = {}  # request id -> error code (None: a result)
            for i, junk in enumerate(STDIO_JUNK):
                await send(junk)
                await send({"jsonrpc": "2.0", "id": 100 + i, "method": "ping"})
                expected[100 + i] = None
            await send({"jsonrpc": "2.0", "id": 200, "method": "no/such/method"})
            expected[200] = METHOD_NOT_FOUND
            await send(
                {
                    "jsonrpc": "2.0",
                    "id": 201,
                    "method": "tools/call",
                    "params": {"name": "a_echo", "arguments": {"text": "x"}},
                }
            )
            expected[201] = None
            for request_id in expected:
                await answer_to(request_id)

        by_id: dict[Any, list[dict[str, Any]]] = {}
        for answer in answers:
            if "method" not in answer:  # not the hub's own notifications (a list_changed may come late)
                by_id.setdefault(answer.get("id"), []).append(answer)
        for request_id, code in expected.items():
            (answer,) = by_id.pop(request_id)  # exactly one answer each
            assert (answer["error"]["code"] if "error" in answer else None) == code, answer
        for stray in by_id.pop(None, []):  # answers to junk, if any, say what was wrong with it
            assert stray["error"]["code"] in INVALID, stray
        assert not by_id, f"answers to requests never sent: {by_id}"

        # The client goes away: the hub exits cleanly, its child reaped.
        await process.stdin.aclose()
        with anyio.fail_after(15):
            assert await process.wait() == 0
    await wait_for(lambda: not any(_alive(pid) for pid in children), timeout=10)
