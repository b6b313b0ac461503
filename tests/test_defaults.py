"""What a new user gets, untouched: the shipped hub.toml and policies (the README's quick start) and the hub.toml
`mcp-hub import` writes for a new file. They hold a poisoned tool until accepted, redact a secret in a result,
keep the pins and the audit log in the user's state folder, and refuse to serve HTTP to other machines without
client authentication."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from mcp_hub.config import load_config, unauthenticated_exposure
from mcp_hub.state import state_file
from mcp_hub.upstream.sandbox import unavailable
from tests.conftest import ROOT, free_port, hub_command, hub_environment, wait_for
from tests.harness.cli import mcp_hub

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LEAKY = ROOT / "tests" / "servers" / "leaky.py"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # what tests/servers/leaky.py's `leak {"what": "aws"}` answers
BIN = str(Path(sys.executable).parent)
"""Where `pip install` put mcp-hub-example-notes and mcp-server-time, which the shipped hub.toml runs."""


def quick_start(tmp_path: Path) -> Path:
    """The shipped hub.toml and policies/, copied as they are, with one more server: tests/servers/leaky.py, whose
    results carry secrets and whose tools include a poisoned one. Every server runs in the shipped sandbox where
    bubblewrap can run."""
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    config = tmp_path / "hub.toml"
    text = (ROOT / "hub.toml").read_text(encoding="utf-8")
    leaky = {"command": sys.executable, "args": [str(LEAKY)]}  # its own process: in the shipped sandbox, as any
    config.write_text(
        text + f"\n[servers.leaky]\ncommand = {json.dumps(leaky['command'])}\nargs = {json.dumps(leaky['args'])}\n",
        encoding="utf-8",
    )
    return config


def environment() -> dict[str, str]:
    return hub_environment(PATH=BIN + os.pathsep + os.environ.get("PATH", ""))


async def _every_server_listed(client: Client) -> set[str]:
    names: set[str] = set()

    async def listed() -> bool:
        names.clear()
        names.update(tool.name for tool in (await client.list_tools()).tools)
        return {"notes_add_note", "time_get_current_time", "leaky_leak"} <= names

    await wait_for(listed, timeout=30)
    return names


async def _holds_and_redacts(client: Client, config: Path, principal: str) -> None:
    """The poisoned tools are held (pinned as pending, in the state folder), a secret in a result is redacted, the
    shipped servers answer, and the audit log in the state folder has the call under `principal`."""
    names = await _every_server_listed(client)
    assert "leaky_poisoned" not in names and "leaky_shadow" not in names
    leaked = await client.call_tool("leaky_leak", {"what": "aws"})
    text = json.dumps(leaked.model_dump(mode="json"))
    assert AWS_KEY not in text and "[REDACTED:" in text
    added = await client.call_tool("notes_add_note", {"title": "first", "text": "from the quick start"})
    assert not added.is_error

    pins = json.loads(state_file(config, "pins", ".json").read_text(encoding="utf-8"))
    assert {"leaky/poisoned", "leaky/shadow"} <= set(pins["pending"])
    assert "leaky/leak" in pins["pins"] and "leaky/poisoned" not in pins["pins"]
    audit = state_file(config, "audit", ".jsonl")

    async def audited() -> bool:  # the audit log's writer lingers a moment before it writes
        lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()] if audit.exists() else []
        return any(line.get("name") == "leak" and line.get("principal") == principal for line in lines)

    await wait_for(audited, timeout=10)
    assert AWS_KEY not in audit.read_text(encoding="utf-8")
    assert not (config.parent / "pins.json").exists() and not (config.parent / "audit.jsonl").exists()


async def test_the_quick_start_over_stdio_holds_a_poisoned_tool_and_redacts_a_secret(tmp_path: Path) -> None:
    config = quick_start(tmp_path)
    command = hub_command("serve", "--config", str(config))
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        cwd=str(tmp_path),
        env=environment(),
    )
    async with Client(params, mode="legacy", cache=None) as client:
        await _holds_and_redacts(client, config, "stdio")


@asynccontextmanager
async def http_hub(config: Path, *options: str) -> AsyncIterator[tuple[subprocess.Popen[bytes], Path]]:
    """`mcp-hub serve --transport http` on `config`, as a process; its output in a file beside the config."""
    output = config.parent / "hub.out"
    command = hub_command("serve", "--config", str(config), "--transport", "http", *options)
    with output.open("wb") as out:
        process = subprocess.Popen(command, cwd=config.parent, stdout=out, stderr=out, env=environment())
    try:
        yield process, output
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def test_the_quick_start_over_loopback_http_serves_clients_without_a_key_with_the_same_protections(
    tmp_path: Path,
) -> None:
    config = quick_start(tmp_path)
    port = free_port()
    async with http_hub(config, "--port", str(port)) as (process, output):
        base = f"http://127.0.0.1:{port}"

        async def healthy() -> bool:
            assert process.poll() is None, output.read_text(encoding="utf-8", errors="replace")
            try:
                async with httpx2.AsyncClient() as http:
                    return (await http.get(f"{base}/healthz")).status_code == 200
            except httpx2.HTTPError:
                return False

        await wait_for(healthy, timeout=30)
        async with Client(f"{base}/mcp", cache=None) as client:
            await _holds_and_redacts(client, config, "anonymous")
        async with httpx2.AsyncClient() as http:
            servers = (await http.get(f"{base}/healthz")).json()["servers"]
        expected = "on" if unavailable() is None else "unavailable"  # where bubblewrap is missing: said so
        assert {name: report["sandbox"]["status"] for name, report in servers.items()} == dict.fromkeys(
            ("notes", "time", "leaky"), expected
        )


async def test_the_quick_start_on_an_address_other_machines_reach_refuses_to_start_without_authentication(
    tmp_path: Path,
) -> None:
    config = quick_start(tmp_path)
    async with http_hub(config, "--host", "0.0.0.0", "--port", str(free_port())) as (process, output):
        with anyio.fail_after(30):
            while process.poll() is None:
                await anyio.sleep(0.05)
    said = output.read_text(encoding="utf-8")
    assert process.returncode == 2, said
    assert said.startswith(f"error: {config}: http.host: serving HTTP on 0.0.0.0, which other machines can reach")
    assert "[auth] api_keys" in said and 'host = "127.0.0.1"' in said and "allow_unauthenticated = true" in said
    assert "Traceback" not in said

    config.write_text(config.read_text(encoding="utf-8").replace('host = "127.0.0.1"', 'host = "0.0.0.0"'))
    checked = mcp_hub("check", "--config", str(config))
    assert checked.returncode == 0, checked.stderr  # stdio still serves
    assert "warning: `serve --transport http` would refuse to start: " in checked.stderr
    assert "http.host: serving HTTP on 0.0.0.0" in checked.stderr


@pytest.mark.parametrize(
    ("host", "extra", "refused"),
    [
        ("127.0.0.1", "", False),
        ("127.0.0.2", "", False),
        ("localhost", "", False),
        ("::1", "", False),
        ("[::1]", "", False),
        ("0.0.0.0", "", True),
        ("::", "", True),
        ("192.168.1.20", "", True),
        ("hub.example.com", "", True),
        ("0.0.0.0", '[auth]\napi_keys = { alice = "a-key-of-alice-0123456789" }\n', False),
        ("0.0.0.0", "[http]\nallow_unauthenticated = true\n", False),
    ],
)
def test_which_hubs_refuse_to_serve_http(tmp_path: Path, host: str, extra: str, refused: bool) -> None:
    path = tmp_path / "hub.toml"
    path.write_text(extra + '\n[servers.a]\ncommand = "true"\n', encoding="utf-8")
    assert (unauthenticated_exposure(load_config(path), host) is not None) is refused


def test_a_new_hub_toml_from_import_has_the_protections_and_the_policies_beside_it(tmp_path: Path) -> None:
    claude = tmp_path / "claude_desktop_config.json"
    claude.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time", "args": []}}}))
    output = tmp_path / "new" / "hub.toml"
    output.parent.mkdir()
    imported = mcp_hub("import", str(claude), "--output", str(output), cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    config = load_config(output)
    assert config.policy.dir == "policies" and config.policy.pins is True and config.audit.file is True
    assert config.pins_file() == state_file(output, "pins", ".json")
    assert config.audit_file() == state_file(output, "audit", ".jsonl")
    assert list(config.servers) == ["time"]
    sandbox = config.servers["time"].sandbox
    assert sandbox is not None and (sandbox.profile, sandbox.required) == ("standard", False)
    written = {path.name: path.read_text(encoding="utf-8") for path in (output.parent / "policies").iterdir()}
    assert written == {path.name: path.read_text(encoding="utf-8") for path in (ROOT / "policies").glob("*.toml")}

    # importing again merges into the file it wrote: the protections and the policies stay as they are
    (output.parent / "policies" / "principals.toml").write_text('[principals]\nstdio = "admin"\n', encoding="utf-8")
    claude.write_text(json.dumps({"mcpServers": {"other": {"command": "mcp-server-time"}}}))
    again = mcp_hub("import", str(claude), "--output", str(output), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    merged = load_config(output)
    assert list(merged.servers) == ["time", "other"] and merged.policy.pins is True
    assert (output.parent / "policies" / "principals.toml").read_text(encoding="utf-8") == (
        '[principals]\nstdio = "admin"\n'
    )


@pytest.mark.parametrize(
    ("table", "setting", "message"),
    [
        ("policy", '""', "pins is true (a file in the user's state folder), false (no pinning) or the path of a file"),
        ("policy", "3", "pins is true"),
        ("policy", '"state/"', 'pins names a folder; name a file in it, like "state/pins.json"'),
        ("audit", '"."', 'file names a folder; name a file in it, like "./audit.jsonl"'),
    ],
)
def test_file_settings_say_what_they_take(tmp_path: Path, table: str, setting: str, message: str) -> None:
    key = "pins" if table == "policy" else "file"
    path = tmp_path / "hub.toml"
    path.write_text(f'[{table}]\n{key} = {setting}\n\n[servers.a]\ncommand = "true"\n', encoding="utf-8")
    with pytest.raises(Exception) as caught:
        load_config(path)
    assert message in str(caught.value)
    assert f"{table}.{key}" in str(caught.value)


def test_pins_and_audit_false_or_a_path(tmp_path: Path) -> None:
    path = tmp_path / "hub.toml"
    path.write_text(
        '[policy]\npins = false\n[audit]\nfile = "logs/audit.jsonl"\n\n[servers.a]\ncommand = "true"\n',
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.pins_file() is None
    assert config.audit_file() == tmp_path / "logs" / "audit.jsonl"


def test_the_install_commands_shown_work_from_a_checkout_and_the_readme_says_where_secrets_go() -> None:
    """The package is not published: `pip install "mcp-hub[...]"` would fail; the README and hub.toml show what
    works from the checkout. A newcomer from Claude Desktop learns of uv, and of the env_file for secrets."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shipped = (ROOT / "hub.toml").read_text(encoding="utf-8")
    for text in (readme, shipped):
        assert 'pip install "mcp-hub[' not in text
    assert ".venv/bin/pip install -e '.[search]'" in readme and ".venv/bin/pip install -e '.[search]'" in shipped
    assert "Not there yet" not in readme
    assert "https://docs.astral.sh/uv/" in readme
    assert 'env_file = ".env"' in readme and "Where a Claude Desktop user puts secrets" in readme
    assert load_config(ROOT / "hub.toml").hub.env_file is None  # shown, commented out
