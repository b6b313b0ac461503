"""DPoP (RFC 9449) at the hub as a resource server: a real authorization server's tokens bound to keys
(`cnf.jkt`), proofs signed with joserfc by the test (not by the hub's own proof maker, except where the SDK's
client is driven end to end), sent over HTTP to the hub's real endpoint; replicas sharing a real Redis."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, Key, RSAKey
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.auth.dpop import token_hash
from mcp_hub.cluster import Cluster
from mcp_hub.credentials.connections import ConnectionStore
from mcp_hub.credentials.dpop import ProofKey
from mcp_hub.server.http import build_app
from tests.conftest import free_port, hub_client, make_config, running_hub, serve_app
from tests.harness.identity import KEY, connected, user_hub
from tests.harness.oauth import ACCEPT
from tests.servers.authorization import INTROSPECTION_CLIENT
from tests.servers.authorization_server import guarded
from tests.servers.fixture import build_server
from tests.test_credentials import authorization_server, client_credentials, guarded_upstream
from tests.test_enterprise import KEY as ENTERPRISE_KEY
from tests.test_enterprise import enterprise_hub
from tests.test_oauth import INITIALIZE, Setup, oauth_hub

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def proof(key: Key, url: str, token: str | None, *, alg: str = "ES256", header: Any = None, **claims: Any) -> str:
    """A DPoP proof signed with `key` for a POST to `url` carrying `token` (`claims` and `header` override)."""
    body: dict[str, Any] = {"jti": uuid.uuid4().hex, "htm": "POST", "htu": url, "iat": int(time.time())}
    if token is not None:
        body["ath"] = token_hash(token)
    body.update(claims)
    body = {name: value for name, value in body.items() if value is not None}
    head = {"typ": "dpop+jwt", "alg": alg, "jwk": key.as_dict(private=False), **(header or {})}
    return jwt.encode(head, body, key, algorithms=[alg])


async def post(setup: Setup, authorization: str, *proofs: str) -> httpx2.Response:
    headers = [*ACCEPT.items(), ("Authorization", authorization), *(("DPoP", each) for each in proofs)]
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(f"{setup.base}/mcp", json=INITIALIZE, headers=headers)


async def metadata_of(setup: Setup) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=30) as http:
        return (await http.get(f"{setup.base}/.well-known/oauth-protected-resource/mcp")).json()


def dpop_challenge(response: httpx2.Response) -> dict[str, str]:
    value = response.headers["www-authenticate"]
    assert value.startswith("DPoP "), value
    return dict(re.findall(r'([a-z_]+)="([^"]*)"', value))


async def test_a_bound_token_with_a_good_proof_is_taken_and_every_bad_proof_is_refused(tmp_path: Path) -> None:
    key, other = ECKey.generate_key("P-256"), ECKey.generate_key("P-256")
    async with oauth_hub(tmp_path) as setup:
        url = f"{setup.base}/mcp"
        token = setup.token(cnf={"jkt": key.thumbprint()})
        good = await post(setup, f"DPoP {token}", proof(key, url, token))
        assert good.status_code == 200, good.text

        once = proof(key, url, token)
        assert (await post(setup, f"DPoP {token}", once)).status_code == 200
        rsa = RSAKey.generate_key(2048)
        cases: dict[str, tuple[str, list[str], str]] = {
            "replayed jti": (f"DPoP {token}", [once], "presented before"),
            "wrong htu": (f"DPoP {token}", [proof(key, f"{setup.base}/other", token)], "htu"),
            "htu with a query": (f"DPoP {token}", [proof(key, url + "?x=1", token)], "htu"),
            "wrong htm": (f"DPoP {token}", [proof(key, url, token, htm="GET")], "htm"),
            "stale iat": (f"DPoP {token}", [proof(key, url, token, iat=int(time.time()) - 1000)], "iat"),
            "iat in the future": (f"DPoP {token}", [proof(key, url, token, iat=int(time.time()) + 600)], "iat"),
            "no jti": (f"DPoP {token}", [proof(key, url, token, jti=None)], "jti"),
            "wrong ath": (f"DPoP {token}", [proof(key, url, "another token")], "ath"),
            "no ath": (f"DPoP {token}", [proof(key, url, None)], "ath"),
            "another key than the token's": (f"DPoP {token}", [proof(other, url, token)], "cnf.jkt"),
            "typ not dpop+jwt": (f"DPoP {token}", [proof(key, url, token, header={"typ": "JWT"})], "typ"),
            "a private key in jwk": (
                f"DPoP {token}",
                [proof(key, url, token, header={"jwk": key.as_dict(private=True)})],
                "private",
            ),
            "signed with another key than its jwk": (
                f"DPoP {token}",
                [proof(other, url, token, header={"jwk": key.as_dict(private=False)})],
                "signature",
            ),
            "an algorithm not taken": (f"DPoP {token}", [proof(rsa, url, token, alg="RS384")], "RS384"),
            "an RSA key of its own (PS256)": (f"DPoP {token}", [proof(rsa, url, token, alg="PS256")], "cnf.jkt"),
            "no proof": (f"DPoP {token}", [], "one DPoP header"),
            "two proofs": (f"DPoP {token}", [proof(key, url, token), proof(key, url, token)], "one DPoP header"),
            "not a JWT": (f"DPoP {token}", ["not-a-proof"], "not a JWT"),
            "the bound token as Bearer": (f"Bearer {token}", [], "bound to a key"),
        }
        for case, (authorization, proofs, said) in cases.items():
            refused = await post(setup, authorization, *proofs)
            assert refused.status_code == 401, (case, refused.text)
            challenge = dpop_challenge(refused)
            assert said in challenge["error_description"], (case, challenge)
            assert challenge["algs"] == "ES256 PS256 RS256 EdDSA", case
            assert challenge["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp"), case

        # A bound token without a required scope: its holder hears so; one without its key hears nothing of it.
        narrow = setup.token(cnf={"jkt": key.thumbprint()}, scope="hub:read")
        lacking = await post(setup, f"DPoP {narrow}", proof(key, url, narrow))
        assert lacking.status_code == 403
        assert dpop_challenge(lacking)["error"] == "insufficient_scope"
        stolen = await post(setup, f"DPoP {narrow}", proof(other, url, narrow))
        assert stolen.status_code == 401
        assert dpop_challenge(stolen)["error"] == "invalid_token"

        unbound = setup.token()
        refused = await post(setup, f"DPoP {unbound}", proof(key, url, unbound))
        assert refused.status_code == 401
        assert "bound to no key" in dpop_challenge(refused)["error_description"]
        bearer = await post(setup, f"Bearer {unbound}")  # allowed by default: a Bearer token bound to no key
        assert bearer.status_code == 200
        document = await metadata_of(setup)
        assert document["dpop_signing_alg_values_supported"] == ["ES256", "PS256", "RS256", "EdDSA"]
        assert "dpop_bound_access_tokens_required" not in document


async def test_require_takes_dpop_bound_tokens_only_and_says_so(tmp_path: Path) -> None:
    key = ECKey.generate_key("P-256")
    async with oauth_hub(tmp_path, 'dpop = "require"\n') as setup:
        url = f"{setup.base}/mcp"
        unbound = setup.token()
        refused = await post(setup, f"Bearer {unbound}")
        assert refused.status_code == 401
        assert "DPoP-bound tokens only" in dpop_challenge(refused)["error_description"]
        nothing = await setup.post(None)
        assert nothing.status_code == 401
        assert "error" not in dpop_challenge(nothing)
        document = await metadata_of(setup)
        assert document["dpop_bound_access_tokens_required"] is True
        token = setup.token(cnf={"jkt": key.thumbprint()})
        assert (await post(setup, f"DPoP {token}", proof(key, url, token))).status_code == 200


async def test_an_introspected_token_is_bound_by_its_answers_cnf(tmp_path: Path) -> None:
    key, other = ECKey.generate_key("P-256"), ECKey.generate_key("P-256")
    client_id, secret = INTROSPECTION_CLIENT
    extra = f'introspection_endpoint = "{{issuer}}/introspect"\nclient_id = "{client_id}"\nclient_secret = "{secret}"\n'
    async with oauth_hub(tmp_path, extra) as setup:
        url = f"{setup.base}/mcp"
        answer = {**setup.issuer.claims(setup.resource), "active": True, "cnf": {"jkt": key.thumbprint()}}
        setup.issuer.opaque["opaque-bound"] = answer
        assert (await post(setup, "DPoP opaque-bound", proof(key, url, "opaque-bound"))).status_code == 200
        assert (await post(setup, "DPoP opaque-bound", proof(other, url, "opaque-bound"))).status_code == 401
        assert (await post(setup, "Bearer opaque-bound")).status_code == 401


class Proving(httpx2.Auth):
    """The test's client side: each request with the bound token and a fresh proof (the hub's `ProofKey`)."""

    def __init__(self, key: ProofKey, token: str) -> None:
        self.key, self.token = key, token

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"DPoP {self.token}"
        request.headers["DPoP"] = self.key.proof(request.method, str(request.url), self.token)
        yield request


async def test_the_sdk_client_lists_and_calls_through_the_hub_with_a_proof_per_request(tmp_path: Path) -> None:
    key = ProofKey()
    async with oauth_hub(tmp_path) as setup:
        token = setup.token(cnf={"jkt": key.thumbprint}, scope="mcp hub:read")
        async with (
            httpx2.AsyncClient(auth=Proving(key, token), timeout=30) as http,
            Client(streamable_http_client(f"{setup.base}/mcp", http_client=http), mode="legacy", cache=None) as client,
        ):
            tools = await client.list_tools()
            assert "srv_echo" in [tool.name for tool in tools.tools]
            result = await client.call_tool("srv_echo", {"text": "bound"})
            assert not result.is_error


async def test_a_proof_used_at_one_replica_is_refused_at_another(tmp_path: Path, redis_server: Any) -> None:
    key = ECKey.generate_key("P-256")
    async with oauth_hub(tmp_path) as setup:
        clusters = [Cluster(redis_server.url), Cluster(redis_server.url)]
        config, server = setup.hub.config.auth.oauth, setup.hub.endpoint.server
        apps = [
            build_app(server, host="127.0.0.1", path="/mcp", health=setup.hub.health, oauth=config, cluster=cluster)
            for cluster in clusters
        ]
        port_a, port_b = free_port(), free_port()
        async with serve_app(apps[0], port_a) as a, serve_app(apps[1], port_b) as b:
            token = setup.token(cnf={"jkt": key.thumbprint()})
            # Both replicas serve one resource (behind one load balancer): the proof names it, not the replica.
            once = proof(key, setup.resource, token)
            headers = [*ACCEPT.items(), ("Authorization", f"DPoP {token}"), ("DPoP", once)]
            async with httpx2.AsyncClient(timeout=30) as http:
                first = await http.post(f"{a}/mcp", json=INITIALIZE, headers=headers)
                again = await http.post(f"{b}/mcp", json=INITIALIZE, headers=headers)
        for cluster in clusters:
            await cluster.aclose()
    assert first.status_code == 200, first.text
    assert again.status_code == 401
    assert "presented before" in dpop_challenge(again)["error_description"]


# The hub as a client: a mount's client credentials bound to a key of the hub's (tests/servers/authorization_server.py
# checks the proofs with joserfc; the upstream behind it takes a bound token only with a good proof of its key).


@pytest.mark.parametrize("nonce", [None, "nonce-1"])
async def test_client_credentials_are_bound_and_every_request_carries_a_fresh_proof(
    tmp_path: Path, nonce: str | None
) -> None:
    seen: list[dict[str, str]] = []
    async with (
        authorization_server(dpop=True, dpop_nonce=nonce) as server,
        guarded_upstream(server, seen) as url,
    ):
        mount = {"url": url, "protocol": "auto", "auth": client_credentials(server)}
        async with running_hub(make_config(tmp_path, {"remote": mount})) as hub, hub_client(hub) as client:
            assert hub.health()["servers"]["remote"]["state"] == "up", hub.health()
            for text in ("one", "two", "three"):
                result = await client.call_tool("remote_echo", {"text": text})
                assert result.structured_content == {"text": text, "server": "remote"}
    [token] = [token for token, issued in server.tokens.items() if issued.jkt is not None]
    assert len(server.tokens) == 1
    # With a nonce, the first token request is answered use_dpop_nonce and sent once more, with it.
    assert len(server.requests) == (2 if nonce else 1)
    assert {headers.get("authorization") for headers in seen} == {f"DPoP {token}"}
    upstream_proofs = [headers["dpop"] for headers in seen]
    assert len(upstream_proofs) >= 4  # the session's own requests and the three calls
    assert len(set(upstream_proofs)) == len(upstream_proofs), "a proof was sent twice"


@pytest.mark.parametrize("setting", ["never", "auto"])
async def test_bearer_tokens_stay_where_dpop_is_off_or_the_server_does_not_say_it_takes_it(
    tmp_path: Path, setting: str
) -> None:
    """ "never"; and "auto" where the authorization server offers DPoP but the server's metadata does not (an
    authorization server binding every client's tokens is no sign that the server reads the DPoP scheme)."""
    seen: list[dict[str, str]] = []
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with authorization_server(dpop=True) as server:
        says = setting == "never"
        app = guarded(build_server("remote").streamable_http_app(), server, url, seen, says_dpop=says)
        mount = {"url": url, "protocol": "legacy", "auth": client_credentials(server, dpop=setting)}
        async with (
            serve_app(app, port=port),
            running_hub(make_config(tmp_path, {"remote": mount})) as hub,
            hub_client(hub) as client,
        ):
            result = await client.call_tool("remote_echo", {"text": "plain"})
            assert result.structured_content == {"text": "plain", "server": "remote"}
    assert server.proofs == []
    [token] = server.tokens
    assert {headers.get("authorization") for headers in seen} == {f"Bearer {token}"}


@pytest.mark.parametrize("nonce", [None, "nonce-u"])
async def test_a_persons_tokens_are_bound_to_a_key_kept_with_their_connection(
    tmp_path: Path, nonce: str | None
) -> None:
    """`mode = "user"`: the sign-in's token request proves a key made for the person's connection, kept (encrypted)
    beside their tokens; their calls carry DPoP proofs of it; a refresh proves the same key."""
    async with user_hub(tmp_path, dpop=True, dpop_nonce=nonce) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice", "2026-07-28") as a:
                await connected(setup, a, "alice")
                [first] = setup.tokens_of("alice")
                setup.server.revoked.add(first)  # the server refuses it now: refreshed, with a proof of the same key
                result = await a.call_tool("remote_echo", {"text": "alice-1"})
                assert result.structured_content == {"text": "alice-1", "server": "remote"}
        [record] = ConnectionStore(tmp_path / "state" / "connections", KEY).list("alice")
        assert record.token_type.lower() == "dpop" and record.dpop_key is not None
        thumbprint = ProofKey.from_private_jwk(record.dpop_key).thumbprint
        tokens = setup.tokens_of("alice")
        assert len(tokens) == 2 and {setup.server.tokens[t].jkt for t in tokens} == {thumbprint}
        assert setup.bearers_of_calls("alice-1") == tokens - {first}
        schemes = {headers["authorization"].split()[0] for headers in setup.seen if "authorization" in headers}
        assert schemes == {"DPoP"}
        grants = [r["grant_type"] for r in setup.server.requests]
        # With a nonce, each grant is answered use_dpop_nonce first and sent once more, with it.
        assert grants.count("authorization_code") == grants.count("refresh_token") == (2 if nonce else 1), grants


async def test_a_persons_enterprise_token_is_bound_to_a_key_kept_with_it(tmp_path: Path) -> None:
    """`mode = "enterprise"`: the JWT bearer grant proves a key made for the person; their calls prove it."""
    async with enterprise_hub(tmp_path, dpop=True) as setup:
        with anyio.fail_after(60):
            async with setup.client(f"Bearer {setup.signed_in('alice')}") as alice:
                for round_ in range(2):
                    result = await alice.call_tool("remote_echo", {"text": f"alice-{round_}"})
                    assert result.structured_content == {"text": f"alice-{round_}", "server": "remote"}
        [token] = setup.tokens_for("alice")
        [record] = ConnectionStore(setup.store, ENTERPRISE_KEY).list("alice")
        assert record.dpop_key is not None
        assert setup.server.tokens[token].jkt == ProofKey.from_private_jwk(record.dpop_key).thumbprint
        calls = [authorization for authorization, body in setup.calls if b'"tools/call"' in body]
        assert calls and set(calls) == {f"DPoP {token}"}
