"""Credentials toward the mounted servers (mcp_hub/credentials/): per mount, never the client's.

The authorization server and the upstreams are real HTTP servers in the test
(tests/servers/authorization_server.py; the fixture MCP server over streamable
HTTP and legacy SSE), the upstream behind a bearer-token check that records every
header it receives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_hub.config import parse_config, signing_algorithm
from mcp_hub.credentials.credential import CredentialError
from mcp_hub.credentials.token import CachedToken, Token
from mcp_hub.credentials.token_exchange import CALLER_TOKEN, CallerToken, TokenExchange
from mcp_hub.credentials.workload import JWT_BEARER, WorkloadIdentity
from mcp_hub.errors import ConfigError
from mcp_hub.server.http import build_app
from tests.conftest import KEYS, free_port, hub_client, keyed_hub, make_config, running_hub, serve_app
from tests.harness.cli import mcp_hub
from tests.servers.authorization_server import AuthorizationServer, guarded, recording
from tests.servers.fixture import build_server, sse_app

pytestmark = pytest.mark.anyio

SECRET = "s3cret-of-the-hub-at-the-as"


@asynccontextmanager
async def authorization_server(**options: Any) -> AsyncIterator[AuthorizationServer]:
    server = AuthorizationServer(clients={"the-hub": SECRET}, **options)
    async with serve_app(server.app()) as base:
        server.issuer = base
        yield server


@asynccontextmanager
async def guarded_upstream(server: AuthorizationServer, seen: list[dict[str, str]]) -> AsyncIterator[str]:
    """The fixture server over streamable HTTP, taking only tokens `server` issued for its URL; yields that URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serve_app(guarded(build_server("remote").streamable_http_app(), server, url, seen), port=port):
        yield url


def client_credentials(server: AuthorizationServer, **extra: str) -> dict[str, str]:
    return {
        "mode": "client_credentials",
        "issuer": server.issuer,
        "client_id": "the-hub",
        "client_secret": SECRET,
        **extra,
    }


def bearers(seen: list[dict[str, str]]) -> set[str]:
    return {headers.get("authorization", "") for headers in seen}


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_client_credentials_token_is_fetched_once_and_presented(tmp_path: Path, protocol: str, mode: str) -> None:
    """The hub discovers the token endpoint from the issuer's metadata, fetches one token with its client
    secret and the server's URL as resource, and presents it on every request (the SDK client's and the
    hub's own POSTs alike)."""
    seen: list[dict[str, str]] = []
    async with authorization_server() as server, guarded_upstream(server, seen) as url:
        mount = {"url": url, "protocol": protocol, "auth": client_credentials(server, scope="tools")}
        config = make_config(tmp_path, {"remote": mount})
        async with running_hub(config) as hub, hub_client(hub, mode) as client:
            assert hub.health()["servers"]["remote"]["state"] == "up", hub.health()
            for text in ("one", "two", "three"):
                result = await client.call_tool("remote_echo", {"text": text})
                assert result.structured_content == {"text": text, "server": "remote"}
    assert len(server.requests) == 1, server.requests
    request = server.requests[0]
    assert request["grant_type"] == "client_credentials"
    assert request["authenticated_as"] == "the-hub"
    assert request["resource"] == url
    assert request["scope"] == "tools"
    issued = next(iter(server.tokens))
    assert bearers(seen) == {f"Bearer {issued}"}


async def test_a_token_the_server_refuses_is_fetched_anew_once_and_the_call_retried(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    async with authorization_server() as server, guarded_upstream(server, seen) as url:
        config = make_config(
            tmp_path, {"remote": {"url": url, "protocol": "legacy", "auth": client_credentials(server)}}
        )
        async with running_hub(config) as hub, hub_client(hub) as client:
            await client.call_tool("remote_echo", {"text": "before"})
            server.revoked.update(server.tokens)  # the server no longer takes the token the hub holds
            result = await client.call_tool("remote_echo", {"text": "after"})
            assert result.structured_content == {"text": "after", "server": "remote"}
            assert len(server.requests) == 2
            refused = len(seen)
            server.refuse_all = True  # a fresh token cannot be had: the call fails, after one retry only
            server.revoked.update(server.tokens)
            with pytest.raises(MCPError, match="invalid_client"):
                await client.call_tool("remote_echo", {"text": "never"})
            assert len(seen) - refused == 1  # refused once; the refetch failed, so no second attempt
            assert len(server.requests) == 3


async def test_client_credentials_over_legacy_sse(tmp_path: Path) -> None:
    """A legacy SSE server gets the token on its stream's GET and on every POST; a refused one is replaced."""
    seen: list[dict[str, str]] = []
    async with authorization_server() as server:
        port = free_port()
        url = f"http://127.0.0.1:{port}/sse"
        async with serve_app(guarded(sse_app(build_server("old")), server, url, seen), port=port):
            mount = {"url": url, "transport": "sse", "auth": client_credentials(server)}
            config = make_config(tmp_path, {"old": mount})
            async with running_hub(config) as hub, hub_client(hub) as client:
                await client.call_tool("old_echo", {"text": "first"})
                server.revoked.update(server.tokens)
                result = await client.call_tool("old_echo", {"text": "second"})
    assert result.structured_content == {"text": "second", "server": "old"}
    assert len(server.requests) == 2
    assert bearers(seen) == {f"Bearer {token}" for token in server.tokens}


async def test_a_refused_client_secret_is_reported_on_the_mount(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    async with authorization_server() as server, guarded_upstream(server, seen) as url:
        auth = {**client_credentials(server), "client_secret": "not-the-secret"}
        config = make_config(tmp_path, {"remote": {"url": url, "auth": auth}})
        async with running_hub(config, settle=10) as hub:
            status = hub.health()["servers"]["remote"]
    assert status["state"] != "up"
    assert "invalid_client" in (status["last_error"] or ""), status
    assert "not-the-secret" not in str(status)
    assert not any("authorization" in headers for headers in seen)


async def test_a_login_that_wants_a_person_is_reported_on_the_mount(tmp_path: Path) -> None:
    """authorization_code: the hub finds the authorization server through the server's 401 and metadata,
    registers, and opens the authorization URL; a login page (no redirect back) is reported, not waited on."""
    seen: list[dict[str, str]] = []
    async with authorization_server() as server, guarded_upstream(server, seen) as url:
        config = make_config(tmp_path, {"remote": {"url": url, "auth": {"mode": "authorization_code"}}})
        async with running_hub(config, settle=10) as hub:
            status = hub.health()["servers"]["remote"]
    assert status["state"] != "up"
    assert "wants a person to sign in" in (status["last_error"] or ""), status
    assert "registered-1" in server.clients  # registered dynamically
    assert not any("authorization" in headers for headers in seen)


async def test_a_configured_token_url_is_used_without_discovery(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    async with authorization_server() as server, guarded_upstream(server, seen) as url:
        auth = {
            "mode": "client_credentials",
            "token_url": f"{server.issuer}/token",
            "client_id": "the-hub",
            "client_secret": SECRET,
            "token_endpoint_auth_method": "client_secret_post",
        }
        config = make_config(tmp_path, {"remote": {"url": url, "auth": auth}})
        async with running_hub(config) as hub, hub_client(hub) as client:
            await client.call_tool("remote_echo", {"text": "x"})
    assert server.requests[0]["client_secret"] == SECRET  # in the body, as configured
    assert len(server.requests) == 1


async def test_with_no_issuer_configured_the_servers_protected_resource_metadata_names_it(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    async with authorization_server() as server, guarded_upstream(server, seen) as url:
        auth = {"mode": "client_credentials", "client_id": "the-hub", "client_secret": SECRET}
        config = make_config(tmp_path, {"remote": {"url": url, "auth": auth}})
        async with running_hub(config) as hub, hub_client(hub) as client:
            result = await client.call_tool("remote_echo", {"text": "found"})
    assert result.structured_content == {"text": "found", "server": "remote"}
    assert [r["grant_type"] for r in server.requests] == ["client_credentials"]


# -- no passthrough ------------------------------------------------------------------------------------------------


def _leaks(seen: list[dict[str, str]]) -> list[str]:
    """Every header value that holds an API key of the hub's clients, or a piece of one."""
    pieces = {key[i : i + 8] for key in KEYS.values() for i in range(0, len(key) - 7)}
    return [
        f"{name}: {value}" for headers in seen for name, value in headers.items() if any(p in value for p in pieces)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_no_client_credential_reaches_an_upstream(tmp_path: Path, transport: str) -> None:
    """Clients present API keys (`Authorization: Bearer` and `X-API-Key`) to the hub; the upstreams see the
    credentials their mounts configure (a static header on one, a client credentials token on the other),
    and nothing of the clients' keys."""
    static_seen: list[dict[str, str]] = []
    oauth_seen: list[dict[str, str]] = []
    static_app = build_server("plain")
    plain = static_app.streamable_http_app() if transport == "streamable-http" else sse_app(static_app)
    path = "/mcp" if transport == "streamable-http" else "/sse"
    async with (
        authorization_server() as server,
        guarded_upstream(server, oauth_seen) as oauth_url,
        serve_app(recording(plain, static_seen)) as plain_base,
    ):
        servers = {
            "plain": {"url": f"{plain_base}{path}", "transport": transport, "headers": {"X-Upstream-Key": "static-1"}},
            "oauth": {"url": oauth_url, "protocol": "legacy", "auth": client_credentials(server)},
        }
        async with keyed_hub(tmp_path, servers) as (hub, _connect):
            keys = hub.config.auth.api_keys
            app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, api_keys=keys)
            async with serve_app(app) as base:
                for principal, header, mode in [
                    ("alice", "X-API-Key", "legacy"),
                    ("bob", "Authorization", "2026-07-28"),
                ]:
                    key = KEYS[principal] if header == "X-API-Key" else f"Bearer {KEYS[principal]}"
                    async with (
                        httpx2.AsyncClient(headers={header: key}, timeout=30) as http,
                        Client(
                            streamable_http_client(f"{base}/mcp", http_client=http), mode=mode, cache=None
                        ) as client,
                    ):
                        await client.call_tool("plain_echo", {"text": principal})
                        await client.call_tool("oauth_echo", {"text": principal})
    assert static_seen and oauth_seen
    assert _leaks(static_seen + oauth_seen) == []
    assert {headers.get("x-upstream-key") for headers in static_seen} == {"static-1"}
    assert not any("authorization" in headers or "x-api-key" in headers for headers in static_seen)
    assert bearers(oauth_seen) == {f"Bearer {token}" for token in server.tokens}


# -- the token cache ---------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_one_fetch_serves_every_caller_waiting_and_the_token_is_replaced_before_it_expires() -> None:
    clock = Clock()
    fetched: list[Token] = []
    release = anyio.Event()

    async def fetch() -> Token:
        await release.wait()
        token = Token.issued(f"t{len(fetched)}", "bearer", 600, clock())
        fetched.append(token)
        return token

    cache = CachedToken(fetch, clock)
    got: list[Token] = []

    async def get() -> None:
        got.append(await cache.get())

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(get)
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert len(fetched) == 1 and all(token is fetched[0] for token in got)
    clock.now += 600 - 31  # more than 30 s before expiry: kept
    assert await cache.get() is fetched[0]
    clock.now += 2  # within 30 s of expiry: replaced
    assert (await cache.get()).access_token == "t1"
    cache.invalidate_header("Bearer t0")  # a refusal of the old token does not drop the new one
    assert await cache.get() is fetched[1]
    cache.invalidate_header("Bearer t1")
    assert (await cache.get()).access_token == "t2"
    assert "t2" not in repr(fetched[-1])


# -- token exchange ------------------------------------------------------------------------------------------------


async def test_token_exchange_trades_the_callers_token_for_one_meant_for_the_server() -> None:
    async with authorization_server() as server:
        config = parse_config(
            f"""
            [servers.wiki]
            url = "https://wiki.example/mcp"
            [servers.wiki.auth]
            mode = "token_exchange"
            issuer = "{server.issuer}"
            client_id = "the-hub"
            client_secret = "{SECRET}"
            audience = "wiki"
            """
        )
        exchange = TokenExchange("wiki", "https://wiki.example/mcp", config.servers["wiki"].auth)
        alice, bob = server.subject_token("alice"), server.subject_token("bob")
        with pytest.raises(CredentialError, match="caller's OAuth token"):
            await exchange.headers("POST", "https://wiki.example/mcp")
        token = CALLER_TOKEN.set(CallerToken(alice))
        try:
            first = await exchange.headers("POST", "https://wiki.example/mcp")
            again = await exchange.headers("POST", "https://wiki.example/mcp")
        finally:
            CALLER_TOKEN.reset(token)
        bobs = await exchange.exchanged(bob)
        with pytest.raises(CredentialError, match="invalid_grant"):
            await exchange.exchanged("not-a-token-it-issued")
    assert first == again  # cached per caller
    alice_token = first["authorization"].removeprefix("Bearer ")
    assert server.tokens[alice_token].subject == "alice" and server.tokens[alice_token].audience == "wiki"
    assert server.tokens[bobs.access_token].subject == "bob"
    exchanges = [r for r in server.requests if r["grant_type"].endswith("token-exchange")]
    assert len(exchanges) == 3
    assert exchanges[0]["subject_token"] == alice
    assert exchanges[0]["resource"] == "https://wiki.example/mcp"
    assert exchanges[0]["subject_token_type"] == "urn:ietf:params:oauth:token-type:access_token"


async def test_a_token_exchange_mount_lists_with_the_hubs_token_and_refuses_a_caller_without_one(
    tmp_path: Path,
) -> None:
    """The hub's own session with a token exchange mount (its listing) carries the hub's client credentials
    token; a caller with no OAuth token (here the in-process client) has nothing to exchange: its call fails
    at once, saying why, and no exchange is asked for. (Callers with tokens: tests/test_token_exchange.py.)"""
    seen: list[dict[str, str]] = []
    async with authorization_server() as server, guarded_upstream(server, seen) as url:
        auth = {**client_credentials(server), "mode": "token_exchange"}
        config = make_config(tmp_path, {"remote": {"url": url, "auth": auth}})
        async with running_hub(config, settle=10) as hub, hub_client(hub) as client:
            assert hub.health()["servers"]["remote"]["state"] == "up", hub.health()
            assert "remote_echo" in {tool.name for tool in (await client.list_tools()).tools}
            with anyio.fail_after(10), pytest.raises(MCPError, match="needs the caller's OAuth access token"):
                await client.call_tool("remote_echo", {"text": "no token"})
    assert [request["grant_type"] for request in server.requests] == ["client_credentials"]
    assert bearers(seen) == {f"Bearer {next(iter(server.tokens))}"}


# -- configuration -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "key", "reason"),
    [
        ('mode = "client_credential"', "servers.gh.auth.mode", 'did you mean "client_credentials"'),
        ('mode = "user"\nclient_id = "a"', "servers.gh.auth.token_key", "needs token_key"),
        (
            'mode = "client_credentials"\nissuer = "https://as"\nclient_id = "a"',
            "servers.gh.auth.client_secret",
            "${VAR}",
        ),
        ('mode = "token_exchange"\ntoken_url = "https://as/token"', "servers.gh.auth.client_id", "needs client_id"),
        ('scope = "x"', "servers.gh.auth.scope", 'does not apply to mode = "static"'),
        ('mod = "static"', "servers.gh.auth.mod", "did you mean 'mode'"),
        ('mode = "client_credentials"\nissuer = "as.example"\nclient_id = "a"', "servers.gh.auth.issuer", "https://"),
        ('mode = "workload"\nclient_id = "a"', "servers.gh.auth.assertion", "needs the workload's token"),
        (
            'mode = "workload"\nclient_id = "a"\nassertion = "x"\nassertion_file = "/t"',
            "servers.gh.auth.assertion",
            "one of them",
        ),
        (
            'mode = "client_credentials"\nclient_id = "a"\nclient_secret = "b"\nassertion = "x"',
            "servers.gh.auth.assertion",
            'only applies to mode = "workload"',
        ),
        (
            'mode = "client_credentials"\nclient_id = "a"\ntoken_endpoint_auth_method = "private_key_jwt"',
            "servers.gh.auth.client_key",
            "needs client_key",
        ),
        (
            'mode = "client_credentials"\nclient_id = "a"\nclient_key = "not a key"',
            "servers.gh.auth.client_key",
            "not an unencrypted PEM private key",
        ),
        ('mode = "user"\nclient_key = "x"', "servers.gh.auth.token_endpoint_auth_method", "private_key_jwt applies"),
    ],
)
def test_the_auth_table_is_checked(table: str, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f'[servers.gh]\nurl = "https://gh.example/mcp"\n[servers.gh.auth]\n{table}\n')
    assert caught.value.key == key
    assert reason in caught.value.reason


def test_a_private_key_names_its_algorithm() -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    def pem(key: Any) -> str:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    assert signing_algorithm(pem(ec.generate_private_key(ec.SECP256R1()))) == "ES256"
    assert signing_algorithm(pem(ec.generate_private_key(ec.SECP384R1()))) == "ES384"
    assert signing_algorithm(pem(rsa.generate_private_key(65537, 2048))) == "RS256"
    assert signing_algorithm(pem(ed25519.Ed25519PrivateKey.generate())) == "EdDSA"
    with pytest.raises(ValueError, match=r"EC .* RSA or Ed25519"):
        signing_algorithm(pem(ec.generate_private_key(ec.SECP256K1())))


def test_a_workload_token_is_read_from_its_file_at_each_request(tmp_path: Path) -> None:
    """A projected token is rotated in place: each token request reads the file anew; a missing or empty file
    is an error that names it."""
    token = tmp_path / "token"
    config = parse_config(
        f'[servers.gh]\nurl = "https://gh.example/mcp"\n[servers.gh.auth]\nmode = "workload"\nclient_id = "a"\n'
        f'assertion_file = "{token}"\n'
    ).servers["gh"]
    assert config.url is not None
    workload = WorkloadIdentity("gh", config.url, config.auth)
    with pytest.raises(CredentialError, match="cannot read assertion_file"):
        workload.grant()
    token.write_text("first.jwt.token\n")
    assert workload.grant() == {"grant_type": JWT_BEARER, "assertion": "first.jwt.token"}
    token.write_text("second.jwt.token")
    assert workload.grant()["assertion"] == "second.jwt.token"
    token.write_text("")
    with pytest.raises(CredentialError, match="is empty"):
        workload.grant()


def test_the_client_secret_comes_from_the_environment_and_is_never_shown() -> None:
    text = (
        '[servers.gh]\nurl = "https://gh.example/mcp"\n[servers.gh.auth]\nmode = "client_credentials"\n'
        'issuer = "https://as.example"\nclient_id = "hub"\nclient_secret = "${GH_SECRET}"\n'
    )
    config = parse_config(text, environ={"GH_SECRET": "from-the-environment"})
    assert config.servers["gh"].auth.client_secret == "from-the-environment"
    assert "from-the-environment" not in repr(config)
    unset = parse_config(text, environ={}).servers["gh"]  # that server is disabled, the others serve
    assert "GH_SECRET is not set" in (unset.unusable or "") and "server 'gh' is disabled" in (unset.unusable or "")
    with pytest.raises(ConfigError, match="only applies to a remote server"):
        parse_config('[servers.local]\ncommand = "x"\n[servers.local.auth]\nmode = "static"\n')


@pytest.mark.slow
def test_check_names_the_auth_key_and_the_fix(tmp_path: Path) -> None:
    config = tmp_path / "hub.toml"
    config.write_text(
        '[servers.gh]\nurl = "https://gh.example/mcp"\n[servers.gh.auth]\nmode = "client_credentials"\n'
        'client_id = "hub"\n',
        encoding="utf-8",
    )
    result = mcp_hub("check", "--config", str(config))
    assert result.returncode == 2
    assert f"{config}: servers.gh.auth.client_secret" in result.stderr
    assert 'add client_secret = "${VAR}"' in result.stderr
    assert "Traceback" not in result.stderr
