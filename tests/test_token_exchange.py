"""Token exchange end to end (RFC 8693): each OAuth caller reaches a mount with its own exchanged token.

All real parts: the hub's sign-in issuer (tests/servers/authorization.py) mints the callers' JWTs; the
authorization server the mount names (tests/servers/authorization_server.py) exchanges them (it is told of
them as tokens it issued, as one organisation's authorization server would know its own); the upstream is
the fixture SDK server over streamable HTTP behind a bearer check that records every request; the clients
are the SDK's, over the hub's real HTTP endpoint.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CreateMessageRequestParams, CreateMessageResult, PromptReference, TextContent

from mcp_hub.config import load_config
from mcp_hub.errors import ConfigError
from mcp_hub.server.http import build_app
from tests.conftest import free_port, running_hub, serve_app, wait_for, write_config
from tests.harness.identity import witnessed
from tests.servers.authorization import AuthorizationServer as SignInIssuer
from tests.servers.authorization_server import EXCHANGE, AuthorizationServer, Issued, guarded
from tests.servers.fixture import build_server, sse_app

pytestmark = pytest.mark.anyio

SECRET = "s3cret-of-the-hub-at-the-as"
CAROL_KEY = "c" * 32


@dataclass
class Setup:
    signin: SignInIssuer
    exchanger: AuthorizationServer
    hub_resource: str
    upstream: str
    base: str
    seen: list[dict[str, str]]
    """The headers of every request the upstream received."""
    calls: list[tuple[str, bytes]]
    """The bearer and body of every request the upstream accepted."""

    def signed_in(self, who: str, **claims: Any) -> str:
        """A token for the hub, as `who` would hold after signing in (known to the exchanging server)."""
        token = self.signin.mint(self.hub_resource, sub=who, **claims)
        self.exchanger.tokens[token] = Issued("a-client-app", self.hub_resource, time.time() + 3600, subject=who)
        return token

    @asynccontextmanager
    async def client(self, authorization: str, mode: str) -> AsyncIterator[Client]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": authorization}, timeout=30) as http,
            Client(streamable_http_client(f"{self.base}/mcp", http_client=http), mode=mode, cache=None) as client,
        ):
            yield client

    def exchanged_for(self, who: str) -> str:
        """The one token the exchanging server issued for `who`, for the upstream."""
        (token,) = self.all_exchanged_for(who)
        return token

    def all_exchanged_for(self, who: str) -> list[str]:
        """The tokens the exchanging server issued for `who`, for the upstream, oldest first."""
        tokens = [t for t, i in self.exchanger.tokens.items() if i.subject == who and i.client_id == "the-hub"]
        assert all(self.exchanger.tokens[token].audience == self.upstream for token in tokens)
        return tokens


@asynccontextmanager
async def exchange_hub(tmp_path: Path, protocol: str = "auto", *, sse: bool = False) -> AsyncIterator[Setup]:
    """A hub whose mount "remote" exchanges its callers' tokens (`protocol`: the mount's; `sse`: the server
    speaks the legacy HTTP+SSE transport), taking OAuth tokens from `signin` and carol's API key."""
    signin_port, hub_port, upstream_port = free_port(), free_port(), free_port()
    signin = SignInIssuer(f"http://127.0.0.1:{signin_port}")
    hub_resource = f"http://127.0.0.1:{hub_port}/mcp"
    upstream = f"http://127.0.0.1:{upstream_port}/sse" if sse else f"http://127.0.0.1:{upstream_port}/mcp"
    exchanger = AuthorizationServer(clients={"the-hub": SECRET})
    seen: list[dict[str, str]] = []
    calls: list[tuple[str, bytes]] = []
    async with serve_app(exchanger.app()) as exchanger_base:
        exchanger.issuer = exchanger_base
        mount = {
            "url": upstream,
            **({"transport": "sse"} if sse else {}),
            "protocol": protocol,
            "auth": {
                "mode": "token_exchange",
                "issuer": exchanger_base,
                "client_id": "the-hub",
                "client_secret": SECRET,
            },
        }
        path = write_config(tmp_path / "hub.toml", {"remote": mount})
        with path.open("a", encoding="utf-8") as file:
            file.write(f'\n[auth]\napi_keys = {{ carol = "{CAROL_KEY}" }}\n')
            file.write(f'[auth.oauth]\nissuer = "{signin.issuer}"\nresource = "{hub_resource}"\n')
        config = load_config(path)
        server = build_server("remote")
        served = sse_app(server) if sse else server.streamable_http_app()
        app = guarded(witnessed(served, calls), exchanger, upstream, seen)
        async with (
            serve_app(signin.app(), signin_port),
            serve_app(app, port=upstream_port),
            running_hub(config) as hub,
        ):
            endpoint = build_app(
                hub.endpoint.server,
                host="127.0.0.1",
                path="/mcp",
                health=hub.health,
                api_keys=config.auth.api_keys,
                oauth=config.auth.oauth,
            )
            async with serve_app(endpoint, hub_port) as base:
                assert hub.health()["servers"]["remote"]["state"] == "up", hub.health()
                yield Setup(signin, exchanger, hub_resource, upstream, base, seen, calls)


def _echoed(body: bytes, text: str) -> bool:
    return b'"tools/call"' in body and f'"text":"{text}"'.encode() in body.replace(b" ", b"")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["legacy", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_each_caller_reaches_the_mount_with_its_own_exchanged_token(
    tmp_path: Path, mode: str, protocol: str
) -> None:
    """Two principals call one token exchange mount: the upstream receives each one's own exchanged token
    (audience: the server), exchanged once per token lifetime, and never a client's token. The hub's own
    listing uses the hub's client credentials token."""
    async with exchange_hub(tmp_path, protocol) as setup:
        alice, bob = setup.signed_in("alice"), setup.signed_in("bob")
        with anyio.fail_after(60):
            async with setup.client(f"Bearer {alice}", mode) as a, setup.client(f"Bearer {bob}", mode) as b:
                tools = await a.list_tools()
                assert "remote_echo" in {tool.name for tool in tools.tools}
                completion = await b.complete(PromptReference(name="remote_greet"), {"name": "who", "value": "al"})
                assert completion.completion.values == ["alice", "albert"]
                for round_ in range(3):
                    result = await a.call_tool("remote_echo", {"text": f"alice-{round_}"})
                    assert result.structured_content == {"text": f"alice-{round_}", "server": "remote"}
                    result = await b.call_tool("remote_echo", {"text": f"bob-{round_}"})
                    assert result.structured_content == {"text": f"bob-{round_}", "server": "remote"}
        exchanges = [r for r in setup.exchanger.requests if r["grant_type"] == EXCHANGE]
        own = [r for r in setup.exchanger.requests if r["grant_type"] == "client_credentials"]
        alices, bobs = setup.exchanged_for("alice"), setup.exchanged_for("bob")
        (hubs,) = [t for t, i in setup.exchanger.tokens.items() if i.subject is None]
    assert sorted(r["subject_token"] for r in exchanges) == sorted([alice, bob])  # once each, 6 calls
    assert all(r["resource"] == setup.upstream and r["authenticated_as"] == "the-hub" for r in exchanges)
    assert len(own) == 1 and own[0]["resource"] == setup.upstream
    for round_ in range(3):
        assert {bearer for bearer, body in setup.calls if _echoed(body, f"alice-{round_}")} == {f"Bearer {alices}"}
        assert {bearer for bearer, body in setup.calls if _echoed(body, f"bob-{round_}")} == {f"Bearer {bobs}"}
    assert {bearer for bearer, body in setup.calls if b"completion/complete" in body} == {f"Bearer {bobs}"}
    received = {headers.get("authorization", "") for headers in setup.seen}
    assert received <= {f"Bearer {alices}", f"Bearer {bobs}", f"Bearer {hubs}"}, received
    everything = repr(setup.seen) + repr(setup.calls)
    assert alice not in everything and bob not in everything  # no client's token ever reaches the upstream


async def test_a_caller_without_a_token_gets_a_clear_error(tmp_path: Path) -> None:
    """An API key caller has no token to exchange: its call fails at once, saying why, and nothing is sent."""
    async with exchange_hub(tmp_path) as setup:
        received = len(setup.calls)
        with anyio.fail_after(15):
            async with setup.client(f"Bearer {CAROL_KEY}", "2026-07-28") as carol:
                assert "remote_echo" in {tool.name for tool in (await carol.list_tools()).tools}
                with pytest.raises(MCPError, match="needs the caller's OAuth access token"):
                    await carol.call_tool("remote_echo", {"text": "carol"})
                with pytest.raises(MCPError, match="needs the caller's OAuth access token"):
                    await carol.complete(PromptReference(name="remote_greet"), {"name": "who", "value": "al"})
            async with setup.client(f"Bearer {CAROL_KEY}", "legacy") as carol:
                with pytest.raises(MCPError, match="needs the caller's OAuth access token"):
                    await carol.call_tool("remote_echo", {"text": "carol"})
        assert not [body for _, body in setup.calls[received:] if b"tools/call" in body or b"completion/" in body]
        assert not [r for r in setup.exchanger.requests if r["grant_type"] == EXCHANGE]


@pytest.mark.slow
def test_a_token_exchange_mount_is_per_client_and_refuses_shared(tmp_path: Path) -> None:
    auth = {"mode": "token_exchange", "token_url": "https://as.example/token", "client_id": "the-hub"}
    mount = {"url": "https://wiki.example/mcp", "auth": auth}
    implied = load_config(write_config(tmp_path / "a.toml", {"wiki": mount}))
    assert implied.servers["wiki"].isolation == "per-client"
    shared = {"url": "https://wiki.example/mcp", "isolation": "shared", "auth": auth}
    with pytest.raises(ConfigError, match="served per client") as caught:
        load_config(write_config(tmp_path / "b.toml", {"wiki": shared}))
    assert "servers.wiki.isolation" in str(caught.value)


@pytest.mark.slow
async def test_an_exchanged_token_is_kept_until_it_expires_then_exchanged_anew(tmp_path: Path) -> None:
    async with exchange_hub(tmp_path) as setup:
        setup.exchanger.expires_in = 1  # exchanged tokens live 1 s from now on (kept until 0.1 s before)
        alice = setup.signed_in("alice")
        calls = 0

        def exchanges() -> list[dict[str, Any]]:
            return [r for r in setup.exchanger.requests if r["grant_type"] == EXCHANGE]

        async with setup.client(f"Bearer {alice}", "2026-07-28") as a:

            async def exchanged_twice() -> bool:
                nonlocal calls
                calls += 1
                await a.call_tool("remote_echo", {"text": f"alice-{calls}"})
                return len(exchanges()) >= 2

            await wait_for(exchanged_twice, timeout=20)
        first, second = [
            t for t, i in setup.exchanger.tokens.items() if i.subject == "alice" and i.client_id == "the-hub"
        ]
    assert len(exchanges()) == 2 and calls > 2  # the first token served every call of its life
    bearers = [bearer for bearer, body in setup.calls if b"tools/call" in body]
    assert bearers[0] == f"Bearer {first}" and bearers[-1] == f"Bearer {second}"
    assert set(bearers) == {f"Bearer {first}", f"Bearer {second}"}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # the server's sampling request
async def test_a_clients_session_sends_with_the_latest_token_the_client_brought(tmp_path: Path) -> None:
    """Over legacy SSE the client's own session sends by itself what no call of the client sends (here: its
    answer to the server's `sampling/createMessage`), in its own task. After the client refreshes its token (the
    same person, a new token), that reaches the server with the new token exchanged, not with the one its session
    was opened with, which may have expired since."""
    async with exchange_hub(tmp_path, "legacy", sse=True) as setup:
        first, refreshed = setup.signed_in("alice", jti="first"), setup.signed_in("alice", jti="refreshed")

        async def sampling(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
            return CreateMessageResult(role="assistant", content=TextContent(type="text", text="sampled"), model="m")

        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {first}"}, timeout=30) as http,
                Client(
                    streamable_http_client(f"{setup.base}/mcp", http_client=http),
                    mode="legacy",
                    cache=None,
                    sampling_callback=sampling,
                ) as a,
            ):
                result = await a.call_tool("remote_echo", {"text": "before"})
                assert result.structured_content == {"text": "before", "server": "remote"}
                http.headers["Authorization"] = f"Bearer {refreshed}"
                asked = await a.call_tool("remote_ask", {"what": "sampling", "text": "q"})
                assert "sampled" in str(asked.content), asked
        opened_with, brought = setup.all_exchanged_for("alice")
    answers = [(bearer, body) for bearer, body in setup.calls if b'"sampled"' in body]
    assert answers and {bearer for bearer, _ in answers} == {f"Bearer {brought}"}, (answers, opened_with)
    assert {bearer for bearer, body in setup.calls if _echoed(body, "before")} == {f"Bearer {opened_with}"}
