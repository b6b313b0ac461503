"""People signing in through the hub to a `mode = "user"` mount at a real authorization server: the hub, its
browser steps, the tokens the upstream saw, and the CLI's commands about connections."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    URL_ELICITATION_REQUIRED,
)

from mcp_hub.admin import console
from mcp_hub.cli import main as cli_main
from mcp_hub.config import load_config
from mcp_hub.credentials.connections import new_key
from mcp_hub.credentials.user import sign_in_routes
from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import free_port, running_hub, serve_app, write_config
from tests.servers.authorization import AuthorizationServer as SignInIssuer
from tests.servers.authorization_server import AuthorizationServer, Issued, guarded
from tests.servers.fixture import build_server

SECRET = "s3cret-of-the-hub-at-the-as"


KEYS = {"alice": "a" * 32, "bob": "b" * 32}


KEY = new_key()


@dataclass
class Setup:
    hub: Hub
    server: AuthorizationServer
    upstream: str
    base: str
    store: Path
    config: Path
    seen: list[dict[str, str]]
    """The headers of every request the upstream received."""
    calls: list[tuple[str, bytes]]
    """The bearer and body of every request the upstream let through."""
    raw: list[list[bytes]]
    """The `Authorization` fields of every request the upstream received."""
    signin: SignInIssuer | None = None
    """The hub's own sign-in issuer ([auth.oauth]), when the hub takes OAuth access tokens too."""

    @asynccontextmanager
    async def client(
        self, principal: str, mode: str = "legacy", *, client_id: str | None = None, **options: Any
    ) -> AsyncIterator[Client]:
        """An MCP client of `principal`: with their API key, or (`client_id`) with an access token the hub's
        sign-in issuer minted for them, for that OAuth client."""
        if client_id is None:
            credential = KEYS[principal]
        else:
            assert self.signin is not None
            credential = self.signin.mint(f"{self.base}/mcp", sub=principal, client_id=client_id)
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {credential}"}, timeout=30) as http,
            Client(
                streamable_http_client(f"{self.base}/mcp", http_client=http), mode=mode, cache=None, **options
            ) as client,
        ):
            yield client

    def tokens_of(self, who: str) -> set[str]:
        """The access tokens the authorization server issued to `who`, for the upstream."""
        return {t for t, i in self.server.tokens.items() if i.subject == who and i.audience == self.upstream}

    def bearers_of_calls(self, text: str) -> set[str]:
        """The bearer tokens of the `remote_echo` calls with `text` that the upstream let through."""
        return {
            bearer.partition(" ")[2]
            for bearer, body in self.calls
            if b'"tools/call"' in body and f'"text":"{text}"'.encode() in body.replace(b" ", b"")
        }


def authorizations(app: Any, log: list[list[bytes]]) -> Any:
    """`app`, recording every `Authorization` field of each HTTP request, as sent (a repeated one twice)."""

    async def record(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            log.append([value for key, value in scope["headers"] if key.lower() == b"authorization"])
        await app(scope, receive, send)

    return record


SERVICE_TOKEN = "the-hubs-own-token-for-listing"


@asynccontextmanager
async def user_hub(
    tmp_path: Path,
    *,
    service_token: bool = False,
    admin_key: str | None = None,
    oauth: bool = False,
    registered: bool = True,
    dpop: bool = False,
    dpop_nonce: str | None = None,
) -> AsyncIterator[Setup]:
    """A hub whose mount "remote" is `mode = "user"`, taking alice's and bob's API keys. The upstream lists its
    tools to anyone, or (`service_token`) only with a token, which the mount's headers hold for the hub. With
    `admin_key`, the admin console is served too (administrator "root"), and the audit log is `audit.jsonl`.
    With `oauth`, the hub also takes access tokens of its own sign-in issuer ([auth.oauth]; `Setup.signin`).
    Without `registered`, the mount names no client: the hub registers itself at the authorization server. With
    `dpop` (and `dpop_nonce`), the authorization server binds tokens to the hub's proof keys (DPoP)."""
    hub_port, upstream_port, signin_port = free_port(), free_port(), free_port()
    signin = SignInIssuer(f"http://127.0.0.1:{signin_port}") if oauth else None
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    server = AuthorizationServer(clients={"the-hub": SECRET}, dpop=dpop, dpop_nonce=dpop_nonce)
    seen: list[dict[str, str]] = []
    calls: list[tuple[str, bytes]] = []
    raw: list[list[bytes]] = []
    store = tmp_path / "state" / "connections"
    async with serve_app(server.app()) as issuer:
        server.issuer = issuer
        if service_token:
            server.tokens[SERVICE_TOKEN] = Issued("the-hub", upstream, time.time() + 3600)
        mount: dict[str, Any] = {
            "url": upstream,
            **({"headers": {"Authorization": f"Bearer {SERVICE_TOKEN}"}} if service_token else {}),
            "auth": {
                "mode": "user",
                "issuer": issuer,
                **({"client_id": "the-hub", "client_secret": SECRET} if registered else {}),
                "scope": "tracker",
                "redirect_uri": f"http://127.0.0.1:{hub_port}/oauth/callback",
                "token_key": "${HUB_TOKEN_KEY}",
                "token_store": str(store),
            },
        }
        path = write_config(tmp_path / "hub.toml", {"remote": mount})
        with path.open("a", encoding="utf-8") as file:
            file.write(f'\n[auth]\napi_keys = {{ alice = "{KEYS["alice"]}", bob = "{KEYS["bob"]}" }}\n')
            if signin is not None:
                file.write(f'[auth.oauth]\nissuer = "{signin.issuer}"\nresource = "http://127.0.0.1:{hub_port}/mcp"\n')
            if admin_key is not None:
                file.write(
                    f'\n[audit]\nfile = "audit.jsonl"\n\n[admin]\nenabled = true\nkeys = {{ root = "{admin_key}" }}\n'
                )
        config = load_config(path, environ={"HUB_TOKEN_KEY": KEY})
        fixture = witnessed(build_server("remote").streamable_http_app(), calls)
        app = authorizations(guarded(fixture, server, upstream, seen, public=not service_token), raw)
        async with AsyncExitStack() as stack:
            if signin is not None:
                await stack.enter_async_context(serve_app(signin.app(), signin_port))
            await stack.enter_async_context(serve_app(app, port=upstream_port))
            hub = await stack.enter_async_context(running_hub(config))
            endpoint = build_app(
                hub.endpoint.server,
                host="127.0.0.1",
                path="/mcp",
                health=hub.health,
                api_keys=config.auth.api_keys,
                oauth=config.auth.oauth,
                routes=sign_in_routes(),
                admin=console(hub, "127.0.0.1") if admin_key is not None else None,
            )
            async with serve_app(endpoint, hub_port) as base:
                assert hub.health()["servers"]["remote"]["state"] == "up", hub.health()
                yield Setup(hub, server, upstream, base, store, path, seen, calls, raw, signin)


def sign_in_link(caught: pytest.ExceptionInfo[MCPError]) -> str:
    """The URL of the URL-mode elicitation a call was answered with (-32042)."""
    error = caught.value.error
    assert error.code == URL_ELICITATION_REQUIRED, error
    assert isinstance(error.data, dict)
    (elicitation,) = error.data["elicitations"]
    assert elicitation["mode"] == "url" and elicitation["elicitationId"]
    return str(elicitation["url"])


def csrf_of(page: httpx2.Response) -> str:
    """The CSRF token the hub's consent page carries in its form."""
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None, page.text
    return found.group(1)


async def allowed(browser: httpx2.AsyncClient, link: str) -> str:
    """What the person's browser does on the hub's consent page the link opens: Allow (unless the hub already
    has their consent for this client and sends the browser on at once). The authorization server's URL."""
    page = await browser.get(link)
    if page.status_code == 302:
        return page.headers["location"]
    assert page.status_code == 200 and 'value="allow"' in page.text, page.text
    allow = await browser.post(link, data={"csrf": csrf_of(page), "decision": "allow"})
    assert allow.status_code == 303, allow.text
    return allow.headers["location"]


async def sign_in(link: str, user: str, browser: httpx2.AsyncClient | None = None) -> httpx2.Response:
    """What a person's browser does with the sign-in link: allow the client on the hub's consent page, open the
    authorization server's login page, post it, follow the redirect back to the hub. The hub's last answer."""
    async with AsyncExitStack() as stack:
        if browser is None:
            browser = await stack.enter_async_context(httpx2.AsyncClient(timeout=30, follow_redirects=False))
        authorize = await allowed(browser, link)
        assert "/authorize?" in authorize and "code_challenge=" in authorize, authorize
        page = await browser.get(authorize)
        assert page.status_code == 200 and "<form" in page.text
        back = await browser.post(authorize, data={"user": user, "password": "pw"})
        assert back.status_code == 302, back.text
        return await browser.get(back.headers["location"])


async def connected(setup: Setup, client: Client, principal: str) -> None:
    """`principal`'s first call is answered with a sign-in link; they sign in; the call then goes through."""
    with pytest.raises(MCPError) as caught:
        await client.call_tool("remote_echo", {"text": f"{principal}-first"})
    link = sign_in_link(caught)
    assert link.startswith(f"{setup.base}/oauth/consent/")
    done = await sign_in(link, principal)
    assert done.status_code == 200 and "signed in" in done.text
    result = await client.call_tool("remote_echo", {"text": f"{principal}-0"})
    assert result.structured_content == {"text": f"{principal}-0", "server": "remote"}


def witnessed(app: Any, log: list[tuple[str, bytes]]) -> Any:
    """`app`, recording each HTTP request's `Authorization` header and body (read whole, then replayed)."""

    async def witness(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        messages = []
        body = b""
        if scope["method"] == "POST":
            while True:
                message = await receive()
                messages.append(message)
                body += message.get("body", b"")
                if message["type"] != "http.request" or not message.get("more_body"):
                    break
        log.append((headers.get("authorization", ""), body))

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await app(scope, replay, send)

    return witness


async def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`mcp-hub ARGS` in a worker thread (the authorization server answers on this test's event loop):
    exit code, stdout, stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        await anyio.to_thread.run_sync(cli_main, list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err
