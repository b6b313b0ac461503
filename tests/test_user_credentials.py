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
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitCompleteNotification, ElicitResult

from mcp_hub.cli import main as cli_main
from mcp_hub.config import load_config
from mcp_hub.credentials import user
from mcp_hub.credentials.connections import Connection, ConnectionStore, StoreError, new_key
from mcp_hub.errors import ConfigError
from tests.conftest import wait_for, write_config
from tests.harness.identity import (
    KEY,
    KEYS,
    SERVICE_TOKEN,
    allowed,
    connected,
    sign_in,
    sign_in_link,
    user_hub,
)

pytestmark = pytest.mark.anyio


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
async def test_a_sign_in_that_comes_back_after_its_time_is_refused_and_the_person_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sign-in is good for `LOGIN_SECONDS` from the moment the person allows it: a callback that comes back later
    finds its state forgotten, trades no code and keeps nothing; a sign-in started again goes through."""
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a:
                with pytest.raises(MCPError) as caught:
                    await a.call_tool("remote_echo", {"text": "x"})
                async with httpx2.AsyncClient(timeout=30) as browser:
                    with monkeypatch.context() as short:
                        short.setattr(user, "LOGIN_SECONDS", 0.0)  # over as soon as it is allowed
                        authorize = await allowed(browser, sign_in_link(caught))
                    back = await browser.post(authorize, data={"user": "alice"})
                    late = await browser.get(back.headers["location"])
                    assert late.status_code == 400 and "has expired" in late.text
                    assert not [r for r in setup.server.requests if r["grant_type"] == "authorization_code"]
                    assert not setup.tokens_of("alice") and not setup.store.exists()
                with pytest.raises(MCPError) as again:
                    await a.call_tool("remote_echo", {"text": "x"})
                done = await sign_in(sign_in_link(again), "alice")
                assert done.status_code == 200 and "signed in" in done.text
                assert (await a.call_tool("remote_echo", {"text": "alice-0"})).structured_content
        assert setup.bearers_of_calls("alice-0") == setup.tokens_of("alice") != set()


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
