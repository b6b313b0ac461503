"""A server's questions (sampling, elicitation, roots) reach the client whose call it is serving."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_hub.config import load_config
from mcp_hub.server.http import build_app
from tests.conftest import fixture_server, hub_client, make_config, running_hub, serve_app, write_config
from tests.harness.people import EXPECTED, Meeting, Person, ask_at_once, expected
from tests.servers.fixture import build_server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("what", list(EXPECTED))
@pytest.mark.parametrize(
    ("server_era", "client_mode"),
    [("legacy", "legacy"), ("legacy", "2026-07-28"), ("2026-07-28", "legacy"), ("2026-07-28", "2026-07-28")],
)
async def test_questions_reach_the_calling_client(tmp_path: Path, what: str, server_era: str, client_mode: str) -> None:
    """Handshake-era questions are relayed as requests to a handshake-era client, and as `input_required`
    results to a 2026-07-28 one; 2026-07-28 `input_required` rounds are driven by the hub for a
    handshake-era client, and passed through to a 2026-07-28 one."""
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol=server_era)})
    ada = Person("ada")
    async with running_hub(config) as hub, hub_client(hub, client_mode, **ada.options()) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("srv_ask", {"what": what, "text": "hello"})
    assert result.is_error is not True, result
    assert result.content[0].text == EXPECTED[what]  # type: ignore[union-attr]
    assert ada.asked == [what]


async def test_a_client_without_the_capability_gets_a_clear_error(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="legacy")})
    async with running_hub(config) as hub, hub_client(hub) as client:
        with anyio.fail_after(10), pytest.raises(MCPError) as caught:
            await client.call_tool("srv_ask", {"what": "sampling", "text": "x"})
    assert "does not support sampling" in caught.value.message


async def test_a_modern_client_without_the_capability_gets_a_clear_error(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="legacy")})
    async with running_hub(config) as hub, hub_client(hub, "2026-07-28") as client:
        with anyio.fail_after(10), pytest.raises(MCPError) as caught:
            await client.call_tool("srv_ask", {"what": "elicitation", "text": "x"})
    assert "does not support elicitation" in caught.value.message


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_2026_server_hears_the_capabilities_of_the_client_it_serves(tmp_path: Path, mode: str) -> None:
    """Two clients share one session with a 2026-07-28 server: each call carries its own client's
    capabilities, not what the hub's session offers on behalf of all."""
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="2026-07-28")})
    declared = "io.modelcontextprotocol/clientCapabilities"
    async with (
        running_hub(config) as hub,
        hub_client(hub, mode, **Person("ada").options()) as asking,
        hub_client(hub, mode) as plain,
    ):
        with anyio.fail_after(10):
            heard = [await client.call_tool("srv_request_meta", {}) for client in (asking, plain, asking, plain)]
    for full, bare in (heard[0:2], heard[2:4]):  # alternating: neither client's capabilities stick to the other
        assert full.structured_content is not None and bare.structured_content is not None
        assert {"sampling", "elicitation", "roots"} <= set(full.structured_content[declared]), full.structured_content
        assert not {"sampling", "elicitation", "roots"} & set(bare.structured_content[declared]), (
            bare.structured_content
        )


async def test_the_state_a_modern_client_carries_is_sealed_and_bound_to_its_call(tmp_path: Path) -> None:
    """A legacy server's question parks the call; only the untouched state, on the same call, resumes it."""
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="legacy")})
    answer = {"action": "accept", "content": {"answer": "ada"}}
    asked = {"what": "elicitation", "text": "x"}  # a retry sends the arguments of the call again
    async with running_hub(config) as hub, hub_client(hub, "2026-07-28", **Person("ada").options()) as client:
        with anyio.fail_after(10):
            first = await client.session.call_tool("srv_ask", asked, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests
            assert first.request_state is not None
            (key,) = first.input_requests
            state = first.request_state
            body, _, mac = state.rpartition(".")
            forged = [
                state[:-2] + ("AA" if not state.endswith("AA") else "BB"),  # another signature
                f"{body[:-1]}{'A' if body[-1] != 'A' else 'B'}.{mac}",  # other claims
                "mcp-hub.1.garbage",
            ]
            for bad in forged:
                with pytest.raises(MCPError) as caught:
                    await client.session.call_tool("srv_ask", asked, input_responses={key: answer}, request_state=bad)
                assert "requestState is not valid" in caught.value.message
            # Bound to the tool it was issued for.
            with pytest.raises(MCPError):
                await client.session.call_tool(
                    "srv_echo", {"text": "x"}, input_responses={key: answer}, request_state=state
                )
            done = await client.session.call_tool("srv_ask", asked, input_responses={key: answer}, request_state=state)
            assert done.content[0].text == "elicited: accept {'answer': 'ada'}"  # type: ignore[union-attr]
            # Used up: the call it belonged to is over.
            with pytest.raises(MCPError) as caught:
                await client.session.call_tool("srv_ask", asked, input_responses={key: answer}, request_state=state)
            assert "has ended" in caught.value.message


async def test_two_clients_asked_by_a_modern_server_each_answer_their_own(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="2026-07-28")})
    meeting = Meeting(2)
    ada, bob = Person("ada", meeting), Person("bob", meeting)
    results: dict[str, str] = {}
    async with running_hub(config) as hub:

        async def call(person: Person) -> None:
            async with hub_client(hub, "legacy", **person.options()) as client:
                result = await client.call_tool("srv_ask", {"what": "elicitation", "text": "who?"})
                results[person.name] = result.content[0].text  # type: ignore[union-attr]

        with anyio.fail_after(15):
            async with anyio.create_task_group() as tg:
                for person in (ada, bob):
                    tg.start_soon(call, person)
    assert results == {"ada": "elicited: accept {'answer': 'ada'}", "bob": "elicited: accept {'answer': 'bob'}"}
    assert ada.asked == bob.asked == ["elicitation"]


async def test_questions_are_relayed_over_the_hubs_http_endpoint(tmp_path: Path) -> None:
    from mcp_hub.server.http import build_app
    from tests.conftest import serve_app

    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="legacy")})
    ada = Person("ada")
    async with running_hub(config) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(app) as base, Client(f"{base}/mcp", mode="legacy", cache=None, **ada.options()) as client:
            with anyio.fail_after(10):
                results = [
                    (await client.call_tool("srv_ask", {"what": what, "text": "hello"})).content[0].text  # type: ignore[union-attr]
                    for what in EXPECTED
                ]
    assert results == list(EXPECTED.values())


@pytest.mark.parametrize("server_era", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("client_mode", ["legacy", "2026-07-28"])
async def test_a_client_cancelling_a_call_cancels_it_on_the_server(
    tmp_path: Path, server_era: str, client_mode: str
) -> None:
    from tests.conftest import wait_for

    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol=server_era)})
    marker = tmp_path / "call"
    async with running_hub(config) as hub, hub_client(hub, client_mode) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "srv_wait", {"marker": str(marker)})
            await wait_for(lambda: _exists(Path(f"{marker}.started")))
            tg.cancel_scope.cancel()
        await wait_for(lambda: _exists(Path(f"{marker}.cancelled")), timeout=10)
        # The connection is fine afterwards.
        echo = await client.call_tool("srv_echo", {"text": "after"})
    assert echo.structured_content == {"text": "after", "server": "srv"}


async def _exists(path: Path) -> bool:
    return path.exists()


async def test_a_sealed_state_is_refused_to_another_principal(tmp_path: Path) -> None:
    """Alice's requestState, presented by Bob (another API key) for the same tool, resumes nothing."""
    path = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv", protocol="legacy")})
    with path.open("a", encoding="utf-8") as file:
        file.write('\n[auth]\napi_keys = { alice = "${ALICE_KEY}", bob = "${BOB_KEY}" }\n')
    keys = {"alice": "a" * 32, "bob": "b" * 32}
    config = load_config(path, environ={"ALICE_KEY": keys["alice"], "BOB_KEY": keys["bob"]})
    answer = {"action": "accept", "content": {"answer": "ada"}}
    asked = {"what": "elicitation", "text": "x"}  # a retry sends the arguments of the call again

    @asynccontextmanager
    async def client_of(base: str, who: str) -> AsyncIterator[Client]:
        async with httpx2.AsyncClient(headers={"X-API-Key": keys[who]}, timeout=30) as http:
            transport = streamable_http_client(f"{base}/mcp", http_client=http)
            async with Client(transport, mode="2026-07-28", **Person(who).options()) as client:
                yield client

    async with running_hub(config) as hub:
        app = build_app(
            hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, api_keys=config.auth.api_keys
        )
        async with serve_app(app) as base, client_of(base, "alice") as alice, client_of(base, "bob") as bob:
            with anyio.fail_after(15):
                first = await alice.session.call_tool("srv_ask", asked, allow_input_required=True)
                assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
                (key,) = first.input_requests or {}
                resumed = {"input_responses": {key: answer}, "request_state": first.request_state}
                with pytest.raises(MCPError) as caught:
                    await bob.session.call_tool("srv_ask", asked, **resumed)
                assert "requestState is not valid" in caught.value.message
                done = await alice.session.call_tool("srv_ask", asked, **resumed)
    assert done.content[0].text == "elicited: accept {'answer': 'ada'}"  # type: ignore[union-attr]


@pytest.mark.slow
async def test_two_calls_reporting_progress_at_once_each_hear_their_own(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"srv": fixture_server("srv")})
    heard: dict[str, list[tuple[float, float | None]]] = {"a": [], "b": []}

    def recorder(who: str) -> Any:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            heard[who].append((progress, total))

        return on_progress

    async with running_hub(config) as hub, hub_client(hub) as client, anyio.create_task_group() as tg:
        for who, steps in (("a", 3), ("b", 5)):
            arguments = {"seconds": 0.3, "steps": steps}
            tg.start_soon(lambda a=arguments, w=who: client.call_tool("srv_slow", a, progress_callback=recorder(w)))
    assert heard["a"] == [(float(i), 3.0) for i in range(1, 4)]
    assert heard["b"] == [(float(i), 5.0) for i in range(1, 6)]


@asynccontextmanager
async def http_upstream(name: str) -> AsyncIterator[str]:
    """The fixture server over streamable HTTP, in-process; its MCP URL."""
    async with serve_app(build_server(name).streamable_http_app()) as base:
        yield f"{base}/mcp"


def late_to_listen(app: Any, seconds: float) -> Any:
    """`app`, taking `seconds` before it answers a GET (the standalone stream opens that late)."""

    async def late(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await anyio.sleep(seconds)
        await app(scope, receive, send)

    return late


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_question_on_the_session_right_after_the_handshake_is_not_lost(tmp_path: Path) -> None:
    """A handshake-era server over HTTP drops what it sends on the standalone stream while no GET is open:
    the hub serves a session only once the server has answered its GET, so a server asking the session
    (not the call) for roots during the first call is heard, however slowly the GET is answered."""
    ada = Person("ada")
    async with serve_app(late_to_listen(build_server("srv").streamable_http_app(), 0.8)) as base:
        config = make_config(tmp_path, {"srv": {"url": f"{base}/mcp", "protocol": "legacy"}})
        async with running_hub(config) as hub, hub_client(hub, "legacy", **ada.options()) as client:
            with anyio.fail_after(10):
                result = await client.call_tool("srv_ask", {"what": "roots"})
    assert result.content[0].text == EXPECTED["roots"]  # type: ignore[union-attr]
    assert ada.asked == ["roots"]


# The in-process server asks for sampling as a handshake-era server does, which the SDK warns is deprecated.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize("what", list(EXPECTED))
@pytest.mark.parametrize(
    ("ada_mode", "bob_mode"), [("legacy", "legacy"), ("legacy", "2026-07-28"), ("2026-07-28", "2026-07-28")]
)
async def test_over_http_a_shared_session_relays_each_question_to_the_call_it_came_with(
    tmp_path: Path, what: str, ada_mode: str, bob_mode: str
) -> None:
    """Over streamable HTTP a question about a call arrives on that call's stream: it is that call's
    client's, however many clients have calls in flight on the mount's one (shared) session."""
    meeting = Meeting(2)
    ada, bob = Person("ada", meeting), Person("bob", meeting)
    async with http_upstream("srv") as url:
        config = make_config(tmp_path, {"srv": {"url": url, "protocol": "legacy"}})
        async with (
            running_hub(config) as hub,
            hub_client(hub, ada_mode, **ada.options()) as ada_client,
            hub_client(hub, bob_mode, **bob.options()) as bob_client,
        ):
            results = await ask_at_once({ada: ada_client, bob: bob_client}, what, related=True)
    assert results == {"ada": expected(what, "ada"), "bob": expected(what, "bob")}
    assert ada.asked == bob.asked == [what]
