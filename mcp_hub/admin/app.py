"""The admin console's Starlette app: login, the pages, their live streams and the actions.

Every request first passes the front door (guard.py): a foreign `Host`, `Origin` or cross-site request is
refused, and every answer carries headers that keep it out of frames, caches and other origins' scripts.
A page needs a session (else the login page); an action (a POST) needs the session's CSRF token too.
Administrators log in with a key of `[admin] keys`, or sign in through the organisation's identity provider
(`[admin.oidc]`, sso.py). Sessions are kept on the server (sessions.py): a logout, or the key a session
logged in with leaving `[admin] keys` (the single sign-on settings changing, for a person's), ends it at
once, and the live streams it opened with it. Login attempts are rate-limited (throttle.py). Pages never show a
secret: the hub's own secret values (its API keys, the admin keys, the secret-named env values and headers
of its mounts, their client secrets and token keys, the console's client secret) are masked in everything the
console renders, on top of the audit log's own masking; they are read from the configuration in force as it is
rendered, so the values a live reload brings are masked too (and those it replaced stay masked).
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

import anyio
import orjson
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mcp_hub import __version__
from mcp_hub.admin import assets, audit_view, pages
from mcp_hub.admin.connections import Connections
from mcp_hub.admin.dashboard import ConsoleParts, DashboardPages
from mcp_hub.admin.guard import Guard
from mcp_hub.admin.sessions import COOKIE, LOGIN_COOKIE, Session, Sessions, address_of, same
from mcp_hub.admin.sso import SingleSignOn, fingerprint
from mcp_hub.admin.throttle import LoginThrottle
from mcp_hub.catalog.catalog import KINDS, Catalog
from mcp_hub.catalog.pins import PinStore
from mcp_hub.chain.guardrails import hub_secrets
from mcp_hub.cluster import Cluster
from mcp_hub.config import HubConfig
from mcp_hub.errors import ConfigError
from mcp_hub.observe.audit_log import Administrator, AuditEvent, AuditLog
from mcp_hub.policy import Target, explain
from mcp_hub.policy.decide import PolicySet
from mcp_hub.upstream import Upstream

if TYPE_CHECKING:
    from mcp_hub.chain.budgets import BudgetCounter
    from mcp_hub.observe.dashboard import Dashboard

logger = logging.getLogger("mcp_hub.admin")

REFRESH = 0.5
"""Seconds between two looks at what a live stream follows (the status, the audit file)."""
_UNKNOWN_KEY = Administrator("(unknown key)")
"""Who the audit line of a refused key sign-in names: the key was no administrator's (the key is never written)."""

_POLICY_KIND = {"tools": "tool", "prompts": "prompt", "resources": "resource", "resource_templates": "resource"}
_VISIBLE_KIND = {
    "tools": "tool",
    "prompts": "prompt",
    "resources": "resource",
    "resource_templates": "resource_template",
}
_OUTCOMES = (
    "allowed",
    "denied",
    "refused",
    "confirm",
    "error",
    "rate_limited",
    "over_budget",
    "blocked",
    "redacted",
    "flagged",
    "tool_changed",
    "server_limit",
    "accepted",
    "rejected",
    "revoked",
    "withdrawn",
)
_MASK = "••••••"


class ConsoleHub(Protocol):
    """What the console reads and governs of the hub (mcp_hub/hub.py's `Hub`)."""

    config: HubConfig
    catalog: Catalog
    pins: PinStore
    audit: AuditLog
    upstreams: Mapping[str, Upstream]
    started_at: float
    cluster: Cluster | None
    budgets: BudgetCounter | None
    dashboard: Dashboard | None

    def policy(self) -> PolicySet: ...
    def health(self, *, stderr: bool = False) -> dict[str, Any]: ...
    async def pins_changed(self) -> None: ...


def console(hub: Any, host: str, *, clock: Callable[[], float] = time.time) -> Console:
    """The console for `hub` (mounted at /admin by the HTTP endpoint), the hub bound to `host`; `clock`: the
    wall clock its sessions and sign-ins expire by."""
    return Console(hub, host, clock=clock)


class Console:
    """The console as an ASGI app; `close()` ends its live streams (the server is shutting down, and would
    otherwise wait for every open page to go away)."""

    def __init__(self, hub: ConsoleHub, host: str, *, clock: Callable[[], float] = time.time) -> None:
        self._pages = _Pages(hub, clock)
        self._app = Guard(self._pages.app(), loopback=host in ("127.0.0.1", "localhost", "::1"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)

    @property
    def sessions(self) -> Sessions:
        """The console's sessions."""
        return self._pages.sessions

    def close(self) -> None:
        self._pages.closed.set()


class _Pages:
    def __init__(self, hub: ConsoleHub, clock: Callable[[], float] = time.time) -> None:
        self.hub = hub
        self.closed = anyio.Event()
        admin = hub.config.admin
        sso = lambda: None if hub.config.admin.oidc is None else fingerprint(hub.config.admin.oidc)  # noqa: E731
        self.sessions = Sessions(lambda: hub.config.admin.keys, admin.session_hours, hub.cluster, sso=sso, clock=clock)
        self.throttle = LoginThrottle(hub.cluster)
        self.sso = SingleSignOn(
            lambda: hub.config.admin.oidc,
            self.sessions,
            lambda request, title, body, code: self._render(request, title, "", body, None, code),
            lambda who, outcome, reason, address: self._record(who, "admin/sign-in", None, outcome, reason, address),
            self.throttle,
            hub.cluster,
            clock=clock,
        )
        self._masks: tuple[HubConfig | None, set[str], list[str]] = (None, set(), [])
        """The configuration last read for secrets, every secret value read so far, and those longest first."""
        self.connections = Connections(hub, self._render, _base)
        self.dashboard = DashboardPages(
            ConsoleParts(hub, self._render, self._page, self._stream, self._closing, self._masked, self._session)
        )

    def app(self) -> Starlette:
        page, action = self._page, self._action
        return Starlette(
            routes=[
                Route("/", self._home),
                Route("/login", self._login_form, methods=["GET"]),
                Route("/login", self._login, methods=["POST"]),
                Route("/logout", action(self._logout), methods=["POST"]),
                *self.sso.routes(),
                *self.dashboard.routes(),
                Route("/status", page(self._status)),
                Route("/status/events", self._stream(self._status_events)),
                Route("/catalog", page(self._catalog)),
                Route("/pins", page(self._pins)),
                Route("/pins/accept", action(self._pin_action("accept")), methods=["POST"]),
                Route("/pins/reject", action(self._pin_action("reject")), methods=["POST"]),
                Route("/connections", page(self.connections.page)),
                Route("/connections/revoke", action(self.connections.revoke), methods=["POST"]),
                Route("/connections/withdraw", action(self.connections.withdraw), methods=["POST"]),
                Route("/audit", page(self._audit)),
                Route("/audit/events", self._stream(self._audit_events)),
                Route("/audit/line/{decision}", page(self._audit_line)),
                Route("/explain", page(self._explain_form)),
                Route("/explain", action(self._explain), methods=["POST"]),
                Route("/static/console.css", lambda r: Response(assets.CSS, media_type="text/css")),
                Route("/static/console.js", lambda r: Response(assets.JS, media_type="text/javascript")),
            ]
        )

    # -- sessions ------------------------------------------------------------------------------------

    async def _session(self, request: Request) -> Session | None:
        session = await self.sessions.read(request.cookies.get(COOKIE))
        return await self.sso.held(session, address_of(request)) if session is not None else None

    def _render(
        self, request: Request, title: str, here: str, body: str, session: Session | None, status_code: int = 200
    ) -> HTMLResponse:
        admin, csrf = (session.admin, session.csrf) if session else (None, None)
        html = pages.layout(_base(request), title, here, body, admin=admin, csrf=csrf)
        return HTMLResponse(self._masked(html), status_code=status_code)

    def _masked(self, text: str) -> str:
        for value in self._secrets():
            text = text.replace(pages.e(value), _MASK).replace(value, _MASK)
        return text

    def _secrets(self) -> list[str]:
        """The secret values to mask, longest first: those of the configuration in force, read again when a
        reload replaced it, and those of every configuration before it (a secret replaced is still one)."""
        config = self.hub.config
        seen, known, ordered = self._masks
        if config is not seen:
            known = known | hub_secrets(config)
            ordered = sorted(known, key=len, reverse=True)
            self._masks = (config, known, ordered)
        return ordered

    def _page(
        self, render: Callable[[Request, Session], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            session = await self._session(request)
            if session is None:
                return RedirectResponse(f"{_base(request)}/login", status_code=303)
            return await render(request, session)

        return endpoint

    def _action(
        self, act: Callable[[Request, Session, Mapping[str, str]], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            session = await self._session(request)
            if session is None:
                return PlainTextResponse("log in first", status_code=401)
            form = {key: value for key, value in (await request.form()).items() if isinstance(value, str)}
            if not same(form.get("csrf"), session.csrf):
                return PlainTextResponse("refused: the form's CSRF token is missing or wrong", status_code=403)
            return await act(request, session, form)

        return endpoint

    async def _home(self, request: Request) -> Response:
        return RedirectResponse(f"{_base(request)}/status", status_code=303)

    async def _login_form(self, request: Request, error: str | None = None, status_code: int = 401) -> Response:
        token, admin = secrets.token_urlsafe(24), self.hub.config.admin
        sso = admin.oidc.label if admin.oidc is not None else None
        body = pages.login(_base(request), token, error, sso=sso, keys=bool(admin.keys))
        response = self._render(request, "Log in", "", body, None, 200 if error is None else status_code)
        _cookie(response, request, LOGIN_COOKIE, token, None)
        return response

    async def _login(self, request: Request) -> Response:
        form = await request.form()
        token, key = form.get("csrf"), form.get("key")
        if not isinstance(token, str) or not same(token, request.cookies.get(LOGIN_COOKIE, "")):
            return PlainTextResponse("refused: the form's CSRF token is missing or wrong", status_code=403)
        key = key if isinstance(key, str) else ""
        wait = await self.throttle.attempt(_client(request), key)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            self._record(
                _UNKNOWN_KEY,
                "admin/sign-in",
                None,
                "refused",
                f"too many sign-in attempts from this address; held back {seconds} s",
                address_of(request),
            )
            response = await self._login_form(
                request, f"too many sign-in attempts; try again in {seconds} s", status_code=429
            )
            response.headers["Retry-After"] = str(seconds)
            return response
        admin = self.sessions.admin_of(key) if key else None
        if admin is None:
            reason = "a sign-in to the admin console with a key that is not an admin key"
            self._record(_UNKNOWN_KEY, "admin/sign-in", None, "refused", reason, address_of(request))
            return await self._login_form(request, "That key is not an admin key.")
        reason = f"{Administrator(admin)} signed in to the admin console with an admin key"
        self._record(Administrator(admin), "admin/sign-in", None, "allowed", reason, address_of(request))
        response = RedirectResponse(f"{_base(request)}/status", status_code=303)
        _cookie(response, request, COOKIE, await self.sessions.begin(admin, key), self.sessions.lifetime)
        response.delete_cookie(LOGIN_COOKIE, path=_base(request) or "/")
        return response

    async def _logout(self, request: Request, session: Session, form: Mapping[str, str]) -> Response:
        await self.sessions.end(session)
        provider = await self.sso.sign_out_url(request, session)
        logger.info(
            "admin console: %s logged out from %s%s",
            session.admin,
            _client(request),
            "; sent to sign out at the identity provider" if provider else "",
        )
        if provider is not None:  # a page that goes on there: a redirect from the form would break its form-action
            body = pages.signing_out(provider, self.hub.config.admin.oidc.label if self.hub.config.admin.oidc else "")
            response: Response = self._render(request, "Signing out", "", body, None)
        else:
            response = RedirectResponse(f"{_base(request)}/login", status_code=303)
        response.delete_cookie(COOKIE, path=_base(request) or "/")
        return response

    def _stream(
        self, events: Callable[[Request, Session], AsyncIterator[ServerSentEvent]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            session = await self._session(request)
            if session is None:
                return PlainTextResponse("log in first", status_code=401)

            async def followed() -> AsyncIterator[ServerSentEvent]:
                async with aclosing(events(request, session)) as stream:
                    async for event in stream:
                        yield event

            return EventSourceResponse(followed(), ping=15, headers={"Cache-Control": "no-store"})

        return endpoint

    async def _closing(self, session: Session) -> bool:
        """Wait `REFRESH` seconds; True, at once, when the console is closed; True too when the session that
        opened the stream has ended (logged out, expired, its key removed or changed): so does the stream."""
        with anyio.move_on_after(REFRESH):
            await self.closed.wait()
        if self.closed.is_set():
            return True
        current = await self.sessions.again(session)
        return current is None or await self.sso.held(current) is None

    # -- status --------------------------------------------------------------------------------------

    def _live_status(self) -> str:
        sessions = {name: upstream.client_sessions for name, upstream in list(self.hub.upstreams.items())}
        return self._masked(pages.mounts(self.hub.health(stderr=True), sessions))

    async def _status(self, request: Request, session: Session) -> Response:
        policy = self.hub.policy()
        facts = {
            "Version": __version__,
            # A time, not a duration: the page is drawn once, and only the mounts below it follow live.
            "Up since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.hub.started_at)),
            "Policy revision": policy.revision,
            "Policy files": ", ".join(policy.sources) or "(built-in policy)",
        }
        return self._render(
            request, "Status", "status", pages.status(_base(request), facts, self._live_status()), session
        )

    async def _status_events(self, request: Request, session: Session) -> AsyncIterator[ServerSentEvent]:
        last = None
        while True:
            current = self._live_status()
            if current != last:
                last = current
                yield ServerSentEvent(current, event="replace")
            if await self._closing(session):
                return

    # -- catalog -------------------------------------------------------------------------------------

    async def _catalog(self, request: Request, session: Session) -> Response:
        query = request.query_params.get("q", "").strip()
        principal = request.query_params.get("principal", "").strip()
        policy = self.hub.policy()
        rows = [row for row in self._catalog_rows(policy, principal) if _matches(row, query)]
        principals = sorted({*policy.principals, *self.hub.config.auth.api_keys, "anonymous"} - {"*"})
        body = pages.catalog(_base(request), rows, principals, principal, query)
        return self._render(request, "Catalog", "catalog", body, session)

    def _catalog_rows(self, policy: PolicySet, principal: str) -> list[dict[str, Any]]:
        pins = self.hub.pins
        rows: list[dict[str, Any]] = []
        listed: set[str] = set()
        for kind in KINDS:
            view = self.hub.catalog.view(kind)
            for item, target in zip(view.items, view.targets, strict=True):
                name = item.get("name") or item.get("uri") or item.get("uriTemplate") or ""
                row = {
                    "kind": kind.removesuffix("s").replace("_", " "),
                    "name": name,
                    "mount": target.mount,
                    "native": target.native,
                    "description": item.get("description"),
                    "title": item.get("title"),
                    "icons": item.get("icons"),
                    "annotations": item.get("annotations") if kind == "tools" else None,
                    "pin": "-",
                }
                if kind == "tools" and pins.enabled:
                    key = f"{target.mount}/{target.native}"
                    listed.add(key)
                    row["pin"] = "flagged" if key in pins.pending else "pinned" if key in pins.pins else "unpinned"
                if principal:
                    self._explained(row, policy, principal, kind)
                rows.append(row)
        for key, change in sorted(pins.pending.items()) if pins.enabled else ():
            if key in listed:
                continue
            mount, _, native = key.partition("/")
            definition = change.get("definition") or {}
            row = {
                "kind": "tool",
                "name": key,
                "mount": mount,
                "native": native,
                "pin": "held",
                "description": definition.get("description"),
                "title": definition.get("title"),
                "icons": definition.get("icons"),
                "annotations": definition.get("annotations"),
            }
            if principal:
                self._explained(row, policy, principal, "tools")
            rows.append(row)
        return rows

    def _explained(self, row: dict[str, Any], policy: PolicySet, principal: str, kind: str) -> None:
        visible = policy.visible(principal, _VISIBLE_KIND[kind], row["mount"], row["native"])
        target = Target(_POLICY_KIND[kind], row["mount"], row["native"])  # type: ignore[arg-type]
        row["outcome"] = "listed" if visible else "hidden"
        if row["pin"] == "held":
            row["outcome"] = "held"
        row["explain"] = explain(policy, principal, target, detectors=self.hub.detectors())

    # -- pins ----------------------------------------------------------------------------------------

    async def _pins(self, request: Request, session: Session) -> Response:
        store = self.hub.pins
        try:
            store.reload()
        except ConfigError as exc:
            return self._render(request, "Pins", "pins", f'<h1>Pins</h1><p class="error">{pages.e(exc)}</p>', session)
        notice = request.query_params.get("done", "")
        body = pages.pins(_base(request), store.enabled, store.pending, store.pins, session.csrf, notice)
        return self._render(request, "Pins", "pins", body, session)

    def _pin_action(self, verb: str) -> Callable[[Request, Session, Mapping[str, str]], Awaitable[Response]]:
        async def act(request: Request, session: Session, form: Mapping[str, str]) -> Response:
            key = form.get("key", "")
            store = self.hub.pins
            if not store.enabled:
                return PlainTextResponse("pinning is off", status_code=409)
            try:
                done = store.accept([key]) if verb == "accept" else store.reject([key], session.admin)
            except (ConfigError, OSError) as exc:
                return PlainTextResponse(f"could not {verb} {key}: {exc}", status_code=500)
            if done:
                reason = f"the change of the tool's definition was {verb}ed by the administrator {session.who}"
                self._record(session.who, f"admin/pins/{verb}", key, f"{verb}ed", reason, address_of(request))
                await self.hub.pins_changed()
                notice = f"{key}: {verb}ed by {session.admin}"
            else:
                notice = f"{key}: nothing to {verb} (no such pending change)"
            return RedirectResponse(f"{_base(request)}/pins?{urlencode({'done': notice})}", status_code=303)

        return act

    def _record(
        self, who: Administrator, method: str, key: str | None, outcome: str, reason: str, address: str | None = None
    ) -> None:
        """The audit line of an administrator's action (`key`: the tool's MOUNT/NAME, if about one; `address`: the
        browser's network address)."""
        mount, _, tool = key.partition("/") if key is not None else (None, "", None)
        logger.log(
            logging.WARNING if outcome == "refused" else logging.INFO,
            "admin console: %s%s%s",
            reason,
            f" ({key})" if key else "",
            f" from {address}" if address else "",
        )
        event = AuditEvent.by_administrator(
            who,
            method=method,
            mount=mount,
            name=tool,
            arguments=None,
            outcome=outcome,
            reason=reason,
            policy_revision=self.hub.policy().revision,
        )
        self.hub.audit.record(replace(event, client_address=address))

    # -- audit ---------------------------------------------------------------------------------------

    def _audit_file(self) -> tuple[Any, int]:
        settings = self.hub.config.audit
        return self.hub.config.audit_file(), settings.backups

    async def _audit(self, request: Request, session: Session) -> Response:
        path, backups = self._audit_file()
        filters = audit_view.Filters.of(request.query_params, self._public_names())
        try:
            offset = max(0, int(request.query_params.get("offset", "0")))
        except ValueError:
            offset = 0
        events, more = ([], False)
        if path is not None:
            events, more = await anyio.to_thread.run_sync(audit_view.page, path, backups, filters, offset)
        body = pages.audit(_base(request), path is not None, filters, events, offset, more, _OUTCOMES)
        return self._render(request, "Audit", "audit", body, session)

    async def _audit_events(self, request: Request, session: Session) -> AsyncIterator[ServerSentEvent]:
        path, _ = self._audit_file()
        if path is None:
            return
        filters = audit_view.Filters.of(request.query_params, self._public_names())
        tail = audit_view.Tail(path)
        while True:
            fresh = [event for event in tail.read() if filters.admit(event)]
            if fresh:
                yield ServerSentEvent(self._masked(pages.audit_rows(_base(request), reversed(fresh))), event="prepend")
            if await self._closing(session):
                return

    def _public_names(self) -> audit_view.Resolve:
        return audit_view.public_names(self.hub.catalog, self.hub.config.servers)

    async def _audit_line(self, request: Request, session: Session) -> Response:
        path, backups = self._audit_file()
        decision = request.path_params["decision"]
        event = None if path is None else await anyio.to_thread.run_sync(audit_view.find, path, backups, decision)
        return self._render(
            request,
            "Audit line",
            "audit",
            pages.audit_line(_base(request), event),
            session,
            status_code=200 if event is not None else 404,
        )

    # -- explain -------------------------------------------------------------------------------------

    async def _explain_form(self, request: Request, session: Session) -> Response:
        body = pages.explain(_base(request), session.csrf, {}, None, None)
        return self._render(request, "Explain", "explain", body, session)

    async def _explain(self, request: Request, session: Session, form: Mapping[str, str]) -> Response:
        answer, error = None, None
        try:
            principal = form.get("principal", "").strip()
            policy, target = self.hub.policy(), _target(form)
            usage = None
            if self.hub.budgets is not None and target.kind == "tool":
                usage = await self.hub.budgets.usage(policy.budgets_for(principal), principal)
            answer = explain(policy, principal, target, detectors=self.hub.detectors(), usage=usage)
        except ValueError as exc:
            error = str(exc)
        body = pages.explain(_base(request), session.csrf, form, answer, error)
        return self._render(request, "Explain", "explain", body, session, status_code=200 if error is None else 400)


def _target(form: Mapping[str, str]) -> Target:
    """The target the explain form names, as `mcp-hub explain` reads it; ValueError saying what is wrong."""
    kind = form.get("kind", "tool")
    if kind not in ("tool", "prompt", "resource"):
        raise ValueError("the kind is tool, prompt or resource")
    if not form.get("principal", "").strip():
        raise ValueError("name the principal")
    text = form.get("target", "").strip()
    separator = "+" if kind == "resource" else "_"
    slash, plus = text.find("/"), text.find(separator)
    if plus > 0 and (slash < 0 or plus < slash):
        mount, name = text[:plus], text[plus + 1 :]
    elif slash > 0:
        mount, name = text[:slash], text[slash + 1 :]
    else:
        raise ValueError(f"name the mount too: MOUNT/NAME, or the public name (got {text!r})")
    arguments = None
    if kind != "resource":
        try:
            arguments = orjson.loads(form.get("args", "").strip() or "{}")
        except orjson.JSONDecodeError as exc:
            raise ValueError(f'the arguments are not JSON ({exc}); write an object like {{"path": "/tmp/x"}}') from None
        if not isinstance(arguments, dict):
            raise ValueError('the arguments must be a JSON object, like {"path": "/tmp/x"}')
    return Target(kind, mount, name, arguments)  # type: ignore[arg-type]


def _matches(row: Mapping[str, Any], query: str) -> bool:
    if not query:
        return True
    text = " ".join(str(row.get(key) or "") for key in ("kind", "name", "title", "mount", "description", "pin"))
    text = text.lower()
    return all(word in text for word in query.lower().split())


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _client(request: Request) -> str:
    return request.client.host if request.client else "?"


def _cookie(response: Response, request: Request, name: str, value: str, max_age: int | None) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=_base(request) or "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
