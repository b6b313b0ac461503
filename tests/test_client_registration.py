"""Who the hub is at a `mode = "user"` mount's authorization server when the mount names no client
(credentials/registration.py): its client ID metadata document where the authorization server takes them,
else a client it registers dynamically; a configured client first.

The metadata document end to end: npm's oidc-provider with client ID metadata documents on and dynamic
registration off, the hub served over HTTPS on loopback (a certificate made here, which oidc-provider trusts
through NODE_EXTRA_CA_CERTS): alice's sign-in goes through oidc-provider's login and consent pages, with the
document's URL as client ID, which oidc-provider can only know by fetching and validating the document the hub
serves; her token, issued to that client, reaches the upstream, which checks it.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from joserfc import jwt
from joserfc.jwk import KeySet
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_hub.config import CLIENT_DOCUMENT_PATH, ServerAuth, load_config
from mcp_hub.credentials.authority import Authority
from mcp_hub.credentials.connections import ConnectionStore, new_key, store_at
from mcp_hub.credentials.credential import CredentialError
from mcp_hub.credentials.registration import Registration, document_url, publish
from mcp_hub.credentials.user import sign_in_routes
from mcp_hub.server.http import build_app
from tests.conftest import ROOT, free_port, running_hub, serve_app, write_config
from tests.harness.identity import KEY, KEYS, allowed, connected, sign_in_link, user_hub
from tests.harness.oauth import NODE
from tests.servers.authorization_server import AuthorizationServer
from tests.servers.fixture import build_server

pytestmark = pytest.mark.anyio


def test_the_document_url_sits_beside_the_callback() -> None:
    auth = ServerAuth(mode="user", redirect_uri="https://hub.example.com/gateway/oauth/callback", token_key=new_key())
    assert document_url(auth) == f"https://hub.example.com/gateway{CLIENT_DOCUMENT_PATH}"
    named = ServerAuth(
        mode="user",
        redirect_uri="https://hub.example.com/oauth/callback",
        client_metadata_url="https://clients.example.com/hub.json",
        token_key=new_key(),
    )
    assert document_url(named) == "https://clients.example.com/hub.json"


async def test_the_hub_serves_its_document_with_no_credential() -> None:
    """The document of a `user` mount with no client: its URL as client_id, the callback as redirect URI, a public
    client of the authorization code and refresh grants; a path no mount uses is a 404."""
    port = free_port()
    callback = f"http://127.0.0.1:{port}/oauth/callback"
    auth = ServerAuth(mode="user", issuer="http://127.0.0.1:9", redirect_uri=callback, token_key=new_key())
    url = publish(auth)
    async with serve_app(Starlette(routes=sign_in_routes()), port) as base, httpx2.AsyncClient(timeout=10) as http:
        answer = await http.get(f"{base}{CLIENT_DOCUMENT_PATH}")
        missing = await http.get(f"{base}/oauth/client-metadata.json/else")
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["client_id"] == url == f"{base}{CLIENT_DOCUMENT_PATH}"
    assert document["redirect_uris"] == [callback]
    assert document["token_endpoint_auth_method"] == "none"
    assert document["grant_types"] == ["authorization_code", "refresh_token"]
    assert "client_secret" not in document
    assert missing.status_code == 404


@pytest.mark.slow
async def test_a_hub_with_no_client_registers_once_and_keeps_the_registration(tmp_path: Path) -> None:
    """An authorization server that takes no documents but registers clients (RFC 7591): the hub registers, alice
    signs in as that client, and the registration is in the token file, so that another hub on the same file is
    the same client."""
    async with user_hub(tmp_path, registered=False) as setup:
        before = set(setup.server.clients)
        async with setup.client("alice") as alice:
            await connected(setup, alice, "alice")
        registered = set(setup.server.clients) - before
        assert len(registered) == 1, setup.server.clients
        (client_id,) = registered
        issuer = setup.server.issuer
        kept = ConnectionStore(setup.store, KEY).registered("remote", issuer)
        assert kept is not None and kept["client_id"] == client_id
        codes = [r for r in setup.server.requests if r.get("grant_type") == "authorization_code"]
        assert codes and all(r["authenticated_as"] == client_id for r in codes)
        # Another hub on the same token file (a restart) is the same client, and registers nothing.
        config = load_config(setup.config, environ={"HUB_TOKEN_KEY": KEY})
        auth = config.servers["remote"].auth
        store = store_at(auth.token_store, KEY)
        again = Registration("remote", auth, Authority("remote", issuer=issuer, token_url=None, resource_url=""), store)
        assert (await again.client()).client_id == client_id
        assert set(setup.server.clients) - before == registered


async def test_an_authorization_server_with_neither_is_named_in_the_error(tmp_path: Path) -> None:
    """No configured client, no document support, no registration endpoint: the sign-in cannot begin, and the
    error says what to configure."""
    server = AuthorizationServer(clients={})
    app = server.app()
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", "") != "/register"]

    async def no_registration(request: Any) -> Any:
        return JSONResponse({"issuer": server.issuer, "token_endpoint": f"{server.issuer}/token"})

    app.router.routes.insert(0, Route("/.well-known/oauth-authorization-server", no_registration))
    async with serve_app(app) as issuer:
        server.issuer = issuer
        auth = ServerAuth(mode="user", issuer=issuer, redirect_uri="http://127.0.0.1:1/oauth/callback", token_key=KEY)
        authority = Authority("remote", issuer=issuer, token_url=None, resource_url="")
        registration = Registration("remote", auth, authority, store_at(tmp_path / "connections", KEY))
        with pytest.raises(CredentialError) as caught:
            await registration.client()
    assert "takes no client ID metadata documents and has no registration endpoint" in caught.value.reason
    assert "client_id" in caught.value.reason


async def test_a_plain_http_document_is_never_the_client_id(tmp_path: Path) -> None:
    """An authorization server that takes documents and registers clients, and a hub whose callback is plain http
    (a desktop hub's loopback one): client ID metadata documents are https URLs, so the hub registers."""
    server = AuthorizationServer(clients={})
    app = server.app()

    async def both(request: Any) -> Any:
        return JSONResponse(
            {
                "issuer": server.issuer,
                "token_endpoint": f"{server.issuer}/token",
                "registration_endpoint": f"{server.issuer}/register",
                "client_id_metadata_document_supported": True,
            }
        )

    app.router.routes.insert(0, Route("/.well-known/oauth-authorization-server", both))
    async with serve_app(app) as issuer:
        server.issuer = issuer
        auth = ServerAuth(mode="user", issuer=issuer, redirect_uri="http://127.0.0.1:1/oauth/callback", token_key=KEY)
        authority = Authority("remote", issuer=issuer, token_url=None, resource_url="")
        client = await Registration("remote", auth, authority, store_at(tmp_path / "connections", KEY)).client()
    assert client.how == "registered" and client.client_id in server.clients


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own authority), and its key: (cert.pem, key.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcp-hub test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert, private = folder / "cert.pem", folder / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert, private


@asynccontextmanager
async def _served_hub(
    tmp_path: Path, issuer: str, upstream: str, hub_port: int, tls: tuple[Path, Path]
) -> AsyncIterator[tuple[str, list[str]]]:
    """The hub, over HTTPS, mounting `upstream` as `mode = "user"` toward `issuer` with no client; its base URL
    and the paths of the requests it received."""
    callback = f"https://127.0.0.1:{hub_port}/oauth/callback"
    mount = {
        "url": upstream,
        "auth": {
            "mode": "user",
            "issuer": issuer,
            "scope": "tracker",
            "redirect_uri": callback,
            "token_key": KEY,
            "token_store": str(tmp_path / "connections"),
        },
    }
    path = write_config(tmp_path / "hub.toml", {"remote": mount})
    with path.open("a", encoding="utf-8") as file:
        file.write(f'\n[auth]\napi_keys = {{ alice = "{KEYS["alice"]}" }}\n')
    config = load_config(path)
    paths: list[str] = []
    async with running_hub(config) as hub:
        app = build_app(
            hub.endpoint.server,
            host="127.0.0.1",
            path="/mcp",
            health=hub.health,
            api_keys=config.auth.api_keys,
            routes=sign_in_routes(),
        )

        async def noted(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                paths.append(scope["path"])
            await app(scope, receive, send)

        async with serve_app(noted, hub_port, tls=tls) as base:
            yield base, paths


@pytest.mark.slow
@pytest.mark.skipif(
    not NODE.exists() or not (ROOT / "tests" / "npm" / "node_modules" / "oidc-provider").exists(),
    reason="npm's oidc-provider is not installed in tests/npm",
)
async def test_oidc_provider_takes_the_hubs_client_id_metadata_document(tmp_path: Path) -> None:
    from tests.harness.oidc import browse, oidc_login_provider
    from tests.test_oidc_end_to_end import jwt_guarded

    tls = _certificate(tmp_path)
    trust = ssl.create_default_context(cafile=str(tls[0]))
    provider_port, hub_port, upstream_port = free_port(), free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    document = f"https://127.0.0.1:{hub_port}{CLIENT_DOCUMENT_PATH}"
    options = {"cimd": True, "registration": False}
    trusted = {"NODE_EXTRA_CA_CERTS": str(tls[0])}
    async with oidc_login_provider(provider_port, {upstream: "tracker"}, [], options=options, env=trusted) as issuer:
        async with httpx2.AsyncClient(timeout=30) as http:
            metadata = (await http.get(f"{issuer}/.well-known/openid-configuration")).json()
            keys = KeySet.import_key_set((await http.get(metadata["jwks_uri"])).json())
        assert metadata["client_id_metadata_document_supported"] is True
        assert "registration_endpoint" not in metadata
        passed: list[dict[str, Any]] = []
        upstream_app = jwt_guarded(build_server("remote").streamable_http_app(), issuer, keys, upstream, passed)
        async with (
            serve_app(upstream_app, upstream_port),
            _served_hub(tmp_path, issuer, upstream, hub_port, tls) as (base, paths),
        ):
            with anyio.fail_after(60):
                async with (
                    httpx2.AsyncClient(headers={"X-API-Key": KEYS["alice"]}, timeout=30, verify=trust) as http,
                    Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="2026-07-28") as alice,
                ):
                    with pytest.raises(MCPError) as caught:
                        await alice.call_tool("remote_echo", {"text": "first"})
                    link = sign_in_link(caught)
                    async with httpx2.AsyncClient(timeout=30, follow_redirects=False, verify=trust) as browser:
                        authorize = await allowed(browser, link)
                        assert authorize.startswith(f"{issuer}/")
                        assert httpx2.URL(authorize).params["client_id"] == document
                        back = await browse(authorize, "alice", f"{base}/oauth/callback", browser)
                        done = await browser.get(back)
                    assert done.status_code == 200 and "signed in" in done.text, done.text
                    result = await alice.call_tool("remote_echo", {"text": "after"})
                    assert result.structured_content == {"text": "after", "server": "remote"}
    assert CLIENT_DOCUMENT_PATH in paths  # oidc-provider fetched the document
    alices = [c for c in passed if c.get("sub") == "alice"]
    assert alices and all(c["client_id"] == document and c["aud"] == upstream for c in alices)
    (record,) = ConnectionStore(tmp_path / "connections", KEY).list()
    assert jwt.decode(record.access_token, keys, algorithms=["RS256"]).claims["client_id"] == document


async def test_an_authorization_code_mount_is_the_client_of_the_document_the_hub_serves(tmp_path: Path) -> None:
    """`mode = "authorization_code"` with `client_metadata_url` at the hub's own /oauth/client-metadata.json: the hub
    serves that document, naming the mount's redirect_uri, to the authorization server that fetches it; the
    SDK's login then uses the URL as its client_id (where the authorization server takes documents)."""
    url = "https://hub.example.com/oauth/client-metadata.json"
    auth = {"mode": "authorization_code", "client_metadata_url": url, "redirect_uri": "https://hub.example.com/code"}
    gone = f"http://127.0.0.1:{free_port()}/mcp"  # the mount need not come up for its document to be served
    config = load_config(write_config(tmp_path / "hub.toml", {"machine": {"url": gone, "auth": auth}}))
    async with (
        running_hub(config, settle=5) as hub,
        serve_app(hub.http_app("127.0.0.1")) as base,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        answer = await http.get(f"{base}{CLIENT_DOCUMENT_PATH}", headers={"Host": "hub.example.com"})
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["client_id"] == url
    assert "https://hub.example.com/code" in document["redirect_uris"]
    assert document["token_endpoint_auth_method"] == "none" and document["grant_types"] == [
        "authorization_code",
        "refresh_token",
    ]
