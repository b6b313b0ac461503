"""`mcp-hub init` as a user runs it: a real process, in a folder of its own, for a user whose home folder is a
temporary one (with, for some tests, the config files of the MCP clients it imports from)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_hub.clients import client_config_files
from mcp_hub.config import load_config
from tests.conftest import ROOT, hub_command

GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
CLAUDE_DESKTOP = {
    "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
        "github": {"command": "github-mcp-server", "args": ["stdio"], "env": {"GITHUB_TOKEN": GITHUB_TOKEN}},
    }
}


def mcp_hub(*args: str, home: Path, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """`mcp-hub ARGS` run in `cwd` by a user whose home folder is `home` (and whose config folder is its
    .config, as on Linux without XDG_CONFIG_HOME)."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR", "APPDATA", "PYTHONPATH")
    }
    environment.update(HOME=str(home), **extra)
    return subprocess.run(
        hub_command(*args),
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def snippet(stdout: str) -> dict[str, object]:
    """The Claude Desktop entry `init` prints (the JSON object after "Claude Desktop")."""
    start = stdout.index("{", stdout.index("Claude Desktop"))
    decoded, _ = json.JSONDecoder().raw_decode(stdout[start:])
    return decoded["mcpServers"]["hub"]


def test_init_writes_a_starter_config_in_the_users_config_folder_that_checks(home: Path, cwd: Path) -> None:
    result = mcp_hub("init", home=home, cwd=cwd)
    assert result.returncode == 0, result.stderr
    folder = home / ".config" / "mcp-hub"
    config = folder / "hub.toml"
    assert f"wrote {config} (servers: notes, time)" in result.stdout  # mcp-server-time is beside this Python
    assert sorted(path.name for path in (folder / "policies").iterdir()) == sorted(
        path.name for path in (ROOT / "policies").iterdir()
    )
    assert list(cwd.iterdir()) == []  # nothing beside the user's files

    loaded = load_config(config)
    assert set(loaded.servers) == {"notes", "time"}
    assert loaded.policy.dir == "policies" and loaded.policy.pins is True and loaded.audit.file is True

    # what to do next: the command that runs this hub, by absolute path, from any folder
    entry = snippet(result.stdout)
    assert entry == {
        "command": sys.executable,
        "args": ["-m", "mcp_hub", "serve", "--config", str(config)],
    }
    assert f"check --connect --config {config}" in result.stdout

    checked = mcp_hub("check", "--config", str(config), home=home, cwd=cwd)
    assert checked.returncode == 0, checked.stderr
    assert "2 server(s) enabled" in checked.stdout and "policies: ok" in checked.stdout

    # without --config, from a folder with no hub.toml: the one init wrote
    found = mcp_hub("check", home=home, cwd=cwd)
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith(f"{config}: ok, 2 server(s) enabled")
    (cwd / "hub.toml").write_text('[servers.here]\ncommand = "mcp-hub-example-notes"\n', encoding="utf-8")
    local = mcp_hub("check", home=home, cwd=cwd)  # a hub.toml in the folder comes first
    assert local.stdout.startswith("hub.toml: ok, 1 server(s) enabled"), local.stderr


def test_without_a_config_anywhere_the_error_says_to_run_init(home: Path, cwd: Path) -> None:
    missing = mcp_hub("check", home=home, cwd=cwd)
    assert missing.returncode == 2
    assert (
        missing.stderr
        == "error: hub.toml: file not found; create it (`mcp-hub init` writes one), or pass --config PATH\n"
    )


def test_init_writes_into_dir_and_refuses_to_overwrite_a_hub_toml(home: Path, cwd: Path) -> None:
    first = mcp_hub("init", "--dir", "hub", home=home, cwd=cwd)
    assert first.returncode == 0, first.stderr
    config = cwd / "hub" / "hub.toml"
    assert f"wrote {config} " in first.stdout  # the absolute path of the relative --dir
    written = config.read_text(encoding="utf-8")

    again = mcp_hub("init", "--dir", str(cwd / "hub"), home=home, cwd=cwd)
    assert again.returncode == 2
    assert f"error: {config}: exists already" in again.stderr and "--force" in again.stderr
    assert "Traceback" not in again.stderr
    assert config.read_text(encoding="utf-8") == written

    # --force replaces hub.toml, keeps the old one beside it, and leaves the policies as the user edited them
    edited = cwd / "hub" / "policies" / "settings.toml"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    config.write_text(written + "\n# mine\n", encoding="utf-8")
    forced = mcp_hub("init", "--dir", "hub", "--force", home=home, cwd=cwd)
    assert forced.returncode == 0, forced.stderr
    assert (cwd / "hub" / "hub.toml.bak").read_text(encoding="utf-8") == written + "\n# mine\n"
    assert config.read_text(encoding="utf-8") == written
    assert edited.read_text(encoding="utf-8").endswith("# edited\n")
    assert "kept" in forced.stdout and "policies" in forced.stdout


def test_init_from_claude_desktop_imports_its_servers_without_their_secrets(home: Path, cwd: Path) -> None:
    claude = home / ".config" / "Claude" / "claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    claude.write_text(json.dumps(CLAUDE_DESKTOP), encoding="utf-8")

    result = mcp_hub("init", "--from", "claude", home=home, cwd=cwd)
    assert result.returncode == 0, result.stderr
    config = home / ".config" / "mcp-hub" / "hub.toml"
    assert f"imported the servers of {claude}" in result.stdout
    text = config.read_text(encoding="utf-8")
    assert GITHUB_TOKEN not in text and GITHUB_TOKEN not in result.stdout
    loaded = load_config(config, environ={"GITHUB_TOKEN": "x"})
    assert set(loaded.servers) == {"files", "github"}  # no example servers beside the imported ones
    assert loaded.servers["github"].env == {"GITHUB_TOKEN": "x"}
    assert loaded.policy.pins is True and (config.parent / "policies" / "profiles.toml").is_file()

    entry = snippet(result.stdout)
    assert entry["env"] == {"GITHUB_TOKEN": "<the value of GITHUB_TOKEN>"}
    assert entry["args"] == ["-m", "mcp_hub", "serve", "--config", str(config)]
    assert "starts each twice" in result.stdout  # take the servers out of Claude Desktop's own list


def test_init_from_two_clients_keeps_their_secrets_apart(home: Path, cwd: Path) -> None:
    claude = home / ".config" / "Claude" / "claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    claude.write_text(json.dumps({"mcpServers": {"a": {"command": "a", "env": {"API_KEY": "one-1"}}}}), "utf-8")
    cursor = home / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text(json.dumps({"mcpServers": {"b": {"command": "b", "env": {"API_KEY": "two-2"}}}}), "utf-8")

    result = mcp_hub("init", "--from", "claude", "--from", "cursor", home=home, cwd=cwd)
    assert result.returncode == 0, result.stderr
    config = home / ".config" / "mcp-hub" / "hub.toml"
    loaded = load_config(config, environ={"API_KEY": "1", "B_API_KEY": "2"})
    assert loaded.servers["a"].env == {"API_KEY": "1"} and loaded.servers["b"].env == {"API_KEY": "2"}
    assert snippet(result.stdout)["env"] == {
        "API_KEY": "<the value of API_KEY>",
        "B_API_KEY": "<the value of B_API_KEY>",
    }
    assert "one-1" not in config.read_text(encoding="utf-8") + result.stdout


def test_init_says_where_it_cannot_write(home: Path, cwd: Path) -> None:
    (cwd / "taken").write_text("a file, not a folder", encoding="utf-8")
    result = mcp_hub("init", "--dir", "taken/hub", home=home, cwd=cwd)
    assert result.returncode == 2
    assert f"error: {cwd / 'taken' / 'hub'}: cannot write there" in result.stderr and "--dir" in result.stderr
    assert "Traceback" not in result.stderr


def test_init_from_claude_code_reads_the_projects_file_then_the_users(home: Path, cwd: Path) -> None:
    project = {"mcpServers": {"db": {"command": "db-mcp", "args": ["--project"]}}}
    user = {
        "numStartups": 3,
        "projects": {str(cwd): {"mcpServers": {}}},
        "mcpServers": {"db": {"command": "db-mcp"}, "search": {"type": "http", "url": "https://example.com/mcp"}},
    }
    (cwd / ".mcp.json").write_text(json.dumps(project), encoding="utf-8")
    (home / ".claude.json").write_text(json.dumps(user), encoding="utf-8")
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"web": {"command": "w"}}}), "utf-8")

    result = mcp_hub("init", "--from", "claude-code", "--dir", "hub", home=home, cwd=cwd)
    assert result.returncode == 0, result.stderr
    loaded = load_config(cwd / "hub" / "hub.toml")
    assert set(loaded.servers) == {"db", "search"}
    assert list(loaded.servers["db"].args) == ["--project"]  # the project's own wins, as in Claude Code
    assert "left out server 'db'" in result.stdout
    # another client's servers: how to add them too
    assert f"import {home / '.cursor' / 'mcp.json'} --output {cwd / 'hub' / 'hub.toml'}" in result.stdout

    # a user-scope file without servers is passed over; a client with none at all is an error, nothing written
    (cwd / ".mcp.json").unlink()
    (home / ".claude.json").write_text(json.dumps({"numStartups": 3}), encoding="utf-8")
    missing = mcp_hub("init", "--from", "claude-code", "--dir", "other", home=home, cwd=cwd)
    assert missing.returncode == 2, missing.stdout
    assert "error: --from claude-code: found no Claude Code config with MCP servers" in missing.stderr
    assert str(home / ".claude.json") in missing.stderr
    assert not (cwd / "other").exists()


def test_init_names_a_client_file_it_cannot_read(home: Path, cwd: Path) -> None:
    broken = home / ".codeium" / "windsurf" / "mcp_config.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"mcpServers": {"a": {"command": "x"}', encoding="utf-8")
    result = mcp_hub("init", "--from", "windsurf", home=home, cwd=cwd)
    assert result.returncode == 2
    assert f"error: {broken}: invalid JSON at line 1" in result.stderr
    assert not (home / ".config" / "mcp-hub").exists()


@pytest.mark.parametrize(
    ("platform", "environ", "expected"),
    [
        ("linux", {}, "/home/u/.config/Claude/claude_desktop_config.json"),
        ("linux", {"XDG_CONFIG_HOME": "/cfg"}, "/cfg/Claude/claude_desktop_config.json"),
        ("darwin", {}, "/home/u/Library/Application Support/Claude/claude_desktop_config.json"),
        ("win32", {"APPDATA": "/appdata"}, "/appdata/Claude/claude_desktop_config.json"),
    ],
)
def test_claude_desktop_keeps_its_config_in_the_platforms_application_data(
    platform: str, environ: dict[str, str], expected: str
) -> None:
    files = client_config_files("claude", home=Path("/home/u"), cwd=Path("/w"), platform=platform, environ=environ)
    assert files == [Path(expected)]


def test_where_the_other_clients_keep_their_servers() -> None:
    def files(client: str, platform: str = "linux") -> list[str]:
        found = client_config_files(client, home=Path("/h"), cwd=Path("/w"), platform=platform, environ={})
        return [str(path) for path in found]

    assert files("claude-code") == ["/w/.mcp.json", "/h/.claude.json"]
    assert files("cursor", "darwin") == ["/w/.cursor/mcp.json", "/h/.cursor/mcp.json"]
    assert files("vscode", "darwin") == [
        "/w/.vscode/mcp.json",
        "/h/Library/Application Support/Code/User/mcp.json",
        "/h/Library/Application Support/Code/User/settings.json",
    ]
    assert files("windsurf", "win32") == ["/h/.codeium/windsurf/mcp_config.json"]
