"""isolation = "per-client": one server session (one child process) per client, reclaimed when idle or gone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import (
    Connect,
    fixture_server,
    hub_client,
    make_config,
    running_hub,
    serve_app,
    wait_for,
)
from tests.conftest import keyed_hub as shared_keyed_hub
from tests.harness.people import Meeting, Person, ask_at_once, expected
from tests.harness.processes import alive, pid_of

pytestmark = pytest.mark.anyio


async def _exists(path: Path) -> bool:
    return path.exists()


async def test_each_client_gets_its_own_server_process(tmp_path: Path) -> None:
    config = make_config(
        tmp_path, {"own": fixture_server("own", isolation="per-client"), "common": fixture_server("common")}
    )
    async with running_hub(config) as hub, hub_client(hub) as first, hub_client(hub) as second:
        own = {await pid_of(first, "own_pid"), await pid_of(second, "own_pid")}
        again = await pid_of(first, "own_pid")
        common = {await pid_of(first, "common_pid"), await pid_of(second, "common_pid")}
        assert hub.upstreams["own"].client_sessions == 2
    assert len(own) == 2 and again in own
    assert len(common) == 1


async def test_two_clients_each_answer_their_own_questions(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="legacy", isolation="per-client")})
    meeting = Meeting(2)  # each question is answered only once the other client's is open too
    ada, bob = Person("ada", meeting), Person("bob", meeting)
    results: dict[str, str] = {}
    async with running_hub(config) as hub:

        async def call(person: Person) -> None:
            async with hub_client(hub, "legacy", **person.options()) as client:
                for what in ("elicitation", "sampling", "roots"):
                    result = await client.call_tool("srv_ask", {"what": what, "text": "hello"})
                    results[f"{person.name} {what}"] = result.content[0].text  # type: ignore[union-attr]

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, ada)
                tg.start_soon(call, bob)
    for name in ("ada", "bob"):
        assert results[f"{name} elicitation"] == f"elicited: accept {{'answer': '{name}'}}"
        assert results[f"{name} sampling"] == f"sampled: {name} read 'hello'"
        assert results[f"{name} roots"] == f"roots: file:///home/{name}"
    assert ada.asked == bob.asked == ["elicitation", "sampling", "roots"]


async def test_a_shared_session_refuses_a_question_it_cannot_attribute(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="legacy")})
    marker = tmp_path / "busy"
    bob_answers = Person("bob").options()
    async with (
        running_hub(config) as hub,
        hub_client(hub) as busy,
        hub_client(hub, **bob_answers) as bob,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(busy.call_tool, "srv_wait", {"marker": str(marker)})
        await wait_for(lambda: _exists(Path(f"{marker}.started")))
        with anyio.fail_after(10), pytest.raises(MCPError) as caught:
            await bob.call_tool("srv_ask", {"what": "elicitation", "text": "x"})
        tg.cancel_scope.cancel()
    assert "isolation" in caught.value.message and "per-client" in caught.value.message


async def test_sessions_beyond_max_sessions_are_refused(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"srv": fixture_server("srv", isolation="per-client", max_sessions=1)})
    async with running_hub(config) as hub, hub_client(hub) as first, hub_client(hub) as second:
        await first.call_tool("srv_echo", {"text": "x"})
        with anyio.fail_after(5), pytest.raises(MCPError) as caught:
            await second.call_tool("srv_echo", {"text": "y"})
    assert "Server 'srv' has 1 client sessions open, its max_sessions" in caught.value.message


@pytest.mark.slow
async def test_idle_and_departed_clients_sessions_are_reclaimed(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"srv": fixture_server("srv", isolation="per-client", idle_timeout=0.5)})
    async with running_hub(config) as hub:
        async with hub_client(hub) as client:
            idle = await pid_of(client, "srv_pid")
            await wait_for(lambda: _dead(idle), timeout=10)
            fresh = await pid_of(client, "srv_pid")  # the next call opens a new session
            assert fresh != idle
        await wait_for(lambda: _dead(fresh), timeout=10)  # the client left
        assert hub.upstreams["srv"].client_sessions == 0


async def _dead(pid: int) -> bool:
    return not alive(pid)


@pytest.mark.slow
async def test_per_client_sessions_over_the_hubs_http_endpoint(tmp_path: Path) -> None:

    config = make_config(tmp_path, {"srv": fixture_server("srv", isolation="per-client")})
    async with running_hub(config) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(app) as base:
            async with (
                Client(f"{base}/mcp", mode="legacy", cache=None) as a,
                Client(f"{base}/mcp", mode="legacy", cache=None) as b,
            ):
                pids = {await pid_of(a, "srv_pid"), await pid_of(b, "srv_pid")}
            assert len(pids) == 2
            for pid in pids:
                await wait_for(lambda pid=pid: _dead(pid), timeout=10)


async def test_a_clients_roots_change_reaches_its_own_session_only(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="legacy", isolation="per-client")})
    async with running_hub(config) as hub, hub_client(hub) as first, hub_client(hub) as second:

        async def heard(client: Client) -> str:
            return (await client.call_tool("srv_heard", {})).content[0].text  # type: ignore[union-attr]

        assert await heard(first) == await heard(second) == "0"
        await first.session.send_notification(types.RootsListChangedNotification())

        async def first_heard() -> bool:
            return await heard(first) == "1"

        await wait_for(first_heard)
        assert await heard(second) == "0"


@asynccontextmanager
async def keyed_hub(tmp_path: Path, **mount: Any) -> AsyncIterator[tuple[Hub, Connect]]:
    """A hub mounting the fixture server as `srv` (with `mount`'s settings), its HTTP endpoint taking `KEYS`."""
    async with shared_keyed_hub(tmp_path, {"srv": fixture_server("srv", protocol="legacy", **mount)}) as served:
        yield served


@pytest.mark.slow
async def test_each_principals_2026_clients_get_a_session_of_their_own(tmp_path: Path) -> None:
    """2026-07-28 requests have no connection: a per-client mount serves them by principal (API key), so
    alice's clients share a session that bob's do not; clients in process (as over stdio) are the local user,
    "stdio", and share one of their own."""
    async with (
        keyed_hub(tmp_path, isolation="per-client") as (hub, connect),
        connect("alice") as alice,
        connect("alice") as alice_again,
        connect("bob") as bob,
        hub_client(hub, "2026-07-28") as local,  # in-process: no HTTP layer, the local user
        hub_client(hub, "2026-07-28") as local_again,
    ):
        pids = {
            "alice": await pid_of(alice, "srv_pid"),
            "alice again": await pid_of(alice_again, "srv_pid"),
            "bob": await pid_of(bob, "srv_pid"),
            "local": await pid_of(local, "srv_pid"),
            "local again": await pid_of(local_again, "srv_pid"),
        }
        assert hub.upstreams["srv"].client_sessions == 3
    assert pids["alice"] == pids["alice again"]
    assert pids["local"] == pids["local again"]
    assert len({pids["alice"], pids["bob"], pids["local"]}) == 3


@pytest.mark.parametrize("what", ["elicitation", "sampling", "roots"])
async def test_two_principals_2026_clients_each_answer_their_own_questions(tmp_path: Path, what: str) -> None:
    """Over stdio nothing says whose a question is; with a session per principal, each has one client in
    flight, whose question it is. They reach the 2026-07-28 clients as `input_required` results."""
    meeting = Meeting(2)  # each question is answered only once the other client's is open too
    alice, bob = Person("alice", meeting), Person("bob", meeting)
    async with (
        keyed_hub(tmp_path, isolation="per-client") as (_, connect),
        connect("alice", **alice.options()) as alice_client,
        connect("bob", **bob.options()) as bob_client,
    ):
        results = await ask_at_once({alice: alice_client, bob: bob_client}, what)
    assert results == {"alice": expected(what, "alice"), "bob": expected(what, "bob")}
    assert alice.asked == bob.asked == [what]


@pytest.mark.slow
async def test_a_principals_session_counts_against_max_sessions_and_idles_out(tmp_path: Path) -> None:
    async with (
        keyed_hub(tmp_path, isolation="per-client", max_sessions=1, idle_timeout=0.5) as (hub, connect),
        connect("alice") as alice,
        connect("bob") as bob,
    ):
        idle = await pid_of(alice, "srv_pid")
        assert hub.upstreams["srv"].client_sessions == 1
        with anyio.fail_after(5), pytest.raises(MCPError) as caught:
            await bob.call_tool("srv_echo", {"text": "y"})
        assert "Server 'srv' has 1 client sessions open, its max_sessions" in caught.value.message
        await wait_for(lambda: _dead(idle), timeout=10)  # alice is still connected, but idle
        assert hub.upstreams["srv"].client_sessions == 0
        assert await pid_of(bob, "srv_pid") != idle


@pytest.mark.slow
async def test_two_clients_of_one_principal_asked_at_once_over_stdio_are_told_why(tmp_path: Path) -> None:
    """Two programs with one API key share a session; over stdio nothing says whose a question is, and two
    2026-07-28 requests are two clients: the server is refused, with advice that fits a principal's session."""
    meeting = Meeting(2)
    first, second = Person("first", meeting), Person("second", meeting)
    async with (
        keyed_hub(tmp_path, isolation="per-client") as (hub, connect),
        connect("alice", **first.options()) as first_client,
        connect("alice", **second.options()) as second_client,
    ):
        results = await ask_at_once({first: first_client, second: second_client}, "elicitation")
        assert hub.upstreams["srv"].client_sessions == 1
    refused = [text for text in results.values() if "clients are in flight" in text]
    assert refused, results
    assert all("give each client an API key of its own" in text for text in refused), refused
