"""Identity end to end with a real authorization server: npm's oidc-provider (tests/npm/oidc_login_provider.mjs),
its own login and consent pages driven by an HTTP client acting as each person's browser.

A client that knows only the MCP authorization spec (the SDK's `OAuthClientProvider`) is given the hub's URL and
nothing else: it meets the 401, reads the hub's protected resource metadata, finds oidc-provider, registers itself
(RFC 7591), and runs authorization code + PKCE with the hub as RFC 8707 resource; the person logs in as alice or
bob. The hub's mount "remote" is `mode = "user"` toward the same oidc-provider (another resource): each person
signs in there through the hub and reaches the upstream with their own JWT, which the upstream checks (signature
against oidc-provider's JWKS, `iss`, `aud`) before it lets the request through.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from mcp.shared.exceptions import MCPError
from starlette.responses import Response

from mcp_hub.config import load_config
from mcp_hub.credentials.connections import ConnectionStore, new_key
from mcp_hub.credentials.user import sign_in_routes
from mcp_hub.server.http import build_app
from tests.conftest import ROOT, free_port, running_hub, serve_app, write_config
from tests.harness.identity import allowed, cli, sign_in_link, witnessed
from tests.harness.oauth import NODE, Tokens
from tests.harness.oidc import browse, oidc_login_provider
from tests.servers.authorization_server import recording
from tests.servers.fixture import build_server

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not NODE.exists() or not (ROOT / "tests" / "npm" / "node_modules" / "oidc-provider").exists(),
        reason="npm's oidc-provider is not installed in tests/npm",
    ),
    pytest.mark.slow,
]

HUB_CLIENT = ("the-hub", "the-hubs-secret-at-oidc-provider-0123456789")
KEY = new_key()


class Person:
    """A person at their MCP client: the SDK's OAuth client, given the hub's URL only; its browser logs in as
    `login` when the client opens the authorization URL."""

    def __init__(self, login: str, hub: str) -> None:
        self.login = login
        self.redirect_uri = f"http://127.0.0.1:{free_port()}/callback"  # the client's; nothing needs to listen
        self.result: AuthorizationCodeResult | None = None
        self.storage = Tokens()
        self.oauth = OAuthClientProvider(
            server_url=hub,
            client_metadata=OAuthClientMetadata(
                redirect_uris=[self.redirect_uri],  # type: ignore[list-item]
                client_name=f"{login}'s MCP client",
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=self.storage,
            redirect_handler=self._open,
            callback_handler=self._returned,
        )

    async def _open(self, url: str) -> None:
        back = parse_qs(urlsplit(await browse(url, self.login, self.redirect_uri)).query)
        self.result = AuthorizationCodeResult(code=back["code"][0], state=back["state"][0], iss=back["iss"][0])

    async def _returned(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result

    @asynccontextmanager
    async def client(self, hub: str, mode: str = "legacy") -> AsyncIterator[Client]:
        async with (
            httpx2.AsyncClient(auth=self.oauth, timeout=30) as http,
            Client(streamable_http_client(hub, http_client=http), mode=mode, cache=None) as client,
        ):
            yield client


def jwt_guarded(app: Any, issuer: str, keys: KeySet, resource: str, passed: list[dict[str, Any]]) -> Any:
    """`app` behind a check of oidc-provider's JWT access tokens: signed by one of `keys`, from `issuer`, for
    `resource`, not expired; a request with one is let through and its claims recorded in `passed`, one with a
    bad one is answered 401; one without any (the hub's own session, listing) is let through."""
    registry = JWTClaimsRegistry(
        iss={"essential": True, "value": issuer},
        aud={"essential": True, "value": resource},
        sub={"essential": True},
        exp={"essential": True},
    )

    async def guard(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if "authorization" not in headers:
            await app(scope, receive, send)
            return
        kind, _, token = headers["authorization"].partition(" ")
        try:
            assert kind.lower() == "bearer"
            claims = jwt.decode(token, keys, algorithms=["RS256"]).claims
            registry.validate(claims)
        except (AssertionError, JoseError, ValueError):
            await Response(status_code=401, headers={"www-authenticate": 'Bearer error="invalid_token"'})(
                scope, receive, send
            )
            return
        passed.append(claims)
        await app(scope, receive, send)

    return guard


@dataclass
class Setup:
    issuer: str
    metadata: dict[str, Any]
    keys: KeySet
    hub: str
    upstream: str
    callback: str
    config: Path
    calls: list[tuple[str, bytes]]
    """The bearer and body of every request the upstream let through."""
    passed: list[dict[str, Any]]
    """The claims of every token the upstream took."""
    seen: list[dict[str, str]]
    """The headers of every request the upstream received, let through or not."""

    async def sign_in_to_remote(self, client: Client, login: str) -> None:
        """`login`'s first call to the user mount is answered with a sign-in link; they sign in at oidc-provider
        (its pages, through the hub's callback); their next call goes through."""
        with pytest.raises(MCPError) as caught:
            await client.call_tool("remote_echo", {"text": f"{login}-first"})
        link = sign_in_link(caught)
        assert "/oauth/consent/" in link  # the hub's consent page first, then oidc-provider's pages
        async with httpx2.AsyncClient(timeout=30, follow_redirects=False) as browser:
            authorize = await allowed(browser, link)
            assert authorize.startswith(f"{self.issuer}/")
            back = await browse(authorize, login, self.callback, browser)
            done = await browser.get(back)
        assert done.status_code == 200 and "signed in" in done.text, done.text

    def bearers_of(self, login: str) -> set[str]:
        """The bearer tokens of the `remote_echo` calls of `login` that the upstream let through."""
        return {
            bearer.partition(" ")[2]
            for bearer, body in self.calls
            if b'"tools/call"' in body and f'"text":"{login}-'.encode() in body.replace(b" ", b"")
        }


@asynccontextmanager
async def oidc_hub(tmp_path: Path) -> AsyncIterator[Setup]:
    """oidc-provider issuing tokens for two resources, the hub (its clients' tokens) and the upstream (the people's
    tokens through the hub's client "the-hub"); the hub taking its tokens, with the `mode = "user"` mount
    "remote" toward the upstream, which takes only oidc-provider's JWTs for itself."""
    provider_port, hub_port, upstream_port = free_port(), free_port(), free_port()
    hub = f"http://127.0.0.1:{hub_port}/mcp"
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    callback = f"http://127.0.0.1:{hub_port}/oauth/callback"
    the_hub = {
        "client_id": HUB_CLIENT[0],
        "client_secret": HUB_CLIENT[1],
        "redirect_uris": [callback],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    async with oidc_login_provider(provider_port, {hub: "mcp", upstream: "tracker"}, [the_hub]) as issuer:
        async with httpx2.AsyncClient(timeout=30) as http:
            metadata = (await http.get(f"{issuer}/.well-known/openid-configuration")).json()
            keys = KeySet.import_key_set((await http.get(metadata["jwks_uri"])).json())
        mount = {
            "url": upstream,
            "auth": {
                "mode": "user",
                "issuer": issuer,
                "client_id": HUB_CLIENT[0],
                "client_secret": HUB_CLIENT[1],
                "scope": "tracker",
                "redirect_uri": callback,
                "token_key": KEY,
                "token_store": str(tmp_path / "connections"),
            },
        }
        path = write_config(tmp_path / "hub.toml", {"remote": mount})
        with path.open("a", encoding="utf-8") as file:
            file.write('\n[audit]\nfile = "audit.jsonl"\n')
            file.write(
                textwrap.dedent(f"""
                [auth.oauth]
                issuer = "{issuer}"
                resource = "{hub}"
                scopes_required = ["mcp"]
                """)
            )
        config = load_config(path)
        setup = Setup(issuer, metadata, keys, hub, upstream, callback, path, [], [], [])
        upstream_app = jwt_guarded(
            witnessed(build_server("remote").streamable_http_app(), setup.calls), issuer, keys, upstream, setup.passed
        )
        upstream_app = recording(upstream_app, setup.seen)
        async with serve_app(upstream_app, upstream_port), running_hub(config) as running:
            endpoint = build_app(
                running.endpoint.server,
                host="127.0.0.1",
                path="/mcp",
                health=running.health,
                oauth=config.auth.oauth,
                routes=sign_in_routes(),
            )
            async with serve_app(endpoint, hub_port):
                yield setup


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_two_people_sign_in_at_oidc_provider_and_reach_a_user_mount_with_their_own_tokens(
    tmp_path: Path, mode: str
) -> None:
    """Done when (issue 24): a client that knows only the MCP authorization spec connects with a token from the
    test authorization server and nothing hand-configured; two principals calling one `user`-mode mount reach it
    with their own tokens; no upstream receives a client's token."""
    async with oidc_hub(tmp_path) as setup:
        issuer, keys, hub, upstream = setup.issuer, setup.keys, setup.hub, setup.upstream
        people = {login: Person(login, hub) for login in ("alice", "bob")}
        with anyio.fail_after(90):
            async with people["alice"].client(hub, mode) as alice, people["bob"].client(hub, mode) as bob:
                for login, client in (("alice", alice), ("bob", bob)):
                    assert "remote_echo" in {tool.name for tool in (await client.list_tools()).tools}
                    await setup.sign_in_to_remote(client, login)
                for round_ in range(2):
                    for login, client in (("alice", alice), ("bob", bob)):
                        result = await client.call_tool("remote_echo", {"text": f"{login}-{round_}"})
                        assert result.structured_content == {"text": f"{login}-{round_}", "server": "remote"}

    # The hub's tokens: JWTs oidc-provider issued for the hub (aud), to each person (sub), by their own client.
    hub_tokens = {login: person.storage.tokens for login, person in people.items()}
    for login, token in hub_tokens.items():
        assert token is not None and token.scope is not None and "mcp" in token.scope.split()
        claims = jwt.decode(token.access_token, keys, algorithms=["RS256"]).claims
        assert (claims["sub"], claims["aud"], claims["iss"]) == (login, hub, issuer)
        assert people[login].storage.client is not None
        assert claims["client_id"] == people[login].storage.client.client_id
    assert hub_tokens["alice"].access_token != hub_tokens["bob"].access_token  # type: ignore[union-attr]
    # Each person reached the upstream with a token for the upstream, issued to them, through the hub's client.
    for login in ("alice", "bob"):
        bearers = setup.bearers_of(login)
        assert len(bearers) == 1, bearers
        (bearer,) = bearers
        claims = jwt.decode(bearer, keys, algorithms=["RS256"]).claims
        assert (claims["sub"], claims["aud"], claims["client_id"]) == (login, upstream, HUB_CLIENT[0])
        assert bearer != hub_tokens[login].access_token  # type: ignore[union-attr]  # never the client's token
    everything = repr(setup.seen)  # every header the upstream received: never a client's token
    assert setup.seen and all(t.access_token not in everything for t in hub_tokens.values() if t is not None)
    assert {claims["sub"] for claims in setup.passed} == {"alice", "bob"}
    # The audit line names the person: the token's subject, its issuer and the client it was issued to.
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    for login in ("alice", "bob"):
        (line, *_) = [
            line
            for line in lines
            if line["name"] == "echo" and line["principal"] == login and line["outcome"] == "allowed"
        ]
        assert (line["subject"], line["issuer"]) == (login, issuer)
        assert line["client_id"] == people[login].storage.client.client_id  # type: ignore[union-attr]


async def test_a_revoked_sign_in_is_revoked_at_oidc_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mcp-hub connections revoke` revokes alice's refresh token at oidc-provider (and its grant with it), which
    then refuses it; oidc-provider does not revoke JWT access tokens (unsupported_token_type), and the CLI says
    that the last one stays valid until it expires. Her next call is asked to sign in again."""
    async with oidc_hub(tmp_path) as setup:
        with anyio.fail_after(90):
            async with Person("alice", setup.hub).client(setup.hub) as alice:
                await setup.sign_in_to_remote(alice, "alice")
                (record,) = ConnectionStore(tmp_path / "connections", KEY).list()
                assert record.refresh_token is not None
                assert await introspected(setup, record.refresh_token) is True
                revoke = ("connections", "revoke", "--config", str(setup.config), "--principal", "alice")
                code, out, _ = await cli(capsys, *revoke)
                assert code == 0, out
                assert f"revoked: alice at remote ({setup.issuer}): its refresh token was revoked" in out
                assert "does not revoke access tokens (unsupported_token_type)" in out
                assert await introspected(setup, record.refresh_token) is False
                async with httpx2.AsyncClient(timeout=30, auth=httpx2.BasicAuth(*HUB_CLIENT)) as http:
                    refreshed = await http.post(
                        setup.metadata["token_endpoint"],
                        data={"grant_type": "refresh_token", "refresh_token": record.refresh_token},
                    )
                assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"
                with pytest.raises(MCPError) as caught:
                    await alice.call_tool("remote_echo", {"text": "alice-after"})
                assert "/oauth/consent/" in sign_in_link(caught)  # sent to sign in again, through the consent page
        assert not any(b"alice-after" in body for _, body in setup.calls)


async def introspected(setup: Setup, token: str) -> bool:
    """Whether oidc-provider's introspection endpoint (RFC 7662) says `token` is active, asked as the hub's client."""
    async with httpx2.AsyncClient(timeout=30, auth=httpx2.BasicAuth(*HUB_CLIENT)) as http:
        answer = await http.post(setup.metadata["introspection_endpoint"], data={"token": token})
    assert answer.status_code == 200, answer.text
    return bool(answer.json()["active"])
