"""The last known catalog (`[hub] catalog_snapshot`): written as mounts list, served at the next start-up.

The servers are real fixture children behind a gate: a tiny launcher that waits
until the test creates a file, then execs the fixture (or exits, if the file
says "fail"). With the gate shut, a mount stays "starting" for as long as the
test needs, whatever the machine's speed.
"""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from mcp_hub.catalog import snapshot
from mcp_hub.catalog.snapshot import CatalogSnapshot
from mcp_hub.config import HubConfig, ServerConfig, load_config
from mcp_hub.errors import ConfigError
from mcp_hub.hub import Hub
from mcp_hub.importer import import_client_config
from mcp_hub.upstream import State
from tests.conftest import fixture_server, hub_client, hub_command, hub_environment, running_hub, wait_for, write_config
from tests.servers.fixture import BASE_TOOLS

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

GATE = textwrap.dedent(
    """
    import os, sys, time
    gate = sys.argv[1]
    while not os.path.exists(gate):
        time.sleep(0.02)
    with open(gate) as file:
        options = file.read()
    if options == "fail":
        sys.exit(3)
    os.execv(sys.executable, [sys.executable, *sys.argv[2:], *options.split()])
    """
)
"""python -c GATE GATE_FILE FIXTURE_ARGS...: start the fixture once GATE_FILE exists (with the options it
holds: a server that changed without its configuration changing), or exit if it says "fail"."""


def gated_server(name: str, gate: Path, *options: str, **settings: Any) -> dict[str, Any]:
    """A fixture server that starts only once `gate` exists."""
    table = fixture_server(name, *options, **settings)
    return {**table, "command": sys.executable, "args": ["-c", GATE, str(gate), *table["args"]]}


def snapshot_config(
    tmp_path: Path, servers: dict[str, dict[str, Any]], snapshot: str = "state/catalog.json", **hub: Any
) -> Path:
    return write_config(tmp_path / "hub.toml", servers, catalog_snapshot=snapshot, **hub)


def read_snapshot(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


async def written(path: Path, mounts: set[str]) -> None:
    """Until the snapshot file holds every one of `mounts`."""

    async def holds() -> bool:
        try:
            return mounts <= set(read_snapshot(path)["mounts"])
        except (OSError, ValueError, KeyError, TypeError):  # not there yet, or still the corrupt one
            return False

    await wait_for(holds)


async def first_start(config: Path) -> None:
    """Run the hub once until every mount is up, so that it writes the snapshot."""
    async with running_hub(load_config(config)) as hub:
        assert all(upstream.state == State.UP for upstream in hub.upstreams.values())


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


BASE_NAMES = {tool["name"] for tool in BASE_TOOLS}


async def test_the_snapshot_holds_every_listing_after_the_mounts_list(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    config = snapshot_config(tmp_path, {"a": gated_server("a", gate), "b": fixture_server("b")})
    path = tmp_path / "state" / "catalog.json"
    async with running_hub(load_config(config)) as hub:
        await written(path, {"a", "b"})
        snapshot = read_snapshot(path)
        for mount in ("a", "b"):
            entry = snapshot["mounts"][mount]
            assert len(entry["fingerprint"]) == 32
            for kind in ("tools", "prompts", "resources", "resource_templates"):
                assert entry[kind] == hub.catalog.items_of(mount, kind)
    assert snapshot["version"] == 1
    assert {tool["name"] for tool in snapshot["mounts"]["a"]["tools"]} == BASE_NAMES
    assert snapshot["mounts"]["b"]["resource_templates"][0]["uriTemplate"] == "fixture://notes/{id}"
    assert [p.name for p in path.parent.iterdir()] == ["catalog.json"]  # no temporary file left behind


async def test_listings_recorded_before_the_writer_runs_or_while_it_writes_are_written_without_another_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer writes what is pending when it (re)starts its loop, without waiting to hear of a change: listings
    recorded before it ran, or while it was writing the file, reach the file though nothing changes after."""
    monkeypatch.setattr(snapshot, "_COALESCE", 0.0)
    path = tmp_path / "catalog.json"
    kept = CatalogSnapshot(path, {"a": ServerConfig(name="a", command="a")}, "hub.toml")
    listed = [{"name": "echo"}]
    kept.record("a", {"tools": listed})  # before the writer runs: no one to tell
    async with anyio.create_task_group() as tg:
        tg.start_soon(kept.run)
        await written(path, {"a"})
        assert read_snapshot(path)["mounts"]["a"]["tools"] == listed
        for n in range(20):  # one listing after another, some while the file is being written
            listed = [{"name": f"echo_{n}"}]
            kept.record("a", {"tools": listed})
            await anyio.sleep(0)

        async def last_written() -> bool:
            return read_snapshot(path)["mounts"]["a"]["tools"] == listed

        await wait_for(last_written)
        tg.cancel_scope.cancel()


async def test_a_restart_serves_the_snapshot_at_once_and_a_call_waits_for_its_server(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    config = snapshot_config(tmp_path, {"a": gated_server("a", gate), "b": gated_server("b", gate)})
    await first_start(config)
    gate.unlink()

    hub = Hub(load_config(config))
    async with hub.running(), hub_client(hub) as client:
        # Nothing has connected, and the whole catalog is listed.
        assert {u.state for u in hub.upstreams.values()} == {State.STARTING}
        assert await tool_names(client) == {f"{m}_{n}" for m in ("a", "b") for n in BASE_NAMES}
        assert {p.name for p in (await client.list_prompts()).prompts} == {"a_greet", "b_greet"}
        health = hub.health()
        assert health["servers"]["a"]["state"] == "starting" and health["servers"]["a"]["tools"] == len(BASE_NAMES)
        assert not hub.ready()

        result: dict[str, Any] = {}

        async def call() -> None:
            result["echo"] = await client.call_tool("a_echo", {"text": "waited"})

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await anyio.wait_all_tasks_blocked()
                assert not result and hub.upstreams["a"].state == State.STARTING  # the call is waiting
                gate.touch()
        assert result["echo"].structured_content == {"text": "waited", "server": "a"}
        assert hub.upstreams["a"].state == State.UP


async def test_a_call_whose_server_fails_its_first_connection_gets_the_down_error(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    config = snapshot_config(tmp_path, {"a": gated_server("a", gate)})
    await first_start(config)
    gate.unlink()

    hub = Hub(load_config(config))
    async with hub.running(), hub_client(hub) as client:
        assert "a_echo" in await tool_names(client)
        caught: list[MCPError] = []

        async def call() -> None:
            try:
                await client.call_tool("a_echo", {"text": "x"})
            except MCPError as exc:
                caught.append(exc)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await anyio.wait_all_tasks_blocked()
                gate.write_text("fail")
    assert caught[0].code == CONNECTION_CLOSED
    assert caught[0].message.startswith("Server 'a' is not connected (down")


async def test_a_server_configured_differently_is_not_served_from_its_stale_entry(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    servers = {"a": gated_server("a", gate), "b": gated_server("b", gate), "gone": gated_server("gone", gate)}
    config = snapshot_config(tmp_path, servers)
    await first_start(config)
    gate.unlink()

    # `a` now runs with other arguments (and different tools), `gone` is no longer configured. The list answers
    # at once with what it has (no startup grace): `b` from the snapshot, not `a`, which is still starting.
    servers = {"a": gated_server("a", gate, "--tools", "2"), "b": gated_server("b", gate)}
    config = snapshot_config(tmp_path, servers, startup_grace=0)
    hub = Hub(load_config(config))
    async with hub.running(), hub_client(hub) as client:
        names = await tool_names(client)
        assert names == {f"b_{n}" for n in BASE_NAMES}
        gate.touch()
        await wait_for(lambda: _listed(client, "a_tool_1"))
        assert not {n for n in await tool_names(client) if n.startswith("gone_")}
    path = tmp_path / "state" / "catalog.json"
    assert set(read_snapshot(path)["mounts"]) == {"a", "b"}
    assert "tool_1" in {tool["name"] for tool in read_snapshot(path)["mounts"]["a"]["tools"]}


async def _listed(client: Client, name: str) -> bool:
    return name in await tool_names(client)


@pytest.mark.parametrize(
    "content",
    ["{not json", '{"version": 1, "mounts": {"a": {"tools": []}}}', '{"version": 7, "mounts": {}}', "[]"],
)
async def test_a_corrupt_snapshot_is_ignored_with_a_warning(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = snapshot_config(tmp_path, {"a": fixture_server("a")}, snapshot="catalog.json")
    path = tmp_path / "catalog.json"
    path.write_text(content, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="mcp_hub.snapshot"):
        hub = Hub(load_config(config))
    assert f"catalog snapshot {path} is unusable, starting without it" in caplog.text
    assert hub.catalog.view("tools").items == ()
    async with hub.running(), hub_client(hub) as client:
        await hub.upstreams["a"].settled.wait()
        assert "a_echo" in await tool_names(client)
        await written(path, {"a"})  # replaced by a good one


async def test_a_snapshot_that_cannot_be_written_is_logged_and_the_hub_serves_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = snapshot_config(tmp_path, {"a": fixture_server("a")}, snapshot="catalog.json")
    (tmp_path / "catalog.json").mkdir()  # neither readable as a file nor replaceable by one
    with caplog.at_level(logging.WARNING, logger="mcp_hub.snapshot"):
        async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
            assert "a_echo" in await tool_names(client)
            await wait_for(lambda: _true_when("could not write the catalog snapshot" in caplog.text))
            echo = await client.call_tool("a_echo", {"text": "still"})
    assert echo.structured_content == {"text": "still", "server": "a"}
    assert "is unusable, starting without it" in caplog.text


async def _true_when(value: bool) -> bool:
    return value


async def test_the_snapshot_holds_what_pinning_admitted_and_policy_still_filters(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "all.toml").write_text(
        '[principals]\n"*" = "all"\n[profiles.all]\ndefault = "allow"\n'
        '[[profiles.all.rules]]\neffect = "deny"\ntools = ["a/fail"]\n[pinning]\non_change = "hold"\n',
        encoding="utf-8",
    )
    # a/echo was approved with another definition: held back, so not in the catalog nor the snapshot.
    pinned = {"fingerprint": "0" * 32, "since": "2026-01-01T00:00:00Z"}
    (tmp_path / "pins.json").write_text(json.dumps({"version": 1, "pins": {"a/echo": pinned}, "pending": {}}))
    config = snapshot_config(tmp_path, {"a": gated_server("a", gate)})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\npins = "pins.json"\n')
    await first_start(config)
    gate.unlink()
    entry = read_snapshot(tmp_path / "state" / "catalog.json")["mounts"]["a"]
    assert {tool["name"] for tool in entry["tools"]} == BASE_NAMES - {"echo"}

    hub = Hub(load_config(config))
    async with hub.running(), hub_client(hub) as client:
        assert hub.upstreams["a"].state == State.STARTING
        assert await tool_names(client) == {f"a_{n}" for n in BASE_NAMES - {"echo", "fail"}}
        gate.touch()  # let the child start, so the hub stops it cleanly


async def test_mounts_from_the_snapshot_start_a_few_at_a_time_and_a_call_starts_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    config = snapshot_config(tmp_path, {"a": gated_server("a", gate), "b": fixture_server("b")})
    await first_start(config)
    gate.unlink()

    monkeypatch.setattr("mcp_hub.hub.STARTS_AT_ONCE", 1)
    hub = Hub(load_config(config))
    async with hub.running(), hub_client(hub) as client:
        # `a` holds the one place and never gets up; `b` would wait behind it, but a call wants it now.
        with anyio.fail_after(30):
            echo = await client.call_tool("b_echo", {"text": "now"})
        assert echo.structured_content == {"text": "now", "server": "b"}
        assert hub.upstreams["a"].state == State.STARTING
        gate.touch()


MARK = "import os, sys; open(sys.argv[1], 'w').close(); os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
"""python -c MARK MARK_FILE FIXTURE_ARGS...: create MARK_FILE (the child has started), then exec the fixture."""


async def test_mounts_from_the_snapshot_start_once_the_hub_serves(tmp_path: Path) -> None:
    started = {name: tmp_path / f"{name}.started" for name in ("a", "b")}
    servers = {}
    for name, mark in started.items():
        table = fixture_server(name)
        servers[name] = {**table, "command": sys.executable, "args": ["-c", MARK, str(mark), *table["args"]]}
    config = snapshot_config(tmp_path, servers)
    await first_start(config)
    for mark in started.values():
        mark.unlink()

    hub, serving = Hub(load_config(config)), anyio.Event()
    async with hub.running(serving=serving), hub_client(hub) as client:
        assert await tool_names(client) == {f"{m}_{n}" for m in ("a", "b") for n in BASE_NAMES}
        with anyio.fail_after(30):  # a call wants its mount at once
            echo = await client.call_tool("b_echo", {"text": "now"})
        assert echo.structured_content == {"text": "now", "server": "b"}
        assert not started["a"].exists()  # the others wait until the hub serves
        serving.set()
        await wait_for(lambda: _up(hub, "a"), timeout=30)
        assert started["a"].exists()


async def _up(hub: Hub, mount: str) -> bool:
    return hub.upstreams[mount].state == State.UP


def test_a_snapshot_path_is_checked_like_the_other_options(tmp_path: Path) -> None:
    servers = {"a": fixture_server("a")}
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path / "hub.toml", servers, catalog_snapshot="state/"))
    assert (caught.value.key, caught.value.file) == ("hub.catalog_snapshot", str(tmp_path / "hub.toml"))
    assert 'name a file in it, like "state/catalog.json"' in caught.value.reason

    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path / "hub.toml", servers, catalog_snapshot="./hub.toml"))
    assert caught.value.key == "hub.catalog_snapshot"
    assert "is this hub.toml, which the snapshot would overwrite" in caught.value.reason

    config = load_config(write_config(tmp_path / "hub.toml", servers, catalog_snapshot=False))
    assert not Hub(config).snapshot.enabled


# -- the default: a file of each hub.toml's own in the user's state folder --------------------------


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own user state folder (platformdirs takes XDG_STATE_HOME on Linux)."""
    folder = tmp_path / "state-home"
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    return folder


def kept(state: Path) -> list[Path]:
    """The snapshot files in the state folder."""
    folder = state / "mcp-hub" / "catalogs"
    return sorted(folder.iterdir()) if folder.exists() else []


def files_under(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


async def test_by_default_each_config_has_its_own_snapshot_in_the_state_folder(tmp_path: Path, state: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = write_config(tmp_path / "one" / "hub.toml", {"a": gated_server("a", gate)})
    two = write_config(tmp_path / "two" / "hub.toml", {"b": gated_server("b", gate)})
    await first_start(one)
    await first_start(two)
    await first_start(one)  # the same config: the same file

    files = kept(state)
    assert len(files) == 2
    by_config = {read_snapshot(path)["config"]: path for path in files}
    assert set(by_config) == {str(one.resolve()), str(two.resolve())}
    assert all(path.name.startswith("hub-") for path in files)  # the config file's name, then a hash of its path
    assert set(read_snapshot(by_config[str(one.resolve())])["mounts"]) == {"a"}
    assert set(read_snapshot(by_config[str(two.resolve())])["mounts"]) == {"b"}
    assert files_under(tmp_path / "one") == {"hub.toml"}  # nothing beside the user's files

    # The next start lists the whole catalog from it, before its server has started.
    gate.unlink()
    hub = Hub(load_config(one))
    async with hub.running(), hub_client(hub) as client:
        assert hub.upstreams["a"].state == State.STARTING
        assert await tool_names(client) == {f"a_{n}" for n in BASE_NAMES}
        gate.touch()  # let the child start, so the hub stops it cleanly


async def test_a_hub_launched_over_stdio_lists_every_tool_at_once_from_its_second_start(
    tmp_path: Path, state: Path
) -> None:
    """As Claude Desktop runs it: `mcp-hub serve` over stdio, nothing about the snapshot in hub.toml."""
    gate = tmp_path / "gate"
    gate.touch()
    config = write_config(tmp_path / "hub.toml", {"a": gated_server("a", gate), "b": gated_server("b", gate)})
    command, *args = hub_command("serve", "--config", str(config))
    hub = StdioServerParameters(command=command, args=args, env=hub_environment())
    everything = {f"{m}_{n}" for m in ("a", "b") for n in BASE_NAMES}
    async with Client(hub, mode="legacy", cache=None) as client:
        assert await tool_names(client) == everything  # the first start waits for its servers
    await wait_for(lambda: _true_when(len(kept(state)) == 1))

    gate.unlink()
    with anyio.fail_after(30):
        async with Client(hub, mode="legacy", cache=None) as client:
            assert await tool_names(client) == everything  # neither server has started
            assert not gate.exists()
            gate.touch()  # let the children start, so the hub stops them cleanly


async def test_false_keeps_no_snapshot_anywhere(tmp_path: Path, state: Path) -> None:
    config = write_config(tmp_path / "hub.toml", {"a": fixture_server("a")}, catalog_snapshot=False)
    await first_start(config)
    hub = Hub(load_config(config))
    assert not hub.snapshot.enabled and hub.catalog.view("tools").items == ()
    assert not state.exists()
    assert files_under(tmp_path) == {"hub.toml"}


def test_a_config_written_by_import_keeps_its_snapshot_in_the_state_folder(tmp_path: Path, state: Path) -> None:
    claude = {"mcpServers": {"a": {"command": sys.executable, "args": fixture_server("a")["args"]}}}
    config = tmp_path / "hub.toml"
    config.write_text(import_client_config(json.dumps(claude), "claude_desktop_config.json").as_string())
    assert "catalog_snapshot" not in config.read_text(encoding="utf-8")
    path = Hub(load_config(config)).snapshot.path
    assert path is not None and path.parent == state / "mcp-hub" / "catalogs"


def test_a_config_that_did_not_come_from_a_file_keeps_no_snapshot(state: Path) -> None:
    config = HubConfig.model_validate({"servers": {"a": fixture_server("a")}})
    assert not Hub(config).snapshot.enabled
    assert not state.exists()


async def test_a_state_folder_that_cannot_be_written_is_one_warning_and_the_hub_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the state folder would be", encoding="utf-8")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocked))
    config = write_config(tmp_path / "hub.toml", {"a": fixture_server("a")})
    with caplog.at_level(logging.INFO, logger="mcp_hub"):
        async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
            assert not hub.snapshot.enabled
            echo = await client.call_tool("a_echo", {"text": "served"})
    assert echo.structured_content == {"text": "served", "server": "a"}
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("mcp_hub")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].getMessage().startswith(f"cannot keep the catalog snapshot in {blocked}/mcp-hub/catalogs")
    assert "set [hub] catalog_snapshot to a file you can write, or to false" in warnings[0].getMessage().lower()
    assert files_under(tmp_path) == {"hub.toml", "not-a-folder"}


async def test_a_stale_tool_is_listed_until_its_server_lists_and_a_call_to_it_gets_the_servers_answer(
    tmp_path: Path,
) -> None:
    """A server that changed without its configuration changing (a package updated in place): the tool the
    snapshot lists and the server no longer offers is listed until the server has listed; a call to it waits
    for the server to start, and gets what the server answers for a tool it does not know."""
    gate = tmp_path / "gate"
    gate.write_text("--tools 1", encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"a": gated_server("a", gate)})
    await first_start(config)
    gate.unlink()

    hub = Hub(load_config(config))
    async with hub.running(), hub_client(hub) as client:
        assert "a_tool_0" in await tool_names(client)  # from the snapshot
        result: dict[str, Any] = {}

        async def call() -> None:
            result["stale"] = await client.call_tool("a_tool_0", {})

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await anyio.wait_all_tasks_blocked()
                assert not result and hub.upstreams["a"].state == State.STARTING  # waiting for its server
                gate.touch()  # it starts without the tool
        stale = result["stale"]
        assert stale.is_error and stale.content[0].text == "Unknown tool: tool_0"  # type: ignore[union-attr]
        assert await tool_names(client) == {f"a_{n}" for n in BASE_NAMES}  # corrected once the server listed
