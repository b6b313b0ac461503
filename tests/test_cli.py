"""The `mcp-hub` command as a user runs it: a real process, real config files, real servers."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mcp_hub.catalog.snapshot import fingerprint
from mcp_hub.config import load_config
from tests.conftest import ROOT, fixture_server, hub_command, script_server, write_config
from tests.harness.cli import mcp_hub
from tests.servers.fixture import BASE_TOOLS

pytestmark = pytest.mark.slow


def test_version_is_the_one_pyproject_toml_gives() -> None:
    """`--version` reads the installed distribution's version: pyproject.toml's, written nowhere else."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    result = mcp_hub("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"mcp-hub {version}\n"


def test_the_shipped_config_connects_on_a_fresh_install() -> None:
    result = mcp_hub("check", "--connect")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "notes: up" in result.stdout
    assert "time: up" in result.stdout


def test_check_names_file_key_and_fix(tmp_path: Path) -> None:
    config = tmp_path / "hub.toml"
    config.write_text('[servers.a]\ncomand = "x"\n', encoding="utf-8")
    result = mcp_hub("check", "--config", str(config))
    assert result.returncode == 2
    assert str(config) in result.stderr
    assert "servers.a" in result.stderr
    assert "did you mean 'command'" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_reports_a_missing_file_and_a_missing_variable(tmp_path: Path) -> None:
    missing = mcp_hub("check", "--config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "file not found" in missing.stderr

    config = tmp_path / "hub.toml"
    config.write_text('[servers.a]\ncommand = "x"\nenv = { TOKEN = "${HUB_TEST_UNSET_TOKEN}" }\n', encoding="utf-8")
    result = mcp_hub("check", "--config", str(config))
    assert result.returncode == 1  # the server is disabled, which check says; the file is usable
    assert "servers.a.env.TOKEN" in result.stdout and "HUB_TEST_UNSET_TOKEN" in result.stdout


def test_check_connect_fails_when_a_server_cannot_start(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "hub.toml", {"ok": fixture_server("ok"), "bad": fixture_server("bad", "--exit-on-start")}
    )
    result = mcp_hub("check", "--config", str(config), "--connect")
    assert result.returncode == 1
    assert "ok: up" in result.stdout
    assert "bad: down" in result.stdout


def test_check_connect_says_what_it_waited_for_and_what_the_server_wrote(tmp_path: Path) -> None:
    hang = "import sys, time; print('hang: loading the model', file=sys.stderr, flush=True); time.sleep(1000)"
    crash = (
        "import os, sys; print('crash: no such file: /etc/crash.json', file=sys.stderr); "
        "print('crash: token', os.environ['API_TOKEN'], 'and', 'ghp_' + 36 * 'a', file=sys.stderr); sys.exit(3)"
    )
    servers = {
        "hang": {"command": sys.executable, "args": ["-c", hang], "connect_timeout": 2},
        "crash": {
            "command": sys.executable,
            "args": ["-c", crash],
            "connect_timeout": 2,
            "env": {"API_TOKEN": "tok-0123456789-secret"},
        },
    }
    config = write_config(tmp_path / "hub.toml", servers)
    result = mcp_hub("check", "--config", str(config), "--connect")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("  hang: ") and "no answer to initialize within 2s" in line for line in lines), lines
    assert "    stderr: hang: loading the model" in lines
    assert any(line.startswith("    stderr: crash: no such file: /etc/crash.json") for line in lines), lines
    # what check shows is masked as the console masks it: the mount's secret values and known secret formats
    tokens = [line for line in lines if line.startswith("    stderr: crash: token")]
    assert tokens and all(line.count("[REDACTED") == 2 for line in tokens), tokens
    assert "tok-0123456789-secret" not in result.stdout and "ghp_" not in result.stdout, tokens
    assert "crash: no such file" in result.stderr  # still passed on to the hub's own stderr


def test_check_connect_shows_what_a_server_refused_and_what_it_listed_wrong(tmp_path: Path) -> None:
    servers = {
        "p": script_server(str(ROOT / "tests" / "servers" / "partial.py")),
        "s": script_server(str(ROOT / "tests" / "servers" / "sloppy.py")),
    }
    config = write_config(tmp_path / "hub.toml", servers)
    result = mcp_hub("check", "--config", str(config), "--connect")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("  p: up (stdio") and "1 tools" in line for line in lines), lines
    assert "    refused resources/templates/list: Method not found (-32601)" in lines
    assert any(line.startswith("  s: up (stdio") and "2 tools" in line for line in lines), lines
    assert "    skipped tool 'stringly' (item 3): inputSchema: Input should be a valid dictionary" in lines
    assert "    skipped resource (item 2): uri: Field required" in lines


def test_tools_prints_the_merged_catalog(tmp_path: Path) -> None:
    config = write_config(tmp_path / "hub.toml", {"a": fixture_server("a"), "b": fixture_server("b")})
    result = mcp_hub("tools", "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    catalog = json.loads(result.stdout)
    names = {tool["name"] for tool in catalog["tools"]}
    assert {"a_echo", "b_echo"} <= names and len(names) == 2 * len(BASE_TOOLS)
    assert {r["uri"] for r in catalog["resources"]} >= {"a+fixture://notes/1", "b+fixture://blob"}
    assert [t["uriTemplate"] for t in catalog["resourceTemplates"]] == [
        "a+fixture://notes/{id}",
        "b+fixture://notes/{id}",
    ]

    text = mcp_hub("tools", "--config", str(config))
    assert "a_echo  Echo the text back" in text.stdout


def test_tools_lists_what_the_servers_offer_now_not_the_catalog_snapshot(tmp_path: Path) -> None:
    """A server that once listed `ghost` and now fails to start: its remembered tools are not reported."""
    config = write_config(
        tmp_path / "hub.toml", {"a": fixture_server("a", "--exit-on-start")}, catalog_snapshot="catalog.json"
    )
    remembered = {"fingerprint": fingerprint(load_config(config).servers["a"]), "tools": [GHOST]}
    snapshot = tmp_path / "catalog.json"
    snapshot.write_text(json.dumps({"version": 1, "mounts": {"a": remembered}}), encoding="utf-8")
    result = mcp_hub("tools", "--config", str(config), "--json")
    assert result.returncode == 1
    assert "server 'a' is down" in result.stderr
    assert json.loads(result.stdout)["tools"] == []
    assert json.loads(snapshot.read_text(encoding="utf-8"))["mounts"]["a"]["tools"] == [GHOST]  # left as it was


GHOST = {"name": "ghost", "inputSchema": {"type": "object"}}


def test_import_converts_a_claude_desktop_config(tmp_path: Path) -> None:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "My Files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]},
                    "github": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "ghp_secret123"}},
                    "remote": {"url": "https://example.com/mcp", "type": "sse"},
                }
            }
        ),
        encoding="utf-8",
    )
    output = tmp_path / "hub.toml"
    result = mcp_hub("import", str(source), "--output", str(output))
    assert result.returncode == 0, result.stderr
    written = output.read_text(encoding="utf-8")
    assert "ghp_secret123" not in written
    assert "[servers.my-files]" in written and "[servers.remote]" in written
    assert "GITHUB_TOKEN" in result.stderr  # told to export it

    checked = subprocess.run(
        hub_command("check", "--config", str(output)),
        capture_output=True,
        text=True,
        timeout=60,
        env={"GITHUB_TOKEN": "x", "PATH": "/usr/bin:/bin"},
    )
    assert checked.returncode == 1, checked.stderr  # the file is usable; gh-mcp is not installed
    assert checked.stderr == "" and "3 server(s) enabled" in checked.stdout
    assert "  github: stdio: command not found: gh-mcp is neither beside the hub's Python" in checked.stdout


def test_import_rejects_a_file_without_servers(tmp_path: Path) -> None:
    source = tmp_path / "x.json"
    source.write_text('{"other": {}}', encoding="utf-8")
    result = mcp_hub("import", str(source))
    assert result.returncode == 2
    assert str(source) in result.stderr and "mcpServers" in result.stderr


def _with_policies(tmp_path: Path) -> Path:
    """A copy of the shipped hub.toml and policies (the hub.toml names ./policies)."""
    import shutil

    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    config = tmp_path / "hub.toml"
    shutil.copy(ROOT / "hub.toml", config)
    return config


def test_check_validates_the_policies(tmp_path: Path) -> None:
    config = _with_policies(tmp_path)
    good = mcp_hub("check", "--config", str(config))
    assert good.returncode == 0, good.stderr
    assert "policies: ok, revision" in good.stdout

    broken = tmp_path / "policies" / "profiles.toml"
    broken.write_text(
        broken.read_text(encoding="utf-8")
        + '\n[[profiles.admin.rules]]\neffect = "allow"\ntools = ["x/y"]\nrate = "3/minit"\n'
    )
    bad = mcp_hub("check", "--config", str(config))
    assert bad.returncode == 2
    assert "profiles.toml" in bad.stderr and "rate" in bad.stderr and "line" in bad.stderr


def test_explain_names_the_deciding_rule(tmp_path: Path) -> None:
    config = _with_policies(tmp_path)
    confirm = mcp_hub("explain", "--config", str(config), "--principal", "stdio", "--tool", "notes_delete_note")
    assert confirm.returncode == 0, confirm.stderr
    assert "Outcome: CONFIRM by rule 'destructive'" in confirm.stdout
    stranger = mcp_hub("explain", "--config", str(config), "--principal", "stranger", "--tool", "notes/list_notes")
    assert "Outcome: DENIED" in stranger.stdout
    bad_args = mcp_hub("explain", "--config", str(config), "--principal", "stdio", "--tool", "notes/x", "--args", "[")
    assert bad_args.returncode == 2 and "--args" in bad_args.stderr


def test_explain_finds_what_the_hub_would_find_with_its_phone_regions(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "policy.toml").write_text(
        '[principals]\n"*" = "agent"\n[profiles.agent]\ndefault = "allow"\n'
        '[[profiles.agent.guards]]\nid = "no-personal"\ndetect = ["personal"]\naction = "redact"\n',
        encoding="utf-8",
    )
    config = tmp_path / "hub.toml"
    config.write_text(
        '[servers.notes]\ncommand = "notes"\n[policy]\ndir = "policies"\n[guardrails]\nregions = ["GB"]\n',
        encoding="utf-8",
    )
    args = ("explain", "--config", str(config), "--principal", "stdio", "--tool", "notes/add_note", "--args")
    done = mcp_hub(*args, '{"note": "call 07911 123456"}')
    assert done.returncode == 0, done.stderr
    assert "argument note: phone (phone) -> redact by no-personal" in done.stdout
    assert "123456" not in done.stdout


def test_connections_lists_the_clients_people_allowed_and_withdraw_forgets_one_keeping_the_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `mode = "user"` servers sharing a token file that holds alice's sign-in and the consents people gave
    (one written before the hub kept their time): `connections` lists them after the sign-ins, one line per
    person, server and client, with how many browsers and never which; `withdraw` forgets a client's consent
    in every browser and leaves the tokens."""
    from cryptography.fernet import Fernet

    from mcp_hub.credentials.connections import Connection, ConnectionStore, new_key

    key, path, issuer = new_key(), tmp_path / "connections", "https://sso.example.com/realms/acme"
    monkeypatch.setenv("TOKEN_KEY", key)
    auth = {
        "mode": "user",
        "issuer": issuer,
        "client_id": "mcp-hub",
        "client_secret": "tracker-client-secret",
        "redirect_uri": "http://127.0.0.1:8765/oauth/callback",
        "token_key": "${TOKEN_KEY}",
        "token_store": str(path),
    }
    servers = {name: {"url": f"https://{name}.example.com/mcp", "auth": auth} for name in ("tracker", "wiki")}
    config_path = write_config(tmp_path / "hub.toml", servers)
    with config_path.open("a", encoding="utf-8") as file:
        file.write('\n[audit]\nfile = "audit.jsonl"\n')
    config = str(config_path)
    browsers = [f"{n}" * 64 for n in "abcd"]  # as the hub keeps them: the SHA-256 of each browser's cookie
    old = {"connections": [], "consents": [["carol", "cursor", "tracker", browsers[3]]]}
    path.write_bytes(Fernet(key.encode()).encrypt(json.dumps(old).encode()))
    store = ConnectionStore(path, key)
    store.put(Connection("alice", "tracker", issuer, "access-token-of-alice", None, "Bearer", None, "tracker"))
    store.consent("alice", "cursor", "tracker", browsers[0])
    store.consent("alice", "cursor", "tracker", browsers[1])
    store.consent("alice", "claude-desktop", "tracker", browsers[0])
    store.consent("bob", "cursor", "wiki", browsers[2])

    listed = mcp_hub("connections", "--config", config)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == f"alice\ttracker\t{issuer}\tno expiry\ttracker"
    section = lines.index("clients allowed (principal, server, client, when, browsers):")
    consents = [line.split("\t") for line in lines[section + 1 :]]
    assert [(p, s, c, n) for p, s, c, _, n in consents] == [
        ("alice", "tracker", "claude-desktop", "1 browser(s)"),
        ("alice", "tracker", "cursor", "2 browser(s)"),
        ("carol", "tracker", "cursor", "1 browser(s)"),
        ("bob", "wiki", "cursor", "1 browser(s)"),
    ]
    assert consents[1][3].startswith("allowed 20") and consents[1][3].endswith(" UTC")
    assert consents[2][3] == "allowed (time not recorded)"
    assert not any(browser[:8] in listed.stdout for browser in browsers)
    mine = mcp_hub("connections", "--config", config, "--principal", "alice", "--client", "cursor").stdout
    assert mine.splitlines()[-1].startswith("alice\ttracker\tcursor\t") and "claude-desktop" not in mine

    no_client = mcp_hub("connections", "withdraw", "--config", config, "--principal", "alice")
    assert no_client.returncode == 2 and "--client" in no_client.stderr
    withdrawn = mcp_hub("connections", "withdraw", "--config", config, "--principal", "alice", "--client", "cursor")
    assert withdrawn.returncode == 0, withdrawn.stderr
    assert withdrawn.stdout.startswith("withdrawn: alice's consent for cursor at tracker (2 browser(s))")
    assert not store.consented("alice", "cursor", "tracker")
    assert store.consented("alice", "claude-desktop", "tracker") and store.consented("carol", "cursor", "tracker")
    assert [(r.principal, r.access_token) for r in store.list()] == [("alice", "access-token-of-alice")]
    again = mcp_hub("connections", "withdraw", "--config", config, "--principal", "alice", "--client", "cursor")
    assert again.returncode == 0 and "nothing to withdraw" in again.stdout

    elsewhere = ("connections", "withdraw", "--config", config, "--principal", "bob", "--client", "cursor")
    assert "nothing to withdraw" in mcp_hub(*elsewhere, "--server", "tracker").stdout
    assert mcp_hub(*elsewhere, "--server", "wiki").stdout.startswith("withdrawn: bob's consent for cursor at wiki")
    assert [(c.principal, c.client) for c in store.list_consents()] == [
        ("alice", "claude-desktop"),
        ("carol", "cursor"),
    ]
    # Each consent withdrawn is audited as the admin console audits its own, by the system user, via "cli".
    audited = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(e["method"], e["mount"], e["arguments"], e["outcome"], e["via"]) for e in audited] == [
        ("admin/connections/withdraw", "tracker", {"principal": "alice", "client": "cursor"}, "withdrawn", "cli"),
        ("admin/connections/withdraw", "wiki", {"principal": "bob", "client": "cursor"}, "withdrawn", "cli"),
    ]
    assert {e["principal"] for e in audited} == {f"admin:{getpass.getuser()}"}
    assert "2 browser(s)" in audited[0]["reason"]
    assert f"withdrawn by the administrator {getpass.getuser()!r}" in audited[0]["reason"]


def test_explain_reads_every_public_form_of_a_resource() -> None:
    from mcp_hub.cli import _split_target

    assert _split_target("resource", "notes+notes://index") == ("notes", "notes://index")
    assert _split_target("resource", "notes/notes://index") == ("notes", "notes://index")
    assert _split_target("resource", "ui://apps+demo/app.html") == ("apps", "ui://demo/app.html")
    assert _split_target("resource", "skill://docs/pdf/SKILL.md") == ("docs", "skill://pdf/SKILL.md")
    assert _split_target("resource", "docs/skill://pdf/SKILL.md") == ("docs", "skill://pdf/SKILL.md")


def test_the_command_runs_with_the_collector_on_and_what_it_loaded_frozen() -> None:
    """mcp_hub/entry.py loads the hub with the garbage collector paused: it must be back on when the command
    runs (else a serving hub would never collect a cycle), with the loaded modules' objects frozen."""
    probe = (
        "import gc, sys\n"
        "sys.argv = ['mcp-hub', '--version']\n"
        "from mcp_hub.entry import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(gc.isenabled(), gc.get_freeze_count(), 'mcp_hub.hub' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    version, state = done.stdout.splitlines()
    enabled, frozen, loaded = state.split()
    assert version.startswith("mcp-hub ") and enabled == "True" and loaded == "True"
    assert int(frozen) > 50_000  # the SDK's models and the hub's modules, not a handful
