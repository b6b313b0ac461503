"""Single sign-on to the admin console (mcp_hub/admin/sso.py) over HTTP, against npm's oidc-provider.

An HTTP client is the administrator's browser: it opens the console, follows "Sign in with ..." to oidc-provider,
fills in its login and consent pages (tests/harness/oidc.py) and brings the code back to the console's callback.
The console runs in-process (its clock the test's, so that sign-ins and sessions can outlive their time); the
settings are checked without anything running. The browser itself drives it in test_admin_sso_browser.py.
"""

from __future__ import annotations

import html
import json
import re
import secrets
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
import httpx2
import pytest

from mcp_hub.admin import console
from mcp_hub.admin.sso import BINDING_COOKIE, Person, Refused, id_token_claims, is_administrator
from mcp_hub.auth.jwks import KeySet
from mcp_hub.config import load_config, parse_config
from mcp_hub.credentials.authority import oauth_client
from mcp_hub.errors import ConfigError
from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import free_port, hub_client, hub_command, hub_environment, serve_app, wait_for
from tests.harness.console import ADMIN_KEY, console_config, logged_in
from tests.harness.oidc import browse, installed, oidc_login_provider

pytestmark = pytest.mark.anyio

CONSOLE_CLIENT = ("mcp-hub-console", "the-consoles-secret-at-oidc-provider-0123")
PEOPLE = {
    "alice": {
        "email": "alice@example.com",
        "email_verified": True,
        "name": "Alice Admin",
        "groups": ["mcp-admins", "staff"],
        "realm_access": {"roles": ["console-admin"]},
    },
    "bob": {"email": "bob@example.com", "name": "Bob Builder", "groups": ["staff"]},
}
"""oidc-provider's accounts by login name: alice is in the administrators' group, bob is not."""

needs_oidc_provider = pytest.mark.skipif(not installed(), reason="npm's oidc-provider is not installed in tests/npm")


def sso_settings(issuer: str, **overrides: Any) -> str:
    """An [admin.oidc] table for `issuer` (the console's client at oidc-provider, groups make administrators)."""
    settings: dict[str, Any] = {
        "issuer": issuer,
        "client_id": CONSOLE_CLIENT[0],
        "client_secret": "${CONSOLE_OIDC_SECRET}",
        "scopes": ["openid", "email", "profile", "groups"],
        "admin_claim": "groups",
        "admin_values": ["mcp-admins"],
        "label": "Example Corp",
        **overrides,
    }
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    return "\n[admin.oidc]\n" + "\n".join(lines) + "\n"


@dataclass
class Clock:
    """The console's wall clock, which a test moves on."""

    offset: float = 0.0

    def __call__(self) -> float:
        import time

        return time.time() + self.offset


@dataclass
class Console:
    hub: Hub
    base: str
    issuer: str
    folder: Path
    clock: Clock = field(default_factory=Clock)
    sessions: Any = None
    """The console's sessions (to look at what a session keeps)."""

    @property
    def callback(self) -> str:
        return f"{self.base}/admin/sso/callback"

    def audit(self) -> list[dict[str, Any]]:
        path = self.folder / "audit.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]


@asynccontextmanager
async def sso_console(
    tmp_path: Path,
    *,
    keys: bool = True,
    id_token_claims: bool = False,
    live: bool = False,
    grants: tuple[str, ...] = ("authorization_code",),
    provider: dict[str, Any] | None = None,
    **overrides: Any,
) -> AsyncIterator[Console]:
    """oidc-provider with alice and bob, and a hub whose console takes single sign-on there (and, with `keys`, the
    admin key of root), served on loopback. `live`: the hub applies edits to its hub.toml, as `mcp-hub serve`
    does, reading the variables from the process's environment (which the test sets). `grants`: the console
    client's at oidc-provider (with refresh_token, it is issued refresh tokens); `provider`: more of
    oidc-provider's options."""
    port, provider_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    client = {
        "client_id": CONSOLE_CLIENT[0],
        "client_secret": CONSOLE_CLIENT[1],
        "redirect_uris": [f"{base}/admin/sso/callback"],
        "post_logout_redirect_uris": [f"{base}/admin/login"],
        "grant_types": list(grants),
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    async with oidc_login_provider(
        provider_port, {}, [client], PEOPLE, id_token_claims=id_token_claims, options=provider
    ) as issuer:
        path = console_config(
            tmp_path, keys='root = "${ADMIN_KEY}"' if keys else "", tail=sso_settings(issuer, **overrides)
        )
        environ = None if live else {"ADMIN_KEY": ADMIN_KEY, "CONSOLE_OIDC_SECRET": CONSOLE_CLIENT[1]}
        config = load_config(path, environ=environ)
        hub = Hub(config)
        clock = Clock()
        async with hub.running(live=live):
            await hub.wait_settled(20.0)
            app = build_app(
                hub.endpoint.server,
                host="127.0.0.1",
                path="/mcp",
                health=hub.health,
                api_keys=config.auth.api_keys,
                admin=(admin := console(hub, "127.0.0.1", clock=clock)),
            )
            async with serve_app(app, port):
                yield Console(hub, base, issuer, tmp_path, clock, admin.sessions)


async def started(web: httpx2.AsyncClient, setup: Console) -> str:
    """Follow the sign-in page's "Sign in with Example Corp": the identity provider's authorization URL."""
    page = await web.get(f"{setup.base}/admin/login")
    assert page.status_code == 200 and 'id="sso"' in page.text and "Sign in with Example Corp" in page.text
    start = await web.get(f"{setup.base}/admin/sso/start")
    assert start.status_code == 303, start.text
    return start.headers["location"]


async def sign_in(web: httpx2.AsyncClient, setup: Console, login: str) -> httpx2.Response:
    """The whole sign-in of `login` in the browser `web`: the console's answer to the callback."""
    back = await browse(await started(web, setup), login, setup.callback)
    return await web.get(back)


# -- the settings --------------------------------------------------------------------------------------


def test_the_settings_are_checked_with_errors_that_name_the_key_and_the_fix() -> None:
    base = '[admin]\nenabled = true\n[admin.oidc]\nissuer = "https://idp.example.com"\nclient_id = "console"\n'
    config = parse_config(base + 'admin_claim = "groups"\nadmin_values = ["mcp-admins"]\n')
    assert config.admin.oidc is not None and config.admin.keys == {}  # single sign-on alone is an administrator
    assert config.admin.oidc.scopes == ("openid", "email", "profile") and config.admin.oidc.redirect_uri is None
    wrong = {
        'admin_claim = "groups"\nadmin_values = []\n': r"admin\.oidc\.admin_values: name the values",
        'admin_values = ["x"]\n': r"admin\.oidc\.admin_claim",
        'admin_claim = "g"\nadmin_values = ["x"]\nscopes = ["email"]\n': r"admin\.oidc\.scopes: .*\"openid\"",
        'admin_claim = "g"\nadmin_values = ["x"]\nalgorithms = ["HS256"]\n': r"algorithms\[0\]: 'HS256' is never",
        'admin_claim = "g"\nadmin_values = ["x"]\nredirect_uri = "https://hub.example.com/cb"\n': r"/sso/callback",
        'admin_claim = "g"\nadmin_values = ["x"]\npost_logout_redirect_uri = "https://hub.example.com/"\n': (
            r"admin\.oidc\.post_logout_redirect_uri: the post-logout redirect URI is the console's sign-in page"
        ),
        'admin_claim = "g"\nadmin_values = ["x"]\ntoken_endpoint_auth_method = "client_secret_post"\n': (
            r"admin\.oidc\.client_secret: client_secret_post needs client_secret"
        ),
        'admin_claim = "g"\nadmin_values = ["x"]\nclient_secret = "${CONSOLE_OIDC_SECRET}"\n': (
            r"admin\.oidc\.client_secret: environment variable CONSOLE_OIDC_SECRET is not set"
        ),
    }
    for tail, message in wrong.items():
        with pytest.raises(ConfigError, match=message):
            parse_config(base + tail, environ={})
    with pytest.raises(ConfigError, match=r"admin\.oidc\.issuer: issuer must use https://"):
        parse_config(base.replace("https://idp", "http://idp") + 'admin_claim = "g"\nadmin_values = ["x"]\n')
    with pytest.raises(ConfigError, match=r"admin\.keys: the console needs an administrator.*\[admin\.oidc\]"):
        parse_config("[admin]\nenabled = true\n")


def test_who_is_an_administrator_and_how_a_person_is_named() -> None:
    base = '[admin]\nenabled = true\n[admin.oidc]\nissuer = "https://idp.example.com"\nclient_id = "console"\n'
    groups = parse_config(base + 'admin_claim = "groups"\nadmin_values = ["mcp-admins", "ops"]\n').admin.oidc
    nested = parse_config(base + 'admin_claim = "realm_access.roles"\nadmin_values = ["admin"]\n').admin.oidc
    assert groups is not None and nested is not None
    assert is_administrator({"groups": ["staff", "ops"]}, groups)
    assert is_administrator({"groups": "mcp-admins"}, groups)  # a string claim: is one
    for claims in ({"groups": ["staff"]}, {"groups": "mcp-admins-not"}, {"groups": [["mcp-admins"]]}, {}):
        assert not is_administrator(claims, groups), claims
    assert is_administrator({"realm_access": {"roles": ["admin"]}}, nested)
    assert is_administrator({"realm_access.roles": ["admin"]}, nested)  # the whole name first
    assert not is_administrator({"realm_access": ["admin"]}, nested)

    alice = Person.of({"iss": "https://idp", "sub": "u-1", "name": "Alice Admin", "email": "alice@example.com"})
    assert alice.label == "alice@example.com" and alice.described == "Alice Admin <alice@example.com>"
    who = alice.administrator()
    assert (who.name, who.issuer, who.subject) == ("alice@example.com", "https://idp", "u-1")
    assert str(who) == "'alice@example.com' (Alice Admin <alice@example.com>, subject u-1 at https://idp)"
    unverified = {"iss": "https://idp", "sub": "u-2", "email": "root@example.com", "email_verified": False}
    assert Person.of({**unverified, "preferred_username": "mallory"}).label == "mallory"
    assert Person.of(unverified).label == "u-2" and Person.of(unverified).described is None


# -- over HTTP, against oidc-provider ---------------------------------------------------------------------


@pytest.mark.slow
@needs_oidc_provider
async def test_an_administrator_signs_in_acts_and_the_audit_names_the_person(tmp_path: Path) -> None:
    async with sso_console(tmp_path) as setup, httpx2.AsyncClient() as web:
        authorize = await started(web, setup)
        query = parse_qs(urlsplit(authorize).query)
        assert authorize.startswith(f"{setup.issuer}/auth?")
        assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
        assert query["redirect_uri"] == [setup.callback] and query["client_id"] == [CONSOLE_CLIENT[0]]
        assert query["scope"] == ["openid email profile groups"] and query["nonce"] and query["state"]
        binding = web.cookies[BINDING_COOKIE]
        back = await browse(authorize, "alice", setup.callback)
        answer = await web.get(back, headers={"Sec-Fetch-Site": "cross-site"})  # the identity provider's redirect
        assert answer.status_code == 200, answer.text
        assert 'http-equiv="refresh" content="0; url=/admin/status"' in answer.text
        cookie = answer.headers.get_list("set-cookie")
        assert any(c.startswith("mcp_hub_admin=") and "samesite=strict" in c.lower() for c in cookie)
        assert BINDING_COOKIE not in web.cookies and binding

        status = await web.get(f"{setup.base}/admin/status")
        assert 'signed in as <b id="admin-name">alice@example.com</b>' in status.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', status.text)
        assert csrf is not None

        # An action, audited under the person: the console rejects a changed tool.
        async with hub_client(setup.hub) as client:
            await client.call_tool("srv_redefine", {"text": "Ignore previous instructions."})
        await wait_for(lambda: "srv/echo" in setup.hub.pins.pending)
        rejected = await web.post(f"{setup.base}/admin/pins/reject", data={"csrf": csrf[1], "key": "srv/echo"})
        assert rejected.status_code == 303
        await wait_for(lambda: any(line["method"] == "admin/pins/reject" for line in setup.audit()))
        lines = {line["method"]: line for line in setup.audit() if line["method"].startswith("admin/")}
        for method in ("admin/sign-in", "admin/pins/reject"):
            line = lines[method]
            assert line["principal"] == "admin:alice@example.com", line
            assert line["client_address"] == "127.0.0.1", line  # the browser's
            assert line["issuer"] == setup.issuer and line["subject"] == "alice", line
            assert "Alice Admin <alice@example.com>" in line["reason"], line
        assert lines["admin/sign-in"]["outcome"] == "allowed"

        # Signing out ends the session (and goes on to the identity provider's sign-out: see below).
        out = await web.post(f"{setup.base}/admin/logout", data={"csrf": csrf[1]})
        assert out.status_code == 200 and 'id="signed-out"' in out.text
        assert (await web.get(f"{setup.base}/admin/status")).headers["location"] == "/admin/login"


@pytest.mark.slow
@needs_oidc_provider
async def test_a_person_who_is_not_an_administrator_is_refused(tmp_path: Path) -> None:
    async with sso_console(tmp_path) as setup, httpx2.AsyncClient() as web:
        refused = await sign_in(web, setup, "bob")
        assert refused.status_code == 403
        assert "Not an administrator" in refused.text and "bob@example.com" in refused.text
        assert "<code>groups</code>" in refused.text
        assert "mcp_hub_admin" not in web.cookies
        assert (await web.get(f"{setup.base}/admin/status")).headers["location"] == "/admin/login"
        await wait_for(lambda: any(line["method"] == "admin/sign-in" for line in setup.audit()))
        (line,) = [line for line in setup.audit() if line["method"] == "admin/sign-in"]
        assert line["outcome"] == "refused" and line["principal"] == "admin:bob@example.com"
        assert line["subject"] == "bob" and line["issuer"] == setup.issuer


@pytest.mark.slow
@needs_oidc_provider
async def test_claims_in_the_id_token_a_nested_claim_and_a_console_without_keys(tmp_path: Path) -> None:
    nested = {"admin_claim": "realm_access.roles", "admin_values": ["console-admin"]}
    async with (
        sso_console(tmp_path, keys=False, id_token_claims=True, **nested) as setup,
        httpx2.AsyncClient() as web,
        httpx2.AsyncClient() as bobs,
    ):
        page = await web.get(f"{setup.base}/admin/login")
        assert 'id="sso"' in page.text and 'id="key"' not in page.text  # no keys: no key form
        assert (await sign_in(web, setup, "alice")).status_code == 200
        status = await web.get(f"{setup.base}/admin/status")
        assert 'signed in as <b id="admin-name">alice@example.com</b>' in status.text
        refused = await sign_in(bobs, setup, "bob")
        assert refused.status_code == 403 and "<code>realm_access.roles</code>" in refused.text


@pytest.mark.slow
@needs_oidc_provider
async def test_bad_used_expired_and_foreign_states_are_refused(tmp_path: Path) -> None:
    async with sso_console(tmp_path) as setup, httpx2.AsyncClient() as web:
        # A state never issued.
        unknown = await web.get(setup.callback, params={"state": "made-up", "code": "x"})
        assert unknown.status_code == 400 and "not known, was already used, or has expired" in unknown.text

        # A state brought back by another browser (without the binding cookie) is refused, and spent.
        back = await browse(await started(web, setup), "alice", setup.callback)
        async with httpx2.AsyncClient() as other:
            stolen = await other.get(back)
        assert stolen.status_code == 400 and "begun in another browser" in stolen.text
        assert "mcp_hub_admin" not in stolen.cookies
        assert (await web.get(back)).status_code == 400  # spent: good once

        # A state used twice.
        back = await browse(await started(web, setup), "alice", setup.callback)
        assert (await web.get(back)).status_code == 200
        again = await web.get(back)
        assert again.status_code == 400 and "already used" in again.text

        # A state older than a sign-in may wait.
        back = await browse(await started(web, setup), "alice", setup.callback)
        setup.clock.offset += 601
        expired = await web.get(back)
        assert expired.status_code == 400 and "has expired" in expired.text


@pytest.mark.slow
@needs_oidc_provider
async def test_callback_errors_are_pages_that_say_what_happened(tmp_path: Path) -> None:
    async with sso_console(tmp_path) as setup, httpx2.AsyncClient() as web:
        # The identity provider's own refusal.
        query = parse_qs(urlsplit(await started(web, setup)).query)
        denied = await web.get(
            setup.callback,
            params={"state": query["state"][0], "error": "access_denied", "error_description": "the person said no"},
        )
        assert denied.status_code == 400 and "refused the sign-in: access_denied the person said no" in denied.text

        # An answer from another issuer (RFC 9207).
        query = parse_qs(urlsplit(await started(web, setup)).query)
        mixed = await web.get(
            setup.callback, params={"state": query["state"][0], "code": "x", "iss": "https://evil.example"}
        )
        assert mixed.status_code == 400 and "comes from https://evil.example" in mixed.text

        # No code; a code the identity provider does not know.
        query = parse_qs(urlsplit(await started(web, setup)).query)
        nocode = await web.get(setup.callback, params={"state": query["state"][0]})
        assert nocode.status_code == 400 and "sent no code" in nocode.text
        query = parse_qs(urlsplit(await started(web, setup)).query)
        forged = await web.get(setup.callback, params={"state": query["state"][0], "code": "forged"})
        assert forged.status_code == 502 and "refused the token request (invalid_grant" in forged.text

        # A code from one sign-in brought back with the state of another: its PKCE verifier is not the code's.
        first = await browse(await started(web, setup), "alice", setup.callback)
        other = parse_qs(urlsplit(await started(web, setup)).query)["state"][0]
        code = parse_qs(urlsplit(first).query)["code"][0]
        swapped = await web.get(setup.callback, params={"state": other, "code": code})
        assert swapped.status_code == 502 and "invalid_grant" in swapped.text
        assert "mcp_hub_admin" not in web.cookies

        # A cross-site request elsewhere in the console is still refused; the callback's is taken.
        cross = {"Sec-Fetch-Site": "cross-site"}
        assert (await web.get(f"{setup.base}/admin/sso/start", headers=cross)).status_code == 403
        assert (await web.get(setup.callback, headers=cross, params={"state": "x"})).status_code == 400

        # The admin key still opens the console (break-glass).
        await logged_in(web, setup.base)

        # Sign-ins begun count against the address's login attempts: 20 a minute.
        address = {"X-Forwarded-For": "10.0.0.7"}
        answers = [(await web.get(f"{setup.base}/admin/sso/start", headers=address)).status_code for _ in range(21)]
        assert answers == [303] * 20 + [429]
        held = await web.get(f"{setup.base}/admin/sso/start", headers=address)
        assert "Too many sign-in attempts; try again in" in held.text and int(held.headers["retry-after"]) <= 60
        assert (await web.get(f"{setup.base}/admin/sso/start")).status_code == 303  # another address


@pytest.mark.slow
@needs_oidc_provider
async def test_a_live_edit_of_the_single_sign_on_settings_applies_and_ends_the_sessions_it_admitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("CONSOLE_OIDC_SECRET", CONSOLE_CLIENT[1])
    async with sso_console(tmp_path, live=True) as setup, httpx2.AsyncClient() as web, httpx2.AsyncClient() as root:
        await logged_in(root, setup.base)
        assert (await sign_in(web, setup, "alice")).status_code == 200
        assert (await web.get(f"{setup.base}/admin/status")).status_code == 200

        # The label changes: it applies, and alice's session goes on.
        console_config(tmp_path, tail=sso_settings(setup.issuer, label="Acme SSO"))
        await wait_for(lambda: getattr(setup.hub.config.admin.oidc, "label", None) == "Acme SSO")
        assert "Sign in with Acme SSO" in (await web.get(f"{setup.base}/admin/login")).text
        assert (await web.get(f"{setup.base}/admin/status")).status_code == 200

        # The administrators' values change: her session ends; root's key session goes on; bob, staff, is admitted.
        console_config(tmp_path, tail=sso_settings(setup.issuer, admin_values=["staff"]))
        await wait_for(lambda: getattr(setup.hub.config.admin.oidc, "admin_values", None) == ("staff",))
        assert (await web.get(f"{setup.base}/admin/status")).headers["location"] == "/admin/login"
        assert (await root.get(f"{setup.base}/admin/status")).status_code == 200
        async with httpx2.AsyncClient() as bobs:
            assert (await sign_in(bobs, setup, "bob")).status_code == 200

            # Single sign-on removed: its sessions end, and it is not offered.
            console_config(tmp_path)
            await wait_for(lambda: setup.hub.config.admin.oidc is None)
            assert (await bobs.get(f"{setup.base}/admin/status")).headers["location"] == "/admin/login"
            page = await bobs.get(f"{setup.base}/admin/login")
            assert 'id="sso"' not in page.text and 'id="key"' in page.text
            assert (await bobs.get(f"{setup.base}/admin/sso/start")).status_code == 404
        assert (await root.get(f"{setup.base}/admin/status")).status_code == 200


@pytest.mark.slow
@needs_oidc_provider
async def test_check_names_the_single_sign_on_and_connect_reads_the_provider(tmp_path: Path) -> None:
    environment = hub_environment(ADMIN_KEY=ADMIN_KEY, CONSOLE_OIDC_SECRET=CONSOLE_CLIENT[1])

    def check(config: Path, *flags: str) -> subprocess.CompletedProcess[str]:
        command = [*hub_command("check", "--config", str(config), *flags)]
        return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=60)

    async with oidc_login_provider(free_port(), {}, [], PEOPLE) as issuer:
        config = console_config(tmp_path, tail=sso_settings(issuer))
        offline = await anyio.to_thread.run_sync(check, config)
        online = await anyio.to_thread.run_sync(check, config, "--connect")
    assert offline.returncode == 0, offline.stderr
    said = f"[admin.oidc]: ok, the console's single sign-on at {issuer}; administrators: groups holds one of mcp-admins"
    assert said in offline.stdout
    assert online.returncode == 0, online.stdout + online.stderr
    at = re.escape(issuer)
    found = rf"{at}: identity provider metadata ok; \d signing key\(s\) at {at}/jwks; a userinfo endpoint"
    assert re.search(found, online.stdout), online.stdout
    (tmp_path / "gone").mkdir()
    gone = console_config(tmp_path / "gone", tail=sso_settings(f"http://127.0.0.1:{free_port()}"))
    unreachable = await anyio.to_thread.run_sync(check, gone, "--connect")
    assert unreachable.returncode == 1 and "unavailable: no authorization server metadata" in unreachable.stdout


@pytest.mark.slow
async def test_an_identity_provider_that_cannot_be_reached_is_a_page_that_says_so(tmp_path: Path) -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    path = console_config(tmp_path, tail=sso_settings(gone))
    config = load_config(path, environ={"ADMIN_KEY": ADMIN_KEY, "CONSOLE_OIDC_SECRET": CONSOLE_CLIENT[1]})
    hub = Hub(config)
    async with hub.running():
        await hub.wait_settled(20.0)
        app = build_app(
            hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, admin=console(hub, "127.0.0.1")
        )
        async with serve_app(app) as base, httpx2.AsyncClient() as web:
            start = await web.get(f"{base}/admin/sso/start")
            assert start.status_code == 502 and "The identity provider cannot be reached" in start.text
            assert f"{gone}/.well-known/openid-configuration" in start.text and 'id="again"' in start.text
            assert "mcp_hub_admin_sso" not in web.cookies  # nothing begun
            await logged_in(web, base)  # the admin key still opens the console


async def provider_sign_out(web: httpx2.AsyncClient, page: httpx2.Response) -> httpx2.Response:
    """What the browser does with the console's "Signed out" page: on to oidc-provider's end-session endpoint, its
    "Yes, sign me out", and back where it sends the browser (returned, opened as a cross-site navigation)."""
    found = re.search(r'http-equiv="refresh" content="0; url=([^"]+)"', page.text)
    assert found is not None, page.text
    ask = await web.get(html.unescape(found[1]))
    assert ask.status_code == 200 and "Do you want to sign-out" in ask.text, ask.text
    action = re.search(r'<form id="op.logoutForm" method="post" action="([^"]+)"', ask.text)
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', ask.text))
    assert action is not None and "xsrf" in fields, ask.text
    done = await web.post(urljoin(str(ask.url), action[1]), data={**fields, "logout": "yes"})
    assert done.status_code in (302, 303), done.text
    return await web.get(done.headers["location"], headers={"Sec-Fetch-Site": "cross-site"})


@pytest.mark.slow
@needs_oidc_provider
async def test_signing_out_signs_the_person_out_at_the_identity_provider_too(tmp_path: Path) -> None:
    """RP-Initiated Logout: the console's sign-out sends the browser to oidc-provider's end_session_endpoint with
    the ID token as its hint, which signs alice out there and sends her back to the sign-in page; her next
    sign-in asks for her login again. With `provider_sign_out = false`, the provider's session stays."""
    async with sso_console(tmp_path) as setup, httpx2.AsyncClient() as web:
        back = await browse(await started(web, setup), "alice", setup.callback, web)
        assert (await web.get(back)).status_code == 200
        again = await web.get(await started(web, setup))  # signed in at the provider: no login page
        assert again.is_redirect and again.headers["location"].startswith(setup.callback), again.text
        assert (await web.get(again.headers["location"])).status_code == 200
        status = await web.get(f"{setup.base}/admin/status")
        csrf = re.search(r'name="csrf" value="([^"]+)"', status.text)
        assert csrf is not None
        out = await web.post(f"{setup.base}/admin/logout", data={"csrf": csrf[1]})
        assert out.status_code == 200 and 'id="signed-out"' in out.text
        sent = parse_qs(urlsplit(html.unescape(re.findall(r'url=([^"]+)"', out.text)[0])).query)
        assert sent["client_id"] == [CONSOLE_CLIENT[0]]
        assert sent["post_logout_redirect_uri"] == [f"{setup.base}/admin/login"]
        assert sent["id_token_hint"][0].count(".") == 2
        assert (await web.get(f"{setup.base}/admin/status")).headers["location"] == "/admin/login"  # ended here
        landed = await provider_sign_out(web, out)
        assert (
            landed.status_code == 200 and str(landed.url) == f"{setup.base}/admin/login" and 'id="sso"' in landed.text
        )
        login = await web.get(await started(web, setup), follow_redirects=True)
        assert 'name="login"' in login.text  # signed out at the provider: it asks again

    (tmp_path / "off").mkdir()
    async with sso_console(tmp_path / "off", provider_sign_out=False) as setup, httpx2.AsyncClient() as web:
        assert (await sign_in(web, setup, "alice")).status_code == 200
        status = await web.get(f"{setup.base}/admin/status")
        csrf = re.search(r'name="csrf" value="([^"]+)"', status.text)
        assert csrf is not None
        out = await web.post(f"{setup.base}/admin/logout", data={"csrf": csrf[1]})
        assert out.status_code == 303 and out.headers["location"] == "/admin/login"


@pytest.mark.slow
@needs_oidc_provider
@pytest.mark.parametrize("how", ["refresh_token", "userinfo"])
async def test_a_person_removed_from_the_administrators_group_loses_the_console_at_the_next_check(
    tmp_path: Path, how: str
) -> None:
    """The console asks oidc-provider again once a session was vouched for more than `recheck_minutes` ago: with
    a refresh token (the console's client has the grant) it renews the sign-in and checks the new ID token and
    the userinfo answer; without one, it asks the userinfo endpoint with the access token. alice stays an
    administrator across a check; once she leaves the group, her session goes on until the next check, which
    ends it (an audit line says why); root's key session is never asked about."""
    accounts = tmp_path / "accounts.json"
    accounts.write_text(json.dumps(PEOPLE), encoding="utf-8")
    grants = ("authorization_code", "refresh_token") if how == "refresh_token" else ("authorization_code",)
    options = {"accountsFile": str(accounts)}
    async with (
        sso_console(tmp_path, grants=grants, provider=options, recheck_minutes=5) as setup,
        httpx2.AsyncClient() as web,
        httpx2.AsyncClient() as root,
    ):
        await logged_in(root, setup.base)
        assert (await sign_in(web, setup, "alice")).status_code == 200
        cookie = web.cookies["mcp_hub_admin"]
        session = await setup.sessions.read(cookie)
        assert session is not None and session.checked is not None
        assert ("refresh_token" in session.tokens) == (how == "refresh_token")
        assert {"id_token", "access_token"} <= set(session.tokens)
        first = dict(session.tokens)

        setup.clock.offset += 301  # due: asked again, still an administrator
        assert (await web.get(f"{setup.base}/admin/status")).status_code == 200
        again = await setup.sessions.read(cookie)
        assert again is not None and again.checked is not None and again.checked > session.checked
        if how == "refresh_token":  # renewed: new tokens kept
            assert again.tokens["access_token"] != first["access_token"]

        accounts.write_text(json.dumps({**PEOPLE, "alice": {**PEOPLE["alice"], "groups": ["staff"]}}))
        setup.clock.offset += 120  # not due yet: the session goes on
        assert (await web.get(f"{setup.base}/admin/status")).status_code == 200
        setup.clock.offset += 200  # due: she is no longer an administrator
        gone = await web.get(f"{setup.base}/admin/status")
        assert gone.status_code == 303 and gone.headers["location"] == "/admin/login"
        assert await setup.sessions.read(cookie) is None
        await wait_for(lambda: any("no longer an administrator" in (x["reason"] or "") for x in setup.audit()))
        (line,) = [x for x in setup.audit() if "no longer an administrator" in (x["reason"] or "")]
        assert line["method"] == "admin/sign-in" and line["outcome"] == "refused"
        assert line["principal"] == "admin:alice@example.com" and line["subject"] == "alice"
        assert "'groups' holds none of ['mcp-admins']" in line["reason"] and line["client_address"] == "127.0.0.1"
        assert (await root.get(f"{setup.base}/admin/status")).status_code == 200  # a key's session: not asked


@pytest.mark.slow
@needs_oidc_provider
async def test_a_refresh_token_the_provider_no_longer_takes_ends_the_session(tmp_path: Path) -> None:
    """alice's grant is revoked at oidc-provider (her refresh token revoked, RFC 7009): at the next check the
    renewal is refused, and her session ends."""
    grants = ("authorization_code", "refresh_token")
    async with sso_console(tmp_path, grants=grants, recheck_minutes=1) as setup, httpx2.AsyncClient() as web:
        assert (await sign_in(web, setup, "alice")).status_code == 200
        session = await setup.sessions.read(web.cookies["mcp_hub_admin"])
        assert session is not None
        revoked = await web.post(
            f"{setup.issuer}/token/revocation",
            data={"token": session.tokens["refresh_token"], "token_type_hint": "refresh_token"},
            auth=CONSOLE_CLIENT,
        )
        assert revoked.status_code == 200, revoked.text
        setup.clock.offset += 61
        gone = await web.get(f"{setup.base}/admin/status")
        assert gone.status_code == 303 and gone.headers["location"] == "/admin/login"
        await wait_for(lambda: any("did not renew the sign-in" in (x["reason"] or "") for x in setup.audit()))


# -- the ID token's checks, on ID tokens oidc-provider issued ------------------------------------------------


@pytest.mark.slow
@needs_oidc_provider
async def test_an_id_token_with_another_nonce_audience_or_time_or_a_broken_signature_is_refused(
    tmp_path: Path,
) -> None:
    async with sso_console(tmp_path) as setup:
        settings = setup.hub.config.admin.oidc
        assert settings is not None
        nonce, verifier = secrets.token_urlsafe(16), secrets.token_urlsafe(48)
        async with oauth_client(
            client_id=CONSOLE_CLIENT[0],
            client_secret=CONSOLE_CLIENT[1],
            scope="openid email",
            redirect_uri=setup.callback,
            code_challenge_method="S256",
        ) as oauth:
            url, _ = oauth.create_authorization_url(f"{setup.issuer}/auth", code_verifier=verifier, nonce=nonce)
            back = await browse(str(url), "alice", setup.callback)
            code = parse_qs(urlsplit(back).query)["code"][0]
            issued = await oauth.fetch_token(f"{setup.issuer}/token", code=code, code_verifier=verifier)
        id_token, access = issued["id_token"], issued["access_token"]

        async with httpx2.AsyncClient() as http:

            async def jwks() -> str:
                return f"{setup.issuer}/jwks"

            keys = KeySet(http, jwks, refetch_interval=1, max_age=60)

            async def check(token: str = id_token, **changes: Any) -> dict[str, Any]:
                options: dict[str, Any] = {"issuer": setup.issuer, "nonce": nonce, "access_token": access}
                own = settings.model_copy(update=changes.pop("settings", {}))
                return await id_token_claims(token, keys, own, **(options | changes))

            claims = await check()
            assert claims["sub"] == "alice" and claims["aud"] == CONSOLE_CLIENT[0] and claims["nonce"] == nonce
            broken = id_token[:-6] + ("AAAAAA" if not id_token.endswith("AAAAAA") else "BBBBBB")
            refusals: dict[str, Callable[[], Awaitable[Any]]] = {
                "its nonce is missing or another's": lambda: check(nonce="another"),
                f"not issued by {setup.issuer}/other": lambda: check(issuer=f"{setup.issuer}/other"),
                "not for this console": lambda: check(settings={"client_id": "another-client"}),
                "has expired": lambda: check(now=lambda: int(claims["exp"]) + 3600),
                "does not verify": lambda: check(broken),
                "not a signed JWT": lambda: check("not.a-jwt"),
            }
            for said, checked in refusals.items():
                with pytest.raises(Refused, match=re.escape(said)):
                    await checked()
            if "at_hash" in claims:  # bound to the access token it came with
                with pytest.raises(Refused, match="'at_hash'"):
                    await check(access_token="another access token")
            with pytest.raises(Refused, match="does not verify"):
                await check(settings={"algorithms": ("ES256",)})  # signed RS256, which is not taken
