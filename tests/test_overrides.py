"""Tool overrides (`[servers.NAME.tools.TOOL]`): an administrator changes what a model reads of a server's
tool (title, description, annotations) and fixes arguments, without forking the server; pinning, the policy
and the audit are as the server and the wire see the call."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_hub.config import load_config, parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.library import HubClient
from mcp_hub.live import LiveConfig
from tests.conftest import ROOT, fixture_server, hub_client, hub_command, running_hub, wait_for, write_config

pytestmark = pytest.mark.anyio

OVERRIDES = """
[servers.srv.tools.read_file]
title = "Read the handbook"
description = "Read the team handbook, the one document this tool may read."
annotations = { readOnlyHint = true, openWorldHint = false }
arguments = { path = "/srv/docs/handbook.md" }

[servers.srv.tools.delete_note]
annotations = { title = "Delete a note" }
"""


def setup(tmp_path: Path, overrides: str = OVERRIDES, *, policy: str | None = None, extra: str = "") -> Path:
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    with config.open("a", encoding="utf-8") as file:
        file.write(overrides)
        if policy is not None:
            policies = tmp_path / "policies"
            policies.mkdir(exist_ok=True)
            (policies / "hub.toml").write_text(policy, encoding="utf-8")
            file.write('\n[policy]\ndir = "policies"\npins = "pins.json"\n\n[audit]\nfile = "audit.jsonl"\n')
        file.write(extra)
    return config


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def _refusal(call: Any) -> tuple[int, str]:
    with pytest.raises(MCPError) as caught:
        await call
    return caught.value.code, caught.value.message


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_client_lists_the_override_and_calls_with_the_fixed_argument(tmp_path: Path, mode: str) -> None:
    async with running_hub(load_config(setup(tmp_path))) as hub, hub_client(hub, mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("srv_read_file", {})
        sent = await _refusal(client.call_tool("srv_read_file", {"path": "/etc/passwd"}))
    read = tools["srv_read_file"]
    assert read.title == "Read the handbook"
    assert read.description == "Read the team handbook, the one document this tool may read."
    assert read.annotations is not None and read.annotations.read_only_hint is True
    assert read.annotations.open_world_hint is False
    # The fixed argument is not part of the schema a model reads: neither a property nor required.
    assert "path" not in read.input_schema.get("properties", {})
    assert "required" not in read.input_schema
    # Annotations merge over the server's own.
    delete = tools["srv_delete_note"].annotations
    assert delete is not None and (delete.title, delete.destructive_hint) == ("Delete a note", True)
    assert (
        tools["srv_echo"].description == "Echo the text back, as text and as structured content."
    )  # others as the server says
    assert result.content[0].text == "would read /srv/docs/handbook.md"  # type: ignore[union-attr]
    assert sent[0] == INVALID_PARAMS and "'path'" in sent[1] and "srv_read_file" in sent[1]


POLICY = """
[principals]
"*" = "user"

[profiles.user]
default = "allow"
[[profiles.user.rules]]
id = "docs-only"
effect = "allow"
tools = ["srv/read_file"]
[profiles.user.rules.arguments.path]
path_within = ["/srv/docs"]
[[profiles.user.rules]]
id = "no-pid"
effect = "deny"
tools = ["srv/pid"]

[audit]
mask_arguments = ["text"]
"""


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_policy_and_the_audit_see_the_call_as_sent_upstream(tmp_path: Path, mode: str) -> None:
    overrides = (
        '\n[servers.srv.tools.read_file]\narguments = { path = "/etc/passwd" }\n'
        '\n[servers.srv.tools.echo]\narguments = { text = "the secret" }\n'
        "\n[servers.srv.tools.pid]\narguments = { verbose = true }\n"
    )
    config = setup(tmp_path, overrides, policy=POLICY)
    async with running_hub(load_config(config)) as hub, hub_client(hub, mode) as client:
        refused = await client.call_tool("srv_read_file", {})
        echoed = await client.call_tool("srv_echo", {})
        # A tool the caller may not see is unknown, whatever arguments the call sends.
        hidden = await _refusal(client.call_tool("srv_pid", {"verbose": False}))
    # The constraint held against the fixed path, which the client never sent.
    assert refused.is_error is True and "docs-only" in refused.content[0].text  # type: ignore[union-attr]
    assert echoed.structured_content == {"text": "the secret", "server": "srv"}
    assert hidden == (INVALID_PARAMS, "Unknown tool: srv_pid")
    lines = {line["name"]: line for line in audit_lines(tmp_path / "audit.jsonl")}
    assert lines["read_file"]["arguments"] == {"path": "/etc/passwd"}
    assert lines["read_file"]["outcome"] == "refused"
    assert lines["echo"]["arguments"] == {"text": "***"}  # masking still applies
    assert "pid" not in lines


PINNED = '[principals]\n"*" = "all"\n[profiles.all]\ndefault = "allow"\n[pinning]\non_change = "hold"\n'


async def test_pinning_fingerprints_the_servers_own_definition(tmp_path: Path) -> None:
    """An override never makes a pin look changed; a server's own change is still held."""
    plain = setup(tmp_path, "", policy=PINNED)
    async with running_hub(load_config(plain)):
        pass
    pins = json.loads((tmp_path / "pins.json").read_text(encoding="utf-8"))
    overridden = setup(tmp_path, '\n[servers.srv.tools.echo]\ndescription = "Say it again."\n', policy=PINNED)
    async with running_hub(load_config(overridden)) as hub, hub_client(hub) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["srv_echo"].description == "Say it again."
        again = json.loads((tmp_path / "pins.json").read_text(encoding="utf-8"))
        assert again["pending"] == {} and again["pins"]["srv/echo"] == pins["pins"]["srv/echo"]
        await client.call_tool("srv_redefine", {"text": "Echo, rewritten by the server."})

        async def held() -> bool:
            return "srv_echo" not in {t.name for t in (await client.list_tools()).tools}

        await wait_for(held)
    assert "srv/echo" in json.loads((tmp_path / "pins.json").read_text(encoding="utf-8"))["pending"]


async def test_search_finds_and_shows_the_override(tmp_path: Path) -> None:
    config = setup(tmp_path, extra='\n[search]\nenabled = true\nranking = "bm25"\n')
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        result = await client.call_tool("search_tools", {"query": "team handbook", "limit": 3})
        through = await client.call_tool("call_tool", {"name": "srv_read_file", "arguments": {}})
        sent = await _refusal(client.call_tool("call_tool", {"name": "srv_read_file", "arguments": {"path": "/x"}}))
    first = result.structured_content["tools"][0]  # type: ignore[index]
    assert first["name"] == "srv_read_file" and first["title"] == "Read the handbook"
    assert first["annotations"]["readOnlyHint"] is True
    assert "path" not in first["inputSchema"].get("properties", {})
    assert through.content[0].text == "would read /srv/docs/handbook.md"  # type: ignore[union-attr]
    assert sent[0] == INVALID_PARAMS and "'path'" in sent[1]


def _command(config: Path, *args: str) -> Any:
    done = subprocess.run(
        hub_command("tools", "--config", str(config), *args),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    )
    return done.stdout


@pytest.mark.slow
def test_the_tools_command_and_the_provider_exports_show_the_override(tmp_path: Path) -> None:
    config = setup(tmp_path, extra="\n[hub]\ncatalog_snapshot = false\n")
    listed = {tool["name"]: tool for tool in json.loads(_command(config, "--json"))["tools"]}
    assert listed["srv_read_file"]["description"].startswith("Read the team handbook")
    assert "path" not in listed["srv_read_file"]["inputSchema"].get("properties", {})
    text = _command(config)
    assert "srv_read_file  Read the team handbook, the one document this tool may read." in text
    exported = {
        tool["function"]["name"]: tool["function"] for tool in json.loads(_command(config, "--format", "openai"))
    }
    read = exported["srv_read_file"]
    assert read["description"].startswith("Read the team handbook")
    assert "path" not in read["parameters"].get("properties", {})
    anthropic = {tool["name"]: tool for tool in json.loads(_command(config, "--format", "anthropic"))}
    assert "path" not in anthropic["srv_read_file"]["input_schema"].get("properties", {})


async def test_an_override_of_a_tool_the_server_does_not_list_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = setup(tmp_path, '\n[servers.srv.tools.no_such_tool]\ndescription = "Nothing."\n')
    with caplog.at_level(logging.WARNING, logger="mcp_hub.catalog"):
        async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
            result = await client.call_tool("srv_echo", {"text": "still served"})
    assert result.content[0].text == "srv: still served"  # type: ignore[union-attr]
    warned = [record.getMessage() for record in caplog.records if "no_such_tool" in record.getMessage()]
    assert len(warned) == 1 and "[servers.srv.tools.no_such_tool]" in warned[0]


@pytest.mark.parametrize(
    ("table", "key", "fix"),
    [
        ('titel = "x"', "servers.srv.tools.echo.titel", "did you mean 'title'?"),
        ("annotations = { readonlyHint = true }", "servers.srv.tools.echo.annotations.readonlyHint", "readOnlyHint"),
        ('annotations = { readOnlyHint = "yes" }', "servers.srv.tools.echo.annotations.readOnlyHint", "true or false"),
        ("arguments = { since = 2026-01-01 }", "servers.srv.tools.echo.arguments.since", "write it as a string"),
        ("arguments = 3", "servers.srv.tools.echo.arguments", "must be a table"),
    ],
)
def test_a_bad_override_names_file_key_and_fix(table: str, key: str, fix: str) -> None:
    text = f'[servers.srv]\ncommand = "srv"\n\n[servers.srv.tools.echo]\n{table}\n'
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "conf/hub.toml")
    assert caught.value.file == "conf/hub.toml" and caught.value.key == key
    assert fix in caught.value.reason


async def test_an_edited_override_applies_without_restarting_the_server(tmp_path: Path) -> None:
    config = setup(tmp_path)
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        before = (await client.call_tool("srv_pid", {})).content[0].text  # type: ignore[union-attr]
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace("/srv/docs/handbook.md", "/srv/docs/faq.md"), encoding="utf-8")
        change = await LiveConfig(hub).reload()
        assert change is not None and change.overridden == ("srv",) and not change.mounts
        read = await client.call_tool("srv_read_file", {})
        after = (await client.call_tool("srv_pid", {})).content[0].text  # type: ignore[union-attr]
        config.write_text(text.replace(OVERRIDES, ""), encoding="utf-8")
        await LiveConfig(hub).reload()
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert read.content[0].text == "would read /srv/docs/faq.md"  # type: ignore[union-attr]
    assert before == after  # the same server process
    assert tools["srv_read_file"].description == "Say which file it would read (reads nothing)."
    assert tools["srv_read_file"].input_schema["required"] == ["path"]


@pytest.mark.slow
async def test_the_library_exports_the_override_and_calls_with_the_fixed_argument(tmp_path: Path) -> None:
    async with HubClient.from_config(setup(tmp_path)) as hub:
        gemini = {tool["name"]: tool for tool in (await hub.definitions("gemini"))[0]["function_declarations"]}
        message = await hub.answer(
            "openai",
            {"id": "call_1", "type": "function", "function": {"name": "srv_read_file", "arguments": "{}"}},
        )
    assert gemini["srv_read_file"]["description"].startswith("Read the team handbook")
    assert "path" not in gemini["srv_read_file"].get("parameters", {}).get("properties", {})
    assert message["tool_call_id"] == "call_1" and "would read /srv/docs/handbook.md" in message["content"]
