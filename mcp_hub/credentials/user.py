"""Each person's own login toward a server (`mode = "user"`): their calls carry their own token.

The hub is an OAuth client of the server's authorization server, one client for every MCP client that calls
through the hub: registered there beforehand (`client_id`, `client_secret`), or, with none configured, the
hub's client ID metadata document where the authorization server takes them, else one it registers
dynamically (registration.py). A
person (a principal of the hub) with no token for the mount is sent to sign in: `login_required`
answers their call with a URL-mode elicitation (MCP 2025-11-25: the error -32042,
`URLElicitationRequiredError`; a client that takes URL elicitation is asked `elicitation/create`
instead, and its call waits for the sign-in) whose URL is the hub's own consent page (consent.py),
which names the MCP client asking (`client_of`), the person, the server, its authorization server
and the scopes. Only when the person allows it there (or allowed this client at this mount before)
does the hub begin the authorization, good once and for `LOGIN_SECONDS`: a `state` bound to that
principal, this mount and the browser that allowed it (a cookie), PKCE (S256) and the resource
indicator (RFC 8707), and the browser goes on to the authorization server's authorization endpoint.
The authorization server sends the browser back to the hub's `/oauth/callback` (`callback`), which
takes the code only from the browser that brings the cookie (with replicas, the `state` begins with the id
of the replica that keeps the sign-in, and the others forward the callback there, cookie and all: the
call waiting for the sign-in is on that replica); the hub trades it for the person's
tokens and keeps them, encrypted, in the mount's token file (connections.py), keyed by principal,
mount and issuer, with the person's consent for that client beside them. The client hears that the
login is complete (`notifications/elicitation/complete`, handshake-era clients) and calls again. A
person who denies on the consent page gets nothing kept: a call waiting for the sign-in fails as a
declined one does, and a client that waits for no call hears nothing.

A token about to expire, or one the server refused (a 401), is refreshed with the refresh token,
once for all the calls that need it at the time (single-flight, one lock per principal); a
refresh the authorization server refuses forgets the connection (not the consent), and the next call
asks the person to sign in again. `mcp-hub connections revoke` forgets one from outside the hub,
consents included.

Which principal a request is sent for reaches `headers` through `CALLER_PRINCIPAL`, as the
caller's token does for token exchange (token_exchange.py): the supervisor sets it around a
client's request, which goes only to that client's own session.

What this does not do: the hub has no login of its own in the browser, so the consent page cannot
tell who opens it; it names the person the link was made for, and whoever allows it there is the
browser the sign-in completes in. A person who forwards their link and sees it allowed has let the
recipient connect their account in the sender's name.
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import mcp_types as types
from authlib.common.errors import AuthlibBaseError
from mcp.shared.exceptions import UrlElicitationRequiredError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mcp_hub.config import CLIENT_DOCUMENT_PATH, USER_CALLBACK_PATH, ServerAuth
from mcp_hub.credentials import consent
from mcp_hub.credentials.authority import Authority, oauth_client
from mcp_hub.credentials.client_credentials import fetch_issued
from mcp_hub.credentials.connections import Connection, StoreError, issued_connection, store_at
from mcp_hub.credentials.consent import LOGIN_SECONDS, client_of, page
from mcp_hub.credentials.credential import CredentialAuth, CredentialError
from mcp_hub.credentials.dpop import KeyRing, ProofKey, bound_headers, new_key_for, nonce_hooks
from mcp_hub.credentials.registration import Registration, client_document
from mcp_hub.credentials.token import EARLY_SECONDS

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import AsyncOAuth2Client

logger = logging.getLogger("mcp_hub.credentials")

PENDING_MAX = 4096
"""Sign-ins under way at once (the oldest is dropped beyond that)."""

CALLER_PRINCIPAL: ContextVar[str | None] = ContextVar("mcp_hub_caller_principal", default=None)
"""The principal a request to a "user" mount is sent for (None: none; the credential then has no token)."""


class LoginRequired(CredentialError):
    """The principal has no token for the server (never signed in, revoked, or refused on refresh)."""

    def __init__(self, server: str, principal: str) -> None:
        self.principal = principal
        super().__init__(server, f"{principal} has not signed in to it")


@dataclass(eq=False)
class SignIn:
    """A sign-in begun, as a call that waits for it sees it: set once it is complete, or denied."""

    done: anyio.Event = field(default_factory=anyio.Event)
    denied: bool = False
    """The person denied the client on the consent page."""

    def is_set(self) -> bool:
        return self.done.is_set()

    async def wait(self) -> None:
        await self.done.wait()


@dataclass(frozen=True)
class _Pending:
    """A sign-in under way (allowed on the consent page): who it is for, and what the code is to be traded
    with."""

    login: UserLogin
    principal: str
    client: str
    """The MCP client the person allowed (`client_of`), whose consent is kept once the sign-in completes."""
    verifier: str
    elicitation_id: str
    browser: str
    """The SHA-256 of the binding cookie of the browser that allowed it (consent.py)."""
    expires_at: float
    """On `time.monotonic()`'s clock."""
    notify: Any = None
    """The client to tell when the sign-in is complete (`HearsElicitationComplete`), if it can be told."""
    signed_in: SignIn = field(default_factory=SignIn)
    """Set when the sign-in is complete (for a call that waits for it)."""


_PENDING: OrderedDict[str, _Pending] = OrderedDict()
"""state -> the sign-in it belongs to (every mount's, for the one callback)."""


class UserLogin:
    """A `Credential`: the token of the principal a request is sent for (see the module docstring)."""

    channel_ok = True

    def __init__(self, server: str, url: str, auth: ServerAuth) -> None:
        assert auth.token_key is not None
        self.server = server
        self._auth = auth
        self._resource = auth.resource or url
        self._authority = Authority(server, issuer=auth.issuer, token_url=auth.token_url, resource_url=url)
        self.store = store_at(auth.token_store, auth.token_key)
        self.registration = Registration(server, auth, self._authority, self.store)
        """The hub's client at the authorization server."""
        self._stale: set[tuple[str, str]] = set()
        """(principal, access token) the server refused: refreshed before it is sent again."""
        self._locks: dict[str, anyio.Lock] = {}
        self._keys = KeyRing(url)
        """The people's connections' DPoP keys."""

    @property
    def redirect_uri(self) -> str:
        """The hub's `/oauth/callback`, as the person's browser reaches it."""
        return self._auth.redirect_uri

    def http_auth(self) -> httpx2.Auth:
        return CredentialAuth(self)

    async def headers(self, method: str, url: str) -> Mapping[str, str]:
        principal = CALLER_PRINCIPAL.get()
        if principal is None:
            raise CredentialError(self.server, "each person signs in to it, and this request is for no one")
        connection = await self.connection(principal)
        if connection is None:
            raise LoginRequired(self.server, principal)
        key = self._keys.of(connection.dpop_key)
        return bound_headers(key, connection.token_type, connection.access_token, _header(connection), method, url)

    async def rejected(self, headers: Mapping[str, str], answer: Mapping[str, str]) -> bool:
        principal = CALLER_PRINCIPAL.get()
        sent = headers.get("authorization", "")
        if principal is None or not sent:
            return False
        if self._keys.nonce_retry(headers, answer):
            return True  # the server asked for its nonce, which the next proof carries
        self._stale.add((principal, sent.partition(" ")[2]))
        return True

    async def issuer(self) -> str:
        """The authorization server's issuer (found in the server's metadata when not configured)."""
        await self._authority.metadata()
        assert self._authority.issuer is not None
        return self._authority.issuer

    async def connection(self, principal: str) -> Connection | None:
        """The principal's tokens, refreshed first if about to expire or refused; None: they must sign in.

        Raises:
            CredentialError: the authorization server cannot be reached, or the token file cannot be read.
        """
        issuer = await self.issuer()
        found = self._stored(principal, issuer)
        if found is None or self._usable(found):
            return found
        async with self._locks.setdefault(principal, anyio.Lock()):
            current = self._stored(principal, issuer)  # refreshed by the call this one waited for?
            if current is None or self._usable(current):
                return current
            return await self._refresh(current)

    def _stored(self, principal: str, issuer: str) -> Connection | None:
        try:
            return self.store.get(principal, self.server, issuer)
        except StoreError as exc:
            raise CredentialError(self.server, str(exc)) from exc

    def _usable(self, connection: Connection) -> bool:
        return (connection.principal, connection.access_token) not in self._stale and connection.fresh(EARLY_SECONDS)

    async def _refresh(self, connection: Connection) -> Connection | None:
        self._stale.discard((connection.principal, connection.access_token))
        if connection.refresh_token is None:
            self._forget(connection)
            return None
        try:
            issued = await self._token_request(
                self._keys.of(connection.dpop_key), grant_type="refresh_token", refresh_token=connection.refresh_token
            )
        except CredentialError as exc:
            if not isinstance(exc.__cause__, AuthlibBaseError):
                raise  # the authorization server is unreachable: the person's tokens may still be good
            logger.info("server %r: the refresh of %s's token was refused: %s", self.server, connection.principal, exc)
            self._forget(connection)
            return None
        refreshed = issued_connection(connection.principal, self.server, connection.issuer, issued, connection)
        self._keep(refreshed)
        return refreshed

    def _keep(self, connection: Connection) -> None:
        try:
            self.store.put(connection)
        except StoreError as exc:
            raise CredentialError(self.server, str(exc)) from exc

    def _forget(self, connection: Connection) -> None:
        try:
            self.store.remove(connection.principal, self.server, connection.issuer, consents=False)
        except StoreError as exc:
            raise CredentialError(self.server, str(exc)) from exc

    async def login_required(
        self, principal: str, notify: Any = None, *, client: str | None = None
    ) -> UrlElicitationRequiredError:
        """A sign-in for `principal` begun: the error that sends them to it (their client opens its URL)."""
        return (await self.begin_sign_in(principal, notify, client=client))[0]

    async def begin_sign_in(
        self, principal: str, notify: Any = None, *, client: str | None = None
    ) -> tuple[UrlElicitationRequiredError, SignIn]:
        """A sign-in for `principal` begun: the error that sends them to it (the hub's consent page), and what
        is set once it is complete or denied. `client`: the MCP client asking, as the consent page names it
        and keeps it (default: `client_of(principal)`)."""
        client = client if client is not None else client_of(principal)
        endpoint = await self._authority.endpoint("authorization_endpoint")
        issuer = await self.issuer()
        elicitation_id = str(uuid.uuid4())
        signed_in = SignIn()

        async def allow(browser: str) -> str:
            state, verifier = consent.new_id(), secrets.token_urlsafe(48)
            async with await self._client() as oauth:
                url, _ = oauth.create_authorization_url(
                    endpoint, state=state, code_verifier=verifier, resource=self._resource
                )
            _forget_expired()
            while len(_PENDING) >= PENDING_MAX:
                _PENDING.popitem(last=False)
            expires_at = time.monotonic() + LOGIN_SECONDS
            _PENDING[state] = _Pending(
                self, principal, client, verifier, elicitation_id, browser, expires_at, notify, signed_in
            )
            return str(url)

        def deny() -> None:
            logger.info("server %r: %s denied %s on the consent page", self.server, principal, client)
            signed_in.denied = True
            signed_in.done.set()

        link = consent.ask(
            consent.Asked(
                principal=str(principal),
                client=client,
                server=self.server,
                issuer=issuer,
                scope=self._auth.scope,
                redirect_uri=self.redirect_uri,
                on_record=lambda browser: self._consented(principal, client, browser),
                allow=allow,
                deny=deny,
            )
        )
        params = types.ElicitRequestURLParams(
            message=f"Sign in to {self.server} so that the hub can act there as you, then try again.",
            url=link,
            elicitation_id=elicitation_id,
        )
        required = UrlElicitationRequiredError(
            [params], f"{self.server} needs you to sign in: open the link, then retry"
        )
        return required, signed_in

    def _consented(self, principal: str, client: str, browser: str) -> bool:
        """Whether `principal` allowed `client` here before, in `browser` (a token file that cannot be read: not
        known, ask)."""
        try:
            return self.store.consented(principal, client, self.server, browser)
        except StoreError as exc:
            logger.warning("server %r: cannot read the consents: %s", self.server, exc)
            return False

    async def complete(self, pending: _Pending, code: str) -> Connection:
        issuer = await self.issuer()
        key = new_key_for(await self._authority.dpop_metadata(self._auth.dpop), self._auth.dpop)
        issued = await self._token_request(
            key,
            grant_type="authorization_code",
            code=code,
            redirect_uri=self._auth.redirect_uri,
            code_verifier=pending.verifier,
            resource=self._resource,
        )
        connection = issued_connection(pending.principal, self.server, issuer, issued, None)
        if key is not None and connection.token_type.lower() == "dpop":
            connection = replace(connection, dpop_key=key.private_jwk())
        self._keep(connection)
        try:
            self.store.consent(pending.principal, pending.client, self.server, pending.browser)
        except StoreError as exc:  # the sign-in stands; the person is asked again next time
            logger.warning("server %r: the consent of %s was not kept: %s", self.server, pending.principal, exc)
        self._stale = {entry for entry in self._stale if entry[0] != pending.principal}
        pending.signed_in.done.set()
        return connection

    async def _client(self, key: ProofKey | None = None, endpoint: str = "") -> AsyncOAuth2Client:
        auth = self._auth
        client = await self.registration.client()
        return oauth_client(
            **nonce_hooks(key, endpoint),
            client_id=client.client_id,
            client_secret=client.client_secret,
            token_endpoint_auth_method=client.token_endpoint_auth_method,
            scope=auth.scope,
            redirect_uri=auth.redirect_uri,
            code_challenge_method="S256",
        )

    async def _token_request(self, key: ProofKey | None, **params: str) -> dict[str, Any]:
        """The token endpoint's answer to `params` (with a DPoP proof of `key`, when given)."""
        endpoint = await self._authority.token_endpoint()
        async with await self._client(key, endpoint) as oauth:
            return await fetch_issued(self.server, oauth, endpoint, key, **params)


def _header(connection: Connection) -> str:
    kind = "Bearer" if connection.token_type.lower() == "bearer" else connection.token_type
    return f"{kind} {connection.access_token}"


def _forget_expired() -> None:
    now = time.monotonic()
    for state in [state for state, pending in _PENDING.items() if pending.expires_at <= now]:
        del _PENDING[state]


async def callback(request: Request) -> Response:
    """The hub's `/oauth/callback`: where a person's browser brings the authorization code of a sign-in."""
    state = request.query_params.get("state", "")
    _forget_expired()
    pending = _PENDING.get(state)
    if pending is None:
        return page(400, "This sign-in link is not known, was already used, or has expired. Start again.")
    login = pending.login
    if not consent.bound(request, login.redirect_uri, pending.browser):
        # Not the browser that allowed it on the consent page: refused, and left for that browser to finish.
        logger.warning("server %r: a sign-in of %s came back in another browser", login.server, pending.principal)
        return page(400, "This browser did not allow this sign-in on the hub's consent page; nothing was kept.")
    del _PENDING[state]  # good once: a replayed state finds nothing
    error = request.query_params.get("error")
    if error is not None:
        detail = request.query_params.get("error_description", "")
        return page(400, f"{login.server}: the authorization server refused the sign-in: {error} {detail}".strip())
    code = request.query_params.get("code")
    if not code:
        return page(400, "The authorization server sent no code.")
    try:
        issuer = await login.issuer()
        returned = request.query_params.get("iss")
        if returned is not None and returned.rstrip("/") != issuer.rstrip("/"):  # RFC 9207: a mix-up
            return page(400, f"The code comes from {returned}, not from {issuer}; nothing was kept.")
        await login.complete(pending, code)
    except CredentialError as exc:
        logger.warning("server %r: the sign-in of %s failed: %s", login.server, pending.principal, exc.reason)
        return page(502, f"{login.server}: the sign-in could not be completed ({exc.reason}). Start again.")
    logger.info("server %r: %s signed in", login.server, pending.principal)
    if pending.notify is not None:
        try:
            await pending.notify.elicitation_complete(pending.elicitation_id)
        except Exception:  # boundary: a client gone since loses its notice, nothing else
            logger.debug("could not tell a client its sign-in is complete", exc_info=True)
    return page(200, f"You are signed in to {login.server}. Go back to your client and try again.")


def sign_in_routes(replica: str | None = None) -> list[BaseRoute]:
    """The hub's HTTP routes for people's sign-ins: the consent page (`/oauth/consent/ID`) and `/oauth/callback`.
    `replica`: with replicas (`[cluster]`), this replica's id, which the consent IDs and `state`s made from now on
    begin with (`consent.issue_as`), so that the others send a browser that brings one here."""
    consent.issue_as(replica)
    return [
        *consent.consent_routes(),
        Route(USER_CALLBACK_PATH, endpoint=callback, methods=["GET"]),
        Route(CLIENT_DOCUMENT_PATH, endpoint=client_document, methods=["GET"]),
    ]
