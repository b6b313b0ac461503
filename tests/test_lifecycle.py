"""Upstream lifecycle: servers that crash, hang, start late or never; and a hub that reaps its children."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, ToolListChangedNotification

from mcp_hub.hub import Hub
from mcp_hub.upstream import State, supervisor
from tests.conftest import (
    fixture_server,
    free_port,
    hub_client,
    hub_command,
    hub_environment,
    make_config,
    running_hub,
    wait_for,
    write_config,
)
from tests.harness.processes import alive, pid_of
from tests.harness.wire import legacy_session

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_a_crashed_server_answers_promptly_and_comes_back(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a"), "b": fixture_server("b")})
    async with running_hub(config) as hub, hub_client(hub) as client:
        first_pid = await pid_of(client, "a_pid")
        with anyio.fail_after(5), pytest.raises(MCPError) as caught:
            await client.call_tool("a_crash", {})
        assert caught.value.code == CONNECTION_CLOSED
        assert "Server 'a'" in caught.value.message

        # The other mount never noticed.
        assert (await client.call_tool("b_echo", {"text": "still here"})).structured_content == {
            "text": "still here",
            "server": "b",
        }

        async def restarted() -> bool:
            try:
                return await pid_of(client, "a_pid") != first_pid
            except MCPError:
                return False

        await wait_for(restarted)
        assert hub.upstreams["a"].restarts >= 1
        assert not alive(first_pid)


async def test_a_crashed_server_is_said_to_have_exited_with_its_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a")})
    with caplog.at_level("WARNING", logger="mcp_hub.upstream"):
        async with running_hub(config) as hub, hub_client(hub) as client:
            with anyio.fail_after(5), pytest.raises(MCPError):
                await client.call_tool("a_crash", {})

            async def said() -> bool:
                return any("exited" in record.getMessage() for record in caplog.records)

            await wait_for(said)
    messages = [record.getMessage() for record in caplog.records]
    # Found by the watcher, or first by the call that was running when the server exited: its status either way.
    said = {"server 'a': connection closed: the server exited with status 3"}
    said.add("server 'a': connection closed during tools/call: the server exited with status 3")
    assert said & set(messages), messages


async def test_a_server_that_stops_answering_fails_the_health_check_and_is_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With no call to notice it, a server that stops answering altogether (frozen: SIGSTOP) fails the health
    check's ping; the hub lets go of its connection (its stdin closed: thawed, it reads the end and exits), says
    why, and starts the server again."""
    monkeypatch.setattr(supervisor, "_HEALTH_INTERVAL", 0.05)  # the checks come soon
    monkeypatch.setattr(supervisor, "_BACKOFF_FIRST", 0.05)  # and so does the restart
    config = make_config(tmp_path, {"a": fixture_server("a", timeout=0.5)})
    with caplog.at_level("WARNING", logger="mcp_hub.upstream"):
        async with running_hub(config) as hub, hub_client(hub) as client:
            upstream = hub.upstreams["a"]
            frozen = await pid_of(client, "a_pid")
            pipes = _pipes("self") & _pipes(frozen)  # its stdin, stdout and stderr: the hub holds the other ends
            os.kill(frozen, signal.SIGSTOP)
            try:
                await wait_for(lambda: not pipes <= _pipes("self"))  # one let go of: the hub is done with it
            finally:
                os.kill(frozen, signal.SIGCONT)
            await wait_for(lambda: upstream.state == State.UP and upstream.restarts == 1)
            assert await pid_of(client, "a_pid") != frozen
            await wait_for(lambda: not alive(frozen))
    messages = [record.getMessage() for record in caplog.records]
    failed = "server 'a': health check failed: Server 'a' did not answer ping within 0.5s"
    assert any(message.startswith(failed) for message in messages), messages  # then how it ended, once reaped


def _pipes(pid: int | str) -> set[str]:
    """The pipes process `pid` has open, as /proc names them ("pipe:[inode]")."""
    found: set[str] = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own, say)
            continue
        if link.startswith("pipe:"):
            found.add(link)
    return found


async def test_a_server_that_hangs_at_start_does_not_hold_up_the_others(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        {"stuck": fixture_server("stuck", "--hang-on-start", connect_timeout=0.5), "ok": fixture_server("ok")},
    )
    hub = Hub(config)
    async with hub.running(), hub_client(hub) as client:
        await hub.upstreams["ok"].settled.wait()
        echo = await client.call_tool("ok_echo", {"text": "up"})
        assert echo.structured_content == {"text": "up", "server": "ok"}
        await hub.upstreams["stuck"].settled.wait()
        with anyio.fail_after(2), pytest.raises(MCPError) as caught:
            await client.call_tool("stuck_echo", {"text": "x"})
        assert caught.value.code == CONNECTION_CLOSED
        assert caught.value.message.startswith("Server 'stuck' is not connected")
        assert "no answer to initialize within 0.5s" in caught.value.message
        health = hub.health()
    assert health["status"] == "degraded"
    assert health["servers"]["stuck"]["state"] in ("down", "starting")
    assert health["servers"]["ok"]["state"] == "up"


async def test_a_server_that_cannot_start_is_reported_and_retried(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"broken": fixture_server("broken", "--exit-on-start")})
    hub = Hub(config)
    async with hub.running():
        await wait_for(lambda: _true_when(hub.upstreams["broken"].restarts >= 1))
        report = hub.health()
    assert report["status"] == "down"
    assert report["servers"]["broken"]["last_error"]


async def _true_when(value: bool) -> bool:
    return value


async def test_calls_while_a_crashed_server_restarts_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that ran a healthy run and is killed under load is restarted at once; the calls that arrive
    while it restarts (half a second, its start-up delay) wait for it and are answered, and none is refused."""
    monkeypatch.setattr(supervisor, "HEALTHY_RUN", 0.5)  # a healthy run of half a second, not ten: a shorter test
    config = make_config(tmp_path, {"a": fixture_server("a", "--start-delay", "0.5")})
    callers = 8
    with caplog.at_level("INFO", logger="mcp_hub.upstream"):
        async with running_hub(config) as hub, hub_client(hub) as client:
            upstream = hub.upstreams["a"]
            victim = await pid_of(client, "a_pid")
            up_since = upstream.up_since
            assert up_since is not None
            await wait_for(lambda: time.monotonic() - up_since >= supervisor.HEALTHY_RUN)
            sent = [0] * callers
            answered = [0] * callers
            """Each caller's calls answered since the kill."""
            during_restart: list[str] = []
            """The answers of calls sent while the mount was restarting (after the kill, before it was up)."""
            failed: list[tuple[int, int, str]] = []
            restarting: list[dict[str, Any]] = []
            """What /healthz said of the mount while it restarted."""
            killed_at: float | None = None
            stop = False

            async def caller(i: int) -> None:
                n = 0
                while not stop:
                    n += 1
                    sent[i] += 1
                    # Sent after the kill, before the new connection was up (whether it waited or not).
                    since = upstream.up_since
                    sent_during_restart = killed_at is not None and (since is None or since < killed_at)
                    try:
                        result = await client.call_tool("a_echo", {"text": f"{i}-{n}"})
                    except MCPError as exc:
                        failed.append((i, exc.code, exc.message))
                        continue
                    assert result.structured_content == {"text": f"{i}-{n}", "server": "a"}
                    answered[i] += 1 if killed_at is not None else 0
                    if sent_during_restart:
                        during_restart.append(f"{i}-{n}")

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    for i in range(callers):
                        tg.start_soon(caller, i)
                    await wait_for(lambda: all(count >= 2 for count in sent))  # under load
                    killed_at = time.monotonic()
                    os.kill(victim, signal.SIGKILL)
                    await wait_for(lambda: upstream.state == State.STARTING)
                    restarting.append(hub.health()["servers"]["a"])
                    await wait_for(lambda: upstream.state == State.UP)
                    await wait_for(lambda: all(count >= 3 for count in answered))
                    stop = True
            assert await pid_of(client, "a_pid") != victim
            after = hub.health()["servers"]["a"]
    assert not alive(victim)
    # Only a call the server was running (or was sent as it died) fails, once a caller: none is refused.
    for _, code, message in failed:
        assert code == CONNECTION_CLOSED and message.startswith("Server 'a' closed the connection"), message
    assert len(failed) <= callers and len({i for i, _, _ in failed}) == len(failed), failed
    assert during_restart, "no call was sent while the server restarted"
    (health,) = restarting
    assert health["state"] == "starting" and health["restarts"] == 1
    assert health["last_error"].endswith(": the server was killed by signal SIGKILL"), health
    assert after["state"] == "up" and after["restarts"] == 1 and after["last_error"] is None
    said = [r.getMessage() for r in caplog.records if "reconnecting" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("server 'a': reconnecting now (it was up"), said


async def test_a_server_that_exits_on_every_start_backs_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No healthy run, no restart at once: each attempt waits twice as long as the one before."""
    monkeypatch.setattr(supervisor, "_BACKOFF_FIRST", 0.1)  # a tenth of a second, not half: a shorter test
    config = make_config(tmp_path, {"broken": fixture_server("broken", "--exit-on-start")})
    hub = Hub(config)
    with caplog.at_level("INFO", logger="mcp_hub.upstream"):
        async with hub.running():
            upstream = hub.upstreams["broken"]

            def waits() -> list[str]:
                return [r.getMessage() for r in caplog.records if "reconnecting" in r.getMessage()]

            await wait_for(lambda: len(waits()) >= 3, timeout=30)
            restarts = upstream.restarts
    assert waits()[:3] == [f"server 'broken': reconnecting in {seconds}s" for seconds in ("0.1", "0.2", "0.4")]
    assert restarts <= 3  # it did not spin: the third wait was the last thing it did, or what it does now


async def test_a_server_that_crashes_soon_after_coming_up_backs_off_and_calls_fail_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Up for less than a healthy run: the server is restarted after the backoff, and a call meanwhile is
    answered at once with the server's last error (it does not wait out the backoff)."""
    config = make_config(tmp_path, {"a": fixture_server("a")})
    with caplog.at_level("INFO", logger="mcp_hub.upstream"):
        async with running_hub(config) as hub, hub_client(hub) as client:
            upstream = hub.upstreams["a"]
            for crashes in (1, 2):
                with anyio.fail_after(10), pytest.raises(MCPError):
                    await client.call_tool("a_crash", {})
                if crashes == 2:  # down for a second now: a call meanwhile does not wait for the restart
                    await wait_for(lambda: upstream.state == State.DOWN)
                    with anyio.fail_after(5), pytest.raises(MCPError) as caught:
                        await client.call_tool("a_echo", {"text": "meanwhile"})
                    assert caught.value.code == CONNECTION_CLOSED
                    assert caught.value.message.startswith("Server 'a' is not connected (down: "), caught.value.message
                await wait_for(lambda crashes=crashes: upstream.restarts == crashes and upstream.state == State.UP)
            echo = await client.call_tool("a_echo", {"text": "back"})
    assert echo.structured_content == {"text": "back", "server": "a"}
    said = [r.getMessage() for r in caplog.records if "reconnecting" in r.getMessage()]
    assert said == ["server 'a': reconnecting in 0.5s", "server 'a': reconnecting in 1.0s"]


async def test_a_call_that_hangs_times_out_and_the_server_keeps_serving(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"slow": fixture_server("slow", timeout=1.0)})
    async with running_hub(config) as hub, hub_client(hub) as client:
        with anyio.fail_after(5), pytest.raises(MCPError) as caught:
            await client.call_tool("slow_hang", {})
        assert caught.value.code == REQUEST_TIMEOUT
        assert caught.value.message == "Server 'slow' did not answer tools/call within 1s"
        echo = await client.call_tool("slow_echo", {"text": "after"})
    assert echo.structured_content == {"text": "after", "server": "slow"}


async def test_a_late_server_joins_and_clients_hear_list_changed(tmp_path: Path) -> None:
    config = make_config(
        tmp_path, {"early": fixture_server("early"), "late": fixture_server("late", "--start-delay", "1")}
    )
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    hub = Hub(config)
    async with hub.running(), hub_client(hub, message_handler=on_message) as client:
        await hub.upstreams["early"].settled.wait()
        with anyio.fail_after(15):
            await changed.wait()
        names = {t.name for t in (await client.list_tools()).tools}
        if "late_echo" not in names:  # the early mount's own arrival may have been the notification seen
            changed = anyio.Event()
            with anyio.fail_after(15):
                await changed.wait()
            names = {t.name for t in (await client.list_tools()).tools}
    assert {"early_echo", "late_echo"} <= names


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_a_server_changing_its_tools_reaches_clients(tmp_path: Path, protocol: str) -> None:
    """A handshake-era server notifies; a 2026-07-28 server streams it on subscriptions/listen."""
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol=protocol)})
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    async with running_hub(config) as hub, hub_client(hub, message_handler=on_message) as client:
        await client.call_tool("srv_grow", {"name": "fresh"})
        with anyio.fail_after(10):
            await changed.wait()
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("srv_fresh", {})
    assert "srv_fresh" in names
    assert result.content[0].text == "srv: fresh"  # type: ignore[union-attr]


# -- the hub as a process: no orphans, ever --------------------------------------------------------


def _hub_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mcp_hub", "serve", "--config", str(config), *extra]


@pytest.mark.real_processes
async def test_stdio_hub_reaps_children_when_the_client_goes_away(tmp_path: Path) -> None:
    config = write_config(tmp_path / "hub.toml", {"a": fixture_server("a"), "b": fixture_server("b")})
    command, *args = _hub_command(config)
    params = StdioServerParameters(command=command, args=args, cwd=str(tmp_path), env=hub_environment())
    async with Client(params, mode="legacy", cache=None) as client:

        async def both_up() -> bool:
            names = {t.name for t in (await client.list_tools()).tools}
            return {"a_pid", "b_pid"} <= names

        await wait_for(both_up)
        pids = [await pid_of(client, "a_pid"), await pid_of(client, "b_pid")]
        assert all(alive(pid) for pid in pids)

    async def reaped() -> bool:
        return not any(alive(pid) for pid in pids)

    await wait_for(reaped, timeout=10)


@pytest.mark.real_processes
async def test_http_hub_reaps_children_on_sigterm(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = write_config(tmp_path / "hub.toml", {"a": fixture_server("a"), "b": fixture_server("b")})
    output = tmp_path / "hub.out"
    with output.open("wb") as err:
        command = _hub_command(config, "--transport", "http", "--port", str(port))
        process = subprocess.Popen(command, cwd=tmp_path, stdout=err, stderr=err)
    try:
        base = f"http://127.0.0.1:{port}"

        async def healthy() -> bool:
            try:
                async with httpx2.AsyncClient() as http:
                    response = await http.get(f"{base}/healthz")
                return response.status_code == 200 and response.json()["status"] == "ok"
            except httpx2.HTTPError:
                return False

        await wait_for(healthy, timeout=20)
        async with Client(f"{base}/mcp", cache=None) as client:
            pids = [await pid_of(client, "a_pid"), await pid_of(client, "b_pid")]
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(15):
            while process.poll() is None:
                await anyio.sleep(0.05)
        assert process.returncode == 0

        async def reaped() -> bool:
            return not any(alive(pid) for pid in pids)

        await wait_for(reaped, timeout=10)
        # Requests are logged by the hub's own access log, when `access_log` is on; not by uvicorn.
        assert "POST /mcp HTTP/1.1" not in output.read_text(encoding="utf-8", errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_http_hub_keeps_an_idle_client_connection_open_for_its_keep_alive(tmp_path: Path) -> None:
    """`[http] keep_alive` reaches uvicorn: a client connection idle for less than it carries the next request, and
    one idle past it is closed by the hub. Set to 2 s here, shorter than uvicorn's own default (5 s), so the close
    comes from the setting; its default (75 s, longer than uvicorn's) is checked in test_config.py."""
    port = free_port()
    config = write_config(tmp_path / "hub.toml", {"a": fixture_server("a")})
    with config.open("a", encoding="utf-8") as file:
        file.write("\n[http]\nkeep_alive = 2\n")
    command = hub_command("serve", "--config", str(config), "--transport", "http", "--port", str(port))
    process = subprocess.Popen(command, cwd=tmp_path, env=hub_environment())
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()

    async def exchange(stream: anyio.abc.SocketStream) -> bytes:
        await stream.send(request)
        received = b""
        with anyio.fail_after(10):
            while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
                received += await stream.receive()
        return received

    try:

        async def listening() -> bool:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                return False
            await stream.aclose()
            return True

        await wait_for(listening, timeout=20)
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            first = await exchange(stream)
            await anyio.sleep(0.3)  # idle, within keep_alive
            second = await exchange(stream)
            with anyio.fail_after(5), pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                await stream.receive()  # idle past keep_alive: the hub closes the connection
        assert first.startswith(b"HTTP/1.1 ") and second.startswith(b"HTTP/1.1 ")
    finally:
        process.terminate()
        process.wait(timeout=15)


async def test_http_hub_closes_a_session_idle_past_its_session_idle_timeout(tmp_path: Path) -> None:
    """`[http] session_idle_timeout` reaches the SDK's session manager: a handshake-era session left
    idle past it is closed, and its id is answered 404."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = write_config(tmp_path / "hub.toml", {"a": fixture_server("a")})
    with config.open("a", encoding="utf-8") as file:
        file.write("\n[http]\nsession_idle_timeout = 0.5\n")
    command = hub_command("serve", "--config", str(config), "--transport", "http", "--port", str(port))
    process = subprocess.Popen(command, cwd=tmp_path, env=hub_environment())
    url = f"http://127.0.0.1:{port}/mcp"
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    try:
        async with httpx2.AsyncClient(timeout=10) as http:

            async def listening() -> bool:
                try:
                    return (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
                except httpx2.HTTPError:
                    return False

            await wait_for(listening, timeout=20)
            session = await legacy_session(http, url)
            served = await http.post(url, json=ping, headers=session)
            await anyio.sleep(1.5)  # idle: no request in flight for three times the timeout
            gone = await http.post(url, json={**ping, "id": 3}, headers=session)
        assert served.status_code == 200, served.text
        assert gone.status_code == 404, gone.text
    finally:
        process.terminate()
        process.wait(timeout=15)
