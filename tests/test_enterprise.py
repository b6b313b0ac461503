"""Enterprise-managed authorization end to end (`mode = "enterprise"`, credentials/enterprise.py).

All real parts: the hub's sign-in issuer (tests/servers/authorization.py) mints the callers' JWTs; the
organisation's identity provider (tests/servers/authorization_server.py, told of those tokens as ones it issued)
exchanges each for an ID-JAG; the server's authorization server (the same module, another instance, trusting
that identity provider's key) takes the ID-JAG with the JWT bearer grant and issues the person's token; the
upstream is the fixture SDK server behind a bearer check; the clients are the SDK's, over the hub's HTTP
endpoint. The conformance suite's `auth/enterprise-managed-authorization` scenario (tests/test_conformance.py)
runs the configured-assertion form against the suite's own identity provider and authorization server.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcp_hub.config import ServerConfig, load_config
from mcp_hub.credentials.connections import ConnectionStore, new_key
from mcp_hub.server.http import build_app
from tests.conftest import free_port, running_hub, serve_app, write_config
from tests.harness.identity import cli, witnessed
from tests.servers.authorization import AuthorizationServer as SignInIssuer
from tests.servers.authorization_server import JWT_BEARER, AuthorizationServer, Issued, guarded
from tests.servers.fixture import build_server

pytestmark = pytest.mark.anyio

SECRET = "s3cret-of-the-hub-at-the-as"
KEY = new_key()
CAROL_KEY = "c" * 32


def _server(**auth: Any) -> ServerConfig:
    return ServerConfig.model_validate({"name": "remote", "url": "https://tools.example.com/mcp", "auth": auth})


ENTERPRISE = {
    "mode": "enterprise",
    "client_id": "the-hub",
    "client_secret": "x",
    "idp_issuer": "https://idp.example.com",
    "idp_client_id": "hub-at-idp",
    "token_key": KEY,
}


def test_an_enterprise_mount_is_served_per_client_unless_it_acts_for_one_person() -> None:
    assert _server(**ENTERPRISE).isolation == "per-client"
    assert _server(**ENTERPRISE, id_token="eyJ.a.b").isolation == "shared"
    with pytest.raises(ValidationError, match='isolation = "per-client"'):
        ServerConfig.model_validate(
            {"name": "remote", "url": "https://t.example.com/mcp", "isolation": "shared", "auth": ENTERPRISE}
        )


@pytest.mark.parametrize(
    ("missing", "said"),
    [
        ("idp_issuer", "needs the identity provider: add idp_issuer"),
        ("idp_client_id", "needs idp_client_id"),
        ("token_key", "needs token_key"),
        ("client_id", "needs client_id"),
    ],
)
def test_an_incomplete_enterprise_table_says_what_to_add(missing: str, said: str) -> None:
    auth = {key: value for key, value in ENTERPRISE.items() if key != missing}
    with pytest.raises(ValidationError, match=said):
        _server(**auth)


def test_the_identity_providers_keys_belong_to_the_enterprise_mode() -> None:
    with pytest.raises(ValidationError, match='idp_issuer only applies to mode = "enterprise"'):
        _server(mode="client_credentials", client_id="a", client_secret="b", idp_issuer="https://idp.example.com")


@dataclass
class Setup:
    signin: SignInIssuer
    idp: AuthorizationServer
    server: AuthorizationServer
    hub_resource: str
    upstream: str
    base: str
    config: Path
    store: Path
    calls: list[tuple[str, bytes]]

    def signed_in(self, who: str) -> str:
        """A token for the hub, as `who` holds after signing in at the identity provider."""
        token = self.signin.mint(self.hub_resource, sub=who)
        self.idp.tokens[token] = Issued("a-client-app", self.hub_resource, time.time() + 3600, subject=who)
        return token

    @asynccontextmanager
    async def client(self, authorization: str) -> AsyncIterator[Client]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": authorization}, timeout=30) as http,
            Client(streamable_http_client(f"{self.base}/mcp", http_client=http), mode="2026-07-28") as client,
        ):
            yield client

    def tokens_for(self, who: str) -> list[str]:
        """The tokens the server's authorization server issued to the hub for `who`, for the upstream."""
        return [
            token
            for token, issued in self.server.tokens.items()
            if issued.subject == who and issued.client_id == "the-hub" and issued.audience == self.upstream
        ]


@asynccontextmanager
async def enterprise_hub(tmp_path: Path, *, dpop: bool = False) -> AsyncIterator[Setup]:
    """A hub whose "remote" mount is `mode = "enterprise"` (with `dpop`, the server's authorization server binds
    its tokens to the hub's proof keys)."""
    signin_port, hub_port, upstream_port = free_port(), free_port(), free_port()
    signin = SignInIssuer(f"http://127.0.0.1:{signin_port}")
    hub_resource = f"http://127.0.0.1:{hub_port}/mcp"
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    idp = AuthorizationServer(clients={"hub-at-idp": ""})
    server = AuthorizationServer(clients={"the-hub": SECRET}, trusts=idp, dpop=dpop)
    store = tmp_path / "connections"
    calls: list[tuple[str, bytes]] = []
    async with serve_app(idp.app()) as idp_base, serve_app(server.app()) as server_base:
        idp.issuer, server.issuer = idp_base, server_base
        mount = {
            "url": upstream,
            "auth": {
                "mode": "enterprise",
                "issuer": server_base,
                "client_id": "the-hub",
                "client_secret": SECRET,
                "idp_issuer": idp_base,
                "idp_client_id": "hub-at-idp",
                "token_key": "${HUB_TOKEN_KEY}",
                "token_store": str(store),
            },
        }
        path = write_config(tmp_path / "hub.toml", {"remote": mount})
        with path.open("a", encoding="utf-8") as file:
            file.write(f'\n[auth]\napi_keys = {{ carol = "{CAROL_KEY}" }}\n')
            file.write(f'[auth.oauth]\nissuer = "{signin.issuer}"\nresource = "{hub_resource}"\n')
        config = load_config(path, environ={"HUB_TOKEN_KEY": KEY})
        app = guarded(witnessed(build_server("remote").streamable_http_app(), calls), server, upstream, [], public=True)
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
                yield Setup(signin, idp, server, hub_resource, upstream, base, path, store, calls)


@pytest.mark.slow
async def test_each_person_reaches_the_server_with_a_token_from_their_own_id_jag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice and bob each call the mount: the hub exchanges each one's token at the identity provider for an
    ID-JAG (once: the token is kept in the token file), presents it with the JWT bearer grant, and the upstream
    receives each person's own token. Revoking alice's with the CLI forgets it and revokes it at the authorization
    server; her next call gets a new one through the identity provider."""
    monkeypatch.setenv("HUB_TOKEN_KEY", KEY)  # for the CLI
    async with enterprise_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            alice_token, bob_token = setup.signed_in("alice"), setup.signed_in("bob")
            async with (
                setup.client(f"Bearer {alice_token}") as alice,
                setup.client(f"Bearer {bob_token}") as bob,
            ):
                for round_ in range(2):
                    for who, client in (("alice", alice), ("bob", bob)):
                        result = await client.call_tool("remote_echo", {"text": f"{who}-{round_}"})
                        assert result.structured_content == {"text": f"{who}-{round_}", "server": "remote"}
                assert [(j["sub"], j["aud"], j["resource"]) for j in setup.idp.id_jags] == [
                    ("alice", setup.server.issuer, setup.upstream),
                    ("bob", setup.server.issuer, setup.upstream),
                ]
                exchanges = [r for r in setup.idp.requests if r.get("grant_type", "").endswith("token-exchange")]
                assert all(r["subject_token_type"].endswith(":access_token") for r in exchanges)
                assert all(r["requested_token_type"].endswith(":id-jag") for r in exchanges)
                bearers = [r for r in setup.server.requests if r.get("grant_type") == JWT_BEARER]
                assert [r["authenticated_as"] for r in bearers] == ["the-hub", "the-hub"]
                for who in ("alice", "bob"):
                    (token,) = setup.tokens_for(who)
                    assert any(
                        bearer == f"Bearer {token}" and f"{who}-1".encode() in body for bearer, body in setup.calls
                    )
                records = {r.principal: r for r in ConnectionStore(setup.store, KEY).list()}
                assert set(records) == {"alice", "bob"}
                (alices,) = setup.tokens_for("alice")
                assert records["alice"].access_token == alices

                code, out, _ = await cli(
                    capsys, "connections", "revoke", "--config", str(setup.config), "--principal", "alice"
                )
                assert code == 0, out
                assert "revoked: alice at remote" in out and "its tokens were revoked" in out
                assert alices in setup.server.revoked
                result = await alice.call_tool("remote_echo", {"text": "alice-after"})
                assert result.structured_content == {"text": "alice-after", "server": "remote"}
                assert len(setup.idp.id_jags) == 3  # a new ID-JAG for alice
                old, new = setup.tokens_for("alice")
                assert old == alices and any(
                    bearer == f"Bearer {new}" and b"alice-after" in body for bearer, body in setup.calls
                )

                # bob's token expired (his record says so): his next call gets a new one, by a new ID-JAG.
                store = ConnectionStore(setup.store, KEY)
                (bobs,) = [r for r in store.list() if r.principal == "bob"]
                store.put(replace(bobs, expires_at=time.time() - 1))
                await bob.call_tool("remote_echo", {"text": "bob-expired"})
                assert len(setup.idp.id_jags) == 4 and len(setup.tokens_for("bob")) == 2
                # The server refuses bob's token (revoked behind the hub's back): the hub gets a new one, and the
                # call that met the 401 goes through with it.
                setup.server.revoked.add(setup.tokens_for("bob")[-1])
                result = await bob.call_tool("remote_echo", {"text": "bob-refused"})
                assert result.structured_content == {"text": "bob-refused", "server": "remote"}
                assert len(setup.idp.id_jags) == 5 and len(setup.tokens_for("bob")) == 3


@pytest.mark.slow
async def test_a_caller_without_a_token_is_refused_and_a_refused_exchange_is_named(tmp_path: Path) -> None:
    """carol signs in with an API key: the mount needs an identity assertion, and says so. When the identity
    provider refuses (it does not know the subject token), the call fails naming the refusal."""
    async with enterprise_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client(f"Bearer {CAROL_KEY}") as carol:
                with pytest.raises(MCPError) as caught:
                    await carol.call_tool("remote_echo", {"text": "carol"})
                assert "sign in to the hub with OAuth" in caught.value.error.message
            stranger = setup.signin.mint(setup.hub_resource, sub="dave")  # the identity provider never issued it
            async with setup.client(f"Bearer {stranger}") as dave:
                with pytest.raises(MCPError) as caught:
                    await dave.call_tool("remote_echo", {"text": "dave"})
                assert "refused the token request (invalid_grant" in caught.value.error.message
    assert not any(b'"carol"' in body or b'"dave"' in body for _, body in setup.calls)
