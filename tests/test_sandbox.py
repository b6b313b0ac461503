"""Stdio servers in a sandbox: the settings, the command line, and a real server's attempts that fail in it.

The attacks are made by tests/servers/intruder.py, a real stdio server run sandboxed by a real hub under the
default profile ("standard"): reading the home folder, writing outside its folders, connecting out, forking a
thousand processes, allocating past its memory limit. Each fails, the hub keeps serving its other server, and
what a limit did is reported (/healthz, `check --connect`, the audit).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from mcp_hub.config import parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.hub import Hub
from mcp_hub.upstream import sandbox
from mcp_hub.upstream.sandbox import Cgroups, bubblewrap_argv, sandbox_of, unavailable
from tests.conftest import FIXTURE, ROOT, hub_client, running_hub, wait_for, write_config

INTRUDER = str(ROOT / "tests" / "servers" / "intruder.py")

needs_bubblewrap = pytest.mark.skipif(
    unavailable() is not None, reason=f"{unavailable()} (.ci/run installs bubblewrap)"
)
needs_cgroups = pytest.mark.skipif(
    Cgroups.here() is None, reason="no writable cgroup here (cgroup v1 memory and pids, as root)"
)


def attack(test: Any) -> Any:
    """A test in which a real server process, run by a real hub in bubblewrap, attempts something."""
    for mark in (pytest.mark.anyio, needs_bubblewrap, pytest.mark.real_processes, pytest.mark.slow):
        test = mark(test)
    return test


# -- settings -------------------------------------------------------------------------------------------------


def _servers(text: str) -> dict[str, Any]:
    return {name: server.sandbox for name, server in parse_config(text).servers.items()}


def test_the_hub_wide_profile_is_every_stdio_servers_and_a_servers_own_table_adds_to_it() -> None:
    sandboxes = _servers(
        """
        [sandbox]
        profile = "standard"
        read = ["/srv/shared"]
        [servers.plain]
        command = "x"
        [servers.online]
        command = "x"
        sandbox = "network"
        [servers.notes]
        command = "x"
        sandbox = { write = ["~/notes"], memory = "256MiB" }
        [servers.trusted]
        command = "x"
        sandbox = "off"
        [servers.remote]
        url = "https://example.com/mcp"
        """
    )
    assert sandboxes["plain"].profile == "standard" and sandboxes["plain"].required is False
    assert sandboxes["online"].profile == "network" and sandboxes["online"].required is True
    notes = sandboxes["notes"]
    assert (notes.profile, notes.read, notes.write, notes.memory) == ("standard", ("/srv/shared",), ("~/notes",), 2**28)
    assert sandboxes["trusted"].profile == "off"
    assert sandboxes["remote"] is None


def test_without_a_sandbox_table_servers_run_as_before() -> None:
    assert _servers('[servers.a]\ncommand = "x"\n') == {"a": None}


def test_the_profiles_settle_every_limit() -> None:
    config = parse_config('[servers.a]\ncommand = "x"\nsandbox = "network"\n')
    settled = sandbox_of(config.servers["a"])
    assert settled is not None
    assert (settled.network, settled.memory, settled.processes, settled.open_files) == ("any", 2**30, 256, 4096)
    assert settled.cpu_seconds is None


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        ('sandbox = "strict"', "servers.a.sandbox", "unknown sandbox profile 'strict'; write one of 'standard'"),
        ('sandbox = { read = ["data"] }', "servers.a.sandbox.read[0]", "'data' is not an absolute path"),
        ('sandbox = { memroy = "1GiB" }', "servers.a.sandbox.memroy", "did you mean 'memory'?"),
        ('sandbox = { memory = "lots" }', "servers.a.sandbox.memory", "could not parse"),
        ("sandbox = { required = true }", "servers.a.sandbox.required", "unknown key 'required'"),
    ],
)
def test_a_malformed_sandbox_names_the_key_and_the_fix(table: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f'[servers.a]\ncommand = "x"\n{table}\n')
    assert key in str(caught.value) and words in str(caught.value), str(caught.value)


def test_a_remote_server_has_no_sandbox_to_set() -> None:
    with pytest.raises(ConfigError, match="sandbox only applies to a local process"):
        parse_config('[servers.a]\nurl = "https://example.com/mcp"\nsandbox = "standard"\n')


# -- the command line -------------------------------------------------------------------------------------------


def _binds(argv: list[str]) -> dict[str, str]:
    """Each bound or hidden path, and how (--ro-bind, --bind, --tmpfs, or /dev/null for a hidden file)."""
    found = {}
    for index, arg in enumerate(argv):
        if arg in ("--ro-bind", "--bind"):
            found[argv[index + 2]] = "/dev/null" if argv[index + 1] == "/dev/null" else arg
        elif arg == "--tmpfs":
            found[argv[index + 1]] = arg
    return found


def _toml_config(tmp_path: Path, table: str) -> Any:
    return parse_config(f'[servers.a]\ncommand = "{sys.executable}"\n{table}\n').servers["a"]


def test_the_home_folder_is_empty_and_the_system_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / "projects").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    (home / "server.py").write_text("")
    server = _toml_config(tmp_path, 'sandbox = { read = ["~/projects"] }')
    settled = sandbox_of(server)
    assert settled is not None
    argv = bubblewrap_argv(settled, sys.executable, [str(home / "server.py")], None, server)
    binds = _binds(argv)
    assert binds[str(home)] == "--tmpfs"  # a script in the home folder does not open it
    assert binds[str(home / "projects")] == "--ro-bind"
    assert binds[str(home / "server.py")] == "--ro-bind"
    assert binds["/usr"] == "--ro-bind" and binds["/tmp"] == "--tmpfs"
    assert "--unshare-net" in argv and "--cap-drop" in argv
    assert argv[argv.index("--chdir") + 1] == str(home)
    assert argv[-3:] == ["--", sys.executable, str(home / "server.py")]


def test_secrets_inside_a_bound_folder_stay_hidden_unless_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    for folder in (".config/gcloud", ".config/editor", ".local/share/keyrings"):
        (home / folder).mkdir(parents=True)
    (home / ".config" / "hub").write_text("oauth_token: secret")
    monkeypatch.setenv("HOME", str(home))
    server = _toml_config(tmp_path, 'sandbox = { read = ["~/.config", "~/.local"] }')
    settled = sandbox_of(server)
    assert settled is not None
    binds = _binds(bubblewrap_argv(settled, sys.executable, [], None, server))
    assert binds[str(home / ".config")] == "--ro-bind"
    assert binds[str(home / ".config/gcloud")] == "--tmpfs"
    assert binds[str(home / ".config/hub")] == "/dev/null"
    assert binds[str(home / ".local/share/keyrings")] == "--tmpfs"
    assert str(home / ".config/editor") not in binds

    whole = _toml_config(tmp_path, 'sandbox = { write = ["~"] }')  # the whole home, as asked, but its secrets
    settled = sandbox_of(whole)
    assert settled is not None
    binds = _binds(bubblewrap_argv(settled, sys.executable, [], None, whole))
    assert binds[str(home)] == "--bind" and binds[str(home / ".config/gcloud")] == "--tmpfs"

    named = _toml_config(tmp_path, 'sandbox = { read = ["~/.config", "~/.config/gcloud"] }')
    settled = sandbox_of(named)
    assert settled is not None
    binds = _binds(bubblewrap_argv(settled, sys.executable, [], None, named))
    assert binds[str(home / ".config/gcloud")] == "--ro-bind"  # named: bound, not hidden


@needs_bubblewrap
def test_the_hubs_state_stays_hidden_from_a_runner_installed_in_local_bin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv installs `uvx` in ~/.local/bin, so the server's program opens ~/.local, which holds the hub's state
    folder (pins, people's sign-ins): that stays hidden, and only the package cache inside it is bound, over it."""
    home = tmp_path / "home"
    uvx = home / ".local" / "bin" / "uvx"
    uvx.parent.mkdir(parents=True)
    uvx.write_text("#!/bin/sh\n")
    uvx.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    (home / ".local" / "state" / "mcp-hub" / "credentials").mkdir(parents=True)
    server = parse_config(f'[servers.a]\ncommand = "{uvx}"\nargs = ["mcp-server-time"]\nsandbox = "standard"\n')
    server = server.servers["a"]
    confinement = sandbox.confine(server, str(uvx), ["mcp-server-time"], None)
    assert confinement is not None
    try:
        argv = confinement.argv[confinement.argv.index("--") + 1 :]
        state, cache = home / ".local" / "state" / "mcp-hub", home / ".local/state/mcp-hub/sandbox-cache/uvx"
        where = {(arg, argv[index + 1]): index for index, arg in enumerate(argv) if arg in ("--bind", "--tmpfs")}
        where |= {(arg, argv[index + 2]): index for index, arg in enumerate(argv) if arg == "--ro-bind"}
        assert where[("--ro-bind", str(home / ".local"))] < where[("--tmpfs", str(state))]  # hidden inside it
        assert where[("--tmpfs", str(state))] < where[("--bind", str(cache))]  # and the cache bound over the hiding
    finally:
        confinement.release()


def test_the_roots_a_table_names_are_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / "docs").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    server = _toml_config(tmp_path, f'roots = ["{home / "docs"}"]\nsandbox = "standard"')
    settled = sandbox_of(server)
    assert settled is not None
    assert _binds(bubblewrap_argv(settled, sys.executable, [], None, server))[str(home / "docs")] == "--ro-bind"


def test_the_servers_own_program_is_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python server: its virtual environment, the Python it was made from and the editable source; a script
    given to an interpreter: its folder; a node server: its node_modules folder."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    server = _toml_config(tmp_path, f'args = ["{INTRUDER}"]\nsandbox = "standard"')
    settled = sandbox_of(server)
    assert settled is not None
    binds = _binds(bubblewrap_argv(settled, sys.executable, [INTRUDER], None, server))
    assert binds[sys.prefix] == "--ro-bind"
    assert binds[str(Path(INTRUDER).parent)] == "--ro-bind"
    everything = ROOT / "tests" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
    assert sandbox.program_paths(str(everything))[0] == ROOT / "tests" / "npm" / "node_modules"


# -- attacks ----------------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder with a key, a note, a project and a work folder, as the hub's $HOME."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    (home / "notes.txt").write_text("private notes")
    (home / "projects").mkdir()
    (home / "projects" / "plan.txt").write_text("the plan")
    (home / "work").mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _hub_config(tmp_path: Path, **intruder: Any) -> Path:
    path = write_config(
        tmp_path / "hub.toml",
        {
            "intruder": {"command": sys.executable, "args": [INTRUDER], **intruder},
            "other": {"command": sys.executable, "args": [FIXTURE, "--name", "other"]},
        },
    )
    with path.open("a") as file:
        file.write(f'\n[sandbox]\nprofile = "standard"\n[audit]\nfile = "{tmp_path / "audit.jsonl"}"\n')
    return path


async def _attempt(client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(f"intruder_{tool}", arguments)
    assert not result.is_error, result
    return dict(result.structured_content or {})


async def _other_serves(client: Any) -> None:
    result = await client.call_tool("other_echo", {"text": "still here"})
    assert result.structured_content == {"text": "still here", "server": "other"}


@attack
async def test_a_server_sees_only_its_folders_and_cannot_write_or_connect_elsewhere(tmp_path: Path, home: Path) -> None:
    from mcp_hub.config import load_config

    config = load_config(_hub_config(tmp_path, sandbox={"read": ["~/projects"], "write": ["~/work"]}))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        async with running_hub(config) as hub, hub_client(hub) as client:
            assert hub.upstreams["intruder"].state == "up", hub.upstreams["intruder"].last_error
            # Reading: the home folder is empty but for what was given; the key is nowhere.
            assert not (await _attempt(client, "read", path=str(home / "notes.txt")))["ok"]
            assert not (await _attempt(client, "read", path=str(home / ".ssh" / "id_ed25519")))["ok"]
            seen = await _attempt(client, "listing", path=str(home))
            assert seen["ok"] and not {"notes.txt", ".ssh"} & set(seen["entries"]), seen
            assert (await _attempt(client, "read", path=str(home / "projects" / "plan.txt")))["text"] == "the plan"

            # Writing: only the write folder reaches the disk.
            assert (await _attempt(client, "write", path=str(home / "work" / "out.txt"), text="made"))["ok"]
            assert (home / "work" / "out.txt").read_text() == "made"
            refused = await _attempt(client, "write", path=str(home / "projects" / "plan.txt"), text="changed")
            assert "Read-only file system" in refused["error"]
            assert "Read-only file system" in (await _attempt(client, "write", path="/usr/evil", text="x"))["error"]
            await _attempt(client, "write", path=str(home / "evil.txt"), text="x")  # its private home, gone after
            await _attempt(client, "write", path=str(tmp_path / "evil.txt"), text="x")  # its private /tmp
            assert (home / "projects" / "plan.txt").read_text() == "the plan"
            assert not (home / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
            assert not Path("/usr/evil").exists()

            # Connecting: nothing on this machine, nothing outside.
            assert not (await _attempt(client, "connect", host="127.0.0.1", port=port))["ok"]
            with pytest.raises(BlockingIOError):
                listener.accept()
            outside = await _attempt(client, "connect", host="192.0.2.1", port=80)
            assert not outside["ok"] and "unreachable" in outside["error"], outside

            who = await _attempt(client, "whoami")
            assert who["home"] == str(home) and who["cwd"] == str(home) and who["pid"] < 10
            await _other_serves(client)
            report = hub.health()["servers"]["intruder"]["sandbox"]
            assert report["status"] == "on" and report["summary"].startswith("standard: no network, 1 GiB")


@attack
@needs_cgroups
async def test_a_thousand_processes_stop_at_the_process_limit_and_the_hub_says_so(tmp_path: Path, home: Path) -> None:
    from mcp_hub.config import load_config

    config = load_config(_hub_config(tmp_path))
    async with running_hub(config) as hub, hub_client(hub) as client:
        bomb = await _attempt(client, "fork", count=1000)
        assert not bomb["ok"] and bomb["started"] < 256 and "Resource temporarily unavailable" in bomb["error"]
        assert (await _attempt(client, "whoami"))["pid"] < 10  # still serving, in its own pid namespace
        await _other_serves(client)
        report = hub.health()["servers"]["intruder"]["sandbox"]
        assert "refused at its process limit" in report["limit_hit"], report


@attack
@needs_cgroups
async def test_a_server_past_its_memory_limit_is_killed_reported_and_restarted(tmp_path: Path, home: Path) -> None:
    from mcp_hub.config import load_config

    config = load_config(_hub_config(tmp_path))
    async with running_hub(config) as hub, hub_client(hub) as client:
        first = (await _attempt(client, "whoami"))["pid"]
        with anyio.fail_after(30), pytest.raises(MCPError) as caught:
            await client.call_tool("intruder_allocate", {"mib": 1536})
        assert caught.value.code == CONNECTION_CLOSED
        await _other_serves(client)
        upstream = hub.upstreams["intruder"]
        await wait_for(lambda: upstream.limit_hit is not None)
        assert "the server was killed for its memory limit (1 GiB)" in (upstream.limit_hit or "")
        await wait_for(lambda: upstream.state == "up", timeout=30)
        assert upstream.restarts >= 1 and (await _attempt(client, "whoami"))["pid"] == first  # its namespace's
        assert "killed for its memory limit" in hub.health()["servers"]["intruder"]["sandbox"]["limit_hit"]
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    (event,) = [line for line in lines if line["outcome"] == "server_limit"]
    assert event["mount"] == "intruder" and event["principal"] == "mcp-hub"
    assert event["reason"] == "the server was killed for its memory limit (1 GiB); restarted"


@pytest.mark.slow
@pytest.mark.real_processes
@pytest.mark.anyio
async def test_without_bubblewrap_a_server_that_asks_for_a_sandbox_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One that only has the hub-wide default runs, unconfined, and says so."""
    from mcp_hub.config import load_config

    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    unavailable.cache_clear()
    try:
        config = load_config(_hub_config(tmp_path, sandbox="standard"))
        hub = Hub(config)
        async with hub.running():
            await hub.wait_settled(20)
            intruder = hub.health()["servers"]["intruder"]
            assert intruder["state"] != "up"
            assert "bubblewrap (bwrap) is not installed: install bubblewrap" in intruder["last_error"]
            assert intruder["sandbox"]["status"] == "refused"
            other = hub.health()["servers"]["other"]
            assert other["state"] == "up"
            assert other["sandbox"]["status"] == "unavailable"
            assert other["sandbox"]["summary"].startswith("UNCONFINED: bubblewrap (bwrap) is not installed")
    finally:
        unavailable.cache_clear()


# -- package runners ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runner", "args", "fetch"),
    [
        ("npx", ["-y", "@scope/server", "--flag"], ["-y", "--package", "@scope/server", "-c", "true"]),
        (
            "npx",
            ["--registry", "https://r.example", "pkg@1.2"],
            ["--registry", "https://r.example", "--package", "pkg@1.2", "-c", "true"],
        ),
        ("npx", ["-y"], None),
        ("uvx", ["mcp-server-time", "--local-timezone", "UTC"], ["--from", "mcp-server-time", "python", "-c", "0"]),
        (
            "uvx",
            ["--from", "git+https://x/y", "serve", "--port", "1"],
            ["--from", "git+https://x/y", "python", "-c", "0"],
        ),
        (
            "uvx",
            ["--python", "3.12", "mcp-server-git"],
            ["--python", "3.12", "--from", "mcp-server-git", "python", "-c", "0"],
        ),
    ],
)
def test_a_package_runner_fetches_the_package_its_arguments_name(
    runner: str, args: list[str], fetch: list[str] | None
) -> None:
    assert sandbox.PACKAGE_RUNNERS[runner].fetch_args(args) == fetch


NPM_LOCK = json.loads((ROOT / "tests" / "npm" / "package-lock.json").read_text())
THINKING = NPM_LOCK["packages"]["node_modules/@modelcontextprotocol/server-sequential-thinking"]["version"]


@pytest.mark.slow
@needs_bubblewrap
@pytest.mark.anyio
async def test_an_npx_server_without_network_runs_from_the_hubs_package_cache(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package is fetched from the npm registry once, with the network but none of the user's files (nor
    the server's variables); the server then runs offline, from the hub's cache, not the user's ~/.npm."""
    from mcp_hub.config import load_config

    package = f"@modelcontextprotocol/server-sequential-thinking@{THINKING}"
    path = write_config(
        tmp_path / "hub.toml",
        {"thinking": {"command": "npx", "args": ["-y", package], "env": {"DISABLE_THOUGHT_LOGGING": "true"}}},
    )
    with path.open("a") as file:
        file.write('\n[sandbox]\nprofile = "standard"\n')
    async with running_hub(load_config(path), settle=90) as hub, hub_client(hub) as client:
        assert hub.upstreams["thinking"].state == "up", (
            hub.upstreams["thinking"].last_error,
            hub.upstreams["thinking"].stderr.lines(),
        )
        tools = [tool.name for tool in (await client.list_tools()).tools]
        assert tools == ["thinking_sequentialthinking"]
    cache = Path(os.environ["XDG_STATE_HOME"]) / "mcp-hub" / "sandbox-cache" / "npx"
    assert (cache / "_npx").is_dir() and not (home / ".npm").exists()


@attack
async def test_a_server_past_its_cpu_time_is_killed_and_said_to_be(tmp_path: Path, home: Path) -> None:
    from mcp_hub.config import load_config

    config = load_config(_hub_config(tmp_path, sandbox={"cpu_seconds": 1}))
    async with running_hub(config) as hub, hub_client(hub) as client:
        with anyio.fail_after(30), pytest.raises(MCPError):
            await client.call_tool("intruder_spin", {"seconds": 5})
        upstream = hub.upstreams["intruder"]
        await wait_for(lambda: upstream.limit_hit is not None)
        assert "the server was killed for its CPU time limit (1 s)" in (upstream.limit_hit or "")
        await _other_serves(client)


def test_the_console_shows_each_servers_sandbox_and_the_last_limit_it_hit() -> None:
    from mcp_hub.admin import pages

    mount = {"state": "up", "transport": "stdio", "restarts": 1, "last_error": None}
    html = pages.mounts(
        {
            "status": "ok",
            "servers": {
                "files": {
                    **mount,
                    "sandbox": {
                        "status": "on",
                        "summary": "standard: no network, 1 GiB, 256 processes",
                        "limit_hit": "the server was killed for its memory limit (1 GiB) at 2026-12-05 10:42:03",
                    },
                },
                "remote": {**mount, "transport": "streamable-http"},
            },
        },
        {},
    )
    assert '<td class="sandbox sandbox-on">standard: no network, 1 GiB, 256 processes<div class="sandbox-limit' in html
    assert "killed for its memory limit (1 GiB) at 2026-12-05 10:42:03" in html
    assert '<td class="sandbox muted">remote</td>' in html


def test_check_says_what_each_stdio_server_runs_in(tmp_path: Path) -> None:
    from tests.harness.cli import mcp_hub

    path = write_config(
        tmp_path / "hub.toml",
        {"a": {"command": sys.executable, "sandbox": "network"}, "b": {"command": sys.executable, "sandbox": "off"}},
    )
    checked = mcp_hub("check", "--config", str(path))
    assert checked.returncode == (0 if unavailable() is None else 1), checked.stderr  # 1: "a" would not start
    lines = checked.stdout.splitlines()
    said = lines[next(index for index, line in enumerate(lines) if line.startswith("  a: stdio")) + 1]
    if unavailable() is None:
        assert said == "    sandbox: network: network, 1 GiB, 256 processes"
    else:  # its own table asks for a sandbox: it would not start
        assert said.startswith("    sandbox: not started: "), said
    assert lines[lines.index("  b: stdio") + 1] == "    sandbox: off: the server runs unconfined"

    nowhere = tmp_path / "nowhere"
    path = write_config(tmp_path / "hub.toml", {"a": {"command": sys.executable, "sandbox": {"write": [str(nowhere)]}}})
    checked = mcp_hub("check", "--config", str(path))
    assert checked.returncode == 1
    if unavailable() is None:  # it would not start, and check says why before it is started
        assert f"  a: stdio: its sandbox: not started: {nowhere} (sandbox write) does not exist" in checked.stdout
