"""Live configuration: edits to hub.toml apply while the hub serves (live.py).

Real parts: the hub in-process with its file watcher and as an `mcp-hub serve` process, fixture servers as
stdio children, the SDK's client. The file is edited on disk, in place and by rename, as editors do.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import tomlkit
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import ToolListChangedNotification

from mcp_hub import live
from mcp_hub.config import HubConfig, load_config, parse_config
from mcp_hub.hub import Hub
from mcp_hub.upstream import State
from tests.conftest import fixture_server, free_port, hub_client, hub_command, hub_environment, script_server, wait_for

LEAKY = str(Path(__file__).parent / "servers" / "leaky.py")

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def write(path: Path, servers: dict[str, dict[str, Any]], *, rename: bool, **tables: dict[str, Any]) -> None:
    """Write hub.toml: in place (truncate, then write), or to a temporary file renamed over it."""
    document = tomlkit.document()
    for table, values in tables.items():
        document[table] = values
    document["servers"] = servers
    text = tomlkit.dumps(document)
    if rename:
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    else:
        with path.open("w", encoding="utf-8") as file:
            file.write(text)


class Listener:
    """A client's `tools/list_changed` notifications, and lists taken until one shows what is expected."""

    def __init__(self) -> None:
        self.heard = 0
        self._changed = anyio.Event()

    async def on_message(self, message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            self.heard += 1
            self._changed.set()

    async def tools_until(self, client: Client, expected: Callable[[set[str]], bool], timeout: float = 30) -> set[str]:
        """List the tools, and again after each list_changed, until `expected` holds (no polling)."""
        with anyio.fail_after(timeout):
            while True:
                names = {tool.name for tool in (await client.list_tools()).tools}
                if expected(names):
                    return names
                await self._changed.wait()
                self._changed = anyio.Event()


def _text(result: Any) -> str:
    return result.content[0].text


async def _pid(client: Client, tool: str) -> int:
    return int(_text(await client.call_tool(tool, {})))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- what changed ----------------------------------------------------------------------------------------


def test_the_diff_names_servers_and_keys_never_values() -> None:
    old = parse_config(
        '[http]\nport = 8000\n[servers.a]\ncommand = "a"\n[servers.b]\ncommand = "b"\nargs = ["x"]\n'
        '[servers.c]\ncommand = "c"\n[servers.off]\ncommand = "off"\nenabled = false\n'
    )
    new = parse_config(
        '[http]\nport = 9000\n[servers.a]\ncommand = "a"\n[servers.b]\ncommand = "b"\nargs = ["y"]\ntimeout = 5.0\n'
        '[servers.d]\nurl = "https://example.com/mcp"\n[servers.off]\ncommand = "off"\n'
        '[servers.c]\ncommand = "c"\nenabled = false\n'
    )
    change = live.diff(old, new)
    assert change.added == ("d", "off")
    assert change.removed == ("c",)
    assert dict(change.changed) == {"b": ("args", "timeout")}
    assert change.read_once == ("http.port",)
    assert live.diff(new, new) == live.ConfigDiff()
    assert not live.diff(new, new).mounts


def test_admin_keys_apply_without_a_restart_and_the_rest_of_admin_at_the_next() -> None:
    old = parse_config(f'[admin]\nenabled = true\nkeys = {{ root = "{"a" * 16}" }}\n')
    new = parse_config(f'[admin]\nenabled = true\nsession_hours = 2\nkeys = {{ root = "{"b" * 16}" }}\n')
    change = live.diff(old, new)
    assert change.applied == ("admin.keys",) and change.read_once == ("admin.session_hours",)
    assert not change.mounts


class Recorder:
    """What `LiveConfig` asks of a hub, recorded (the hub's own `remount` is exercised by the tests below)."""

    def __init__(self, config: HubConfig) -> None:
        self.config = config
        self.remounts: list[tuple[HubConfig, tuple[str, ...]]] = []

    async def remount(self, config: HubConfig, restart: Collection[str] = ()) -> live.MountsChanged:
        self.remounts.append((config, tuple(restart)))
        self.config = self.config.model_copy(update={"servers": config.servers})
        return live.MountsChanged()

    def adopt(self, config: HubConfig) -> None:
        self.config = self.config.model_copy(update={"admin": config.admin})

    async def reload_policy(self) -> None:
        pass


@pytest.mark.parametrize(
    ("edit", "key", "reason"),
    [
        ('[servers.a]\ncommand = "a"\nargs = [\n', "", "invalid TOML"),
        ('[servers.a]\ncommand = "a"\ntimeout = -1\n', "servers.a.timeout", "must be greater than 0"),
        ('[servers.a]\ncommand = "a"\nprefix = false\n[servers.b]\ncommand = "b"\n', "servers.a.prefix", "only"),
        (
            '[auth]\napi_keys = { a = "${NOT_SET_ANYWHERE}" }\n[servers.a]\ncommand = "a"\n',
            "auth.api_keys.a",
            "NOT_SET_ANYWHERE is not set",
        ),
    ],
    ids=["toml", "type", "rule", "variable"],
)
async def test_an_edit_the_loader_rejects_is_logged_and_changes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, edit: str, key: str, reason: str
) -> None:
    path = tmp_path / "hub.toml"
    path.write_text('[servers.a]\ncommand = "a"\n', encoding="utf-8")
    hub = Recorder(load_config(path))
    watcher = live.LiveConfig(hub)
    path.write_text(edit, encoding="utf-8")
    with caplog.at_level(logging.ERROR, logger="mcp_hub.live"):
        assert await watcher.reload() is None
    (message,) = [record.getMessage() for record in caplog.records]
    assert message.startswith(f"{path}: {key}: " if key else f"{path}: ")
    assert reason in message
    assert message.endswith("; the configuration in force stays until the file is fixed")
    assert watcher.last_error is not None and hub.remounts == []
    path.write_text('[servers.a]\ncommand = "a"\n[servers.b]\ncommand = "b"\n', encoding="utf-8")
    change = await watcher.reload()
    assert change is not None and change.added == ("b",) and watcher.last_error is None
    assert [restart for _, restart in hub.remounts] == [()]


async def test_an_edit_written_a_piece_at_a_time_is_read_once_the_writes_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written in several writes (a slow editor, a copy) is read once it has stayed the same for `QUIET`,
    whole: never one of the pieces before it, which would be rejected or applied half."""
    monkeypatch.setattr(live, "QUIET", 0.05)
    path = tmp_path / "hub.toml"
    path.write_text('[servers.a]\ncommand = "a"\n', encoding="utf-8")
    hub = Recorder(load_config(path))
    watcher = live.LiveConfig(hub, interval=0.005)
    edit = '[servers.a]\ncommand = "a"\n\n[servers.b]\ncommand = "b"\nargs = ["--one", "--two"]\n'
    with caplog.at_level(logging.INFO, logger="mcp_hub.live"), anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            await anyio.sleep(0.02)  # the watcher looks at the unchanged file a few times first
            with path.open("w", encoding="utf-8") as file:  # truncated: the first write
                for line in edit.splitlines(keepends=True):
                    await anyio.sleep(0.01)  # each piece well within QUIET of the one before
                    file.write(line)
                    file.flush()
            await wait_for(lambda: bool(hub.remounts))
            tg.cancel_scope.cancel()
    ((config, restart),) = hub.remounts
    assert set(config.servers) == {"a", "b"} and config.servers["b"].args == ("--one", "--two") and restart == ()
    assert watcher.last_error is None
    assert [r.getMessage() for r in caplog.records if r.name == "mcp_hub.live"] == [f"{path}: server 'b' added"]


# -- an in-process hub with its watcher --------------------------------------------------------------------


async def test_edits_add_remove_and_restart_servers_while_others_serve_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Added and removed servers join and leave the catalog with list_changed (a call in flight to the removed
    one ends with an error); a changed one restarts; the untouched one keeps its process, its session and the
    call it is serving; a bad edit changes nothing."""
    monkeypatch.setattr(live, "POLL_INTERVAL", 0.05)  # each edit seen in a twentieth of a second, not half
    monkeypatch.setattr(live, "QUIET", 0.05)
    caplog.set_level(logging.INFO, logger="mcp_hub.live")
    path = tmp_path / "hub.toml"
    a, b, c = fixture_server("a", protocol="legacy"), fixture_server("b"), fixture_server("c")
    write(path, {"a": a, "b": b}, rename=False)
    hub = Hub(load_config(path))
    listener = Listener()
    asked, answer = anyio.Event(), anyio.Event()

    async def elicitation(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        asked.set()
        await answer.wait()  # the call stays in flight on server a until the test answers
        return types.ElicitResult(action="accept", content={"answer": "later"})

    async with (
        hub.running(live=True),
        hub_client(hub, message_handler=listener.on_message, elicitation_callback=elicitation) as client,
    ):
        await hub.wait_settled(30)
        await listener.tools_until(client, lambda names: {"a_echo", "b_echo"} <= names)
        a_pid, b_pid = await _pid(client, "a_pid"), await _pid(client, "b_pid")
        results: list[str] = []
        served: list[str] = []
        async with anyio.create_task_group() as tg:

            async def in_flight() -> None:
                results.append(_text(await client.call_tool("a_ask", {"what": "elicitation", "text": "hold"})))

            async def on_removed_server() -> None:
                with pytest.raises(MCPError) as ended:
                    await client.call_tool("b_wait", {"marker": str(tmp_path / "b")})
                results.append(ended.value.message)

            async def traffic() -> None:  # calls to a all through the reload: none may fail
                while not answer.is_set():
                    served.append(_text(await client.call_tool("a_echo", {"text": "busy"})))
                    await anyio.sleep(0.02)  # pacing, not waiting for anything

            tg.start_soon(in_flight)
            tg.start_soon(on_removed_server)
            tg.start_soon(traffic)
            with anyio.fail_after(30):
                await asked.wait()
            await wait_for(lambda: (tmp_path / "b.started").exists())

            # b removed, c added: written to a temporary file renamed over hub.toml
            write(path, {"a": a, "c": c}, rename=True)
            names = await listener.tools_until(client, lambda names: "c_echo" in names and "b_echo" not in names)
            assert "a_echo" in names
            answer.set()  # the call on a was in flight all along
        assert results == ["Server 'b' closed the connection during tools/call", "elicited: accept {'answer': 'later'}"]
        assert served and set(served) == {"a: busy"}
        await wait_for(lambda: not _alive(b_pid), timeout=15)  # b stopped, its process reaped
        assert await _pid(client, "a_pid") == a_pid  # a untouched, on the same session

        # c changed (one more tool): written in place
        c_pid = await _pid(client, "c_pid")
        write(path, {"a": a, "c": fixture_server("c", "--tools", "1")}, rename=False)
        await listener.tools_until(client, lambda names: "c_tool_0" in names)
        assert await _pid(client, "c_pid") != c_pid
        assert await _pid(client, "a_pid") == a_pid

        # an unknown key: logged with file, key and reason; the configuration in force stays
        broken = fixture_server("c", bogus=1)
        write(path, {"a": a, "c": broken, "d": fixture_server("d")}, rename=False)

        def rejected() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and r.name == "mcp_hub.live"]

        await wait_for(lambda: bool(rejected()), timeout=15)
        [message] = rejected()
        assert message.startswith(f"{path}: servers.c.bogus: unknown key 'bogus'; remove it (allowed keys: command,")
        assert message.endswith("); the configuration in force stays until the file is fixed")
        assert set(hub.upstreams) == {"a", "c"}

        # fixed, with a setting that needs a restart: d joins, the port change is a warning
        write(
            path,
            {"a": a, "c": fixture_server("c", "--tools", "1"), "d": fixture_server("d")},
            rename=True,
            http={"port": 1},
        )
        await listener.tools_until(client, lambda names: "d_echo" in names)
        assert await _pid(client, "a_pid") == a_pid
        assert _text(await client.call_tool("a_echo", {"text": "still here"})) == "a: still here"
    assert hub.snapshot.path is not None  # the last known catalog forgets the removed server
    assert set(json.loads(hub.snapshot.path.read_text())["mounts"]) == {"a", "c", "d"}
    logged = [r.getMessage() for r in caplog.records if r.name == "mcp_hub.live"]
    assert f"{path}: server 'c' added" in logged
    assert f"{path}: server 'b' removed" in logged
    assert f"{path}: server 'c' restarted: args changed" in logged
    assert (
        f"{path}: http.port changed, which applies only when the hub starts; restart the hub to apply it (until "
        "then it serves with the setting it started with)"
    ) in logged
    assert listener.heard >= 3


async def test_sighup_reloads_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the watcher looking once an hour and the policy files not watched, only SIGHUP can make the edits
    apply: hub.toml's and the policy's. The hub stays ready while an added server is starting."""
    monkeypatch.setattr(live, "POLL_INTERVAL", 3600.0)
    policies = tmp_path / "policies"
    policies.mkdir()
    allow = '[principals]\nstdio = "agent"\n\n[profiles.agent]\ndefault = "allow"\n'
    (policies / "policy.toml").write_text(allow, encoding="utf-8")
    path, policy = tmp_path / "hub.toml", {"dir": "policies", "reload": False}
    write(path, {"a": fixture_server("a")}, rename=False, policy=policy)
    hub = Hub(load_config(path))
    listener = Listener()
    async with hub.running(live=True), hub_client(hub, message_handler=listener.on_message) as client:
        await hub.wait_settled(30)
        await listener.tools_until(client, lambda names: "a_echo" in names)
        assert hub.ready()
        hangs = fixture_server("hangs", "--hang-on-start")
        write(path, {"a": fixture_server("a"), "b": fixture_server("b"), "hangs": hangs}, rename=True, policy=policy)
        deny = '[[profiles.agent.rules]]\neffect = "deny"\ntools = ["a/echo"]\n'
        (policies / "policy.toml").write_text(allow + deny, encoding="utf-8")
        os.kill(os.getpid(), signal.SIGHUP)
        await listener.tools_until(client, lambda names: "b_echo" in names and "a_echo" not in names)
        assert hub.upstreams["hangs"].state == State.STARTING
        assert hub.ready()  # a mount added later is not waited for: the hub already serves


async def test_a_secret_of_an_added_server_is_one_the_guardrails_know(tmp_path: Path) -> None:
    """The "secrets" detector knows the hub's own secrets: an added server's too."""
    key = "s3cr3t-Configured-Value"
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "policy.toml").write_text(
        '[principals]\nstdio = "agent"\n\n[profiles.agent]\ndefault = "allow"\n\n[[profiles.agent.guards]]\n'
        'id = "own"\ndetect = ["secrets"]\naction = "redact"\non = "arguments"\n',
        encoding="utf-8",
    )
    path, policy = tmp_path / "hub.toml", {"dir": "policies", "reload": False}
    leaky = script_server(LEAKY)
    write(path, {"a": fixture_server("a")}, rename=False, policy=policy)
    hub = Hub(load_config(path))
    listener = Listener()
    async with hub.running(live=True), hub_client(hub, message_handler=listener.on_message) as client:
        write(
            path,
            {"a": fixture_server("a"), "leaky": {**leaky, "env": {"LEAKY_API_KEY": key}}},
            rename=True,
            policy=policy,
        )
        await listener.tools_until(client, lambda names: "leaky_echo" in names)
        result = await client.call_tool("leaky_echo", {"text": f"the key is {key}"})
    assert _text(result) == 'received {"text": "the key is [REDACTED:configured_secret]"}'


# -- `mcp-hub serve` as a process --------------------------------------------------------------------------


@pytest.mark.real_processes  # the hub's own handling of SIGHUP and SIGTERM
async def test_a_served_hub_applies_edits_and_says_what_changed(tmp_path: Path) -> None:
    """Over HTTP: an added server reaches the connected client by list_changed; an edit that leaves the file's
    size and time as they were is applied on SIGHUP; the log says what changed."""
    path, port = tmp_path / "hub.toml", free_port()
    a = fixture_server("a", "--tools", "1")
    write(path, {"a": a}, rename=False)
    command = [sys.executable, "-m", "mcp_hub", "serve", "--config", str(path), "--transport", "http"]
    log_path = tmp_path / "hub.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([*command, "--port", str(port)], cwd=tmp_path, stderr=log, env=hub_environment())
    listener = Listener()
    try:
        await wait_for(lambda: "server 'a': up" in log_path.read_text(), timeout=30)
        async with Client(
            f"http://127.0.0.1:{port}/mcp", mode="legacy", cache=None, message_handler=listener.on_message
        ) as client:
            await listener.tools_until(client, lambda names: "a_tool_0" in names)
            write(path, {"a": a, "b": fixture_server("b")}, rename=True)
            await listener.tools_until(client, lambda names: "b_echo" in names)

            before = path.stat()
            write(path, {"a": fixture_server("a", "--tools", "2"), "b": fixture_server("b")}, rename=False)
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the watcher sees no change
            assert path.stat().st_size == before.st_size
            process.send_signal(signal.SIGHUP)
            await listener.tools_until(client, lambda names: "a_tool_1" in names)
        text = log_path.read_text()
        assert f"{path}: server 'b' added" in text
        assert f"{path}: server 'a' restarted: args changed" in text
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            while process.poll() is None:
                await anyio.sleep(0.05)
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_a_hub_served_over_stdio_applies_an_edit(tmp_path: Path) -> None:
    path = tmp_path / "hub.toml"
    write(path, {"a": fixture_server("a")}, rename=False)
    hub = hub_command("serve", "--config", str(path))
    command = StdioServerParameters(
        command=hub[0],
        args=hub[1:],
        cwd=str(tmp_path),
        env=hub_environment(),
    )
    listener = Listener()
    async with Client(command, mode="legacy", cache=None, message_handler=listener.on_message) as client:
        await listener.tools_until(client, lambda names: "a_echo" in names)
        write(path, {"a": fixture_server("a"), "b": fixture_server("b")}, rename=True)
        await listener.tools_until(client, lambda names: "b_echo" in names)
        assert _text(await client.call_tool("b_echo", {"text": "hi"})) == "b: hi"
