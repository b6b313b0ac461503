"""Revoking a person's sign-in toward a `mode = "user"` mount revokes its tokens at the authorization server
(RFC 7009) too, and forgets them at the hub whatever that server answers.

Real parts: the authorization server of tests/servers/authorization_server.py served over HTTP (its `/revoke`
checks the client and records every request), the hub and upstream of tests/test_user_credentials.py, the
real CLI and admin console.
"""

from __future__ import annotations

import getpass
import json
import time
from pathlib import Path

import anyio
import httpx2
import pytest

from mcp_hub.credentials.connections import Connection, ConnectionStore
from tests.conftest import free_port, serve_app, write_config
from tests.harness.console import ADMIN_KEY, logged_in
from tests.harness.identity import KEY, SECRET, Setup, cli, connected, user_hub
from tests.servers.authorization_server import AuthorizationServer, Issued

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


async def upstream_status(setup: Setup, token: str) -> int:
    """What the guarded upstream answers to a request that carries `token`."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=30) as http:
        return (await http.post(setup.upstream, json=INITIALIZE, headers=headers)).status_code


def stored(setup: Setup) -> list[Connection]:
    return ConnectionStore(setup.store, KEY).list()


@pytest.mark.slow
async def test_cli_revoke_revokes_both_tokens_at_the_authorization_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice's refresh token and access token are revoked at the authorization server, the hub authenticating
    as its client; her old access token is then refused by the server; bob's tokens are left alone. The revoke
    is written to the audit log the running hub writes too."""
    monkeypatch.setenv("HUB_TOKEN_KEY", KEY)
    async with user_hub(tmp_path, admin_key=ADMIN_KEY) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a, setup.client("bob") as b:
                await connected(setup, a, "alice")
                await connected(setup, b, "bob")
            (alice,) = [r for r in stored(setup) if r.principal == "alice"]
            assert alice.refresh_token is not None
            assert await upstream_status(setup, alice.access_token) == 200
            code, out, _ = await cli(
                capsys, "connections", "revoke", "--config", str(setup.config), "--principal", "alice"
            )
            assert code == 0, out
            assert f"revoked: alice at remote ({setup.server.issuer}): its tokens were revoked at the" in out
            assert [r.principal for r in stored(setup)] == ["bob"]
            asked = [
                (r["token"], r["token_type_hint"], r["authenticated_as"], r["status"]) for r in setup.server.revocations
            ]
            assert asked == [
                (alice.refresh_token, "refresh_token", "the-hub", 200),
                (alice.access_token, "access_token", "the-hub", 200),
            ]
            assert {alice.access_token, alice.refresh_token} <= setup.server.revoked
            assert alice.refresh_token not in setup.server.refresh_tokens
            assert await upstream_status(setup, alice.access_token) == 401
            (bob,) = stored(setup)
            assert await upstream_status(setup, bob.access_token) == 200
            assert bob.access_token not in setup.server.revoked
            lines = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
            (revoke,) = [e for e in map(json.loads, lines) if e["method"] == "admin/connections/revoke"]
            assert revoke["principal"] == f"admin:{getpass.getuser()}" and revoke["via"] == "cli"
            assert revoke["mount"] == "remote" and revoke["outcome"] == "revoked"
            assert revoke["arguments"] == {"principal": "alice", "issuer": setup.server.issuer}
            assert "its tokens were revoked at the authorization server" in revoke["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("endpoint", [True, False], ids=["revocation-endpoint", "none"])
async def test_the_admin_consoles_revoke_revokes_at_the_authorization_server_and_says_so(
    tmp_path: Path, endpoint: bool
) -> None:
    async with user_hub(tmp_path, admin_key=ADMIN_KEY) as setup, httpx2.AsyncClient(timeout=30) as web:
        with anyio.fail_after(60):
            async with setup.client("alice") as a:
                await connected(setup, a, "alice")
            (alice,) = stored(setup)
            setup.server.revocation = endpoint  # in its metadata or not, from now on
            csrf = await logged_in(web, setup.base)
            form = {"principal": "alice", "mount": "remote", "issuer": setup.server.issuer, "csrf": csrf}
            revoked = await web.post(f"{setup.base}/admin/connections/revoke", data=form)
            assert revoked.status_code == 303
            after = await web.get(f"{setup.base}{revoked.headers['location']}")
            assert not stored(setup)
            if endpoint:
                assert "alice at remote: revoked by root; its tokens were revoked at the authorization" in after.text
                assert [r["token_type_hint"] for r in setup.server.revocations] == ["refresh_token", "access_token"]
                assert await upstream_status(setup, alice.access_token) == 401
            else:
                assert (
                    "alice at remote: revoked by root; the hub forgot its tokens; the authorization server"
                    in (after.text)
                    and "publishes no revocation endpoint" in after.text
                )
                assert not setup.server.revocations
                assert await upstream_status(setup, alice.access_token) == 200  # still good at the server


def _stored_by_hand(tmp_path: Path, issuer: str, **auth: str) -> tuple[Path, ConnectionStore]:
    """A hub.toml with a `mode = "user"` mount "remote" whose authorization server is `issuer`, and alice's
    connection in its token file (as a sign-in leaves it)."""
    store = tmp_path / "connections"
    mount = {
        "url": "http://127.0.0.1:9/mcp",
        "auth": {
            "mode": "user",
            "issuer": issuer,
            "client_id": "the-hub",
            "client_secret": SECRET,
            "redirect_uri": "http://127.0.0.1:8/oauth/callback",
            "token_key": KEY,
            "token_store": str(store),
            **auth,
        },
    }
    config = write_config(tmp_path / "hub.toml", {"remote": mount})
    records = ConnectionStore(store, KEY)
    records.put(Connection("alice", "remote", issuer, "access-a", "refresh-a", expires_at=time.time() + 600))
    records.put(Connection("bob", "remote", issuer, "access-b", "refresh-b", expires_at=time.time() + 600))
    return config, records


async def test_an_authorization_server_without_a_revocation_endpoint_the_tokens_are_only_forgotten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = AuthorizationServer(clients={"the-hub": SECRET}, revocation=False)
    async with serve_app(server.app()) as issuer:
        server.issuer = issuer
        config, records = _stored_by_hand(tmp_path, issuer)
        code, out, _ = await cli(capsys, "connections", "revoke", "--config", str(config), "--principal", "alice")
    assert code == 0
    assert "revoked: alice at remote" in out and "publishes no revocation endpoint" in out
    assert "valid there until they expire" in out
    assert [r.principal for r in records.list()] == ["bob"]
    assert not server.revocations


async def test_an_authorization_server_that_is_down_the_tokens_are_forgotten_and_it_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    issuer = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config, records = _stored_by_hand(tmp_path, issuer)
    with anyio.fail_after(30):
        code, out, _ = await cli(capsys, "connections", "revoke", "--config", str(config), "--principal", "alice")
    assert code == 1
    assert "revoked: alice at remote" in out and "could not be revoked at the authorization server" in out
    assert "metadata could not be read" in out and issuer in out
    assert [r.principal for r in records.list()] == ["bob"]


async def test_a_refusing_authorization_server_the_tokens_are_forgotten_and_the_refusal_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The authorization server refuses the hub's client (a wrong secret): nothing is revoked there, the hub
    forgets the tokens all the same, and the CLI says why, with exit code 1."""
    server = AuthorizationServer(clients={"the-hub": SECRET})
    async with serve_app(server.app()) as issuer:
        server.issuer = issuer
        config, records = _stored_by_hand(tmp_path, issuer, client_secret="not-the-secret")
        server.tokens["access-a"] = Issued("the-hub", "http://127.0.0.1:9/mcp", time.time() + 600, "alice")
        code, out, _ = await cli(capsys, "connections", "revoke", "--config", str(config), "--principal", "alice")
    assert code == 1
    assert "could not be revoked at the authorization server" in out and "invalid_client" in out
    assert [r.principal for r in records.list()] == ["bob"]
    assert [r["status"] for r in server.revocations] == [401, 401]
    assert "access-a" not in server.revoked


@pytest.mark.slow
async def test_client_secret_post_revokes_with_the_clients_credentials_in_the_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """token_endpoint_auth_method = "client_secret_post": the client's credentials go in the form, as at the
    token endpoint."""
    server = AuthorizationServer(clients={"the-hub": SECRET})
    async with serve_app(server.app()) as issuer:
        server.issuer = issuer
        config, _ = _stored_by_hand(tmp_path, issuer, token_endpoint_auth_method="client_secret_post")
        code, out, _ = await cli(capsys, "connections", "revoke", "--config", str(config), "--principal", "alice")
    assert code == 0, out
    assert [(r["client_id"], r["client_secret"], r["status"]) for r in server.revocations] == [
        ("the-hub", SECRET, 200),
        ("the-hub", SECRET, 200),
    ]
