"""Each person's own login toward a mounted server (`mode = "user"`), end to end.

All real parts: the sign-in link opens the hub's consent page, where the person allows the client; the mount's
authorization server (tests/servers/authorization_server.py) then shows a login page, which the test fills in
as a browser would (an HTTP client with its own cookies, following the sign-in link and the redirects);
the upstream is the fixture SDK server over streamable HTTP behind a bearer check that records every
request (its listing is open to anyone, as some servers' are); the clients are the SDK's, over the hub's
real HTTP endpoint, signed in to the hub with API keys.
"""

from __future__ import annotations

import os
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
from mcp_types import URL_ELICITATION_REQUIRED, ElicitCompleteNotification, ElicitResult

from mcp_hub.admin import console
from mcp_hub.cli import main as cli_main
from mcp_hub.config import load_config
from mcp_hub.credentials.connections import Connection, ConnectionStore, StoreError, new_key
from mcp_hub.credentials.user import sign_in_routes
from mcp_hub.errors import ConfigError
from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import free_port, running_hub, serve_app, wait_for, write_config
from tests.servers.authorization import AuthorizationServer as SignInIssuer
from tests.servers.authorization_server import AuthorizationServer, Issued, guarded
from tests.servers.fixture import build_server
from tests.test_token_exchange import witnessed

pytestmark = pytest.mark.anyio

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
    tmp_path: Path, *, service_token: bool = False, admin_key: str | None = None, oauth: bool = False
) -> AsyncIterator[Setup]:
    """A hub whose mount "remote" is `mode = "user"`, taking alice's and bob's API keys. The upstream lists its
    tools to anyone, or (`service_token`) only with a token, which the mount's headers hold for the hub. With
    `admin_key`, the admin console is served too (administrator "root"), and the audit log is `audit.jsonl`.
    With `oauth`, the hub also takes access tokens of its own sign-in issuer ([auth.oauth]; `Setup.signin`)."""
    hub_port, upstream_port, signin_port = free_port(), free_port(), free_port()
    signin = SignInIssuer(f"http://127.0.0.1:{signin_port}") if oauth else None
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    server = AuthorizationServer(clients={"the-hub": SECRET})
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
                "client_id": "the-hub",
                "client_secret": SECRET,
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


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_each_person_reaches_the_mount_with_their_own_token(tmp_path: Path, mode: str) -> None:
    """Two principals call one `user` mount: each is first sent to sign in, then every call of theirs carries
    the token the authorization server issued to that person; no client's own credential reaches the server."""
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice", mode) as a, setup.client("bob", mode) as b:
                assert "remote_echo" in {tool.name for tool in (await a.list_tools()).tools}
                await connected(setup, a, "alice")
                await connected(setup, b, "bob")
                for round_ in range(1, 3):
                    assert (await a.call_tool("remote_echo", {"text": f"alice-{round_}"})).structured_content
                    assert (await b.call_tool("remote_echo", {"text": f"bob-{round_}"})).structured_content
                assert setup.hub.upstreams["remote"].client_sessions == 2
        alices, bobs = setup.tokens_of("alice"), setup.tokens_of("bob")
        assert len(alices) == 1 and len(bobs) == 1 and alices != bobs
        for round_ in range(3):
            assert setup.bearers_of_calls(f"alice-{round_}") == alices
            assert setup.bearers_of_calls(f"bob-{round_}") == bobs
        assert not setup.bearers_of_calls("alice-first") and not setup.bearers_of_calls("bob-first")  # never sent
        (code_request,) = [r for r in setup.server.requests if r["grant_type"] == "authorization_code"][:1]
        assert code_request["authenticated_as"] == "the-hub" and code_request["code_verifier"]
        assert code_request["resource"] == setup.upstream
        everything = repr(setup.seen) + repr(setup.calls)
        assert KEYS["alice"] not in everything and KEYS["bob"] not in everything  # no passthrough


async def test_the_hubs_own_token_lists_and_each_persons_session_carries_theirs_alone(tmp_path: Path) -> None:
    """A server that lists its tools only with a token: the hub's own session presents the one in the mount's
    headers; a person's session replaces it with theirs, never sends both, never the client's."""
    async with user_hub(tmp_path, service_token=True) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice", "2026-07-28") as a:
                assert "remote_echo" in {tool.name for tool in (await a.list_tools()).tools}
                await connected(setup, a, "alice")
        assert setup.bearers_of_calls("alice-0") == setup.tokens_of("alice")
        assert all(len(fields) <= 1 for fields in setup.raw), setup.raw
        sent = {fields[0].decode() for fields in setup.raw if fields}
        assert sent == {f"Bearer {SERVICE_TOKEN}", *(f"Bearer {t}" for t in setup.tokens_of("alice"))}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_client_that_takes_url_elicitation_is_asked_and_its_call_waits_for_the_sign_in(
    tmp_path: Path, mode: str
) -> None:
    """The client is asked `elicitation/create` (mode "url"); the person signs in while it is open; the call
    then goes through, with their token, without being made again."""
    asked: list[Any] = []

    async def open_link(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        assert (await sign_in(params.url, "alice")).status_code == 200
        return ElicitResult(action="accept")

    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['alice']}"}, timeout=30) as http,
                Client(
                    streamable_http_client(f"{setup.base}/mcp", http_client=http),
                    mode=mode,
                    cache=None,
                    elicitation_callback=open_link,
                ) as a,
            ):
                result = await a.call_tool("remote_echo", {"text": "alice-0"})
                assert result.structured_content == {"text": "alice-0", "server": "remote"}
        (params,) = asked
        assert params.mode == "url" and params.url.startswith(f"{setup.base}/oauth/consent/")
        assert setup.bearers_of_calls("alice-0") == setup.tokens_of("alice")


async def test_a_declined_sign_in_fails_the_call_and_sends_nothing(tmp_path: Path) -> None:
    async def decline(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="decline")

    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['alice']}"}, timeout=30) as http,
                Client(
                    streamable_http_client(f"{setup.base}/mcp", http_client=http),
                    mode="legacy",
                    cache=None,
                    elicitation_callback=decline,
                ) as a,
            ):
                with pytest.raises(MCPError, match="did not agree to sign in"):
                    await a.call_tool("remote_echo", {"text": "alice-0"})
        assert not setup.bearers_of_calls("alice-0") and not setup.tokens_of("alice")


async def test_a_handshake_era_client_hears_that_the_sign_in_is_complete(tmp_path: Path) -> None:
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ElicitCompleteNotification):
            heard.append(message.params.elicitation_id)

    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['alice']}"}, timeout=30) as http,
                Client(
                    streamable_http_client(f"{setup.base}/mcp", http_client=http),
                    mode="legacy",
                    cache=None,
                    message_handler=on_message,
                ) as a,
            ):
                with pytest.raises(MCPError) as caught:
                    await a.call_tool("remote_echo", {"text": "x"})
                link = sign_in_link(caught)
                assert isinstance(caught.value.error.data, dict)
                (elicitation,) = caught.value.error.data["elicitations"]
                assert not heard
                await sign_in(link, "alice")

                async def told() -> bool:
                    return heard == [elicitation["elicitationId"]]

                await wait_for(told)


async def test_a_token_about_to_expire_is_refreshed_before_it_is_sent(tmp_path: Path) -> None:
    async with user_hub(tmp_path) as setup:
        setup.server.expires_in = 1  # replaced 0.1 s before it expires
        with anyio.fail_after(60):
            async with setup.client("alice", "2026-07-28") as a:
                await connected(setup, a, "alice")
                (first,) = setup.tokens_of("alice")
                calls = 0

                async def refreshed() -> bool:
                    nonlocal calls
                    calls += 1
                    await a.call_tool("remote_echo", {"text": f"alice-later-{calls}"})
                    return len(setup.tokens_of("alice")) == 2

                await wait_for(refreshed, timeout=20)
        assert len([r for r in setup.server.requests if r["grant_type"] == "refresh_token"]) == 1
        (second,) = setup.tokens_of("alice") - {first}
        assert setup.bearers_of_calls(f"alice-later-{calls}") == {second}
        assert first not in setup.server.revoked and not any(
            setup.bearers_of_calls(f"alice-later-{n}") - {first, second} for n in range(1, calls + 1)
        )


async def test_the_token_file_holds_no_token_in_clear(tmp_path: Path) -> None:
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a:
                await connected(setup, a, "alice")
        data = setup.store.read_bytes()
        (token,) = setup.tokens_of("alice")
        (refresh,) = setup.server.refresh_tokens
        for secret in (token, refresh, "alice", "remote", setup.server.issuer):
            assert secret.encode() not in data
        assert os.stat(setup.store).st_mode & 0o077 == 0


async def test_a_sign_in_link_is_good_once(tmp_path: Path) -> None:
    """The callback takes a state once: replayed (or made up), it is refused and changes nothing."""
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a:
                with pytest.raises(MCPError) as caught:
                    await a.call_tool("remote_echo", {"text": "x"})
                link = sign_in_link(caught)
                async with httpx2.AsyncClient(timeout=30) as browser:
                    authorize = await allowed(browser, link)
                    assert authorize.startswith(f"{setup.server.issuer}/authorize?")
                    assert (await browser.get(link)).status_code == 400  # the consent page is good once too
                    back = await browser.post(authorize, data={"user": "alice"})
                    callback = back.headers["location"]
                    assert (await browser.get(callback)).status_code == 200
                    stored = setup.store.read_bytes()
                    replayed = await browser.get(callback)
                    assert replayed.status_code == 400 and "already used" in replayed.text
                    made_up = await browser.get(f"{setup.base}/oauth/callback?state=nope&code=nope")
                    assert made_up.status_code == 400
                assert setup.store.read_bytes() == stored
        assert len([r for r in setup.server.requests if r["grant_type"] == "authorization_code"]) == 1


async def test_a_refused_token_is_refreshed_once_for_all_waiting_calls(tmp_path: Path) -> None:
    """The server refuses alice's token (revoked at the authorization server): the calls that meet the 401 at
    once share one refresh, and all go through with the new token."""
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a:
                await connected(setup, a, "alice")
                (first,) = setup.tokens_of("alice")
                setup.server.revoked.add(first)
                results: list[Any] = []

                async def call(n: int) -> None:
                    results.append(await a.call_tool("remote_echo", {"text": f"alice-again-{n}"}))

                async with anyio.create_task_group() as tg:
                    for n in range(5):
                        tg.start_soon(call, n)
        assert len(results) == 5 and all(not r.is_error for r in results)
        assert len([r for r in setup.server.requests if r["grant_type"] == "refresh_token"]) == 1
        (second,) = setup.tokens_of("alice") - {first}
        for n in range(5):
            assert setup.bearers_of_calls(f"alice-again-{n}") == {second}


async def test_a_refused_refresh_asks_the_person_to_sign_in_again(tmp_path: Path) -> None:
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a:
                await connected(setup, a, "alice")
                setup.server.revoked.update(setup.tokens_of("alice"))
                setup.server.refresh_tokens.clear()
                with pytest.raises(MCPError) as caught:
                    await a.call_tool("remote_echo", {"text": "alice-later"})
                assert (await sign_in(sign_in_link(caught), "alice")).status_code == 200
                assert (await a.call_tool("remote_echo", {"text": "alice-later"})).structured_content


async def test_revoked_from_the_cli_the_session_closes_and_the_person_signs_in_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUB_TOKEN_KEY", KEY)
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a, setup.client("bob") as b:
                await connected(setup, a, "alice")
                await connected(setup, b, "bob")
                with pytest.raises(SystemExit) as exited:
                    cli_main(["connections", "--config", str(setup.config)])
                assert exited.value.code == 0
                listed = capsys.readouterr().out
                assert "alice\tremote\t" in listed and "bob\tremote\t" in listed
                with pytest.raises(SystemExit):
                    cli_main(["connections", "--config", str(setup.config), "--principal", "bob"])
                assert "alice" not in capsys.readouterr().out
                with pytest.raises(SystemExit) as exited:  # in a thread: it asks the AS, on this event loop
                    revoke = ["connections", "revoke", "--config", str(setup.config), "--principal", "alice"]
                    await anyio.to_thread.run_sync(cli_main, revoke)
                assert exited.value.code == 0 and "revoked: alice at remote" in capsys.readouterr().out
                assert setup.hub.upstreams["remote"].client_sessions == 2
                with pytest.raises(MCPError) as caught:
                    await a.call_tool("remote_echo", {"text": "alice-after"})
                sign_in_link(caught)
                assert setup.hub.upstreams["remote"].client_sessions == 1  # alice's is closed
                assert (await b.call_tool("remote_echo", {"text": "bob-after"})).structured_content
        assert not setup.bearers_of_calls("alice-after")


def test_a_user_mount_needs_its_key_and_callback(tmp_path: Path) -> None:
    base = {"mode": "user", "issuer": "https://as.example", "client_id": "the-hub"}
    callback = "https://hub.example/oauth/callback"
    good = {**base, "token_key": KEY, "redirect_uri": callback}
    config = load_config(write_config(tmp_path / "a.toml", {"wiki": {"url": "https://wiki.example/mcp", "auth": good}}))
    assert config.servers["wiki"].isolation == "per-client"
    for auth, problem in [
        ({**base, "redirect_uri": callback}, "needs token_key"),
        ({**base, "token_key": KEY}, "needs redirect_uri"),
        ({**good, "token_key": "not-a-key"}, "not a Fernet key"),
        ({**good, "redirect_uri": "https://hub.example/elsewhere"}, "must end with /oauth/callback"),
    ]:
        mount = {"url": "https://wiki.example/mcp", "auth": auth}
        with pytest.raises(ConfigError, match=problem):
            load_config(write_config(tmp_path / "b.toml", {"wiki": mount}))
    shared = {"url": "https://wiki.example/mcp", "isolation": "shared", "auth": good}
    with pytest.raises(ConfigError, match="served per client"):
        load_config(write_config(tmp_path / "c.toml", {"wiki": shared}))


def test_the_token_file_is_read_again_when_changed_elsewhere_and_needs_its_key(tmp_path: Path) -> None:
    """Two stores on one file stand for the hub and the CLI: what one changes the other sees; another key
    reads nothing, and says why."""
    path = tmp_path / "connections"
    hub, cli = ConnectionStore(path, KEY), ConnectionStore(path, KEY)
    hub.put(Connection("alice", "remote", "https://as", "token-a", "refresh-a", expires_at=time.time() + 60))
    hub.put(Connection("bob", "remote", "https://as", "token-b"))
    assert [r.principal for r in cli.list()] == ["alice", "bob"]
    assert [r.principal for r in cli.remove("alice")] == ["alice"]
    assert hub.get("alice", "remote", "https://as") is None
    assert hub.get("bob", "remote", "https://as") is not None
    assert "token-b" not in repr(hub.list())
    with pytest.raises(StoreError, match="cannot be decrypted with this token_key"):
        ConnectionStore(path, new_key()).list()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_token_refused_mid_session_asks_a_url_capable_client_and_the_call_goes_through(
    tmp_path: Path, mode: str
) -> None:
    """alice's access and refresh tokens are revoked at the authorization server while her session is open: the
    server answers her next call 401 and no refresh helps. Her client, which takes URL elicitation, is asked to
    sign in again (as it was the first time); she does; the call is then sent once more, with her new token, and
    answered. The call the server refused was never run (a 401 is the HTTP layer refusing), so it runs once."""
    asked: list[Any] = []

    async def open_link(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        assert (await sign_in(params.url, "alice")).status_code == 200
        return ElicitResult(action="accept")

    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['alice']}"}, timeout=30) as http,
                Client(
                    streamable_http_client(f"{setup.base}/mcp", http_client=http),
                    mode=mode,
                    cache=None,
                    elicitation_callback=open_link,
                ) as a,
            ):
                assert (await a.call_tool("remote_echo", {"text": "alice-0"})).structured_content
                assert len(asked) == 1
                (first,) = setup.tokens_of("alice")
                setup.server.revoked.add(first)
                for refresh, issued in list(setup.server.refresh_tokens.items()):
                    if issued.subject == "alice":
                        del setup.server.refresh_tokens[refresh]
                result = await a.call_tool("remote_echo", {"text": "alice-later"})
                assert result.structured_content == {"text": "alice-later", "server": "remote"}
                assert len(asked) == 2 and asked[1].mode == "url"
                (second,) = setup.tokens_of("alice") - {first}
                assert setup.bearers_of_calls("alice-later") == {second}
                refused = [
                    fields for fields in setup.raw if fields == [f"Bearer {first}".encode()]
                ]  # the call met the 401 with the revoked token before the sign-in
                assert refused
                assert len([b for b, body in setup.calls if b'"alice-later"' in body.replace(b" ", b"")]) == 1


async def test_a_server_that_refuses_even_a_refreshed_token_is_reported_in_words(tmp_path: Path) -> None:
    """The server refuses every token of alice's, the refreshed one too: her call fails with an error that says
    what the server answered, not which task group it came through."""

    class EveryTokenOf(set[str]):
        def __init__(self, server: Any, who: str) -> None:
            super().__init__()
            self._server, self._who = server, who

        def __contains__(self, token: object) -> bool:
            issued = self._server.tokens.get(token)
            return issued is not None and issued.subject == self._who

    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as alice:
                await connected(setup, alice, "alice")
                setup.server.revoked = EveryTokenOf(setup.server, "alice")
            async with setup.client("alice") as again:  # a new session, opened with a token the server refuses
                with pytest.raises(MCPError) as caught:
                    await again.call_tool("remote_echo", {"text": "refused"})
    message = caught.value.error.message
    assert "ExceptionGroup" not in message and "TaskGroup" not in message, message
    assert message.endswith("could not open a session for this client: Server returned an error response"), message
    assert not setup.bearers_of_calls("refused")
