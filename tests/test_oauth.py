"""The hub as an OAuth 2.1 resource server: a real authorization server (tests/servers/authorization.py)
served over HTTP, tokens minted with real keys, the hub's real HTTP endpoint, the SDK's real client."""

from __future__ import annotations

import base64
import json
import textwrap
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
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_hub.auth import Identity, introspection
from mcp_hub.auth.identity import PRINCIPAL_KEY, identity_in
from mcp_hub.auth.jwks import KeySet
from mcp_hub.auth.jwt import JwtVerifier
from mcp_hub.auth.middleware import Credentials
from mcp_hub.auth.refusal import Refusal
from mcp_hub.auth.verifier import TokenVerifier
from mcp_hub.config import OAuthSettings, load_config
from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import ROOT, fixture_server, free_port, hub_command, running_hub, serve_app, wait_for, write_config
from tests.harness.oauth import ACCEPT, NODE, POLICY, Tokens, challenge_of
from tests.servers.authorization import INTROSPECTION_CLIENT, AuthorizationServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@dataclass
class Setup:
    issuer: AuthorizationServer
    hub: Hub
    base: str
    resource: str
    audit: Path

    def token(self, **overrides: Any) -> str:
        return self.issuer.mint(self.resource, **overrides)

    async def post(self, token: str | None, body: Any = None, **headers: str) -> httpx2.Response:
        sent = {**ACCEPT, **headers}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        async with httpx2.AsyncClient(timeout=30) as http:
            return await http.post(f"{self.base}/mcp", json=body or INITIALIZE, headers=sent)

    @asynccontextmanager
    async def client(self, token: str, mode: str = "2026-07-28") -> AsyncIterator[Client]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            Client(streamable_http_client(f"{self.base}/mcp", http_client=http), mode=mode, cache=None) as client,
        ):
            yield client


@asynccontextmanager
async def oauth_hub(tmp_path: Path, extra: str = "", api_keys: str = "") -> AsyncIterator[Setup]:
    """An authorization server and a hub taking its tokens (`extra`: more [auth.oauth] lines, where "{issuer}"
    is the authorization server's URL)."""
    issuer_port, hub_port = free_port(), free_port()
    issuer = AuthorizationServer(f"http://127.0.0.1:{issuer_port}")
    resource = f"http://127.0.0.1:{hub_port}/mcp"
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "hub.toml").write_text(textwrap.dedent(POLICY), encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n\n[audit]\nfile = "audit.jsonl"\n')
        file.write(f'\n[auth]\n{api_keys}\n[auth.oauth]\nissuer = "{issuer.issuer}"\nresource = "{resource}"\n')
        file.write('scopes_required = ["mcp"]\n' + textwrap.dedent(extra).replace("{issuer}", issuer.issuer))
    loaded = load_config(config, environ={"ALICE_KEY": "a" * 32, "BOB_KEY": "b" * 32})
    async with serve_app(issuer.app(), issuer_port), running_hub(loaded) as hub:
        app = build_app(
            hub.endpoint.server,
            host="127.0.0.1",
            path="/mcp",
            health=hub.health,
            api_keys=loaded.auth.api_keys,
            oauth=loaded.auth.oauth,
        )
        async with serve_app(app, hub_port) as base:
            yield Setup(issuer, hub, base, resource, tmp_path / "audit.jsonl")


async def test_protected_resource_metadata_is_served_at_both_well_known_paths(tmp_path: Path) -> None:
    async with (
        oauth_hub(tmp_path, 'scopes_supported = ["hub:read", "hub:admin"]\n') as setup,
        httpx2.AsyncClient() as http,
    ):
        bare = await http.get(f"{setup.base}/.well-known/oauth-protected-resource")
        suffixed = await http.get(f"{setup.base}/.well-known/oauth-protected-resource/mcp")
        unauthenticated = await setup.post(None)
    assert bare.status_code == suffixed.status_code == 200
    assert bare.json() == suffixed.json()
    document = suffixed.json()
    assert document["resource"] == setup.resource
    assert document["authorization_servers"] == [setup.issuer.issuer]
    assert document["scopes_supported"] == ["mcp", "hub:read", "hub:admin"]
    assert document["bearer_methods_supported"] == ["header"]
    assert unauthenticated.status_code == 401
    challenge = challenge_of(unauthenticated)
    assert challenge == {
        "resource_metadata": f"{setup.base}/.well-known/oauth-protected-resource/mcp",
        "scope": "mcp",
    }


@pytest.mark.parametrize(
    ("case", "description"),
    [
        ("expired", "expired"),
        ("not yet valid", "not valid yet"),
        ("wrong issuer", "not issued by"),
        ("wrong audience", "not for this resource"),
        ("another resource", "not for this resource"),
        ("alg none", "'none'"),
        ("HS256 with the public key", "'HS256'"),
        ("tampered signature", "signature"),
        ("unknown kid", "not among the issuer's keys"),
        ("no exp", "'exp'"),
        ("garbage", "not a JWT"),
    ],
)
async def test_bad_tokens_are_refused_with_401_and_the_challenge(tmp_path: Path, case: str, description: str) -> None:
    async with oauth_hub(tmp_path) as setup:
        issuer, resource = setup.issuer, setup.resource
        now = int(time.time())
        rogue = type(issuer.rsa).generate_key(2048, parameters={"kid": "rogue"})
        token = {
            "expired": lambda: setup.token(exp=now - 120, iat=now - 600),
            "not yet valid": lambda: setup.token(nbf=now + 600),
            "wrong issuer": lambda: setup.token(iss="https://evil.example.com"),
            "wrong audience": lambda: setup.token(aud="https://other.example.com/mcp"),
            "another resource": lambda: issuer.mint(resource.replace("/mcp", "/other-mcp")),
            "alg none": lambda: issuer.forge(resource, "none"),
            "HS256 with the public key": lambda: issuer.forge(resource, "HS256"),
            "tampered signature": lambda: _tampered(setup.token()),
            "unknown kid": lambda: setup.token(key=rogue),
            "no exp": lambda: setup.token(exp=None),
            "garbage": lambda: "not-a-token",
        }[case]()
        response = await setup.post(token)
        good = await setup.post(setup.token())
    assert response.status_code == 401, response.text
    challenge = challenge_of(response)
    assert challenge["error"] == "invalid_token"
    assert description in challenge["error_description"]
    assert challenge["resource_metadata"] == f"{setup.base}/.well-known/oauth-protected-resource/mcp"
    assert challenge["scope"] == "mcp"
    assert token not in response.text
    assert good.status_code == 200, good.text


def _tampered(token: str) -> str:
    head, payload, signature = token.split(".")
    claims = json.loads(_unb64(payload))
    claims["sub"] = "mallory"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{head}.{forged}.{signature}"


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def test_a_token_without_a_required_scope_is_refused_403_insufficient_scope(tmp_path: Path) -> None:
    async with oauth_hub(tmp_path) as setup:
        response = await setup.post(setup.token(scope="hub:read"))
    assert response.status_code == 403
    challenge = challenge_of(response)
    assert challenge["error"] == "insufficient_scope"
    assert challenge["scope"] == "mcp"
    assert "resource_metadata" in challenge


async def test_a_token_in_the_query_string_is_not_read(tmp_path: Path) -> None:
    async with oauth_hub(tmp_path) as setup:
        token = setup.token()
        async with httpx2.AsyncClient() as http:
            response = await http.post(f"{setup.base}/mcp?access_token={token}", json=PING, headers=ACCEPT)
    assert response.status_code == 401
    assert "error" not in challenge_of(response)  # no credential was presented at all


async def test_keys_are_fetched_once_and_an_unknown_kid_refetches_at_a_bounded_rate(tmp_path: Path) -> None:
    interval = 1.0  # the least `jwks_refetch_interval` takes
    async with oauth_hub(tmp_path, f"jwks_refetch_interval = {interval}\n") as setup:
        issuer = setup.issuer
        started = time.monotonic()
        for _ in range(5):
            assert (await setup.post(setup.token())).status_code == 200
        assert issuer.requests["metadata"] == 1  # the jwks_uri discovered from RFC 8414 metadata, once
        assert issuer.requests["jwks"] == 1  # no round trip per request once the keys are known
        # Made-up key ids, many of them at once: at most one fetch per interval, whatever they say.
        rogue = type(issuer.rsa).generate_key(2048, parameters={"kid": "rogue"})
        for index in range(20):
            response = await setup.post(setup.token(key=rogue, jti=str(index)))
            assert response.status_code == 401
        assert issuer.requests["jwks"] <= 1 + (time.monotonic() - started) / interval + 1
        # The issuer rotates to a new key: its tokens are taken once the keys may be fetched again.
        rotated = type(issuer.rsa).generate_key(2048, parameters={"kid": "rsa-2", "use": "sig"})
        issuer.published.append(rotated)
        fresh = setup.token(key=rotated)

        async def accepted() -> bool:
            return (await setup.post(fresh)).status_code == 200

        await wait_for(accepted, timeout=3 * interval + 10, interval=0.2)
        assert issuer.requests["jwks"] <= 1 + (time.monotonic() - started) / interval + 1
        fetched = issuer.requests["jwks"]
        assert (await setup.post(setup.token(key=issuer.ec, alg="ES256"))).status_code == 200
        assert (await setup.post(fresh)).status_code == 200
        assert issuer.requests["jwks"] == fetched  # known keys: no fetch


async def test_opaque_tokens_are_introspected_and_the_answer_kept_while_the_token_lives(tmp_path: Path) -> None:
    client_id, secret = INTROSPECTION_CLIENT
    extra = f'introspection_endpoint = "{{issuer}}/introspect"\nclient_id = "{client_id}"\nclient_secret = "{secret}"\n'
    async with oauth_hub(tmp_path, extra) as setup:
        issuer, now = setup.issuer, int(time.time())
        answer = {"active": True, "iss": issuer.issuer, "sub": "dave", "scope": "mcp hub:read", "client_id": "c"}
        issuer.opaque["opaque-good"] = {**answer, "aud": setup.resource, "exp": now + 300}
        issuer.opaque["opaque-elsewhere"] = {**answer, "aud": "https://other.example.com/mcp", "exp": now + 300}
        issuer.opaque["opaque-no-scope"] = {**answer, "aud": setup.resource, "scope": "hub:read", "exp": now + 300}
        issuer.opaque["opaque-short"] = {**answer, "aud": setup.resource, "exp": now - 25}  # within the leeway
        good = [(await setup.post("opaque-good")).status_code for _ in range(3)]
        asked_for_good = issuer.requests["introspection"]
        elsewhere = await setup.post("opaque-elsewhere")
        revoked = await setup.post("opaque-revoked")
        no_scope = await setup.post("opaque-no-scope")
        short = await setup.post("opaque-short")
        async with setup.client("opaque-good") as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
    assert good == [200, 200, 200]
    assert asked_for_good == 1  # kept, not asked again per request
    assert elsewhere.status_code == revoked.status_code == 401
    assert "not for this resource" in challenge_of(elsewhere)["error_description"]
    assert "not active" in challenge_of(revoked)["error_description"]
    assert no_scope.status_code == 403
    assert short.status_code == 200
    assert tools == {"srv_echo"}


async def test_the_sdk_client_connects_with_a_token_and_its_scopes_select_the_profile(tmp_path: Path) -> None:
    async with oauth_hub(tmp_path) as setup:
        async with setup.client(setup.token(sub="dave", scope="mcp hub:read")) as reader:
            read_tools = {tool.name for tool in (await reader.list_tools()).tools}
            echoed = await reader.call_tool("srv_echo", {"text": "hi"})
        async with setup.client(setup.token(sub="dave", scope="mcp hub:admin"), mode="legacy") as admin:
            admin_tools = {tool.name for tool in (await admin.list_tools()).tools}
        grouped = setup.token(sub="erin", scope="mcp", groups=["engineering"])
        async with setup.client(grouped) as engineer:
            engineer_tools = {tool.name for tool in (await engineer.list_tools()).tools}
        async with setup.client(setup.token(sub="frank", scope="mcp hub:admin notes:write")) as writer:
            writer_tools = {tool.name for tool in (await writer.list_tools()).tools}
        nobody = await setup.post(setup.token(sub="gina", scope="mcp"))
    assert read_tools == {"srv_echo"}
    assert not echoed.is_error
    assert admin_tools == engineer_tools == {"srv_echo", "srv_pid"}
    assert writer_tools == {"srv_echo", "srv_pid", "srv_delete_note"}  # a rule that requires a scope
    assert nobody.status_code == 200  # a valid token with no profile: authenticated, shown nothing
    lines = [json.loads(line) for line in setup.audit.read_text(encoding="utf-8").splitlines()]
    call = next(line for line in lines if line["name"] == "echo")
    assert call["principal"] == "dave"
    assert call["issuer"] == setup.issuer.issuer
    assert call["subject"] == "dave"
    assert call["client_id"] == "test-client"


async def test_a_session_is_bound_to_the_principal_that_opened_it(tmp_path: Path) -> None:
    keys = 'api_keys = { alice = "${ALICE_KEY}", bob = "${BOB_KEY}" }'
    async with oauth_hub(tmp_path, api_keys=keys) as setup:
        alice, bob = setup.token(sub="alice"), setup.token(sub="bob")
        opened = await setup.post(alice, INITIALIZE)
        session = opened.headers["mcp-session-id"]
        own = await setup.post(alice, PING, **{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
        other = await setup.post(bob, PING, **{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
        by_key = await setup.post("b" * 32, PING, **{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
        key_opened = await setup.post("a" * 32, INITIALIZE)
        key_session = key_opened.headers["mcp-session-id"]
        on_key = {"Mcp-Session-Id": key_session, "MCP-Protocol-Version": "2025-11-25"}
        key_own = await setup.post("a" * 32, PING, **on_key)
        key_other = await setup.post("b" * 32, PING, **on_key)
        token_on_key = await setup.post(setup.token(sub="alice"), PING, **on_key)
    assert opened.status_code == own.status_code == 200
    assert other.status_code == by_key.status_code == 404  # as if the session did not exist
    assert key_opened.status_code == key_own.status_code == 200
    assert key_other.status_code == token_on_key.status_code == 404


async def _mcp_hub(*args: str) -> tuple[int, str, str]:
    with anyio.fail_after(120):
        done = await anyio.run_process(hub_command(*args), cwd=ROOT, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _cli_config(tmp_path: Path, issuer: str, resource: str = "https://hub.example.com/mcp") -> Path:
    (tmp_path / "policies").mkdir(parents=True, exist_ok=True)
    (tmp_path / "policies" / "hub.toml").write_text(textwrap.dedent(POLICY), encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv", enabled=False)})
    with config.open("a", encoding="utf-8") as file:
        file.write(f'\n[policy]\ndir = "policies"\n\n[auth.oauth]\nissuer = "{issuer}"\nresource = "{resource}"\n')
        file.write('scopes_required = ["mcp"]\n')
    return config


async def test_check_validates_the_table_and_with_connect_fetches_the_issuers_metadata(tmp_path: Path) -> None:
    port = free_port()
    issuer = AuthorizationServer(f"http://127.0.0.1:{port}")
    config = _cli_config(tmp_path, issuer.issuer)
    async with serve_app(issuer.app(), port):
        offline = await _mcp_hub("check", "--config", str(config))
        online = await _mcp_hub("check", "--config", str(config), "--connect")
    assert offline[0] == 0, offline
    assert "metadata at https://hub.example.com/.well-known/oauth-protected-resource/mcp" in offline[1]
    assert issuer.requests["metadata"] == issuer.requests["jwks"] == 1  # by --connect only
    assert online[0] == 0, online
    assert f"{issuer.issuer}: issuer metadata ok; 2 signing key(s) at {issuer.issuer}/jwks" in online[1]
    gone = _cli_config(tmp_path / "gone", f"http://127.0.0.1:{free_port()}")
    unreachable = await _mcp_hub("check", "--config", str(gone), "--connect")
    assert unreachable[0] == 1 and "unavailable: no authorization server metadata" in unreachable[1]
    broken = tmp_path / "broken.toml"
    broken.write_text(
        '[auth.oauth]\nissuer = "https://idp.example.com"\nresource = "https://h/mcp"\nalgorithms = ["HS256"]\n'
    )
    refused = await _mcp_hub("check", "--config", str(broken))
    assert refused[0] == 2 and "auth.oauth.algorithms[0]: 'HS256' is never accepted" in refused[2]


async def test_explain_takes_a_tokens_claims(tmp_path: Path) -> None:
    config = str(_cli_config(tmp_path, "https://idp.example.com"))
    admin = json.dumps({"sub": "dave", "scope": "mcp hub:admin"})
    writer = json.dumps({"sub": "dave", "scope": "mcp hub:admin notes:write"})
    grouped = json.dumps({"sub": "erin", "scope": "mcp", "groups": ["engineering"]})
    pid = await _mcp_hub("explain", "--config", config, "--claims", admin, "--tool", "srv/pid")
    delete = await _mcp_hub("explain", "--config", config, "--claims", admin, "--tool", "srv/delete_note")
    written = await _mcp_hub("explain", "--config", config, "--claims", writer, "--tool", "srv/delete_note")
    group = await _mcp_hub("explain", "--config", config, "--claims", grouped, "--tool", "srv/pid")
    unscoped = await _mcp_hub("explain", "--config", config, "--claims", '{"sub": "x"}', "--tool", "srv/pid")
    nameless = await _mcp_hub("explain", "--config", config, "--claims", '{"scope": "mcp"}', "--tool", "srv/pid")
    assert pid[0] == 0, pid
    assert "Principal 'dave' (token scopes hub:admin, mcp): profile 'operator', from [scopes] \"hub:admin\"" in pid[1]
    assert "Outcome: ALLOWED by rule 'pid'" in pid[1]
    assert "needs the scopes notes:write" in delete[1] and "Outcome: DENIED" in delete[1]
    assert "Outcome: ALLOWED by rule 'notes-writers'" in written[1]
    assert 'from [groups] "engineering"' in group[1]
    assert "the hub refuses this token (403 insufficient_scope): it lacks mcp" in unscoped[1]
    assert nameless[0] == 2 and "no 'sub' claim" in nameless[2]


OIDC_PROVIDER = ROOT / "tests" / "npm" / "oidc_provider.mjs"
OIDC_CLIENT = ("hub-client", "hub-client-secret-0123456789")


@asynccontextmanager
async def oidc_provider(port: int, resource: str) -> AsyncIterator[str]:
    """npm's oidc-provider as a child process, issuing JWT access tokens for `resource`; yields its issuer."""
    command = [str(NODE), str(OIDC_PROVIDER), str(port), resource, *OIDC_CLIENT, "mcp hub:read"]
    async with await anyio.open_process(command, cwd=OIDC_PROVIDER.parent) as process:
        try:
            assert process.stdout is not None
            with anyio.fail_after(30):
                assert (await process.stdout.receive()).startswith(b"ready")
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await process.wait()


@pytest.mark.skipif(
    not NODE.exists() or not (OIDC_PROVIDER.parent / "node_modules" / "oidc-provider").exists(),
    reason="npm's oidc-provider is not installed in tests/npm",
)
async def test_a_client_that_knows_only_the_spec_connects_with_a_token_from_a_real_authorization_server(
    tmp_path: Path,
) -> None:
    """The SDK's OAuth client is given the hub's URL and its own client credentials, nothing else: it learns
    the authorization server from the hub's 401 and protected resource metadata, gets a token for the hub
    (client_credentials, with the hub as RFC 8707 resource) from oidc-provider, and connects."""
    issuer_port, hub_port = free_port(), free_port()
    resource = f"http://127.0.0.1:{hub_port}/mcp"
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "hub.toml").write_text(textwrap.dedent(POLICY), encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    async with oidc_provider(issuer_port, resource) as issuer:
        with config.open("a", encoding="utf-8") as file:
            file.write('\n[policy]\ndir = "policies"\n\n[audit]\nfile = "audit.jsonl"\n')
            file.write(f'\n[auth.oauth]\nissuer = "{issuer}"\nresource = "{resource}"\nscopes_required = ["mcp"]\n')
        loaded = load_config(config)
        async with running_hub(loaded) as hub:
            app = build_app(
                hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, oauth=loaded.auth.oauth
            )
            async with serve_app(app, hub_port):
                provider = ClientCredentialsOAuthProvider(
                    server_url=resource,
                    storage=Tokens(),
                    client_id=OIDC_CLIENT[0],
                    client_secret=OIDC_CLIENT[1],
                    issuer=issuer,
                )
                async with (
                    httpx2.AsyncClient(auth=provider, timeout=30) as http,
                    Client(streamable_http_client(resource, http_client=http), mode="legacy", cache=None) as client,
                ):
                    tools = {tool.name for tool in (await client.list_tools()).tools}
                    echoed = await client.call_tool("srv_echo", {"text": "hi"})
                    token = await provider.context.storage.get_tokens()
    assert tools == {"srv_echo"}  # hub-client's profile, reader
    assert not echoed.is_error
    assert token is not None and token.scope == "mcp"
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    call = next(line for line in lines if line["name"] == "echo")
    assert (call["principal"], call["issuer"], call["subject"], call["client_id"]) == (
        "hub-client",
        issuer,
        "hub-client",
        "hub-client",
    )


async def test_an_unreachable_authorization_server_is_answered_503_not_401(tmp_path: Path) -> None:
    hub_port = free_port()
    issuer = AuthorizationServer(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    resource = f"http://127.0.0.1:{hub_port}/mcp"
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    with config.open("a", encoding="utf-8") as file:
        file.write(f'\n[auth.oauth]\nissuer = "{issuer.issuer}"\nresource = "{resource}"\n')
    loaded = load_config(config)
    async with running_hub(loaded) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, oauth=loaded.auth.oauth)
        async with serve_app(app, hub_port) as base, httpx2.AsyncClient(timeout=30) as http:
            token = issuer.mint(resource)
            answer = await http.post(
                f"{base}/mcp", json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {token}"}
            )
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "5"
    assert token not in answer.text


async def test_an_issuer_that_is_down_is_asked_at_a_bounded_rate_and_then_used_again(tmp_path: Path) -> None:
    async with oauth_hub(tmp_path, "jwks_refetch_interval = 2\n") as setup:
        setup.issuer.down = True
        statuses = [(await setup.post(setup.token())).status_code for _ in range(5)]
        asked = setup.issuer.requests["metadata"]
        setup.issuer.down = False

        async def accepted() -> bool:
            return (await setup.post(setup.token())).status_code == 200

        await wait_for(accepted, timeout=20, interval=0.2)
    assert statuses == [503] * 5
    assert asked <= 3  # the three well-known URLs, tried once (not once per request)


async def test_an_introspection_endpoint_that_is_down_is_not_asked_for_each_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(introspection, "RETRY_AFTER_FAILURE", 2.0)  # left alone 2 s, not 5, after a failure
    client_id, secret = INTROSPECTION_CLIENT
    extra = f'introspection_endpoint = "{{issuer}}/introspect"\nclient_id = "{client_id}"\nclient_secret = "{secret}"\n'
    async with oauth_hub(tmp_path, extra) as setup:
        issuer = setup.issuer
        answer = {"active": True, "sub": "dave", "scope": "mcp", "aud": setup.resource, "exp": int(time.time()) + 300}
        issuer.opaque["opaque-good"] = answer
        issuer.down = True
        statuses = [(await setup.post("opaque-good")).status_code for _ in range(5)]
        asked = issuer.requests["introspection"]
        issuer.down = False

        async def accepted() -> bool:
            return (await setup.post("opaque-good")).status_code == 200

        await wait_for(accepted, timeout=20, interval=0.2)
    assert statuses == [503] * 5
    assert asked == 1


async def test_the_validated_token_and_its_claims_are_on_the_request(tmp_path: Path) -> None:
    """What links acting for the caller read (`Identity`, under `IDENTITY_KEY` in the scope's state)."""
    issuer_port, port = free_port(), free_port()
    issuer = AuthorizationServer(f"http://127.0.0.1:{issuer_port}")
    resource = f"http://127.0.0.1:{port}/mcp"
    settings = OAuthSettings(
        issuer=issuer.issuer, resource=resource, principal_claim="email", groups_claim="team.groups"
    )
    seen: list[Identity | None] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(identity_in(scope["state"]))
        await JSONResponse({"principal": scope["state"][PRINCIPAL_KEY]})(scope, receive, send)

    async with httpx2.AsyncClient() as fetcher, serve_app(issuer.app(), issuer_port):
        verifier = TokenVerifier(settings, fetcher)
        endpoint = Starlette(routes=[Route("/mcp", endpoint=Credentials(app, verifier=verifier))])
        async with serve_app(endpoint, port) as base, httpx2.AsyncClient() as http:
            token = issuer.mint(resource, email="dave@example.com", team={"groups": ["ops"]}, scope="mcp a b")
            answer = await http.get(f"{base}/mcp", headers={"Authorization": f"Bearer {token}"})
    assert answer.json() == {"principal": "dave@example.com"}
    identity = seen[0]
    assert identity is not None
    assert (identity.principal, identity.issuer, identity.subject, identity.client_id) == (
        "dave@example.com",
        issuer.issuer,
        "alice",
        "test-client",
    )
    assert identity.scopes == {"mcp", "a", "b"} and identity.principal.groups == {"ops"}
    assert identity.token == token and identity.claims["email"] == "dave@example.com"
    assert token not in repr(identity)


async def test_a_verified_token_is_kept_until_it_expires_or_its_key_is_gone() -> None:
    """A client sends one token with every request: its signature is checked once, and the token is taken
    again exactly as long as checking it again would take it: until its `exp` plus the leeway, and while
    the key that verified it is still the issuer's (here: until the key set is due again, fetched, and the
    issuer has dropped that key)."""
    port = free_port()
    issuer = AuthorizationServer(f"http://127.0.0.1:{port}")
    resource = "https://hub.example.com/mcp"
    wall, monotonic = [int(time.time())], [0.0]

    async def jwks_uri() -> str:
        return f"{issuer.issuer}/jwks"

    async with serve_app(issuer.app(), port), httpx2.AsyncClient(timeout=30) as http:
        keys = KeySet(http, jwks_uri, refetch_interval=1, max_age=60, clock=lambda: monotonic[0])
        verifier = JwtVerifier(
            keys, issuer=issuer.issuer, resource=resource, algorithms=["RS256", "ES256"], leeway=30, now=lambda: wall[0]
        )
        lasting = issuer.mint(resource, exp=wall[0] + 3600, email="dave@example.com")
        for _ in range(5):
            claims = await verifier.claims(lasting)
            claims["email"] = "changed by a caller"  # each caller gets its own copy
        assert (await verifier.claims(lasting))["email"] == "dave@example.com"
        assert verifier.signature_checks == 1
        assert (await verifier.claims(issuer.mint(resource, key=issuer.ec, alg="ES256")))["sub"] == "alice"
        assert verifier.signature_checks == 2

        short = issuer.mint(resource, exp=wall[0] + 10)
        await verifier.claims(short)
        wall[0] += 10 + 29  # a second before its exp plus the leeway: still good, and not checked again
        await verifier.claims(short)
        assert verifier.signature_checks == 3
        wall[0] += 1
        with pytest.raises(Refusal, match="expired"):
            await verifier.claims(short)

        issuer.published.remove(issuer.rsa)  # the issuer drops the RSA key
        await verifier.claims(lasting)  # the hub's key set is not due yet: the key is still the one it knows
        assert issuer.requests["jwks"] == 1
        monotonic[0] += 61  # the key set is due: fetched again, without the key
        with pytest.raises(Refusal, match="not among the issuer's keys"):
            await verifier.claims(lasting)
        assert issuer.requests["jwks"] == 2
        issuer.published.append(issuer.rsa)  # back, fetched again (a new key object): checked once more
        monotonic[0] += 61
        await verifier.claims(lasting)
        await verifier.claims(lasting)
        assert issuer.requests["jwks"] == 3
        assert verifier.signature_checks == 5
