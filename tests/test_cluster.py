"""Replicas sharing one Redis (`[cluster]`): one rate-limit budget, one cache, and per-replica behaviour while
Redis is down.

Real parts only: a real `redis-server` (Debian's package; `.ci/run` installs it) on a free loopback port,
two in-process hubs that each mount the same counting server (tests/servers/counting.py) over streamable
HTTP, and the SDK's clients through each hub's HTTP endpoint.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from mcp_hub import cluster as cluster_module
from mcp_hub.cache import MemoryStore
from mcp_hub.catalog.pins import PinStore
from mcp_hub.catalog.shared_pins import SharedPins
from mcp_hub.cluster import Cluster
from mcp_hub.config import parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.server.http import build_app
from tests.conftest import hub_command, serve_app, wait_for
from tests.harness.cached import KEYS, POLICY, audit_outcomes, cached_hub, replicas, text
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_one_rate_limit_budget_across_replicas(tmp_path: Path, redis_server: RedisServer) -> None:
    """dave may make 2 calls a minute: 2 succeed in total across both replicas, the next is refused on either."""
    async with replicas(tmp_path, redis_server.url) as (a, b), a.connect("dave") as on_a, b.connect("dave") as on_b:
        first = await on_a.call_tool("up_lookup", {"x": 1})
        second = await on_b.call_tool("up_lookup", {"x": 2})
        third = await on_a.call_tool("up_lookup", {"x": 3})
        fourth = await on_b.call_tool("up_lookup", {"x": 4})
    assert [r.is_error for r in (first, second, third, fourth)] == [False, False, True, True]
    assert "rate" in text(third).lower() and "rate" in text(fourth).lower()
    assert a.served[("tool", "lookup")] == 2


async def test_a_result_fetched_on_one_replica_is_a_hit_on_another(tmp_path: Path, redis_server: RedisServer) -> None:
    async with replicas(tmp_path, redis_server.url) as (a, b):
        async with a.connect("alice") as on_a, b.connect("alice") as on_b:
            fetched = await on_a.call_tool("up_lookup", {"x": 1, "y": 2})
            hit = await on_b.call_tool("up_lookup", {"y": 2, "x": 1})
            read = await on_a.read_resource("up+count://a")
            read_again = await on_b.read_resource("up+count://a")
        assert text(fetched) == text(hit) and text(read) == text(read_again) == "count://a #1"
        assert a.served[("tool", "lookup")] == 1 and a.served[("resource", "count://a")] == 1
        async with b.connect("bob") as bob_on_b:  # still kept per principal
            assert text(await bob_on_b.read_resource("up+count://a")) == "count://a #2"
        await a.hub.invalidate_cache()  # a policy edit on A: B forgets too
        async with b.connect("alice") as on_b:
            assert text(await on_b.read_resource("up+count://a")) == "count://a #3"
    assert [outcome for _, _, outcome in audit_outcomes(b.audit)] == ["cached", "cached", "allowed", "allowed"]


async def test_losing_redis_degrades_to_each_replica_and_recovers(
    tmp_path: Path, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "mcp_hub.cluster")
    async with replicas(tmp_path, redis_server.url) as (a, b):
        app = build_app(a.hub.endpoint.server, host="127.0.0.1", path="/mcp", health=a.hub.health, ready=a.hub.ready)
        async with serve_app(app) as base, httpx2.AsyncClient(base_url=base, timeout=10) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["cluster"] == {"redis": "up", "last_error": None}

            answered: list[bool] = []
            async with a.connect("alice") as on_a, b.connect("alice") as on_b:

                async def traffic(n: int) -> None:  # calls in flight on both replicas while Redis dies
                    for client in (on_a, on_b):
                        answered.append(not (await client.call_tool("up_lookup", {"traffic": n})).is_error)

                with anyio.fail_after(20):
                    async with anyio.create_task_group() as tg:
                        for n in range(10):
                            tg.start_soon(traffic, n)
                        await wait_for(lambda: _at_least(answered, 4), timeout=10, interval=0.001)
                        redis_server.kill()
                    first = await on_a.call_tool("up_lookup", {"x": 1})  # answered, from the replica's own memory
                    again = await on_a.call_tool("up_lookup", {"x": 1})
                    elsewhere = await on_b.call_tool("up_lookup", {"x": 1})
            assert answered == [True] * 20
            assert not first.is_error and text(again) == text(first) and text(elsewhere) != text(first)
            assert any(
                r.levelno == logging.WARNING and "Redis is unreachable" in r.getMessage() for r in caplog.records
            )
            ready = await http.get("/readyz")
            assert ready.status_code == 200  # the replica still serves
            assert ready.json()["cluster"]["redis"] == "down" and ready.json()["cluster"]["last_error"]
            async with a.connect("dave") as dave_on_a, b.connect("dave") as dave_on_b:  # a budget per replica
                counted = [
                    await client.call_tool("up_lookup", {"n": n}) for client in (dave_on_a, dave_on_b) for n in (1, 2)
                ]
            assert [r.is_error for r in counted] == [False, False, False, False]

            redis_server.start()

            async def shared_again() -> bool:
                return bool(a.hub.cluster and a.hub.cluster.up and b.hub.cluster and b.hub.cluster.up)

            await wait_for(shared_again)
            assert any("Redis answers again" in r.getMessage() for r in caplog.records)
            assert (await http.get("/readyz")).json()["cluster"]["redis"] == "up"
            async with a.connect("alice") as on_a, b.connect("alice") as on_b:
                fetched = await on_a.call_tool("up_lookup", {"x": 5})
                hit = await on_b.call_tool("up_lookup", {"x": 5})
            assert text(fetched) == text(hit)
            async with a.connect("dave") as dave_on_a, b.connect("dave") as dave_on_b:  # one budget again
                counted = [await client.call_tool("up_lookup", {"m": n}) for n, client in enumerate([dave_on_a] * 2)]
                counted.append(await dave_on_b.call_tool("up_lookup", {"m": 3}))
            assert [r.is_error for r in counted] == [False, False, True]


async def test_an_accepted_pin_releases_the_tool_on_every_replica(tmp_path: Path, redis_server: RedisServer) -> None:
    """Each replica has its own pins file; the pins are one. The server rewrites `lookup`: both replicas hold it;
    `mcp-hub pins accept` run against one replica's configuration releases it on both."""
    hold = POLICY + '\n[pinning]\non_change = "hold"\n'
    pins = 'pins = "pins.json"\n'
    async with (
        replicas(tmp_path, redis_server.url, policy=hold, policy_settings=pins) as (a, b),
        a.connect("alice") as on_a,
        b.connect("alice") as on_b,
    ):

        async def lookup_on_both(description: str | None) -> bool:
            for client in (on_a, on_b):
                tools = {tool.name: tool.description for tool in (await client.list_tools()).tools}
                if tools.get("up_lookup") != description:
                    return False
            return True

        await wait_for(lambda: lookup_on_both("Look something up."))
        await on_a.call_tool("up_redefine", {"text": "Look it up again."})
        await wait_for(lambda: lookup_on_both(None))  # held on both
        environ = {**os.environ, **{f"{name.upper()}_KEY": key for name, key in KEYS.items()}}
        command = hub_command("pins", "--config", str(tmp_path / "replica0" / "hub.toml"))
        accepted = await anyio.run_process([*command, "accept", "up/lookup"], env=environ, check=False)
        assert accepted.returncode == 0 and b"accepted up/lookup" in accepted.stdout, accepted.stderr
        await wait_for(lambda: lookup_on_both("Look it up again."))  # released on both
        assert not (await on_b.call_tool("up_lookup", {"x": 1})).is_error


async def test_without_redis_a_replica_is_found_where_it_last_was(tmp_path: Path, redis_server: RedisServer) -> None:
    """carol's confirmations, asked through A, are answered through B, which forwards them to A; once Redis is
    gone, B still finds A at the address it last read."""
    async with replicas(tmp_path, redis_server.url) as (a, b), AsyncExitStack() as stack:
        urls = []
        for setup in (a, b):
            hub = setup.hub
            assert hub.cluster is not None
            app = build_app(
                hub.endpoint.server,
                host="127.0.0.1",
                path="/mcp",
                health=hub.health,
                api_keys=hub.config.auth.api_keys,
                cluster=hub.cluster,
                parking=hub.endpoint.parking,
            )
            hub.cluster.address = await stack.enter_async_context(serve_app(app)) + "/mcp"
            await hub.cluster.register()
            urls.append(hub.cluster.address)
        http = await stack.enter_async_context(httpx2.AsyncClient(headers={"X-API-Key": KEYS["carol"]}, timeout=30))
        on_a, on_b = [
            await stack.enter_async_context(
                Client(streamable_http_client(url, http_client=http), mode=ERA, cache=None, elicitation_callback=_yes)
            )
            for url in urls
        ]
        results = []
        for n in (1, 2):
            if n == 2:
                redis_server.kill()
            asked = await on_a.session.call_tool("up_lookup", {"n": n}, allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult) and asked.request_state
            (key,) = asked.input_requests
            answers = {key: {"action": "accept", "content": {"confirm": True}}}
            with anyio.fail_after(10):
                done = await on_b.session.call_tool(
                    "up_lookup", {"n": n}, input_responses=answers, request_state=asked.request_state
                )
            results.append(done)
        assert not (b.hub.cluster and b.hub.cluster.up)
    assert [text(result) for result in results] == ['{"n": 1} #1', '{"n": 2} #2']


ERA = "2026-07-28"


async def _yes(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


async def _at_least(items: list[bool], count: int) -> bool:
    return len(items) >= count


async def test_without_a_cluster_nothing_is_shared(tmp_path: Path) -> None:
    async with cached_hub(tmp_path) as hub, hub.connect("dave") as dave:
        await dave.call_tool("up_lookup", {"x": 1})
        assert hub.hub.cluster is None and "cluster" not in hub.hub.health()
        assert hub.hub.cache is not None and isinstance(hub.hub.cache.store, MemoryStore)


def test_the_cluster_table_is_checked() -> None:
    config = parse_config('[cluster]\nredis = "${REDIS_URL}"\n', environ={"REDIS_URL": "redis://127.0.0.1:1/0"})
    assert config.cluster.redis == "redis://127.0.0.1:1/0"
    with pytest.raises(ConfigError) as error:
        parse_config('[cluster]\nredis = "http://127.0.0.1:6379"\n')
    assert "cluster.redis" in str(error.value) and "not a Redis URL" in str(error.value)
    with pytest.raises(ConfigError) as error:
        parse_config('[cluster]\nredsi = "redis://127.0.0.1:6379"\n')
    assert "did you mean 'redis'" in str(error.value)


async def test_the_redis_store_keeps_counts_and_forgets_as_the_memory_store_does(redis_server: RedisServer) -> None:
    from mcp_hub.cache.shared import RedisStore

    cluster = Cluster(redis_server.url)
    store, other = RedisStore(cluster, MemoryStore(10, 10_000)), RedisStore(cluster, MemoryStore(10, 10_000))
    try:
        assert await store.generations(["s", "t"]) == (0, 0, 0)
        await store.put("k", b'{"a": 1}', 60)
        kept = await other.get("k")
        assert kept is not None and kept.value == b'{"a": 1}' and 59 < kept.remaining <= 60
        await store.put("brief", b"x", 0.05)
        await wait_for(lambda: _gone(other, "brief"), timeout=5)
        await store.bump(["s", "s", "t"])
        assert await other.generations(["s", "t", "u"]) == (0, 2, 1, 0)
        await other.clear()
        assert (await store.generations(["s"]))[0] == 1
        assert redis_server.commands().get("incrby", 0) == 4  # three counters moved in one transaction, and the epoch
        assert store.local.size == 0  # nothing went to this replica's memory while Redis answered
    finally:
        await cluster.aclose()


async def _gone(store: object, key: str) -> bool:
    return await store.get(key) is None  # type: ignore[attr-defined]


def test_a_hub_without_a_cluster_does_not_load_redis(tmp_path: Path) -> None:
    """`redis` (some 7 MiB) is imported only by a hub that has a `[cluster]`: one without never loads it, from
    start-up to its first answers."""
    config = tmp_path / "hub.toml"
    config.write_text('[servers.time]\ncommand = "true"\n', encoding="utf-8")
    script = (
        "import sys\n"
        "from mcp_hub.cli import main\n"
        "from mcp_hub.config import load_config\n"
        "from mcp_hub.hub import Hub\n"
        "hub = Hub(load_config(sys.argv[1]))\n"
        "hub.http_app('127.0.0.1')\n"
        "print(sorted(name for name in sys.modules if name == 'redis' or name.startswith('redis.')))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script, str(config)], capture_output=True, text=True, timeout=60, check=True
    )
    assert found.stdout.strip() == "[]", found.stdout + found.stderr


async def test_the_health_check_notices_redis_leave_and_come_back_with_no_call_to_tell_it(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica serving nothing still checks Redis (`Cluster.run`): a failed check marks it down, said once however
    many checks fail; the check goes on, and once Redis answers the recovery hooks run before shared state is used
    again."""
    monkeypatch.setattr(cluster_module, "CHECK_EVERY", 0.02)  # the checks come soon
    caplog.set_level(logging.INFO, "mcp_hub.cluster")
    cluster = Cluster(redis_server.url)
    recovered: list[bool] = []

    async def hook() -> None:
        recovered.append(cluster.up)

    cluster.on_recovered.append(hook)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(cluster.run)
            await wait_for(lambda: cluster.sealing is not None)  # the first check read the shared sealing key
            redis_server.kill()
            await wait_for(lambda: not cluster.up)
            report = cluster.report()
            assert report["redis"] == "down" and "Error" in str(report["last_error"])
            redis_server.start()
            await wait_for(lambda: cluster.up)
            tg.cancel_scope.cancel()
    finally:
        await cluster.aclose()
    assert recovered == [False]  # run once, while shared state was not used yet
    assert cluster.report() == {"redis": "up", "last_error": None}
    messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "mcp_hub.cluster"]
    assert len([m for level, m in messages if level == logging.WARNING and "Redis is unreachable" in m]) == 1
    assert any("Redis answers again" in m for _, m in messages)


LOOKUP = {"name": "lookup", "description": "Look something up.", "inputSchema": {"type": "object"}}
FETCH = {"name": "fetch", "description": "Fetch a page.", "inputSchema": {"type": "object"}}


async def test_a_replica_keeps_its_own_pins_while_redis_is_down_and_takes_the_shared_ones_once_it_is_back(
    tmp_path: Path, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A pull that fails leaves the replica its own pins (and the hub serving, Redis marked down, said once); later
    pulls leave Redis alone until the health check hears it again, even once it answers; then the next pull takes
    what another replica wrote meanwhile (a Redis restarted without persistence, which kept nothing)."""
    caplog.set_level(logging.WARNING, "mcp_hub.cluster")
    a_cluster, b_cluster = Cluster(redis_server.url), Cluster(redis_server.url)
    a_store, b_store = PinStore(tmp_path / "a.json"), PinStore(tmp_path / "b.json")
    a, b = SharedPins(a_cluster, a_store), SharedPins(b_cluster, b_store)
    later: Cluster | None = None
    try:
        assert not await b.pull()  # nothing shared yet: b's own pins start it
        b_store.admit("up", [LOOKUP], "hold")
        assert await b.push()
        assert await a.pull() and set(a_store.pins) == {"up/lookup"}
        assert json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))["pins"] == a_store.pins

        redis_server.kill()
        assert not await a.pull()
        assert not a_cluster.up and set(a_store.pins) == {"up/lookup"}
        assert a_cluster.report()["last_error"]

        redis_server.start()  # empty: it kept nothing
        later = Cluster(redis_server.url)  # a replica that started meanwhile, with pins of its own
        c_store = PinStore(tmp_path / "c.json")
        c = SharedPins(later, c_store)
        c_store.admit("up", [FETCH], "hold")
        assert not await c.pull() and await c.push()
        assert not await a.pull()  # Redis answers, but this replica has not heard it yet
        assert set(a_store.pins) == {"up/lookup"}

        async with anyio.create_task_group() as tg:
            tg.start_soon(a_cluster.run)  # its first check is at once
            await wait_for(lambda: a_cluster.up)
            tg.cancel_scope.cancel()
        assert await a.pull() and set(a_store.pins) == {"up/fetch"}  # the one written first wins
        assert json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))["pins"] == a_store.pins
    finally:
        for cluster in (a_cluster, b_cluster, later):
            if cluster is not None:
                await cluster.aclose()
    warnings = [r for r in caplog.records if "Redis is unreachable" in r.getMessage()]
    assert len(warnings) == 1
