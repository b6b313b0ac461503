"""The console's Connections page: the people's sign-ins toward `mode = "user"` (and "enterprise") mounts and
the clients they allowed on the hub's consent page, as each mount's token file holds them
(credentials/connections.py), never a token nor a browser; Revoke (credentials/revocation.py) and Withdraw,
each written to the audit log by `admin:NAME`. The store is `store_at`'s, the one the hub uses, so what is
revoked or withdrawn here is gone for the hub at its next look."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol
from urllib.parse import urlencode

import anyio
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from mcp_hub.admin import pages
from mcp_hub.admin.sessions import Session, address_of
from mcp_hub.config import HubConfig, ServerConfig
from mcp_hub.credentials.connections import Connection, Consent, StoreError, store_at
from mcp_hub.credentials.revocation import Revoked, revoke
from mcp_hub.observe.audit_log import Administrator, AuditEvent, AuditLog
from mcp_hub.policy.decide import PolicySet

logger = logging.getLogger("mcp_hub.admin")


class _Hub(Protocol):
    config: HubConfig
    audit: AuditLog

    def policy(self) -> PolicySet: ...


Render = Callable[[Request, str, str, str, Session], HTMLResponse]
"""The console's page around a body: (request, title, the navigation's current page, body, session)."""


class Connections:
    """The page (`page`) and its actions (`revoke`, `withdraw`), for the console to route."""

    def __init__(self, hub: _Hub, render: Render, base: Callable[[Request], str]) -> None:
        self.hub = hub
        self._render = render
        self._base = base

    def user_mounts(self) -> dict[str, ServerConfig]:
        return {
            name: server
            for name, server in self.hub.config.servers.items()
            if server.auth.mode in ("user", "enterprise")
        }

    def _stored(self, mounts: Mapping[str, ServerConfig]) -> tuple[list[Connection], list[Consent]]:
        """The people's sign-ins toward `mounts`, and the clients they allowed there, from each mount's token
        file (the one the hub uses: `store_at` gives this process's one store per file, so what is revoked or
        withdrawn here is gone for the hub)."""
        found: list[Connection] = []
        given: list[Consent] = []
        for name, server in mounts.items():
            assert server.auth.token_key is not None
            store = store_at(server.auth.token_store, server.auth.token_key)
            found += [record for record in store.list() if record.mount == name]
            given += [consent for consent in store.list_consents() if consent.mount == name]
        return sorted(found, key=lambda r: r.key), sorted(given, key=lambda c: (c.principal, c.mount, c.client))

    async def page(self, request: Request, session: Session) -> Response:
        mounts = self.user_mounts()
        principal = request.query_params.get("principal", "").strip()
        server = request.query_params.get("server", "").strip()
        records: list[Connection] = []
        consents: list[Consent] = []
        error: str | None = None
        try:
            records, consents = await anyio.to_thread.run_sync(self._stored, mounts)
        except StoreError as exc:
            error = str(exc)
        rows = [record for record in records if principal in ("", record.principal) and server in ("", record.mount)]
        given = [c for c in consents if principal in ("", c.principal) and server in ("", c.mount)]
        body = pages.connections(
            self._base(request),
            sorted(mounts),
            rows,
            principal,
            server,
            session.csrf,
            request.query_params.get("done", ""),
            error,
            time.time(),
            given,
        )
        return self._render(request, "Connections", "connections", body, session)

    async def revoke(self, request: Request, session: Session, form: Mapping[str, str]) -> Response:
        """Forget one person's sign-in toward one mount and revoke its tokens at the authorization server, as
        `mcp-hub connections revoke` does: the hub (same store) closes that person's session with the server at
        their next call and asks them to sign in again."""
        principal, mount, issuer = form.get("principal", ""), form.get("mount", ""), form.get("issuer", "")
        server = self.user_mounts().get(mount)
        if not principal or server is None:
            return PlainTextResponse(f'revoke needs a principal and a mode = "user" server (got {mount!r})', 400)
        try:
            gone = await revoke(mount, server, principal, issuer or None)
        except StoreError as exc:
            return PlainTextResponse(f"could not revoke: {exc}", status_code=500)
        for revoked in gone:
            self._record_revoke(session.who, revoked, address_of(request))
        notice = (
            f"{principal} at {mount}: revoked by {session.admin}; " + "; ".join(r.message for r in gone)
            if gone
            else f"{principal} at {mount}: nothing to revoke (no such connection)"
        )
        return RedirectResponse(f"{self._base(request)}/connections?{urlencode({'done': notice})}", status_code=303)

    def _record_revoke(self, admin: Administrator, revoked: Revoked, address: str | None) -> None:
        record = revoked.connection
        logger.info(
            "admin console: %s revoked the sign-in of %s at %s: %s",
            admin.name,
            record.principal,
            record.mount,
            revoked.message,
        )
        event = AuditEvent.revoked(
            admin,
            principal=record.principal,
            mount=record.mount,
            issuer=record.issuer,
            message=revoked.message,
            policy_revision=self.hub.policy().revision,
            via="admin-console",
        )
        self.hub.audit.record(replace(event, client_address=address))

    async def withdraw(self, request: Request, session: Session, form: Mapping[str, str]) -> Response:
        """Forget that a person allowed an MCP client at one mount, in every browser, as `mcp-hub connections
        withdraw` does: that client's next sign-in asks them again on the consent page. Their tokens are kept."""
        principal, mount, client = form.get("principal", ""), form.get("mount", ""), form.get("client", "")
        server = self.user_mounts().get(mount)
        if not principal or not client or server is None:
            return PlainTextResponse(
                f'withdraw needs a principal, a client and a mode = "user" server (got {mount!r})', 400
            )
        assert server.auth.token_key is not None
        store = store_at(server.auth.token_store, server.auth.token_key)
        try:
            gone = await anyio.to_thread.run_sync(store.withdraw, principal, client, mount)
        except StoreError as exc:
            return PlainTextResponse(f"could not withdraw: {exc}", status_code=500)
        for withdrawn in gone:
            self._record_withdraw(session.who, withdrawn, address_of(request))
        notice = (
            f"{principal} at {mount}: the consent for {client} was withdrawn by {session.admin}; that client's next"
            " sign-in asks them again (their tokens are kept)"
            if gone
            else f"{principal} at {mount}: nothing to withdraw (no consent for {client} on record)"
        )
        return RedirectResponse(f"{self._base(request)}/connections?{urlencode({'done': notice})}", status_code=303)

    def _record_withdraw(self, admin: Administrator, withdrawn: Consent, address: str | None) -> None:
        logger.info(
            "admin console: %s withdrew the consent of %s for %s at %s",
            admin.name,
            withdrawn.principal,
            withdrawn.client,
            withdrawn.mount,
        )
        event = AuditEvent.withdrawn(
            admin,
            principal=withdrawn.principal,
            client=withdrawn.client,
            mount=withdrawn.mount,
            browsers=withdrawn.browsers,
            policy_revision=self.hub.policy().revision,
            via="admin-console",
        )
        self.hub.audit.record(replace(event, client_address=address))
