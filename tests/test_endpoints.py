"""Curated endpoints: `[endpoints.NAME]` views of the hub, served at `/mcp/NAME` over HTTP (both protocol eras,
behind the same door as `/mcp`) and with `mcp-hub serve --endpoint NAME` over stdio; each a view through the
same policy, with its own `list_changed` and its own tool search."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolListChangedNotification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_hub.config import load_config, parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.hub import Hub
from mcp_hub.library import HubClient
from mcp_hub.server.curated import selections
from tests.conftest import ROOT, fixture_server, hub_command, hub_environment, running_hub, serve_app, write_config
from tests.servers.fixture import BASE_TOOLS

pytestmark = pytest.mark.anyio

KEYS = {"alice": "a" * 32, "bob": "b" * 32}

POLICY = """
[principals]
alice = "full"
bob = "narrow"
stdio = "full"

[profiles.full]
default = "allow"

[profiles.narrow]
default = "deny"
[[profiles.narrow.rules]]
id = "echo-only"
effect = "allow"
tools = ["*/echo"]
"""

ENDPOINTS = """
[search]
pinned = ["*_pid"]

[endpoints.coding]
servers = ["git"]
tools = ["!*/delete_*", "!*/crash"]
prompts = ["!*/*"]
instructions = "Tools for working on code."

[endpoints.research]
servers = ["time"]
search = true
"""

MODES = ["legacy", "2026-07-28"]


def setup(tmp_path: Path, endpoints: str = ENDPOINTS) -> Path:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "hub.toml").write_text(POLICY, encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"git": fixture_server("git"), "time": fixture_server("time")})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n\n[auth]\napi_keys = { alice = "${ALICE}", bob = "${BOB}" }\n')
        file.write(endpoints)
    return config


@asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[tuple[Hub, str]]:
    """A hub with the endpoints of `ENDPOINTS`, served over HTTP as `mcp-hub serve --transport http` serves it."""
    config = load_config(setup(tmp_path), environ={"ALICE": KEYS["alice"], "BOB": KEYS["bob"]})
    async with running_hub(config) as hub, serve_app(hub.http_app("127.0.0.1")) as base:
        yield hub, base


@asynccontextmanager
async def connect(url: str, principal: str, mode: str, **options: Any) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"X-API-Key": KEYS[principal]}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, **options) as client,
    ):
        yield client


async def tool_names(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


async def told(client: Client) -> str | None:
    """The instructions the server gave: in its initialize answer (handshake era), or asked of server/discover."""
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return client.instructions
    return (await client.session.send_discover(client.protocol_version)).get("instructions")


async def refusal(call: Any) -> tuple[int, str]:
    with pytest.raises(MCPError) as caught:
        await call
    return caught.value.code, caught.value.message


GIT_VIEW = sorted(f"git_{tool['name']}" for tool in BASE_TOOLS if tool["name"] not in ("delete_note", "crash"))


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_an_endpoint_serves_its_view_beside_the_whole_hub(tmp_path: Path, mode: str) -> None:
    async with (
        served(tmp_path) as (_, base),
        connect(f"{base}/mcp/coding", "alice", mode) as coding,
        connect(f"{base}/mcp", "alice", mode) as all_,
    ):
        coding_tools = await tool_names(coding)
        coding_prompts = [p.name for p in (await coding.list_prompts()).prompts]
        coding_resources = [r.uri for r in (await coding.list_resources()).resources]
        coding_templates = [t.uri_template for t in (await coding.list_resource_templates()).resource_templates]
        echoed = await coding.call_tool("git_echo", {"text": "hi"})
        whole = await tool_names(all_)
        whole_prompts = [p.name for p in (await all_.list_prompts()).prompts]
        instructions, whole_instructions = await told(coding), await told(all_)
    assert sorted(coding_tools) == GIT_VIEW
    assert coding_prompts == []
    assert coding_resources and all(uri.startswith("git+") for uri in coding_resources)
    assert coding_templates == ["git+fixture://notes/{id}"]
    assert echoed.structured_content == {"text": "hi", "server": "git"}
    assert instructions == "Tools for working on code."
    assert len(whole) == 2 * len(BASE_TOOLS)
    assert sorted(whole_prompts) == ["git_greet", "time_greet"]
    assert whole_instructions is None


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_a_principal_sees_the_intersection_of_its_profile_and_the_endpoint(tmp_path: Path, mode: str) -> None:
    async with (
        served(tmp_path) as (_, base),
        connect(f"{base}/mcp/coding", "bob", mode) as coding,
        connect(f"{base}/mcp", "bob", mode) as all_,
    ):
        narrow = await tool_names(coding)
        whole = await tool_names(all_)
        denied = await refusal(coding.call_tool("git_pid", {}))
        elsewhere = await refusal(coding.call_tool("time_echo", {"text": "hi"}))
    assert narrow == ["git_echo"]
    assert sorted(whole) == ["git_echo", "time_echo"]
    assert denied == (INVALID_PARAMS, "Unknown tool: git_pid")
    assert elsewhere == (INVALID_PARAMS, "Unknown tool: time_echo")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_a_call_outside_the_view_is_refused_like_an_unknown_tool(tmp_path: Path, mode: str) -> None:
    async with served(tmp_path) as (_, base):
        async with connect(f"{base}/mcp/coding", "alice", mode) as coding:
            other_mount = await refusal(coding.call_tool("time_echo", {"text": "hi"}))
            excluded = await refusal(coding.call_tool("git_delete_note", {"key": "1"}))
            unknown = await refusal(coding.call_tool("git_no_such_tool", {}))
            prompt = await refusal(coding.get_prompt("git_greet", {"who": "you"}))
            resource = await refusal(coding.read_resource("time+fixture://notes/1"))
            read = await coding.read_resource("git+fixture://notes/1")
        async with connect(f"{base}/mcp/research", "alice", mode) as research:
            through = await refusal(research.call_tool("call_tool", {"name": "git_echo", "arguments": {"text": "x"}}))
            direct = await refusal(research.call_tool("git_echo", {"text": "x"}))
            allowed = await research.call_tool("call_tool", {"name": "time_echo", "arguments": {"text": "x"}})
        async with connect(f"{base}/mcp", "alice", mode) as whole:
            fine = await whole.call_tool("time_echo", {"text": "hi"})
    assert other_mount == (INVALID_PARAMS, "Unknown tool: time_echo")
    assert excluded == (INVALID_PARAMS, "Unknown tool: git_delete_note")
    assert unknown == (INVALID_PARAMS, "Unknown tool: git_no_such_tool")
    assert prompt[0] == INVALID_PARAMS and "git_greet" in prompt[1]
    assert resource[1] == "Unknown resource: time+fixture://notes/1"
    assert read.contents
    assert through == direct == (INVALID_PARAMS, "Unknown tool: git_echo")
    assert allowed.structured_content == {"text": "x", "server": "time"}
    assert fine.structured_content == {"text": "hi", "server": "time"}


@pytest.mark.parametrize("mode", MODES)
async def test_each_endpoint_has_its_own_tool_search_and_pinned_tools(tmp_path: Path, mode: str) -> None:
    async with served(tmp_path) as (_, base):
        async with connect(f"{base}/mcp/research", "alice", mode) as research:
            listed = await tool_names(research)
            found = await research.call_tool("search_tools", {"query": "repeat my words back to me", "limit": 50})
        async with connect(f"{base}/mcp/research", "bob", mode) as narrow:
            narrow_found = await narrow.call_tool("search_tools", {"query": "echo", "limit": 50})
        async with connect(f"{base}/mcp/coding", "alice", mode) as coding:
            coding_listed = await tool_names(coding)
    # [search] is off for the hub: the research endpoint turns it on for itself, and pins its own view's tools.
    assert listed == ["search_tools", "call_tool", "time_pid"]
    names = [tool["name"] for tool in found.structured_content["tools"]]
    assert names[0] == "time_echo"
    assert names and all(name.startswith("time_") for name in names)
    assert [tool["name"] for tool in narrow_found.structured_content["tools"]] == ["time_echo"]
    assert "search_tools" not in coding_listed and "git_echo" in coding_listed


class Heard:
    """A client's `tools/list_changed` notifications (handshake era)."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = anyio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            self.count += 1
            self.changed.set()

    async def next(self) -> None:
        with anyio.fail_after(15):
            await self.changed.wait()
        self.changed = anyio.Event()


async def test_list_changed_reaches_only_the_endpoints_whose_view_changed(tmp_path: Path) -> None:
    """Each endpoint's clients hear of a change in their own view only. Notifications of one change go out to
    every endpoint before the next change is handled, each client's in order; so when a client hears of a
    later change, it would already have heard of an earlier one meant for it."""
    heard = {name: Heard() for name in ("whole", "coding", "research")}
    async with served(tmp_path) as (_, base), AsyncExitStack() as stack:
        paths = {"whole": "/mcp", "coding": "/mcp/coding", "research": "/mcp/research"}
        clients = {
            name: await stack.enter_async_context(
                connect(f"{base}{path}", "alice", "legacy", message_handler=heard[name])
            )
            for name, path in paths.items()
        }
        for client in clients.values():
            await client.list_tools()
        await clients["whole"].call_tool("git_grow", {"name": "fresh"})  # in coding's view, not in research's
        await heard["coding"].next()
        await heard["whole"].next()
        await clients["whole"].call_tool("time_grow", {"name": "fresh"})  # in research's view, not in coding's
        await heard["research"].next()
        await heard["whole"].next()
        assert heard["research"].count == 1  # it did not hear of the first change
        await clients["whole"].call_tool("git_grow", {"name": "later"})
        await heard["coding"].next()
        assert heard["coding"].count == 2  # it did not hear of the second change
        coding_tools = await tool_names(clients["coding"])
    assert "git_fresh" in coding_tools and "git_later" in coding_tools and "time_fresh" not in coding_tools


async def test_a_2026_client_of_an_endpoint_hears_its_list_changed(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, base), connect(f"{base}/mcp/coding", "alice", "2026-07-28") as coding:
        async with coding.listen(tools_list_changed=True) as subscription:
            await coding.call_tool("git_grow", {"name": "fresh"})
            with anyio.fail_after(15):
                async for _event in subscription:
                    break
        assert "git_fresh" in await tool_names(coding)


async def test_the_policy_changing_tells_every_endpoint(tmp_path: Path) -> None:
    """Whatever an endpoint selects, a new policy may change what its callers see of it."""
    heard = Heard()
    async with (
        served(tmp_path) as (hub, base),
        connect(f"{base}/mcp/research", "bob", "legacy", message_handler=heard) as bob,
        connect(f"{base}/mcp", "alice", "legacy") as alice,
    ):
        await alice.call_tool("time_grow", {"name": "fresh"})
        await heard.next()  # bob's client hears the hub: its notification stream is open
        assert await tool_names(bob) == ["search_tools", "call_tool"]
        (tmp_path / "policies" / "hub.toml").write_text(POLICY.replace('"*/echo"', '"*/pid"'), encoding="utf-8")
        await hub.reload_policy()
        await heard.next()
        listed = await tool_names(bob)
    assert listed == ["search_tools", "call_tool", "time_pid"]


async def test_an_unknown_endpoint_is_answered_404_behind_the_same_door(tmp_path: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with served(tmp_path) as (_, base), httpx2.AsyncClient(timeout=30) as http:
        unknown = await http.post(f"{base}/mcp/nope", json=body, headers={**headers, "X-API-Key": KEYS["alice"]})
        anonymous = await http.post(f"{base}/mcp/nope", json=body, headers=headers)
        keyless = await http.post(f"{base}/mcp/coding", json=body, headers=headers)
        foreign = await http.post(
            f"{base}/mcp/coding",
            json=body,
            headers={**headers, "X-API-Key": KEYS["alice"], "Origin": "https://evil.example"},
        )
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "unknown_endpoint"
    assert "/mcp/nope" in unknown.json()["message"]
    assert anonymous.status_code == keyless.status_code == 401
    assert foreign.status_code == 403


def test_endpoint_tables_are_checked_naming_file_key_and_fix(tmp_path: Path) -> None:
    base = '[servers.git]\ncommand = "git-server"\n'
    cases = {
        '[endpoints.coding]\nservers = ["gti"]\n': ("endpoints.coding.servers[0]", "did you mean 'git'?"),
        "[endpoints.Coding]\n": ("endpoints.Coding", "write [endpoints.coding]"),
        '[endpoints.coding]\ntool = ["git/*"]\n': ("endpoints.coding.tool", "did you mean 'tools'?"),
        '[endpoints.coding]\nsearch = "yes"\n': ("endpoints.coding.search", "remove the quotes"),
    }
    for table, (key, fix) in cases.items():
        with pytest.raises(ConfigError) as caught:
            parse_config(base + table, file="my-hub.toml")
        assert (caught.value.file, caught.value.key) == ("my-hub.toml", key), table
        assert fix in caught.value.reason, table
    config = parse_config(base + '[endpoints.coding]\ntools = ["git/*", "!git_delete*"]\n', file="my-hub.toml")
    with pytest.raises(ConfigError) as caught:
        selections(config)
    assert (caught.value.file, caught.value.key) == ("my-hub.toml", "endpoints.coding.tools[1]")
    assert "'git/delete*' if 'git_delete*' is the hub's public name" in caught.value.reason
    with pytest.raises(ConfigError) as caught:
        Hub(parse_config(base + "[endpoints.coding]\n", file="my-hub.toml"), endpoint="research")
    assert caught.value.key == "endpoints.research" and "endpoints: coding" in caught.value.reason


@pytest.mark.slow
def test_check_reports_a_bad_endpoint_selector(tmp_path: Path) -> None:
    config = tmp_path / "hub.toml"
    config.write_text('[servers.git]\ncommand = "x"\n[endpoints.coding]\ntools = ["echo"]\n', encoding="utf-8")
    result = subprocess.run(
        hub_command("check", "--config", str(config)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"{config}: endpoints.coding.tools[0]" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
async def test_serve_endpoint_over_stdio_serves_the_view(tmp_path: Path) -> None:
    config = setup(tmp_path)
    command = hub_command("serve", "--config", str(config), "--endpoint", "coding")
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        cwd=str(tmp_path),
        env=hub_environment(ALICE=KEYS["alice"], BOB=KEYS["bob"]),
    )
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", cache=None) as client:
            names = await tool_names(client)  # the first list waits for the mounts' first connection attempts
            refused = await refusal(client.call_tool("time_echo", {"text": "hi"}))
            instructions = client.instructions
    assert sorted(names) == GIT_VIEW
    assert refused == (INVALID_PARAMS, "Unknown tool: time_echo")
    assert instructions == "Tools for working on code."


def test_tools_endpoint_prints_the_view(tmp_path: Path) -> None:
    config = setup(tmp_path)
    result = subprocess.run(
        hub_command("tools", "--config", str(config), "--endpoint", "coding", "--json"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=hub_environment(ALICE=KEYS["alice"], BOB=KEYS["bob"]),
    )
    assert result.returncode == 0, result.stderr
    catalog = json.loads(result.stdout)
    assert sorted(tool["name"] for tool in catalog["tools"]) == GIT_VIEW
    assert catalog["prompts"] == []


@pytest.mark.slow
async def test_the_library_client_takes_an_endpoint(tmp_path: Path) -> None:
    config = load_config(setup(tmp_path), environ={"ALICE": KEYS["alice"], "BOB": KEYS["bob"]})
    async with HubClient.from_config(config, endpoint="research") as hub:
        assert hub.hub is not None
        await hub.hub.wait_settled(20)
        listed = [tool.name for tool in await hub.tools()]
    assert listed == ["search_tools", "call_tool", "time_pid"]
