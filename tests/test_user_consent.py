"""The hub's consent page before a person's sign-in toward a `mode = "user"` mount (credentials/consent.py).

The same real parts as tests/test_user_credentials.py: the hub's real HTTP endpoint, the mount's authorization
server with its login page, the fixture upstream behind a bearer check, the SDK's clients; an HTTP client with
its own cookie jar is the person's browser (a second one, without the cookie, is someone else's).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import URL_ELICITATION_REQUIRED, ElicitCompleteNotification, ElicitResult
from starlette.applications import Starlette

from mcp_hub.cli import main as cli_main
from mcp_hub.credentials import consent
from mcp_hub.credentials.connections import ConnectionStore
from mcp_hub.policy.principal import Principal
from tests.harness.identity import KEY, Setup, allowed, csrf_of, sign_in, sign_in_link, user_hub

pytestmark = pytest.mark.anyio


async def link_for(client: Any, text: str = "x") -> str:
    """The sign-in link `client`'s call to the mount is answered with (-32042)."""
    with pytest.raises(MCPError) as caught:
        await client.call_tool("remote_echo", {"text": text})
    return sign_in_link(caught)


def nothing_kept(setup: Setup, principal: str = "alice") -> None:
    """No tokens issued to `principal`, no code asked for or traded, nothing in the token file for them."""
    assert not setup.tokens_of(principal)
    assert not setup.server.codes and not [r for r in setup.server.requests if r["grant_type"] == "authorization_code"]
    if setup.store.exists():
        store = ConnectionStore(setup.store, KEY)
        assert not [r for r in store.list() if r.principal == principal]


def not_framable(response: httpx2.Response) -> None:
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["cache-control"] == "no-store"


async def test_the_link_opens_the_hubs_consent_page_naming_client_person_server_and_scopes(tmp_path: Path) -> None:
    """The link is the hub's page, not the authorization server's; it names the OAuth client (the caller's
    `client_id` claim), the person, the server, its authorization server, the scopes and the redirect URI; it
    cannot be framed or cached; and nothing went to the authorization server yet."""
    async with user_hub(tmp_path, oauth=True) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice", client_id="claude-desktop") as a:
                link = await link_for(a)
        assert link.startswith(f"{setup.base}/oauth/consent/")
        async with httpx2.AsyncClient(timeout=30) as browser:
            page = await browser.get(link)
        assert page.status_code == 200
        not_framable(page)
        named = dict(re.findall(r"<dd id=([\w-]+)>([^<]*)</dd>", page.text))
        assert named == {
            "client-id": "claude-desktop",
            "principal": "alice",
            "mount": "remote",
            "issuer": setup.server.issuer,
            "redirect-uri": f"{setup.base}/oauth/callback",
        }
        assert "<code>tracker</code>" in page.text
        assert 'value="allow"' in page.text and 'value="deny"' in page.text and csrf_of(page)
        assert "set-cookie" not in page.headers  # the browser is bound only when it allows
        assert not setup.server.codes and setup.server.issuer not in link


async def test_an_api_key_caller_is_named_by_its_key_and_everything_shown_is_escaped() -> None:
    assert consent.client_of("alice") == "api-key:alice"
    assert consent.client_of(Principal("alice", client_id="cursor")) == "cursor"
    assert consent.client_of("stdio") == "stdio"

    async def allow(browser: str) -> str:
        raise AssertionError("not allowed")

    evil = "<script>alert(1)</script>"
    link = consent.ask(
        consent.Asked(
            principal=f'"{evil}',
            client=evil,
            server="remote",
            issuer="https://as.example/<i>",
            scope=f"read {evil}",
            redirect_uri="https://hub.example/oauth/callback",
            on_record=lambda browser: False,
            allow=allow,
            deny=lambda: None,
        )
    )
    assert link.startswith("https://hub.example/oauth/consent/")
    app = Starlette(routes=consent.consent_routes())
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="https://hub.example") as browser:
        page = await browser.get(link)
    assert page.status_code == 200 and "<script>" not in page.text and "<i>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and "&quot;&lt;script" in page.text


async def test_allow_leads_to_the_login_and_a_call_with_the_persons_token(tmp_path: Path) -> None:
    """Allow sends the browser on to the authorization server, bound to it by an HttpOnly, SameSite=Lax cookie
    kept to the /oauth paths (plain http here: no `Secure`, no `__Host-`); the call then carries alice's token."""
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a, httpx2.AsyncClient(timeout=30) as browser:
                link = await link_for(a)
                page = await browser.get(link)
                assert dict(re.findall(r"<dd id=([\w-]+)>([^<]*)</dd>", page.text))["client-id"] == "api-key:alice"
                allow = await browser.post(link, data={"csrf": csrf_of(page), "decision": "allow"})
                assert allow.status_code == 303
                not_framable(allow)
                assert allow.headers["location"].startswith(f"{setup.server.issuer}/authorize?")
                cookie = allow.headers["set-cookie"]
                attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
                assert cookie.startswith("mcp-hub-sign-in=") and "Path=/oauth;" in cookie + ";"
                assert {"httponly", "samesite"} <= attributes and "secure" not in attributes
                assert "samesite=lax" in cookie.lower()
                assert (await browser.get(link)).status_code == 400  # the page was good once
                login = await browser.post(allow.headers["location"], data={"user": "alice", "password": "pw"})
                done = await browser.get(login.headers["location"])
                assert done.status_code == 200 and "signed in" in done.text
                assert (await a.call_tool("remote_echo", {"text": "alice-0"})).structured_content
        assert setup.bearers_of_calls("alice-0") == setup.tokens_of("alice") != set()


async def test_on_https_the_cookie_is_host_prefixed_and_secure_and_names_the_browser_its_consent_was_given_in() -> None:
    """With an https `redirect_uri`, Allow sets `__Host-mcp-hub-sign-in`, `Secure`, `Path=/`; the hub keeps only
    its digest; at the next sign-in the same browser, with its consent on record, is sent on at once."""
    bindings: list[str] = []

    async def allow(browser: str) -> str:
        bindings.append(browser)
        return "https://as.example/authorize?state=s"

    def asked() -> consent.Asked:
        return consent.Asked(
            principal="alice",
            client="cursor",
            server="remote",
            issuer="https://as.example",
            scope=None,
            redirect_uri="https://hub.example/oauth/callback",
            on_record=lambda browser: browser in bindings,
            allow=allow,
            deny=lambda: None,
        )

    app = Starlette(routes=consent.consent_routes())
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="https://hub.example") as browser:
        link = consent.ask(asked())
        page = await browser.get(link)
        assert page.status_code == 200
        sent_on = await browser.post(link, data={"csrf": csrf_of(page), "decision": "allow"})
        assert sent_on.status_code == 303 and sent_on.headers["location"] == "https://as.example/authorize?state=s"
        cookie = sent_on.headers["set-cookie"]
        assert cookie.startswith("__Host-mcp-hub-sign-in=")
        assert "Secure" in cookie and "HttpOnly" in cookie and "Path=/;" in cookie + ";" and "Domain" not in cookie
        assert len(bindings) == 1 and cookie.split("=")[1].split(";")[0] not in bindings  # only its digest is kept
        again = await browser.get(consent.ask(asked()))
        assert again.status_code == 302 and bindings[1] == bindings[0]
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="https://hub.example") as other:
        assert (await other.get(consent.ask(asked()))).status_code == 200  # another browser is asked


async def test_deny_fails_the_waiting_call_and_keeps_nothing(tmp_path: Path) -> None:
    """A client that takes URL elicitation accepts, the person denies on the page: the call fails as a declined
    one does. A client answered with the link hears nothing after a Deny. Nothing reaches the authorization
    server; nothing is kept."""
    heard: list[Any] = []

    async def deny(context: Any, params: Any) -> ElicitResult:
        async with httpx2.AsyncClient(timeout=30) as browser:
            page = await browser.get(params.url)
            denied = await browser.post(params.url, data={"csrf": csrf_of(page), "decision": "deny"})
        assert denied.status_code == 200 and "Nothing was kept" in denied.text and "set-cookie" not in denied.headers
        return ElicitResult(action="accept")

    async def on_message(message: Any) -> None:
        if isinstance(message, ElicitCompleteNotification):
            heard.append(message)

    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice", elicitation_callback=deny) as a:
                with pytest.raises(MCPError, match="did not agree to sign in"):
                    await a.call_tool("remote_echo", {"text": "alice-0"})
            async with setup.client("alice", message_handler=on_message) as b:
                link = await link_for(b)
                async with httpx2.AsyncClient(timeout=30) as browser:
                    page = await browser.get(link)
                    await browser.post(link, data={"csrf": csrf_of(page), "decision": "deny"})
                    assert (await browser.get(link)).status_code == 400  # gone
                with pytest.raises(MCPError) as caught:
                    await b.call_tool("remote_echo", {"text": "alice-1"})
                assert caught.value.error.code == URL_ELICITATION_REQUIRED  # asked again, nothing kept
        assert not heard
        assert not setup.bearers_of_calls("alice-0") and not setup.bearers_of_calls("alice-1")
        nothing_kept(setup)


@pytest.mark.slow
async def test_a_second_client_of_the_person_is_asked_again_and_the_same_client_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice allows "claude-desktop"; when her token is gone (the refresh refused), the same client's link
    sends her browser on at once (another browser is asked), another client of hers ("cursor") is asked. The
    consent outlives the process (another store on the file sees it) and goes with a revoke."""
    monkeypatch.setenv("HUB_TOKEN_KEY", KEY)

    def token_gone() -> None:
        setup.server.revoked.update(setup.tokens_of("alice"))
        setup.server.refresh_tokens.clear()

    async with user_hub(tmp_path, oauth=True) as setup:
        with anyio.fail_after(60):
            async with (
                setup.client("alice", client_id="claude-desktop") as claude,
                setup.client("alice", client_id="cursor") as cursor,
                setup.client("bob", client_id="claude-desktop") as bobs,
                httpx2.AsyncClient(timeout=30) as browser,
                httpx2.AsyncClient(timeout=30) as other,
            ):
                assert (await sign_in(await link_for(bobs), "bob", other)).status_code == 200  # bob's browser
                assert other.cookies.get("mcp-hub-sign-in")
                assert (await sign_in(await link_for(claude), "alice", browser)).status_code == 200
                assert (await claude.call_tool("remote_echo", {"text": "a"})).structured_content
                assert ConnectionStore(setup.store, KEY).consented("alice", "claude-desktop", "remote")

                token_gone()
                link = await link_for(claude, "b")
                elsewhere = await other.get(link)  # bob's browser, not the one alice allowed it in: asked
                assert elsewhere.status_code == 200 and "<dd id=client-id>claude-desktop</dd>" in elsewhere.text
                again = await browser.get(link)
                assert again.status_code == 302 and again.headers["location"].startswith(
                    f"{setup.server.issuer}/authorize?"
                )
                assert again.headers["set-cookie"].startswith("mcp-hub-sign-in=")
                login = await browser.post(again.headers["location"], data={"user": "alice", "password": "pw"})
                assert (await browser.get(login.headers["location"])).status_code == 200
                assert (await claude.call_tool("remote_echo", {"text": "b"})).structured_content

                token_gone()
                page = await browser.get(await link_for(cursor, "c"))
                assert page.status_code == 200 and "<dd id=client-id>cursor</dd>" in page.text
                assert not ConnectionStore(setup.store, KEY).consented("alice", "cursor", "remote")

                with pytest.raises(SystemExit):  # in a thread: it asks the AS, on this event loop
                    revoke = ["connections", "revoke", "--config", str(setup.config), "--principal", "alice"]
                    await anyio.to_thread.run_sync(cli_main, revoke)
                capsys.readouterr()
                assert not ConnectionStore(setup.store, KEY).consented("alice", "claude-desktop", "remote")
                asked = await browser.get(await link_for(claude, "d"))
                assert asked.status_code == 200 and "<dd id=client-id>claude-desktop</dd>" in asked.text


async def test_a_callback_from_a_browser_without_the_cookie_is_refused_and_keeps_nothing(tmp_path: Path) -> None:
    """The right state and the right code, brought by a browser that did not allow the sign-in: 400, no code
    traded, nothing kept; the browser that allowed it still completes it."""
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a:
                link = await link_for(a)
                async with (
                    httpx2.AsyncClient(timeout=30) as person,
                    httpx2.AsyncClient(timeout=30) as other,
                    httpx2.AsyncClient(timeout=30) as forger,
                ):
                    authorize = await allowed(person, link)
                    login = await person.post(authorize, data={"user": "alice", "password": "pw"})
                    callback = login.headers["location"]
                    assert "code=" in callback and "state=" in callback
                    refused = await other.get(callback)
                    assert refused.status_code == 400 and "nothing was kept" in refused.text
                    forger.cookies.set("mcp-hub-sign-in", "x" * 43)
                    assert (await forger.get(callback)).status_code == 400
                    assert not [r for r in setup.server.requests if r["grant_type"] == "authorization_code"]
                    assert not setup.tokens_of("alice") and not setup.store.exists()
                    assert (await person.get(callback)).status_code == 200
        assert setup.tokens_of("alice")


async def test_a_consent_post_without_the_pages_token_or_from_another_site_is_refused(tmp_path: Path) -> None:
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a:
                link = await link_for(a)
                async with httpx2.AsyncClient(timeout=30) as browser:
                    page = await browser.get(link)
                    csrf = csrf_of(page)
                    for data, headers in [
                        ({"decision": "allow"}, {}),
                        ({"decision": "allow", "csrf": csrf[::-1]}, {}),
                        ({"decision": "allow", "csrf": csrf}, {"origin": "https://evil.example"}),
                    ]:
                        refused = await browser.post(link, data=data, headers=headers)
                        assert refused.status_code == 403 and "location" not in refused.headers
                        assert "set-cookie" not in refused.headers
                    too_large = await browser.post(link, data={"decision": "allow", "csrf": csrf, "pad": "x" * 20000})
                    assert too_large.status_code == 413
                    assert not setup.server.requests and not browser.cookies
                    allow = await browser.post(
                        link, data={"decision": "allow", "csrf": csrf}, headers={"origin": setup.base}
                    )
                    assert allow.status_code == 303
        nothing_kept(setup)


async def test_a_consent_link_expires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client("alice") as a:
                monkeypatch.setattr(consent, "LOGIN_SECONDS", 0.0)
                link = await link_for(a)
                async with httpx2.AsyncClient(timeout=30) as browser:
                    assert (await browser.get(link)).status_code == 400
        nothing_kept(setup)


@pytest.mark.slow
def test_a_token_file_from_before_consents_were_kept_is_read(tmp_path: Path) -> None:
    """A file of the earlier format (a bare list of records) keeps its connections, and takes consents from then
    on; revoking a connection forgets the consents toward that mount only."""
    import json

    from cryptography.fernet import Fernet

    path = tmp_path / "connections"
    row = {"principal": "alice", "mount": "remote", "issuer": "https://as", "access_token": "token-a"}
    path.write_bytes(Fernet(KEY.encode()).encrypt(json.dumps([row]).encode()))
    store = ConnectionStore(path, KEY)
    assert [r.principal for r in store.list()] == ["alice"] and not store.consented("alice", "cursor", "remote")
    store.consent("alice", "cursor", "remote", "browser-1")
    store.consent("alice", "cursor", "wiki", "browser-1")
    again = ConnectionStore(path, KEY)  # as after a restart
    assert again.consented("alice", "cursor", "remote", "browser-1")
    assert not again.consented("alice", "cursor", "remote", "browser-2")
    assert [r.principal for r in again.remove("alice", "remote")] == ["alice"]
    assert not again.consented("alice", "cursor", "remote") and again.consented("alice", "cursor", "wiki")
