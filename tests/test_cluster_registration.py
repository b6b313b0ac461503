"""Replicas of a hub (`[cluster]`) whose `mode = "user"` mount names no client register the hub once, at its
authorization server, for them all (credentials/registration.py).

Real parts only: a real `redis-server`, two `mcp-hub serve --transport http` replicas sharing it, each with a token
file of its own (as on two machines), mounting the fixture SDK server over streamable HTTP as a `user` mount whose
authorization server (tests/servers/authorization_server.py) registers any client (RFC 7591); the SDK's clients,
each on the replica the test names; people's browsers (HTTP clients) behind a balancer with no affinity.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_hub.cluster import Cluster
from mcp_hub.config import ServerAuth
from mcp_hub.credentials.authority import Authority
from mcp_hub.credentials.connections import ConnectionStore, new_key
from mcp_hub.credentials.credential import CredentialError
from mcp_hub.credentials.registration import Registration, share_with
from tests.conftest import free_port, serve_app
from tests.harness.cluster import Replica, start_replica
from tests.harness.identity import allowed, sign_in_link, witnessed
from tests.redis_server import RedisServer
from tests.servers.authorization_server import AuthorizationServer, guarded
from tests.servers.fixture import build_server
from tests.test_cluster_sign_in import Balancer, port_of, shared_redis, stop

__all__ = ["shared_redis"]

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

KEYS = {"alice": "a" * 32, "bob": "b" * 32}
TOKEN_KEY = new_key()


def replica_toml(redis_url: str, upstream: str, issuer: str, redirect_uri: str, store: Path) -> str:
    keys = ", ".join(f'{name} = "{key}"' for name, key in KEYS.items())
    return f"""
[servers.remote]
url = "{upstream}"

[servers.remote.auth]
mode = "user"
issuer = "{issuer}"
scope = "tracker"
redirect_uri = "{redirect_uri}"
token_key = "{TOKEN_KEY}"
token_store = "{store}"

[auth]
api_keys = {{ {keys} }}

[cluster]
redis = "{redis_url}"
"""


@asynccontextmanager
async def replicas(tmp_path: Path, redis: RedisServer) -> AsyncIterator[tuple[list[Replica], int, AuthorizationServer]]:
    """Replicas A and B (each its own token file), the balancer's port in their `redirect_uri`, and the server."""
    hub, upstream_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    server = AuthorizationServer(clients={})
    async with serve_app(server.app()) as issuer:
        server.issuer = issuer
        fixture = witnessed(build_server("remote").streamable_http_app(), [])
        async with serve_app(guarded(fixture, server, upstream, [], public=True), port=upstream_port):
            started: list[Replica] = []
            try:
                for name in "ab":
                    toml = replica_toml(
                        redis.url, upstream, issuer, f"http://127.0.0.1:{hub}/oauth/callback", tmp_path / f"{name}.tok"
                    )
                    start = functools.partial(start_replica, tmp_path / name, redis.url, toml=toml)
                    started.append(await anyio.to_thread.run_sync(start))
                yield started, hub, server
            finally:
                for replica in started:
                    await anyio.to_thread.run_sync(stop, replica)


async def link_of(principal: str, on: Replica) -> str:
    """`principal`'s first call on replica `on`: the sign-in link it is answered with."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS[principal]}"}, timeout=30) as http,
        Client(streamable_http_client(on.url, http_client=http), mode="2026-07-28", cache=None) as client,
    ):
        with pytest.raises(MCPError) as caught:
            await client.call_tool("remote_echo", {"text": f"{principal}-first"})
    return sign_in_link(caught)


async def test_replicas_register_the_hub_once_and_each_uses_that_client(
    tmp_path: Path, shared_redis: RedisServer
) -> None:
    """alice's link is made on A, bob's on B; both allow at the same moment, alice's browser reaching A and bob's
    B: each replica needs the hub's client at once, one registers it under the lock, the other waits and takes
    it. The authorization server registered one client; both authorization URLs name it; both token files keep
    it; alice's sign-in completes with it."""
    async with replicas(tmp_path, shared_redis) as (started, hub, server):
        a, b = started
        with anyio.fail_after(90):
            links = {"alice": await link_of("alice", a), "bob": await link_of("bob", b)}
            assert not server.clients  # nothing registered before a person allows
            urls: dict[str, str] = {}

            async def allow(principal: str, on: Replica) -> None:
                async with httpx2.AsyncClient(
                    transport=Balancer(hub, [port_of(on)] * 4), timeout=30, follow_redirects=False
                ) as browser:
                    urls[principal] = await allowed(browser, links[principal])
                    if principal == "alice":  # her sign-in completes, with the shared client
                        assert (await browser.get(urls[principal])).status_code == 200
                        back = await browser.post(urls[principal], data={"user": "alice", "password": "pw"})
                        done = await browser.get(back.headers["location"])
                        assert done.status_code == 200 and "signed in" in done.text, done.text

            async with anyio.create_task_group() as tg:
                tg.start_soon(allow, "alice", a)
                tg.start_soon(allow, "bob", b)
        assert list(server.clients) == ["registered-0"], server.clients
        named = {principal: parse_qs(urlsplit(url).query)["client_id"] for principal, url in urls.items()}
        assert named == {"alice": ["registered-0"], "bob": ["registered-0"]}
        issuer = server.issuer
        for name in "ab":
            kept = ConnectionStore(tmp_path / f"{name}.tok", TOKEN_KEY).registered("remote", issuer)
            assert kept is not None and kept["client_id"] == "registered-0", name
        assert any(i.subject == "alice" for i in server.tokens.values())


async def test_many_at_once_register_once_a_key_that_cannot_read_it_is_named_and_without_redis_each_registers(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """In process, on a real redis-server: eight replicas' registrations (each its own token file) asking at the same
    moment make one client; a replica whose token_key is another cannot read it, and says so; with Redis gone, a
    replica registers as it would alone."""
    server = AuthorizationServer(clients={})
    callback = "https://hub.example.com/oauth/callback"
    async with serve_app(server.app()) as issuer:
        server.issuer = issuer

        def registration(n: int, key: str = TOKEN_KEY) -> Registration:
            auth = ServerAuth(mode="user", issuer=issuer, redirect_uri=callback, token_key=key)
            authority = Authority("remote", issuer=issuer, token_url=None, resource_url="")
            return Registration("remote", auth, authority, ConnectionStore(tmp_path / f"{n}.tok", key))

        cluster = Cluster(redis_server.url)
        share_with(cluster)
        try:
            found: list[str] = []

            async def ask(n: int) -> None:
                found.append((await registration(n).client()).client_id)

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    for n in range(8):
                        tg.start_soon(ask, n)
            assert found == ["registered-0"] * 8 and list(server.clients) == ["registered-0"]
            assert ConnectionStore(tmp_path / "5.tok", TOKEN_KEY).registered("remote", issuer) == {
                "client_id": "registered-0",
                "token_endpoint_auth_method": "none",
            }
            with pytest.raises(CredentialError, match="give every replica the same token_key"):
                await registration(9, new_key()).client()

            redis_server.kill()
            with anyio.fail_after(30):
                alone = await registration(10).client()
            assert alone.client_id == "registered-1" and not cluster.up
        finally:
            share_with(None)
            await cluster.aclose()
