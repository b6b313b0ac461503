"""The cache: what is kept, for whom, for how long, what is never kept, and what invalidates it.

Real parts only: the upstream is the SDK server of tests/servers/counting.py over streamable HTTP,
counting what it actually served; the clients are the SDK's, through the hub's HTTP endpoint with
API keys (one principal each), of both eras.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_hub.config import load_config
from mcp_hub.upstream import State
from tests.conftest import free_port, serve_app, wait_for, write_config
from tests.harness.cached import POLICY, audit_outcomes, cached_hub, text
from tests.servers.counting import counting_server

pytestmark = pytest.mark.anyio


ERAS = ["2026-07-28", "legacy"]


# -- lists ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_a_list_is_each_caller_s_own(tmp_path: Path, mode: str) -> None:
    """A first caller's list is not served to the next one: bob may not see up_write, alice may."""
    async with (
        cached_hub(tmp_path, list_ttl_ms=30_000) as hub,
        hub.connect("alice", mode) as alice,
        hub.connect("bob", mode) as bob,
    ):
        first = await alice.list_tools()
        theirs = await bob.list_tools()
        again = await alice.list_tools()
    assert "up_write" in {t.name for t in first.tools} and "up_write" in {t.name for t in again.tools}
    assert "up_write" not in {t.name for t in theirs.tools}
    if mode == "2026-07-28":
        assert {first.cache_scope, theirs.cache_scope, again.cache_scope} == {"private"}  # the server said public
        assert first.ttl_ms == 30_000


@pytest.mark.parametrize("era", ERAS)
async def test_a_list_stays_fresh_as_long_as_the_servers_said(tmp_path: Path, era: str) -> None:
    async with cached_hub(tmp_path, era, list_ttl_ms=30_000) as hub, hub.connect("alice") as alice:
        tools = await alice.list_tools()
        resources = await alice.list_resources()
    expected = 30_000 if era == "2026-07-28" else 0  # a handshake-era server's hints do not count
    assert (tools.ttl_ms, resources.ttl_ms) == (expected, expected)


# -- resources/read ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_a_resource_is_read_once_for_as_long_as_its_server_says(tmp_path: Path, mode: str) -> None:
    async with cached_hub(tmp_path) as hub:
        async with hub.connect("alice", mode) as alice:
            first = await alice.read_resource("up+count://a")
            second = await alice.read_resource("up+count://a")
        assert text(first) == text(second) == "count://a #1"
        assert hub.served[("resource", "count://a")] == 1
        if mode == "2026-07-28":
            assert first.cache_scope == second.cache_scope == "private"  # a policy is configured
            assert 59_000 < second.ttl_ms <= 60_000
        async with hub.connect("bob", mode) as bob:  # "private": bob's read is his own
            assert text(await bob.read_resource("up+count://a")) == "count://a #2"
    assert audit_outcomes(hub.audit) == [
        ("alice", "count://a", "allowed"),
        ("alice", "count://a", "cached"),
        ("bob", "count://a", "allowed"),
    ]


async def test_a_public_resource_is_shared_but_the_policy_is_asked_first(tmp_path: Path) -> None:
    async with cached_hub(tmp_path, scope="public") as hub:
        async with hub.connect("alice") as alice, hub.connect("bob") as bob, hub.connect("carol") as carol:
            assert text(await alice.read_resource("up+count://b")) == "count://b #1"
            assert text(await carol.read_resource("up+count://b")) == "count://b #1"  # shared: "public"
            with pytest.raises(MCPError) as denied:  # bob may not read it, kept or not
                await bob.read_resource("up+count://b")
            shared = await alice.read_resource("up+count://b")
        assert "count://b" in denied.value.message
        assert hub.served[("resource", "count://b")] == 1
        assert shared.cache_scope == "private"  # what the hub answers depends on who asks


async def test_without_a_policy_a_public_resource_stays_public(tmp_path: Path) -> None:
    async with cached_hub(tmp_path, policy=None, scope="public") as hub, hub.connect("alice") as alice:
        await alice.read_resource("up+count://a")
        result = await alice.read_resource("up+count://a")
    assert result.cache_scope == "public" and result.ttl_ms > 0
    assert hub.served[("resource", "count://a")] == 1


async def test_a_handshake_era_server_gives_no_hints_so_its_resources_are_read_each_time(tmp_path: Path) -> None:
    async with cached_hub(tmp_path, "legacy") as hub, hub.connect("alice") as alice:
        for _ in range(2):
            result = await alice.read_resource("up+count://a")
    assert hub.served[("resource", "count://a")] == 2
    assert result.ttl_ms == 0 and result.cache_scope == "private"


async def test_a_zero_ttl_is_not_kept(tmp_path: Path) -> None:
    async with cached_hub(tmp_path, ttl_ms=0) as hub, hub.connect("alice") as alice:
        for _ in range(2):
            await alice.read_resource("up+count://a")
    assert hub.served[("resource", "count://a")] == 2


async def test_the_cache_can_be_turned_off(tmp_path: Path) -> None:
    async with cached_hub(tmp_path, cache="\n[cache]\nenabled = false\n") as hub, hub.connect("alice") as alice:
        for _ in range(2):
            await alice.read_resource("up+count://a")
            await alice.call_tool("up_lookup", {"a": 1})
    assert hub.served[("resource", "count://a")] == hub.served[("tool", "lookup")] == 2


async def test_a_result_larger_than_max_entry_bytes_is_not_kept(tmp_path: Path) -> None:
    async with (
        cached_hub(tmp_path, cache="\n[cache]\nmax_entry_bytes = 10\n") as hub,
        hub.connect("alice") as alice,
    ):
        for _ in range(2):
            await alice.read_resource("up+count://a")
    assert hub.served[("resource", "count://a")] == 2


async def test_concurrent_reads_of_one_resource_make_one_upstream_call(tmp_path: Path) -> None:
    async with cached_hub(tmp_path) as hub, hub.connect("alice") as alice:
        cache = hub.hub.cache
        assert cache is not None
        results: list[str] = []

        async def read() -> None:
            results.append(text(await alice.read_resource("up+count://slow")))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(read)
                await wait_for(lambda: cache.waiting == 4 and hub.served[("resource", "count://slow")] == 1)
                hub.gate.set()
    assert results == ["count://slow #1"] * 5
    assert hub.served[("resource", "count://slow")] == 1


async def test_on_a_per_client_mount_a_result_is_kept_for_its_client_session(tmp_path: Path) -> None:
    async with (
        cached_hub(tmp_path, scope="public", isolation="per-client") as hub,
        hub.connect("alice", "legacy") as first,
        hub.connect("alice", "legacy") as second,
    ):
        assert text(await first.read_resource("up+count://a")) == "count://a #1"
        assert text(await first.read_resource("up+count://a")) == "count://a #1"
        assert text(await second.read_resource("up+count://a")) == "count://a #2"  # public, but its own session
        assert text(await first.call_tool("up_lookup", {})).endswith("#1")
        assert text(await second.call_tool("up_lookup", {})).endswith("#2")
        assert text(await second.call_tool("up_lookup", {})).endswith("#2")


# -- tools/call --------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("mode", ERAS)
async def test_a_read_only_tool_is_kept_per_principal_whatever_the_order_of_its_arguments(
    tmp_path: Path, era: str, mode: str
) -> None:
    async with cached_hub(tmp_path, era) as hub:
        async with hub.connect("alice", mode) as alice:
            first = await alice.call_tool("up_lookup", {"a": 1, "b": {"x": 1, "y": [1, 2]}})
            again = await alice.call_tool("up_lookup", {"b": {"y": [1, 2], "x": 1}, "a": 1})
            other = await alice.call_tool("up_lookup", {"a": 2, "b": {"x": 1, "y": [1, 2]}})
        async with hub.connect("bob", mode) as bob:
            theirs = await bob.call_tool("up_lookup", {"a": 1, "b": {"x": 1, "y": [1, 2]}})
    assert text(first) == text(again) == '{"a": 1, "b": {"x": 1, "y": [1, 2]}} #1'
    assert text(other).endswith("#2")
    assert text(theirs).endswith("#3")  # bob's call is his own
    assert hub.served[("tool", "lookup")] == 3
    assert [outcome for _, _, outcome in audit_outcomes(hub.audit)] == ["allowed", "cached", "allowed", "allowed"]


@pytest.mark.parametrize("era", ERAS)
async def test_tool_errors_are_never_kept(tmp_path: Path, era: str) -> None:
    async with cached_hub(tmp_path, era) as hub, hub.connect("alice") as alice:
        first = await alice.call_tool("up_failing", {})
        second = await alice.call_tool("up_failing", {})
    assert first.is_error and second.is_error
    assert (text(first), text(second)) == ("failed #1", "failed #2")


async def test_a_tool_not_marked_read_only_is_not_kept_even_if_a_rule_says_cache(tmp_path: Path) -> None:
    async with cached_hub(tmp_path) as hub, hub.connect("alice") as alice:
        for _ in range(2):
            await alice.call_tool("up_write", {"x": 1})
    assert hub.served[("tool", "write")] == 2


async def test_a_tool_no_rule_caches_is_not_kept(tmp_path: Path) -> None:
    policy = POLICY.replace('cache = "60s"', "")
    async with cached_hub(tmp_path, policy=policy) as hub, hub.connect("alice") as alice:
        for _ in range(2):
            await alice.call_tool("up_lookup", {"x": 1})
    assert hub.served[("tool", "lookup")] == 2


@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_that_needed_a_confirmation_is_never_kept(tmp_path: Path, mode: str) -> None:
    asked: list[str] = []

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with cached_hub(tmp_path) as hub, hub.connect("carol", mode, elicitation_callback=person) as carol:
        first = await carol.call_tool("up_lookup", {"x": 1})
        second = await carol.call_tool("up_lookup", {"x": 1})
    assert (text(first)[-2:], text(second)[-2:]) == ("#1", "#2")
    assert len(asked) == 2


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_that_asked_its_client_is_never_kept(tmp_path: Path, era: str, mode: str) -> None:
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    async with cached_hub(tmp_path, era) as hub, hub.connect("alice", mode, elicitation_callback=answer) as alice:
        first = await alice.call_tool("up_ask", {})
        second = await alice.call_tool("up_ask", {})
    assert "answered" in text(first) and "answered" in text(second)
    assert text(first) != text(second)
    assert hub.served[("tool", "ask")] == (2 if era == "legacy" else 4)  # 2026-07-28: asked, then answered


async def test_a_cached_call_counts_against_the_rate_limit(tmp_path: Path) -> None:
    async with cached_hub(tmp_path) as hub, hub.connect("dave") as dave:
        results = [await dave.call_tool("up_lookup", {"x": 1}) for _ in range(3)]
    assert [r.is_error for r in results] == [False, False, True]
    assert "rate" in text(results[2]).lower()
    assert hub.served[("tool", "lookup")] == 1
    assert [outcome for _, _, outcome in audit_outcomes(hub.audit)] == ["allowed", "cached", "rate_limited"]


# -- invalidation ------------------------------------------------------------------------


class Updates:
    def __init__(self) -> None:
        self.arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.arrived.set()


@pytest.mark.slow
async def test_a_resource_the_server_says_was_updated_is_read_again(tmp_path: Path) -> None:
    updates = Updates()
    async with cached_hub(tmp_path) as hub, hub.connect("alice", "legacy", message_handler=updates) as alice:
        await alice.read_resource("up+count://a")
        await alice.read_resource("up+count://b")
        request = types.Request[dict[str, Any], str](method="resources/subscribe", params={"uri": "up+count://a"})
        await alice.session.send_request(request, types.EmptyResult)  # type: ignore[arg-type]
        with anyio.fail_after(15):
            while not updates.arrived.is_set():  # the hub subscribes upstream as the client does; touch until heard
                await alice.call_tool("up_touch", {"uri": "count://a"})
                with anyio.move_on_after(0.5):
                    await updates.arrived.wait()
        assert text(await alice.read_resource("up+count://a")) == "count://a #2"
        assert text(await alice.read_resource("up+count://b")) == "count://b #1"  # untouched: still kept


async def test_a_tool_list_change_invalidates_the_mount_s_tools(tmp_path: Path) -> None:
    async with cached_hub(tmp_path) as hub, hub.connect("alice") as alice:
        cache = hub.hub.cache
        assert cache is not None
        await alice.call_tool("up_lookup", {"x": 1})
        await alice.read_resource("up+count://a")
        before = await cache.store.generations(["tools\x00up"])
        await alice.call_tool("up_announce", {})
        await wait_for(lambda: _changed(cache.store.generations(["tools\x00up"]), before))
        assert text(await alice.call_tool("up_lookup", {"x": 1})).endswith("#2")
        assert text(await alice.read_resource("up+count://a")) == "count://a #1"  # resources: still kept


async def test_a_changed_tool_definition_is_a_new_key(tmp_path: Path) -> None:
    async with cached_hub(tmp_path) as hub, hub.connect("alice") as alice:
        await alice.call_tool("up_lookup", {"x": 1})
        await alice.call_tool("up_redefine", {"text": "Another description."})

        async def redefined() -> bool:
            tools = (await alice.list_tools()).tools
            return any(t.description == "Another description." for t in tools)

        await wait_for(redefined)
        assert text(await alice.call_tool("up_lookup", {"x": 1})).endswith("#2")


@pytest.mark.slow
async def test_a_policy_change_invalidates(tmp_path: Path) -> None:
    async with cached_hub(tmp_path) as hub, hub.connect("alice") as alice:
        await alice.call_tool("up_lookup", {"x": 1})
        revision = hub.hub.policy().revision
        hub.policy.write_text(POLICY + '\n[audit]\nmask_arguments = ["*secret*"]\n', encoding="utf-8")
        await wait_for(lambda: hub.hub.policy().revision != revision)
        assert text(await alice.call_tool("up_lookup", {"x": 1})).endswith("#2")


async def test_invalidate_cache_forgets_everything(tmp_path: Path) -> None:
    async with cached_hub(tmp_path) as hub, hub.connect("alice") as alice:
        await alice.call_tool("up_lookup", {"x": 1})
        await alice.read_resource("up+count://a")
        await hub.hub.invalidate_cache()
        assert text(await alice.call_tool("up_lookup", {"x": 1})).endswith("#2")
        assert text(await alice.read_resource("up+count://a")) == "count://a #2"


@pytest.mark.slow
async def test_a_reconnection_invalidates_the_mount(tmp_path: Path) -> None:
    port = free_port()
    server, served = counting_server("up")
    async with anyio.create_task_group() as tg:
        first = anyio.Event()
        await tg.start(_serve_until, server, port, first)
        async with cached_hub(tmp_path, upstream=(port, served)) as hub, hub.connect("alice") as alice:
            upstream = hub.hub.upstreams["up"]
            await alice.call_tool("up_lookup", {"x": 1})
            await alice.read_resource("up+count://a")
            first.set()  # the server goes away; a call finds out
            await wait_for(lambda: not _listening(port))
            with contextlib.suppress(MCPError):
                await alice.call_tool("up_write", {})
            second = anyio.Event()
            await tg.start(_serve_until, server, port, second)  # and it comes back on the same port
            await wait_for(lambda: upstream.restarts >= 1 and upstream.state == State.UP, timeout=40)
            assert text(await alice.call_tool("up_lookup", {"x": 1})).endswith("#2")
            assert text(await alice.read_resource("up+count://a")) == "count://a #2"
            second.set()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def _serve_until(
    server: Any, port: int, stop: anyio.Event, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    async with serve_app(server.streamable_http_app(), port):
        task_status.started()
        await stop.wait()


async def _changed(now: Any, before: tuple[int, ...]) -> bool:
    return await now != before


# -- the policy's `cache` ----------------------------------------------------------------


def test_a_rule_s_cache_is_checked_and_explained() -> None:
    from mcp_hub.errors import ConfigError
    from mcp_hub.policy import Target, explain, parse_policies

    policy = parse_policies({"p.toml": POLICY})
    decision = policy.decide("alice", Target("tool", "up", "lookup", {}))
    assert decision.cache == 60.0
    assert "Cache: results kept 60 s" in explain(policy, "alice", Target("tool", "up", "lookup", {}))
    assert "cache 60 s" in explain(policy, "alice", Target("tool", "up", "lookup", {}))
    assert policy.decide("carol", Target("tool", "up", "lookup", {})).cache is None  # confirm: never kept
    assert policy.decide("alice", Target("tool", "up", "touch", {})).cache is None
    rule = '[principals]\n"*" = "p"\n[profiles.p]\n[[profiles.p.rules]]\n'
    for body, message in [
        ('effect = "allow"\ntools = ["a/b"]\ncache = "soon"\n', "invalid duration"),
        ('effect = "allow"\ntools = ["a/b"]\ncache = "2d"\n', "invalid duration"),
        ('effect = "allow"\ntools = ["a/b"]\ncache = "25h"\n', "more than a day"),
        ('effect = "confirm"\ntools = ["a/b"]\ncache = "1m"\n', "a confirm rule has no cache"),
        ('effect = "allow"\ntools = ["a/b"]\nresources = ["a/x"]\ncache = "1m"\n', "cache applies to tools"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_policies({"p.toml": rule + body})


# -- the one-process store -----------------------------------------------------------------


async def test_the_memory_store_keeps_within_its_bounds_and_times() -> None:
    from mcp_hub.cache import MemoryStore

    now = [0.0]
    store = MemoryStore(3, 2000, clock=lambda: now[0])
    for i in range(5):
        await store.put(f"k{i}", b"x" * 100, 10)
    assert len(store) == 3 and await store.get("k0") is None  # max_entries: the least recently used went
    await store.put("big", b"x" * 5000, 10)
    assert await store.get("big") is None  # larger than max_bytes on its own
    for i in range(3):
        await store.put(f"m{i}", b"x" * 700, 10)
    assert store.size <= 2000 and await store.get("m0") is None
    now[0] = 9.5
    found = await store.get("m2")
    assert found is not None and found.remaining == pytest.approx(0.5)
    now[0] = 10.0
    assert await store.get("m2") is None  # its time is up
    assert await store.generations(["a"]) == (0, 0)
    await store.bump(["a"])
    assert await store.generations(["a", "b"]) == (0, 1, 0)
    await store.clear()
    assert await store.generations(["a"]) == (1, 0) and len(store) == 0


def test_a_mistake_in_the_cache_table_names_the_key(tmp_path: Path) -> None:
    from mcp_hub.errors import ConfigError

    path = write_config(tmp_path / "hub.toml", {"up": {"url": "http://127.0.0.1:1/mcp"}})
    with path.open("a", encoding="utf-8") as file:
        file.write("\n[cache]\nmax_entrys = 5\n")
    with pytest.raises(ConfigError, match="max_entrys"):
        load_config(path)
    path.write_text(path.read_text(encoding="utf-8").replace("max_entrys = 5", "max_entries = 0"), encoding="utf-8")
    with pytest.raises(ConfigError, match="max_entries"):
        load_config(path)
