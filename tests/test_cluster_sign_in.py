"""A person's sign-in to a `mode = "user"` mount completes whichever replica their browser reaches.

Real parts only: a real `redis-server`, two `mcp-hub serve --transport http` replicas on loopback sharing it
(`[cluster]`) and one token file, each mounting the fixture SDK server over streamable HTTP as a `user` mount;
the mount's authorization server with its login page (tests/servers/authorization_server.py) and the
upstream behind its bearer check, served in this test; the SDK's clients, each talking to the replica the
test names; an HTTP client with its own cookie jar as the person's browser, behind a balancer with no
affinity (`Balancer`): each of its requests to the hub's address (`redirect_uri`'s) goes to the replica the
test names, in turn.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult

from mcp_hub.config import CLIENT_DOCUMENT_PATH
from mcp_hub.credentials import consent
from mcp_hub.credentials.connections import ConnectionStore, new_key
from mcp_hub.credentials.user import sign_in_routes
from mcp_hub.server.http import replicas
from tests.conftest import free_port, serve_app
from tests.harness.cluster import Replica, start_replica
from tests.harness.identity import allowed, sign_in, sign_in_link, witnessed
from tests.redis_server import RedisServer, started_redis
from tests.servers.authorization_server import AuthorizationServer, guarded
from tests.servers.fixture import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SECRET = "s3cret-of-the-hub-at-the-as"
KEYS = {"alice": "a" * 32, "bob": "b" * 32, "carol": "c" * 32}
TOKEN_KEY = new_key()


@pytest.fixture(scope="module")
def shared_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from started_redis(tmp_path_factory)


class Balancer(httpx2.AsyncBaseTransport):
    """The load balancer in front of the replicas, as the browser meets it: each request for the hub's address
    (port `hub`) goes to the next port of `route`; any other (the authorization server's pages) as it is."""

    def __init__(self, hub: int, route: list[int]) -> None:
        self._hub = hub
        self.route = route
        self.sent: list[tuple[str, str, int]] = []
        self._transport = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.port == self._hub:
            port = self.route.pop(0)
            request.url = request.url.copy_with(port=port)
            request.headers["host"] = f"127.0.0.1:{port}"
            self.sent.append((request.method, request.url.path, port))
        return await self._transport.handle_async_request(request)

    async def aclose(self) -> None:
        await self._transport.aclose()


@dataclass
class Two:
    a: Replica
    b: Replica
    hub: int
    """The port of the hub's address as browsers reach it (the balancer's), in `redirect_uri`."""
    server: AuthorizationServer
    upstream: str
    store: Path
    calls: list[tuple[str, bytes]]
    """The bearer and body of every request the upstream let through."""

    @property
    def ports(self) -> tuple[int, int]:
        return port_of(self.a), port_of(self.b)

    @asynccontextmanager
    async def client(self, principal: str, on: Replica, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
        """An SDK client of `principal` (their API key), talking to replica `on` only."""
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS[principal]}"}, timeout=30) as http,
            Client(streamable_http_client(on.url, http_client=http), mode=mode, cache=None, **options) as client,
        ):
            yield client

    @asynccontextmanager
    async def browser(self, route: list[int]) -> AsyncIterator[tuple[httpx2.AsyncClient, Balancer]]:
        """A person's browser, its requests to the hub sent to the replicas (ports) of `route` in turn."""
        balancer = Balancer(self.hub, route)
        async with httpx2.AsyncClient(transport=balancer, timeout=30, follow_redirects=False) as browser:
            yield browser, balancer

    def tokens_of(self, who: str) -> set[str]:
        return {t for t, i in self.server.tokens.items() if i.subject == who and i.audience == self.upstream}

    def bearers_of_calls(self, text: str) -> set[str]:
        return {
            bearer.partition(" ")[2]
            for bearer, body in self.calls
            if b'"tools/call"' in body and f'"text":"{text}"'.encode() in body.replace(b" ", b"")
        }


def port_of(replica: Replica) -> int:
    port = httpx2.URL(replica.url).port
    assert port is not None
    return port


def replica_toml(redis_url: str, upstream: str, issuer: str, redirect_uri: str, store: Path) -> str:
    keys = ", ".join(f'{name} = "{key}"' for name, key in KEYS.items())
    return f"""
[servers.remote]
url = "{upstream}"

[servers.remote.auth]
mode = "user"
issuer = "{issuer}"
client_id = "the-hub"
client_secret = "{SECRET}"
scope = "tracker"
redirect_uri = "{redirect_uri}"
token_key = "{TOKEN_KEY}"
token_store = "{store}"

[auth]
api_keys = {{ {keys} }}

[cluster]
redis = "{redis_url}"
"""


def stop(replica: Replica) -> None:
    if replica.process.poll() is None:
        replica.process.terminate()
        try:
            replica.process.wait(10)
        except subprocess.TimeoutExpired:
            replica.kill()


@asynccontextmanager
async def two_replicas(tmp_path: Path, redis: RedisServer) -> AsyncIterator[Two]:
    """Replicas A and B of one hub (one hub.toml, one token file), whose `redirect_uri` is the balancer's
    address, which serves nothing itself: every browser request to it reaches A or B as the test says."""
    hub, upstream_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    server = AuthorizationServer(clients={"the-hub": SECRET})
    calls: list[tuple[str, bytes]] = []
    store = tmp_path / "connections"
    async with serve_app(server.app()) as issuer:
        server.issuer = issuer
        fixture = witnessed(build_server("remote").streamable_http_app(), calls)
        async with serve_app(guarded(fixture, server, upstream, [], public=True), port=upstream_port):
            toml = replica_toml(redis.url, upstream, issuer, f"http://127.0.0.1:{hub}/oauth/callback", store)
            started: list[Replica] = []
            try:
                for name in "ab":  # in a thread: the replicas reach the upstream served on this event loop
                    start = functools.partial(start_replica, tmp_path / name, redis.url, toml=toml)
                    started.append(await anyio.to_thread.run_sync(start))
                yield Two(started[0], started[1], hub, server, upstream, store, calls)
            finally:
                for replica in started:
                    await anyio.to_thread.run_sync(stop, replica)


def named_replica(value: str) -> str:
    """The replica id before the dot of a consent ID or `state`."""
    replica, dot, rest = value.partition(".")
    assert dot and len(replica) == 12 and rest, value
    return replica


async def test_a_sign_in_completes_whichever_replica_the_browser_reaches(
    tmp_path: Path, shared_redis: RedisServer
) -> None:
    """alice's client is on replica A, which hands out the link and holds her call while she signs in; her
    browser opens the consent page on B, allows on B, signs in at the authorization server and comes back
    to the callback on B: B forwards each to A (cookies, form and redirects as they are), and her call goes
    through on A. carol's link, made on A, is opened on B, allowed on A, and brought back to B; her next
    call, on B, goes through with the token A kept (the replicas share the token file)."""
    async with two_replicas(tmp_path, shared_redis) as two:
        port_a, port_b = two.ports
        asked: list[Any] = []
        routes: list[list[tuple[str, str, int]]] = []

        async def open_link(context: Any, params: Any) -> ElicitResult:
            asked.append(params)
            async with two.browser([port_b, port_b, port_b]) as (browser, balancer):
                done = await sign_in(params.url, "alice", browser)
                assert done.status_code == 200 and "signed in" in done.text, done.text
                routes.append(balancer.sent)
            return ElicitResult(action="accept")

        with anyio.fail_after(90):
            async with two.client("alice", two.a, elicitation_callback=open_link) as alice:
                result = await alice.call_tool("remote_echo", {"text": "alice-0"})
            assert result.structured_content == {"text": "alice-0", "server": "remote"}
            (params,) = asked
            link = urlsplit(params.url)
            assert link.port == two.hub and link.path.startswith("/oauth/consent/")
            owner = named_replica(link.path.removeprefix("/oauth/consent/"))
            assert [port for _, _, port in routes[0]] == [port_b] * 3  # the page, the form, the callback: all B
            assert two.bearers_of_calls("alice-0") == two.tokens_of("alice") != set()

            async with two.client("carol", two.a, mode="2026-07-28") as carol:
                with pytest.raises(MCPError) as caught:
                    await carol.call_tool("remote_echo", {"text": "carol-first"})
            carols = sign_in_link(caught)
            assert named_replica(urlsplit(carols).path.removeprefix("/oauth/consent/")) == owner
            async with two.browser([port_b, port_a, port_b]) as (browser, balancer):
                authorize = await allowed(browser, carols)
                (state,) = parse_qs(urlsplit(authorize).query)["state"]
                assert named_replica(state) == owner
                assert browser.cookies.get(consent.COOKIE)  # set by A, through B
                assert (await browser.get(authorize)).status_code == 200  # the authorization server's login page
                back = await browser.post(authorize, data={"user": "carol", "password": "pw"})
                done = await browser.get(back.headers["location"])
                assert done.status_code == 200 and "signed in" in done.text, done.text
            assert [(method, port) for method, _, port in balancer.sent] == [
                ("GET", port_b),
                ("POST", port_a),
                ("GET", port_b),
            ]
            async with two.client("carol", two.b, mode="2026-07-28") as carol:
                result = await carol.call_tool("remote_echo", {"text": "carol-0"})
            assert result.structured_content == {"text": "carol-0", "server": "remote"}
        assert two.bearers_of_calls("carol-0") == two.tokens_of("carol") != set()
        kept = {c.principal for c in ConnectionStore(two.store, TOKEN_KEY).list()}
        assert kept == {"alice", "carol"}


async def test_a_sign_in_whose_replica_is_gone_gets_a_page_that_says_to_start_again(
    tmp_path: Path, shared_redis: RedisServer
) -> None:
    """bob's two links are made on A; he allows the first on A and signs in at the authorization server; A
    stops. Through B, the second link's page and the first's callback are each answered 410 with a page
    telling him to start again, and nothing is kept. A link or state that names no replica is B's to answer
    (400, not known)."""
    async with two_replicas(tmp_path, shared_redis) as two:
        port_a, port_b = two.ports
        with anyio.fail_after(90):
            async with two.client("bob", two.a) as bob:
                links = []
                for n in range(2):
                    with pytest.raises(MCPError) as caught:
                        await bob.call_tool("remote_echo", {"text": f"bob-{n}"})
                    links.append(sign_in_link(caught))
            async with two.browser([port_a, port_a, port_b, port_b]) as (browser, _):
                authorize = await allowed(browser, links[0])
                assert (await browser.get(authorize)).status_code == 200
                back = await browser.post(authorize, data={"user": "bob", "password": "pw"})
                callback = back.headers["location"]
                await anyio.to_thread.run_sync(stop, two.a)
                for gone in (await browser.get(links[1]), await browser.get(callback)):
                    assert gone.status_code == 410, gone.text
                    assert "gone" in gone.text and "Start again" in gone.text
                    assert gone.headers["cache-control"] == "no-store" and gone.headers["x-frame-options"] == "DENY"
                hub = f"http://127.0.0.1:{two.hub}"
                for made_up in ("nope", ".nope", "nope."):  # no replica named: B's own, unknown
                    browser_on_b = httpx2.AsyncClient(transport=Balancer(two.hub, [port_b, port_b]), timeout=30)
                    async with browser_on_b:
                        for unknown in (
                            f"{hub}/oauth/callback?state={made_up}&code=x",
                            f"{hub}/oauth/consent/{made_up}",
                        ):
                            answer = await browser_on_b.get(unknown)
                            assert answer.status_code == 400 and "not known" in answer.text, answer.text
        assert not two.tokens_of("bob")
        assert not [r for r in two.server.requests if r["grant_type"] == "authorization_code"]


def test_with_replicas_consent_ids_and_states_name_this_replica_and_without_them_nothing() -> None:
    try:
        sign_in_routes("0123456789ab")
        named = consent.new_id()
        assert named_replica(named) == "0123456789ab" and len(named) == 12 + 1 + 43
    finally:
        sign_in_routes()
    alone = consent.new_id()
    assert "." not in alone and len(alone) == 43


def test_the_paths_forwarded_are_the_sign_in_routes() -> None:
    """replicas.py names the sign-in routes it forwards (the server floor does not import credentials): the
    same paths as credentials/consent.py and user.py serve, but the hub's client ID metadata document, which
    every replica serves alike."""
    assert replicas.SIGN_IN_CONSENT == consent.CONSENT_PATH + "/"
    routes = {getattr(route, "path", None) for route in sign_in_routes()}
    assert routes == {consent.CONSENT_PATH + "/{consent_id}", replicas.SIGN_IN_CALLBACK, CLIENT_DOCUMENT_PATH}
