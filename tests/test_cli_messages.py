"""What a newcomer sees in the first hour: a busy port, a command not installed, a variable not set, several
mistakes in one file, where the hub serves, and every option's help. The `mcp-hub` command is run as a user
runs it: a real process, real config files, real servers."""

from __future__ import annotations

import argparse
import json
import os
import pty
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO

import pytest

from mcp_hub.cli import _parser
from tests.conftest import ROOT, fixture_server, free_port, hub_command, hub_environment, write_config

pytestmark = pytest.mark.slow


def mcp_hub(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(hub_command(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def serving(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        hub_command("serve", *args),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def read_until(stream: IO[str], pattern: str, seconds: float = 30) -> tuple[re.Match[str] | None, list[str]]:
    """The first line of `stream` that matches `pattern` (and the lines read), or None at its end or after
    `seconds` (the lines are read by a thread, so that a process that says nothing does not block the test)."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
            if re.search(pattern, line):
                return
        lines.put("")

    threading.Thread(target=read, daemon=True).start()
    read_lines: list[str] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if not line:
            break
        read_lines.append(line)
        found = re.search(pattern, line)
        if found:
            return found, read_lines
    return None, read_lines


def stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    try:
        _, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
    return err


def without_uv(tmp_path: Path) -> dict[str, str]:
    """The environment with a PATH that holds no `uvx` (nor anything else)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return {**os.environ, "PATH": str(empty)}


# -- 1. a busy port ----------------------------------------------------------------------------


def test_a_busy_port_is_one_line_naming_the_address_and_the_fix(tmp_path: Path) -> None:
    config = write_config(tmp_path / "hub.toml", {"a": fixture_server("a")}, catalog_snapshot=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = mcp_hub("serve", "--transport", "http", "--port", str(port), "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"error: {config}: http.port: 127.0.0.1:{port} is in use by another program; stop that program, or serve "
        "on another port with `--port PORT` or [http] port"
    ]


# -- 2 and 8. a command not found --------------------------------------------------------------


def test_check_without_connecting_reports_a_command_not_found(tmp_path: Path) -> None:
    config = write_config(tmp_path / "hub.toml", {"time": {"command": "uvx", "args": ["mcp-server-time"]}})
    result = mcp_hub("check", "--config", str(config), env=without_uv(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("  time: ")]
    assert line.startswith("  time: stdio: command not found: uvx is neither beside the hub's Python (")
    assert f"nor on PATH ({tmp_path / 'empty-bin'})" in line
    assert line.endswith("uvx comes with uv (https://docs.astral.sh/uv/): install it, or write the command's full path")


def test_a_command_not_found_is_said_plainly_by_check_connect_and_tools(tmp_path: Path) -> None:
    servers = {"ok": fixture_server("ok"), "web": {"command": "npx", "args": ["-y", "some-server"]}}
    config = write_config(tmp_path / "hub.toml", servers, catalog_snapshot=False)
    env = {**without_uv(tmp_path), "PATH": f"{tmp_path / 'empty-bin'}"}
    checked = mcp_hub("check", "--connect", "--config", str(config), env=env)
    assert checked.returncode == 1
    assert "FileNotFoundError" not in checked.stdout + checked.stderr
    (line,) = [line for line in checked.stdout.splitlines() if line.startswith("  web: ")]
    assert line.startswith("  web: down: command not found: npx is neither beside the hub's Python")
    assert "npx comes with Node.js" in line
    listed = mcp_hub("tools", "--config", str(config), env=env)
    assert listed.returncode == 1
    assert "ok_echo" in listed.stdout
    assert "warning: server 'web' is down: command not found: npx" in listed.stderr


def test_a_command_not_found_is_logged_once_and_the_server_stays_down_with_the_reason(tmp_path: Path) -> None:
    port = free_port()
    servers = {"ok": fixture_server("ok"), "time": {"command": "mcp-hub-no-such-server"}}
    config = write_config(tmp_path / "hub.toml", servers, catalog_snapshot=False)
    hub = serving("--transport", "http", "--port", str(port), "--config", str(config))
    try:
        assert hub.stderr is not None
        ready, lines = read_until(hub.stderr, r"serving http://")
        assert ready is not None, lines
        time.sleep(1)  # the old loop tried again after 0.5 s (then 1 and 2 more), logging each time
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            report = json.load(response)
    finally:
        err = "".join(lines) + stop(hub)
    assert report["servers"]["time"]["state"] == "down"
    assert report["servers"]["time"]["last_error"].startswith("command not found: mcp-hub-no-such-server")
    assert err.count("command not found: mcp-hub-no-such-server") == 1, err
    assert "server 'time': reconnecting" not in err


# -- 3. a server that exits -------------------------------------------------------------------


def test_a_server_that_exits_is_said_to_be_down_with_its_exit_status(tmp_path: Path) -> None:
    servers = {
        "crash": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
        "killed": {
            "command": sys.executable,
            "args": ["-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
        },
    }
    config = write_config(tmp_path / "hub.toml", servers, catalog_snapshot=False)
    checked = mcp_hub("check", "--connect", "--config", str(config))
    assert checked.returncode == 1
    lines = checked.stdout.splitlines()
    assert "  crash: down: Connection closed: the server exited with status 3" in lines, lines
    assert "  killed: down: Connection closed: the server was killed by signal SIGKILL" in lines, lines
    listed = mcp_hub("tools", "--config", str(config))
    assert "warning: server 'crash' is down: Connection closed: the server exited with status 3" in listed.stderr


# -- 4. a variable not set ---------------------------------------------------------------------


def test_an_unset_variable_disables_its_server_only_and_says_so_everywhere(tmp_path: Path) -> None:
    port = free_port()
    servers = {
        "ok": fixture_server("ok"),
        "gh": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${HUB_TEST_UNSET_TOKEN}"}},
    }
    config = write_config(tmp_path / "hub.toml", servers, catalog_snapshot=False)
    reason = (
        f"{config}: servers.gh.headers.Authorization: environment variable HUB_TEST_UNSET_TOKEN is not set; "
        "export it, set it in a dotenv file named by [hub] env_file, or write ${HUB_TEST_UNSET_TOKEN:-default}; "
        "server 'gh' is disabled until it is set"
    )
    checked = mcp_hub("check", "--config", str(config))
    assert checked.returncode == 1
    assert f"  gh: streamable-http, or sse if refused: disabled: {reason}" in checked.stdout.splitlines()
    connected = mcp_hub("check", "--connect", "--config", str(config))
    assert f"  gh: disabled: {reason}" in connected.stdout.splitlines()
    assert any(line.startswith("  ok: up") for line in connected.stdout.splitlines())
    listed = mcp_hub("tools", "--config", str(config))
    assert f"warning: server 'gh' is disabled: {reason}" in listed.stderr.splitlines()
    assert "ok_echo" in listed.stdout
    hub = serving("--transport", "http", "--port", str(port), "--config", str(config))
    try:
        assert hub.stderr is not None
        ready, lines = read_until(hub.stderr, r"serving (\S+): (\d+)/(\d+) servers up, (\d+) tools")
        assert ready is not None, lines
        assert ready.groups()[:3] == (f"http://127.0.0.1:{port}/mcp", "1", "2")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            report = json.load(response)
    finally:
        stop(hub)
    assert report["status"] == "degraded"
    assert report["servers"]["gh"]["state"] == "disabled"
    assert report["servers"]["gh"]["last_error"] == reason
    assert report["servers"]["ok"]["state"] == "up"


def test_the_env_file_holds_the_secrets_of_a_hub_started_without_a_shell(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"HUB_TEST_PYTHON={sys.executable}\n", encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"py": {"command": "${HUB_TEST_PYTHON}"}}, env_file=".env")
    result = mcp_hub("check", "--config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  py: stdio" in result.stdout.splitlines()


# -- 5. every problem at once ------------------------------------------------------------------


def test_check_reports_every_problem_of_the_file_at_once(tmp_path: Path) -> None:
    config = tmp_path / "hub.toml"
    config.write_text('[http]\nport = "8765"\n[hub]\nlog_levl = "info"\n[servers.a]\ntimeout = 0\ncommand = "a"\n')
    result = mcp_hub("check", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {config}: 3 problems; fix each:",
        f"  {config}: hub.log_levl: unknown key 'log_levl'; did you mean 'log_level'?",
        f"  {config}: http.port: must be a valid integer, got a string; remove the quotes",
        f"  {config}: servers.a.timeout: must be greater than 0, got 0 (a number); fix the value",
    ]


# -- 6. where the hub serves -------------------------------------------------------------------


def test_get_slash_points_to_the_mcp_endpoint_and_healthz(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "hub.toml", {"ok": fixture_server("ok")}, catalog_snapshot=False)
    hub = serving("--transport", "http", "--port", str(port), "--config", str(config))
    try:
        assert hub.stderr is not None
        ready, lines = read_until(hub.stderr, r"serving \S+: 1/1 servers up, \d+ tools")
        assert ready is not None, lines
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
            home = json.load(response)
    finally:
        stop(hub)
    assert home["mcp"] == "/mcp" and home["health"] == "/healthz"
    assert "connect an MCP client to /mcp" in home["message"]


@pytest.mark.real_processes  # a forked hub at a terminal once outlasted SIGTERM's 20 s
def test_serving_stdio_at_a_terminal_says_it_waits_for_a_client(tmp_path: Path) -> None:
    config = write_config(tmp_path / "hub.toml", {}, catalog_snapshot=False)
    leader, follower = pty.openpty()
    hub = subprocess.Popen(
        hub_command("serve", "--config", str(config)),
        cwd=ROOT,
        stdin=follower,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=hub_environment(),
    )
    os.close(follower)
    try:
        assert hub.stderr is not None
        said, lines = read_until(hub.stderr, r"waiting for an MCP client on stdin")
        assert said is not None, lines
        assert "mcp-hub serve --transport http" in said.string
    finally:
        stop(hub)
        os.close(leader)


# -- 7. help -----------------------------------------------------------------------------------


def test_every_option_has_help() -> None:
    def walk(parser: argparse.ArgumentParser, where: str) -> list[str]:
        missing = []
        for action in parser._actions:
            if action.help is None:
                missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    missing += walk(sub, f"{where} {name}")
        return missing

    assert walk(_parser(), "mcp-hub") == []


@pytest.mark.parametrize("command", ["serve", "check", "tools"])
def test_help_describes_transport_and_config(command: str) -> None:
    result = mcp_hub(command, "--help")
    assert result.returncode == 0
    assert "the hub's config file" in result.stdout
    if command == "serve":
        assert "streamable HTTP" in result.stdout
