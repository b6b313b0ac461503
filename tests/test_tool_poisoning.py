"""Tool poisoning: a tool whose definition carries hidden text or instructions aimed at the model is handled by
`[pinning]` as a changed definition, the first time it is seen too: held (neither listed nor callable) until
accepted, or flagged."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from mcp_hub.catalog.pins import PinStore
from mcp_hub.config import load_config
from mcp_hub.guardrails import Detectors, poisoned
from tests.conftest import ROOT, hub_client, hub_command, running_hub, script_server, wait_for, write_config
from tests.servers.leaky import TOOLS

pytestmark = pytest.mark.anyio

LEAKY = str(Path(__file__).parent / "servers" / "leaky.py")
REASON = "hidden text: html_comment, tag_characters in description"


def setup(tmp_path: Path, on_change: str, scan: str | None = '["hidden"]') -> Path:
    """A hub mounting tests/servers/leaky.py, with pinning and audit; `scan=None` leaves `[pinning] scan` out."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "all.toml").write_text(
        f'[principals]\n"*" = "all"\n[profiles.all]\ndefault = "allow"\n'
        f'[pinning]\non_change = "{on_change}"\n' + (f"scan = {scan}\n" if scan is not None else ""),
        encoding="utf-8",
    )
    config = write_config(tmp_path / "hub.toml", {"leaky": script_server(LEAKY)})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\npins = "pins.json"\n\n[audit]\nfile = "audit.jsonl"\n')
    return config


def mcp_hub_pins(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = hub_command("pins", "--config", str(config), *args)
    return subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=ROOT)


def test_hidden_text_in_a_definition_is_told_by_kind_and_place() -> None:
    detectors = Detectors()
    assert {
        tool["name"]: poisoned(tool, detectors, {"hidden"}) for tool in TOOLS if poisoned(tool, detectors, {"hidden"})
    } == {"poisoned": REASON}
    schema = {"name": "t", "inputSchema": {"properties": {"a": {"description": "x\u200by"}}}}
    assert poisoned(schema, detectors, {"hidden"}) == "hidden text: zero_width in inputSchema/properties/a/description"
    assert poisoned(next(t for t in TOOLS if t["name"] == "poisoned"), detectors, set()) is None


def test_instructions_in_plain_sight_are_told_by_kind() -> None:
    detectors = Detectors()
    tools = {tool["name"]: tool for tool in TOOLS}
    both = {"hidden", "instructions"}
    assert poisoned(tools["shadow"], detectors, both) == (
        "instructions to the model: model_tag, shadowing, concealment in description"
    )
    # inside the HTML comment: told as the comment and as what it says (overlapping matches keep every finding)
    told = poisoned(tools["poisoned"], detectors, both)
    assert told == f"{REASON}; instructions to the model: sensitive_file in description"
    assert poisoned(tools["poisoned"], detectors, {"instructions"}) == (
        "instructions to the model: sensitive_file in description"
    )
    assert poisoned(tools["shadow"], detectors, {"hidden"}) is None


async def test_the_default_scan_holds_instructions_to_the_model(tmp_path: Path) -> None:
    config = setup(tmp_path, "hold", scan=None)
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert listed == {f"leaky_{tool['name']}" for tool in TOOLS} - {"leaky_poisoned", "leaky_shadow"}
        with pytest.raises(MCPError):
            await client.call_tool("leaky_shadow", {"a": 1, "b": 2})
    pending = PinStore(tmp_path / "pins.json").pending
    assert (
        pending["leaky/shadow"]["reason"]
        == "instructions to the model: model_tag, shadowing, concealment in description"
    )
    shown = mcp_hub_pins(config)
    assert "leaky/shadow  (held or flagged for instructions to the model: model_tag" in shown.stdout, shown.stderr


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_poisoned_tool_is_held_until_accepted(tmp_path: Path, mode: str) -> None:
    config = setup(tmp_path, "hold")
    async with running_hub(load_config(config)) as hub, hub_client(hub, mode) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert listed == {f"leaky_{tool['name']}" for tool in TOOLS} - {"leaky_poisoned"}
        with pytest.raises(MCPError) as caught:
            await client.call_tool("leaky_poisoned", {"a": 1, "b": 2})
        assert caught.value.message == "Unknown tool: leaky_poisoned"
        pins = json.loads((tmp_path / "pins.json").read_text(encoding="utf-8"))
        assert pins["pending"]["leaky/poisoned"]["reason"] == REASON and "leaky/poisoned" not in pins["pins"]

        shown = mcp_hub_pins(config)
        assert f"leaky/poisoned  (held or flagged for {REASON}, since" in shown.stdout, shown.stderr
        assert mcp_hub_pins(config, "accept", "leaky/poisoned").returncode == 0

        async def released() -> bool:
            return "leaky_poisoned" in {tool.name for tool in (await client.list_tools()).tools}

        await wait_for(released)
        result = await client.call_tool("leaky_poisoned", {"a": 1, "b": 2})
    assert result.content[0].text == "3.0"  # type: ignore[union-attr]


async def test_a_poisoned_tool_is_served_and_audited_when_flagged(tmp_path: Path) -> None:
    config = setup(tmp_path, "flag")
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
    assert "leaky_poisoned" in listed
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    changed = [line for line in lines if line["outcome"] == "tool_changed"]
    assert [(line["name"], line["reason"]) for line in changed] == [
        ("poisoned", f"the tool's definition looks poisoned ({REASON}); served (pinning: flag)")
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("on_change", "scan"), [("accept", '["hidden"]'), ("hold", "[]")])
async def test_accept_or_no_scan_serves_it(tmp_path: Path, on_change: str, scan: str) -> None:
    config = setup(tmp_path, on_change, scan)
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
    assert "leaky_poisoned" in listed
    assert PinStore(tmp_path / "pins.json").pending == {}
