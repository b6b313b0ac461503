"""Budgets of calls and cost shared by three replicas on one real Redis (`[cluster]`): calls spread over every
replica, one after another and all at once, are allowed exactly as many times as the budget says.

Real parts only: a real `redis-server` (tests/redis_server.py), three in-process hubs that each mount the same
counting server (tests/servers/counting.py) over streamable HTTP, the SDK's clients through each hub's HTTP
endpoint, and `mcp-hub explain` run as a process reading the counts from Redis.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import pytest
import redis
from mcp import Client

from tests.conftest import hub_command, wait_for
from tests.harness.cached import KEYS, Setup, audit_outcomes, replicas
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

POLICY = """
[principals]
alice = "metered"
bob = "priced"
dave = "metered"

[profiles.metered]
default = "allow"
budgets = [{ calls = 7, per = "day" }]

[profiles.priced]
default = "allow"
budgets = [{ cost = 10, per = "month" }]
[[profiles.priced.rules]]
id = "pricey"
effect = "allow"
tools = ["up/lookup"]
cost = 3
"""


@asynccontextmanager
async def clients(hubs: list[Setup], principal: str) -> AsyncIterator[list[Client]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(hub.connect(principal)) for hub in hubs]


async def test_a_calls_budget_holds_exactly_across_three_replicas(tmp_path: Path, redis_server: RedisServer) -> None:
    """7 calls a day each: dave's 12 calls in turn over three replicas, then alice's 15 at once, 7 allowed each."""
    async with replicas(tmp_path, redis_server.url, count=3, policy=POLICY) as hubs:
        async with clients(hubs, "dave") as on:
            in_turn = [(await on[n % 3].call_tool("up_lookup", {"n": n})).is_error for n in range(12)]
        assert in_turn == [False] * 7 + [True] * 5
        assert hubs[0].served[("tool", "lookup")] == 7

        allowed: list[bool] = []
        async with clients(hubs, "alice") as on:

            async def call(n: int) -> None:
                allowed.append(not (await on[n % 3].call_tool("up_lookup", {"at-once": n})).is_error)

            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    for n in range(15):
                        group.start_soon(call, n)
        assert sorted(allowed) == [False] * 8 + [True] * 7
        assert hubs[0].served[("tool", "lookup")] == 14

        environ = {**os.environ, **{f"{name.upper()}_KEY": key for name, key in KEYS.items()}}
        command = hub_command("explain", "--config", str(tmp_path / "replica1" / "hub.toml"))
        told = await anyio.run_process([*command, "--principal", "dave", "--tool", "up/lookup"], env=environ)
    assert b"Budget budget:profile:metered:calls/day: 7 calls per day" in told.stdout
    assert b"7 used, 0 left; renews at " in told.stdout
    refusals = [outcome for hub in hubs for _, _, outcome in audit_outcomes(hub.audit) if outcome == "over_budget"]
    assert len(refusals) == 5 + 8
    client = redis.Redis.from_url(redis_server.url)
    try:
        keys = sorted(key.decode() for key in client.scan_iter("LIMITS:mcp-hub:budget:*"))
        assert len(keys) == 2 and all(
            key.startswith("LIMITS:mcp-hub:budget:profile:metered:calls:day:") for key in keys
        )
        assert [int(client.get(key) or 0) for key in keys] == [7, 7]  # what refused calls charged was given back
        assert 0 < int(client.ttl(keys[0])) <= 86400 + 60
    finally:
        client.close()


async def test_a_cost_budget_holds_exactly_across_three_replicas(tmp_path: Path, redis_server: RedisServer) -> None:
    """10 cost a month, lookup costs 3 and write 1: three lookups (9) over three replicas, the fourth refused, one
    write (10) still fits, the next does not; then all at once on a new month's worth: three lookups of eight."""
    async with replicas(tmp_path, redis_server.url, count=3, policy=POLICY) as hubs, clients(hubs, "bob") as on:
        lookups = [(await on[n % 3].call_tool("up_lookup", {"n": n})).is_error for n in range(4)]
        writes = [(await on[(n + 1) % 3].call_tool("up_write", {"n": n})).is_error for n in range(2)]
        assert lookups == [False, False, False, True] and writes == [False, True]
        assert hubs[0].served[("tool", "lookup")] == 3 and hubs[0].served[("tool", "write")] == 1

        client = redis.Redis.from_url(redis_server.url)
        try:
            for key in client.scan_iter("LIMITS:mcp-hub:budget:*"):
                client.delete(key)  # as when the month renews
        finally:
            client.close()
        allowed: list[bool] = []

        async def call(n: int) -> None:
            allowed.append(not (await on[n % 3].call_tool("up_lookup", {"at-once": n})).is_error)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                for n in range(8):
                    group.start_soon(call, n)
    assert sorted(allowed) == [False] * 5 + [True] * 3
    assert hubs[0].served[("tool", "lookup")] == 6


async def test_without_redis_each_replica_keeps_the_budget_in_its_own_memory(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Redis gone, calls go on and each replica holds the budget on its own (7 each); back, it is one again."""
    async with replicas(tmp_path, redis_server.url, count=2, policy=POLICY) as hubs:
        redis_server.kill()
        async with clients(hubs, "dave") as on:
            alone = [[(await on[side].call_tool("up_lookup", {"n": n})).is_error for n in range(8)] for side in (0, 1)]
        assert alone == [[False] * 7 + [True]] * 2
        redis_server.start()

        async def shared_again() -> bool:
            return all(hub.hub.cluster is not None and hub.hub.cluster.up for hub in hubs)

        await wait_for(shared_again)
        async with clients(hubs, "dave") as on:  # what each counted meanwhile is dropped: one budget in Redis again
            again = [(await on[n % 2].call_tool("up_lookup", {"again": n})).is_error for n in range(8)]
        assert again == [False] * 7 + [True]
