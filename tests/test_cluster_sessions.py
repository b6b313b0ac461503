"""Replicas reaching what another replica holds: a 2026-07-28 client's parked call, a handshake-era session.

Real parts only: a real `redis-server` (tests/test_cluster.py's `RedisServer`), three `mcp-hub serve
--transport http` processes on loopback sharing it (`[cluster]`), each mounting its own
tests/servers/counting.py over stdio in the handshake era (so its questions park the hub's 2026-07-28
calls), and the SDK's clients, sent to a different replica request by request (`RoundRobin`, the
simplest balancer there is: no cookies, no affinity). A replica is killed with SIGKILL.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.conftest import forking, wait_for
from tests.harness.cluster import KEYS, Replica, hub_toml, launch_replica, start_replica, until_ready
from tests.redis_server import RedisServer, started_redis

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

YES = {"action": "accept", "content": {"confirm": True}}
ANSWER = {"action": "accept", "content": {"answer": "yes"}}


@pytest.fixture(scope="module")
def shared_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from started_redis(tmp_path_factory)


@pytest.fixture(scope="module")
def three(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisServer
) -> Iterator[list[Replica]]:
    folder = tmp_path_factory.mktemp("replicas")
    started: list[Replica] = []
    try:
        with forking(request):  # the replicas and their servers fork from preloaded processes, as in a test
            for name in "abc":
                started.append(launch_replica(folder / name, shared_redis.url))
        for replica in started:
            until_ready(replica)
        yield started
    finally:
        for replica in started:
            if replica.process.poll() is None:
                replica.process.terminate()
                try:
                    replica.process.wait(10)
                except subprocess.TimeoutExpired:
                    replica.kill()


@pytest.fixture
def doomed(tmp_path: Path, shared_redis: RedisServer) -> Iterator[Replica]:
    """A fourth replica, whose lookups take 3 s, for a test to kill."""
    replica = start_replica(tmp_path / "doomed", shared_redis.url, work_ms=3000)
    try:
        yield replica
    finally:
        if replica.process.poll() is None:
            replica.kill()


class RoundRobin(httpx2.AsyncBaseTransport):
    """A balancer in the client: each request goes to the next replica's endpoint."""

    def __init__(self, urls: list[str]) -> None:
        self._urls = [httpx2.URL(url) for url in urls]
        self._next = 0
        self._transport = httpx2.AsyncHTTPTransport()
        self.sent: list[tuple[str, int | None]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        target = self._urls[self._next % len(self._urls)]
        self._next += 1
        request.url = request.url.copy_with(host=target.host, port=target.port)
        request.headers["host"] = f"{target.host}:{target.port}"
        self.sent.append((request.method, target.port))
        return await self._transport.handle_async_request(request)

    async def aclose(self) -> None:
        await self._transport.aclose()


@asynccontextmanager
async def client(
    principal: str, urls: list[str], mode: str = "2026-07-28", sent: list[Any] | None = None, **options: Any
) -> AsyncIterator[Client]:
    """An SDK client as `principal`, its requests spread over `urls` in turn (noted in `sent`)."""
    transport = RoundRobin(urls)
    if sent is not None:
        transport.sent = sent
    headers = {"X-API-Key": KEYS[principal]}
    async with (
        httpx2.AsyncClient(transport=transport, headers=headers, timeout=30) as http,
        Client(streamable_http_client(urls[0], http_client=http), mode=mode, cache=None, **options) as c,
    ):
        yield c


async def answer_form(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "yes"})


async def ask(on: Client, name: str, arguments: dict[str, Any], **retry: Any) -> types.InputRequiredResult:
    result = await on.session.call_tool(name, arguments, allow_input_required=True, **retry)
    assert isinstance(result, types.InputRequiredResult) and result.request_state, result
    return result


def text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


async def test_a_question_asked_through_one_replica_is_answered_through_another(three: list[Replica]) -> None:
    """carol's call is confirmed (the hub's question) through B, the server's own question answered through C,
    and the first state, replayed on C once it was used, is refused: it would answer the next question."""
    a, b, c = (replica.url for replica in three)
    with anyio.fail_after(30):
        async with (
            client("carol", [a], elicitation_callback=answer_form) as on_a,
            client("carol", [b], elicitation_callback=answer_form) as on_b,
            client("carol", [c], elicitation_callback=answer_form) as on_c,
        ):
            first = await ask(on_a, "up_ask", {})
            (confirm,) = first.input_requests
            second = await ask(on_b, "up_ask", {}, input_responses={confirm: YES}, request_state=first.request_state)
            assert second.request_state != first.request_state
            (question,) = second.input_requests
            with pytest.raises(MCPError) as replayed:
                await on_c.session.call_tool(
                    "up_ask", {}, input_responses={confirm: YES}, request_state=first.request_state
                )
            assert "already answered" in replayed.value.error.message
            done = await on_c.session.call_tool(
                "up_ask", {}, input_responses={question: ANSWER}, request_state=second.request_state
            )
    assert isinstance(done, types.CallToolResult) and not done.is_error
    assert "answered" in text(done) and "yes" in text(done)


async def test_a_handshake_era_session_is_served_whichever_replica_a_request_reaches(three: list[Replica]) -> None:
    """Each request (the initialize, the GET stream, the calls, the answer to an elicitation mid-call) reaches
    another replica; the session's id names its replica, and every one of them reaches it. A list change
    arrives on the GET stream, opened through another replica."""
    urls = [replica.url for replica in three]
    asked: list[str] = []
    changed = anyio.Event()

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    sent: list[tuple[str, int | None]] = []
    with anyio.fail_after(30):
        async with client(
            "alice", urls, mode="legacy", sent=sent, elicitation_callback=person, message_handler=on_message
        ) as alice:
            tools = await alice.list_tools()
            first = await alice.call_tool("up_lookup", {"x": 1})
            second = await alice.call_tool("up_lookup", {"x": 2})
            answered = await alice.call_tool("up_ask", {})
            await alice.call_tool("up_redefine", {"text": "Look it up once more."})
            await changed.wait()
    ports = {httpx2.URL(url).port for url in urls}
    assert {port for method, port in sent if method == "POST"} == ports  # every replica had some of them
    assert any(method == "GET" for method, _ in sent)
    assert "up_lookup" in {tool.name for tool in tools.tools}
    assert not first.is_error and not second.is_error and '"x": 2' in text(second).replace("'", '"')
    assert "answered" in text(answered) and asked == ["Answer?"]


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


async def test_killing_a_replica_ends_what_it_held_with_an_error_never_a_hang(
    three: list[Replica], doomed: Replica
) -> None:
    """carol's calls park on the doomed replica; their answers, sent through B, are forwarded there; it dies
    mid-call: every one ends with an error telling the client to call again, none hangs; so does a call
    whose replica is already gone. A handshake-era session it opened is then answered 404 through B (the
    client starts a new session), at once."""
    headers = {"X-API-Key": KEYS["alice"], "accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        session = (await http.post(doomed.url, json=INITIALIZE)).headers["mcp-session-id"]
        assert session.partition(".")[1] == "."  # the replica's id, a dot, the session's
        on_session = {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        reached = await http.post(three[1].url, json=PING, headers=on_session)
        assert reached.status_code == 200, reached.text
    outcomes: list[str] = []
    with anyio.fail_after(30):
        async with (
            client("carol", [doomed.url], elicitation_callback=answer_form) as on_doomed,
            client("carol", [three[1].url], elicitation_callback=answer_form) as on_b,
        ):
            questions = [await ask(on_doomed, "up_lookup", {"n": n}) for n in range(3)]

            async def answer(question: types.InputRequiredResult, n: int) -> None:
                (key,) = question.input_requests
                try:
                    await on_b.session.call_tool(
                        "up_lookup", {"n": n}, input_responses={key: YES}, request_state=question.request_state
                    )
                    outcomes.append("completed")
                except MCPError as error:
                    outcomes.append(error.error.message)

            async with anyio.create_task_group() as tg:
                for n, question in enumerate(questions[:2]):
                    tg.start_soon(answer, question, n)
                await _until_forwarded(doomed, 3)
                doomed.kill()
            await answer(questions[2], 2)
    assert len(outcomes) == 3 and all("gone; call again" in outcome for outcome in outcomes), outcomes
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        with anyio.fail_after(10):
            gone = await http.post(three[1].url, json=PING, headers=on_session)
    assert gone.status_code == 404 and gone.json()["error"]["message"] == "Session not found"


async def _until_forwarded(replica: Replica, count: int) -> None:
    """Until `count` connections to the replica are open (the client's own, and B's: one per forwarded call)."""
    port = f"{httpx2.URL(replica.url).port:04X}"

    async def connected() -> bool:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
        fields = [line.split() for line in lines]
        return sum(1 for f in fields if f[1].endswith(":" + port) and f[3] == "01") >= count

    await wait_for(connected, timeout=10, interval=0.01)


async def test_an_edit_adds_and_removes_a_server_on_every_replica_under_traffic(
    tmp_path: Path, shared_redis: RedisServer
) -> None:
    """Two replicas, their hub.toml edited alike (as a deployment rolls a config out) while a client's calls
    spread over both: `old` leaves and `new` joins every replica's catalog, and no call fails."""
    replicas = [launch_replica(tmp_path / name, shared_redis.url, servers=("up", "old")) for name in "ab"]
    urls = [replica.url for replica in replicas]
    served: list[str] = []
    try:
        for replica in replicas:
            until_ready(replica)
        with anyio.fail_after(60):
            async with client("alice", urls, mode="legacy") as c:
                names = {tool.name for tool in (await c.list_tools()).tools}
                assert {"up_lookup", "old_lookup"} <= names
                edited = anyio.Event()

                async def traffic() -> None:  # through both replicas, all along the edit: none may fail
                    while not edited.is_set():
                        result = await c.call_tool("up_lookup", {"key": len(served)})
                        assert not result.is_error, result
                        served.append(text(result))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(traffic)
                    for replica in replicas:  # written whole, then renamed over: never read half-written
                        edit = replica.folder / "hub.toml.new"
                        edit.write_text(hub_toml(shared_redis.url, servers=("up", "new")), encoding="utf-8")
                        edit.replace(replica.folder / "hub.toml")

                    async def everywhere() -> bool:  # each list goes to the next replica: two in a row see both
                        seen = [{tool.name for tool in (await c.list_tools()).tools} for _ in replicas]
                        return all("new_lookup" in s and "old_lookup" not in s for s in seen)

                    await wait_for(everywhere, timeout=45)
                    edited.set()
                for _ in replicas:
                    assert text(await c.call_tool("new_lookup", {"key": "joined"})).startswith('{"key": "joined"}')
    finally:
        for replica in replicas:
            replica.process.terminate()
            try:
                replica.process.wait(10)
            except subprocess.TimeoutExpired:
                replica.kill()
    assert len(served) > 1
