"""Single sign-on to the console: administrators sign in through the organisation's identity provider.

With `[admin.oidc]`, the sign-in page offers "Sign in with ..." beside the admin keys (which stay, for
break-glass use). The console is an OpenID Connect relying party, with authlib's OAuth client:

1. `/admin/sso/start`: the identity provider's metadata is read at its issuer (OpenID Connect discovery or
   RFC 8414; a document for another issuer is refused), and the browser is sent to its authorization endpoint
   with the authorization code flow, PKCE (S256), a `state` and a `nonce`. What the callback needs (the PKCE
   verifier, the nonce, the redirect URI) is kept on the server under the SHA-256 of the state, for
   `PENDING_SECONDS`, in memory or in Redis with `[cluster]` (the callback may reach another replica), and is
   bound to the browser by a cookie of its own (HttpOnly, SameSite=Lax so that it comes back with the
   identity provider's redirect, its path the callback's).
   Sign-ins begun count against the address's login attempts (throttle.py).
2. `/admin/sso/callback`: the state is taken (good once, whatever the replica), must have been begun in this
   browser, and the answer must come from the configured issuer (RFC 9207's `iss`, when given). The code is
   traded for tokens with the verifier, and the ID token is checked: its signature against the issuer's keys
   (its JWKS; public-key algorithms only), `iss`, `aud` (the console's client id; `azp` when there are
   several), `exp` and `iat` with the configured leeway, `nonce`, and `at_hash` when present (authlib's
   `CodeIDToken`). Claims the ID token leaves out are read from the userinfo endpoint (whose `sub` must be the
   ID token's).
3. A person whose `admin_claim` holds one of `admin_values` is an administrator: the console's own session
   begins (sessions.py), named by their email (unless the provider says it is not verified; else their
   preferred username, name or subject), and keeping
   their issuer, subject, name and email for the audit log; it lasts `session_hours`, ends at sign-out,
   and ends at once when the `[admin.oidc]` settings that admitted them change. Anyone else is refused with a
   page that says why. Both are audit lines (`admin/sign-in`, "allowed" or "refused").

Every refusal (an unknown, used or expired state, another browser, an error from the identity provider, a
token that fails a check) is a page that says what happened and offers to start again; nothing is kept.

4. Signing out of the console ends the session, and, where the identity provider's metadata offers an
   `end_session_endpoint` (OpenID Connect RP-Initiated Logout 1.0), sends the browser there to end the person's
   session at the provider too, with their ID token as `id_token_hint` and the console's sign-in page as
   `post_logout_redirect_uri` (registered there); `provider_sign_out = false` keeps the provider's session.

5. A person's word is taken for `recheck_minutes` (10): the first request after that asks the identity provider
   again (`held`), with what it issued at sign-in, kept sealed with the session (sessions.py): the refresh token,
   where it gave one, renewed (its new ID token checked as at sign-in, but for the nonce, and naming the same
   subject), then the userinfo endpoint asked with the access token. The session goes on, vouched for anew, if
   `admin_claim` still holds one of `admin_values`; else it ends, and so it does when the provider refuses the
   renewal (the person was disabled, their grant revoked), when the access token is no longer taken, when the
   provider cannot be reached, and when it gave no refresh token and has no userinfo endpoint: an audit line
   (`admin/sign-in`, "refused") says why. One request of a replica asks; the others wait for its answer.

So a person removed from the administrators' group keeps the console for `recheck_minutes` at most; the whole
session lasts `[admin] session_hours` at most, however often it is vouched for.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import anyio
import httpx2
from authlib.oidc.core import CodeIDToken
from cachetools import TTLCache
from joserfc import jwt
from joserfc.errors import ExpiredTokenError, InvalidClaimError, JoseError, MissingClaimError
from joserfc.jws import extract_compact
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mcp_hub.admin import pages
from mcp_hub.admin.sessions import COOKIE, Session, Sessions, address_of, store
from mcp_hub.admin.throttle import LoginThrottle
from mcp_hub.auth.discovery import fetch_json, issuer_metadata
from mcp_hub.auth.jwks import KeySet
from mcp_hub.auth.refusal import Refusal, Unavailable
from mcp_hub.auth.verifier import claim_at
from mcp_hub.cluster import Cluster
from mcp_hub.config import ADMIN_SSO_CALLBACK, AdminOidc
from mcp_hub.credentials.authority import oauth_client
from mcp_hub.credentials.client_credentials import fetch_issued
from mcp_hub.credentials.credential import CredentialError
from mcp_hub.observe.audit_log import Administrator
from mcp_hub.tls import verifying

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import AsyncOAuth2Client

logger = logging.getLogger("mcp_hub.admin")

PENDING_SECONDS = 600
"""How long a sign-in begun waits for the identity provider's answer."""
BINDING_COOKIE = "mcp_hub_admin_sso"
"""The cookie that binds a sign-in under way to the browser that began it."""
METADATA_SECONDS = 300.0
"""How long the identity provider's metadata is kept before it is read again."""
START = "/sso/start"
_TOKENS = "\0tokens"
"""Where `_signed_in` puts the tokens issued beside the claims (a name no claim has)."""


def fingerprint(settings: AdminOidc) -> str:
    """What a person's session keeps of the settings that made them an administrator: it ends when they change."""
    what = [settings.issuer, settings.client_id, settings.admin_claim, *sorted(settings.admin_values)]
    return hashlib.sha256(b"mcp-hub admin sso\0" + "\0".join(what).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Person:
    """Who the identity provider says signed in."""

    issuer: str
    subject: str
    name: str | None
    email: str | None
    username: str | None

    @classmethod
    def of(cls, claims: Mapping[str, Any]) -> Person:
        def text(name: str) -> str | None:
            value = claims.get(name)
            return value if isinstance(value, str) and value else None

        email = text("email") if claims.get("email_verified") is not False else None  # an unverified one: anyone's
        return cls(str(claims["iss"]), str(claims["sub"]), text("name"), email, text("preferred_username"))

    @property
    def label(self) -> str:
        """The console's name for them (and the audit log's `admin:NAME`)."""
        return self.email or self.username or self.name or self.subject

    @property
    def described(self) -> str | None:
        """Their name and email as the identity provider gave them: "Alice Admin <alice@example.com>"."""
        if self.name and self.email:
            return f"{self.name} <{self.email}>"
        return self.name or self.email

    def administrator(self) -> Administrator:
        return Administrator(self.label, issuer=self.issuer, subject=self.subject, person=self.described)


class Refused(Exception):
    """The sign-in cannot go on: what the page says, and its status code."""

    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


def is_administrator(claims: Mapping[str, Any], settings: AdminOidc) -> bool:
    """Whether `claims` hold one of the administrators' values in `admin_claim` (a list: contains one)."""
    value = claim_at(claims, settings.admin_claim)
    held = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return any(isinstance(each, str) and each in settings.admin_values for each in held)


async def id_token_claims(
    id_token: str,
    keys: KeySet,
    settings: AdminOidc,
    *,
    issuer: str,
    nonce: str | None,
    access_token: str | None,
    now: Callable[[], int] | None = None,
) -> dict[str, Any]:
    """The claims of an ID token once every check passes (see the module docstring); `Refused` naming the first
    that fails, `Unavailable` when the issuer's keys cannot be had."""
    if id_token.count(".") != 2:
        raise Refused("The identity provider's ID token is not a signed JWT; nothing was kept.")
    try:
        kid = extract_compact(id_token.encode()).headers().get("kid")
    except (JoseError, ValueError):
        raise Refused("The identity provider's ID token cannot be read; nothing was kept.") from None
    try:
        key = await keys.key(kid if isinstance(kid, str) else None)
        token = jwt.decode(id_token, key, algorithms=list(settings.algorithms))
    except Refusal as exc:
        raise Refused(f"The identity provider's ID token cannot be checked: {exc}; nothing was kept.") from None
    except (JoseError, ValueError) as exc:
        raise Refused(
            f"The identity provider's ID token does not verify ({type(exc).__name__}: its signature or algorithm); "
            "nothing was kept."
        ) from None
    options: dict[str, Any] = {
        "iss": {"essential": True, "value": issuer},
        "aud": {"essential": True, "value": settings.client_id},
        "exp": {"essential": True},
    }
    params = {"nonce": nonce, "client_id": settings.client_id, "access_token": access_token}
    claims = CodeIDToken(token.claims, token.header, options, params)
    try:
        claims.validate(now=now() if now is not None else None, leeway=settings.leeway)
    except ExpiredTokenError:
        raise Refused("The identity provider's ID token has expired; start again.") from None
    except (MissingClaimError, InvalidClaimError) as exc:
        claim = getattr(exc, "claim", "?")
        what = {
            "iss": f"was not issued by {issuer}",
            "aud": f"is not for this console (its audience does not name {settings.client_id})",
            "nonce": "does not answer this sign-in (its nonce is missing or another's)",
        }.get(claim, f"has a missing or invalid {claim!r} claim")
        raise Refused(f"The identity provider's ID token {what}; nothing was kept.") from None
    except JoseError as exc:
        raise Refused(f"The identity provider's ID token fails a check ({exc}); nothing was kept.") from None
    return dict(claims)


Render = Callable[[Request, str, str, int], Response]
"""A page of the console with no session: (request, title, body HTML, status code)."""


class SingleSignOn:
    """The console's `/sso/start` and `/sso/callback` (see the module docstring). `settings()`: the
    `[admin.oidc]` in force (None: single sign-on is off); `audit(administrator, outcome, reason, address)` writes an
    audit line (`address`: the browser's)."""

    def __init__(
        self,
        settings: Callable[[], AdminOidc | None],
        sessions: Sessions,
        render: Render,
        audit: Callable[[Administrator, str, str, str | None], None],
        throttle: LoginThrottle,
        cluster: Cluster | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._sessions = sessions
        self._render = render
        self._audit = audit
        self._throttle = throttle
        self._pending = store(cluster, clock, "admin-sso")
        self._clock = clock
        self._checking: dict[str, anyio.Lock] = {}
        """The sessions being asked about again (by their record's name): one request asks, the others wait."""
        self._metadata: TTLCache[str, Mapping[str, Any]] = TTLCache(maxsize=4, ttl=METADATA_SECONDS)

    def routes(self) -> list[Route]:
        return [
            Route(START, self._start, methods=["GET"]),
            Route(ADMIN_SSO_CALLBACK, self._callback, methods=["GET"]),
        ]

    # -- start -----------------------------------------------------------------------------------------

    async def _start(self, request: Request) -> Response:
        settings = self._settings()
        if settings is None:
            return self._refusal(request, "Single sign-on is not set up for this console.", 404)
        wait = await self._throttle.sign_in(_client(request))
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            logger.warning("admin console: too many sign-ins begun from %s; held back %d s", _client(request), seconds)
            response = self._refusal(request, f"Too many sign-in attempts; try again in {seconds} s.", 429)
            response.headers["Retry-After"] = str(seconds)
            return response
        try:
            metadata = await self._issuer_metadata(settings)
            endpoint = _endpoint(metadata, "authorization_endpoint", settings)
        except Refused as exc:
            return self._refusal(request, exc.message, exc.status_code)
        state, nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48)
        here = f"{request.url.scheme}://{request.url.netloc}{_base(request)}{ADMIN_SSO_CALLBACK}"
        redirect_uri = settings.redirect_uri or here  # the console's own callback, as this browser reaches it
        browser = request.cookies.get(BINDING_COOKIE, "")
        if not 32 <= len(browser) <= 64:
            browser = secrets.token_urlsafe(32)
        record = {"v": verifier, "n": nonce, "b": _digest(browser), "r": redirect_uri}
        await self._pending.put(_digest(state), json.dumps(record).encode(), PENDING_SECONDS)
        async with self._client(settings, redirect_uri) as oauth:
            url, _ = oauth.create_authorization_url(endpoint, state=state, code_verifier=verifier, nonce=nonce)
        response = RedirectResponse(url, status_code=303)
        response.set_cookie(
            BINDING_COOKIE,
            browser,
            max_age=PENDING_SECONDS,
            path=f"{_base(request)}{ADMIN_SSO_CALLBACK}",
            httponly=True,
            samesite="lax",  # it must come back with the identity provider's redirect, a cross-site navigation
            secure=request.url.scheme == "https",
        )
        return response

    # -- callback --------------------------------------------------------------------------------------

    async def _callback(self, request: Request) -> Response:
        settings = self._settings()
        if settings is None:
            return self._refusal(request, "Single sign-on is not set up for this console.", 404)
        try:
            person, claims = await self._signed_in(request, settings)
        except Refused as exc:
            logger.warning("admin console: a single sign-on from %s was refused: %s", _client(request), exc.message)
            return self._refusal(request, exc.message, exc.status_code)
        who = person.administrator()
        if not is_administrator(claims, settings):
            logger.warning("admin console: %s (%s) signed in but is not an administrator", who.name, person.subject)
            self._audit(
                who,
                "refused",
                f"{who} signed in at the identity provider but is not an administrator: their "
                f"{settings.admin_claim!r} holds none of {list(settings.admin_values)}",
                address_of(request),
            )
            body = pages.not_an_administrator(_base(request), person.label, settings.admin_claim)
            return self._render(request, "Not an administrator", body, 403)
        cookie = await self._sessions.begin_signed_in(
            who.name,
            issuer=person.issuer,
            subject=person.subject,
            person=person.described,
            sso=fingerprint(settings),
            tokens=claims[_TOKENS],
        )
        logger.info("admin console: %s signed in through %s from %s", who.name, person.issuer, _client(request))
        self._audit(
            who, "allowed", f"{who} signed in to the admin console through the identity provider", address_of(request)
        )
        response = self._render(request, "Signed in", pages.signed_in(_base(request), person.label), 200)
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=self._sessions.lifetime,
            path=_base(request) or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        response.delete_cookie(BINDING_COOKIE, path=f"{_base(request)}{ADMIN_SSO_CALLBACK}")
        return response

    async def _signed_in(self, request: Request, settings: AdminOidc) -> tuple[Person, dict[str, Any]]:
        """The person the callback's code proves, and their claims; `Refused` saying why not."""
        query = request.query_params
        found = await self._pending.take(_digest(query.get("state", "")))
        if found is None:
            raise Refused(
                "This sign-in is not known, was already used, or has expired (a sign-in waits "
                f"{PENDING_SECONDS // 60} minutes). Start again."
            )
        pending = json.loads(found)
        if not hmac.compare_digest(_digest(request.cookies.get(BINDING_COOKIE, "")), pending["b"]):
            raise Refused("This sign-in was begun in another browser; nothing was kept. Start again here.")
        if "error" in query:
            detail = query.get("error_description", "")
            raise Refused(f"The identity provider refused the sign-in: {query['error']} {detail}".strip() + ".")
        metadata = await self._issuer_metadata(settings)
        issuer = str(metadata["issuer"])
        returned = query.get("iss")
        if returned is not None and returned.rstrip("/") != issuer.rstrip("/"):  # RFC 9207: a mix-up
            raise Refused(f"The answer comes from {returned}, not from {issuer}; nothing was kept.")
        code = query.get("code")
        if not code:
            raise Refused("The identity provider sent no code.")
        token_endpoint = _endpoint(metadata, "token_endpoint", settings)
        async with self._client(settings, pending["r"]) as oauth:
            try:
                issued = await fetch_issued(
                    "the console's identity provider",
                    oauth,
                    token_endpoint,
                    grant_type="authorization_code",
                    code=code,
                    redirect_uri=pending["r"],
                    code_verifier=pending["v"],
                )
            except CredentialError as exc:
                raise Refused(f"The sign-in could not be completed: {exc.reason}. Start again.", 502) from None
        id_token = issued.get("id_token")
        if not isinstance(id_token, str):
            raise Refused(
                "The identity provider answered no ID token: is the console's client an OpenID Connect client, and "
                '"openid" among [admin.oidc] scopes?',
                502,
            )
        access_token = issued.get("access_token")
        async with httpx2.AsyncClient(verify=verifying(), follow_redirects=False) as http:
            jwks_uri = _endpoint(metadata, "jwks_uri", settings)

            async def where() -> str:
                return jwks_uri

            keys = KeySet(http, where, refetch_interval=1.0, max_age=60.0)
            try:
                claims = await id_token_claims(
                    id_token, keys, settings, issuer=issuer, nonce=pending["n"], access_token=access_token
                )
                userinfo = metadata.get("userinfo_endpoint")
                if isinstance(userinfo, str) and isinstance(access_token, str):
                    claims = await _with_userinfo(http, userinfo, access_token, claims)
            except Unavailable as exc:
                raise Refused(f"The identity provider cannot be reached: {exc}. Start again.", 502) from None
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise Refused("The identity provider's ID token names no subject; nothing was kept.")
        kept = {name: issued[name] for name in ("id_token", "access_token", "refresh_token") if _text(issued.get(name))}
        return Person.of(claims), {**claims, _TOKENS: kept}

    # -- asking again ---------------------------------------------------------------------------------

    async def held(self, session: Session, address: str | None = None) -> Session | None:
        """`session`, once the identity provider has said again that the person is an administrator, when it last
        said so more than `recheck_minutes` ago; None, the session ended, when it does not (see the module
        docstring, step 5). A key's session, and one checked lately, as it is."""
        settings = self._settings()
        if session.issuer is None or settings is None or not self._due(session, settings):
            return session
        async with self._checking.setdefault(session.name, anyio.Lock()):
            try:
                current = await self._sessions.again(session)  # asked again by the request this one waited for?
                if current is None or not self._due(current, settings):
                    return current
                try:
                    tokens = await self._ask_again(current, settings)
                except Refused as exc:
                    await self._sessions.end(current)
                    who = current.who
                    logger.warning("admin console: the session of %s ended: %s", who.name, exc.message)
                    self._audit(who, "refused", f"the console session of {who} ended: {exc.message}", address)
                    return None
                return await self._sessions.checked_again(current, tokens)
            finally:
                self._checking.pop(session.name, None)

    def _due(self, session: Session, settings: AdminOidc) -> bool:
        return session.checked is None or self._clock() - session.checked >= settings.recheck_minutes * 60

    async def _ask_again(self, session: Session, settings: AdminOidc) -> dict[str, str]:
        """The tokens with which the identity provider says again that the person of `session` is an
        administrator: renewed with the refresh token (a new ID token checked), then the userinfo endpoint asked
        with the access token; `Refused` saying why not."""
        metadata = await self._issuer_metadata(settings)
        tokens = dict(session.tokens)
        claims: dict[str, Any] = {"sub": session.subject}
        async with httpx2.AsyncClient(verify=verifying(), follow_redirects=False) as http:
            if "refresh_token" in tokens:
                async with self._client(settings, "") as oauth:
                    try:
                        issued = await fetch_issued(
                            "the console's identity provider",
                            oauth,
                            _endpoint(metadata, "token_endpoint", settings),
                            grant_type="refresh_token",
                            refresh_token=tokens["refresh_token"],
                        )
                    except CredentialError as exc:
                        raise Refused(f"the identity provider did not renew the sign-in ({exc.reason})") from None
                tokens |= {k: issued[k] for k in ("id_token", "access_token", "refresh_token") if _text(issued.get(k))}
                if _text(issued.get("id_token")):
                    claims = await self._renewed_claims(http, metadata, settings, issued, session)
            userinfo = metadata.get("userinfo_endpoint")
            if isinstance(userinfo, str) and "access_token" in tokens:
                try:
                    claims = await _with_userinfo(http, userinfo, tokens["access_token"], claims)
                except Unavailable as exc:
                    raise Refused(f"its userinfo endpoint did not answer for them ({exc})") from None
            elif "refresh_token" not in tokens:
                raise Refused(
                    "the identity provider gave the console no refresh token and has no userinfo endpoint to ask "
                    "again whether they are an administrator"
                )
        if not is_administrator(claims, settings):
            raise Refused(
                f"they are no longer an administrator: their {settings.admin_claim!r} holds none of "
                f"{list(settings.admin_values)}"
            )
        return tokens

    async def _renewed_claims(
        self,
        http: httpx2.AsyncClient,
        metadata: Mapping[str, Any],
        settings: AdminOidc,
        issued: Mapping[str, Any],
        session: Session,
    ) -> dict[str, Any]:
        jwks_uri = _endpoint(metadata, "jwks_uri", settings)

        async def where() -> str:
            return jwks_uri

        keys = KeySet(http, where, refetch_interval=1.0, max_age=60.0)
        try:
            claims = await id_token_claims(
                str(issued["id_token"]),
                keys,
                settings,
                issuer=str(metadata["issuer"]),
                nonce=None,
                access_token=issued.get("access_token"),
            )
        except Unavailable as exc:
            raise Refused(f"the identity provider's keys cannot be had ({exc})") from None
        if claims.get("sub") != session.subject:
            raise Refused("the identity provider's renewed ID token names another person")
        return claims

    # -- sign-out --------------------------------------------------------------------------------------

    async def sign_out_url(self, request: Request, session: Session) -> str | None:
        """Where to send the browser of a person signing out of the console, to sign them out of the identity
        provider too (OpenID Connect RP-Initiated Logout 1.0): its `end_session_endpoint`, with their ID token as
        `id_token_hint`, the console's client id, and the console's sign-in page as `post_logout_redirect_uri`.
        None: not a single sign-on session, `provider_sign_out` is off, or the provider offers no such endpoint
        (or cannot be reached; the console's session has ended all the same)."""
        settings = self._settings()
        if session.issuer is None or settings is None or not settings.provider_sign_out:
            return None
        try:
            metadata = await self._issuer_metadata(settings)
        except Refused as exc:
            logger.warning("admin console: %s is signed out of the console only: %s", session.admin, exc.message)
            return None
        endpoint = metadata.get("end_session_endpoint")
        if not isinstance(endpoint, str) or urlsplit(endpoint).scheme not in ("https", "http"):
            return None
        back = settings.post_logout_redirect_uri or f"{request.url.scheme}://{request.url.netloc}{_base(request)}/login"
        params = {"client_id": settings.client_id, "post_logout_redirect_uri": back}
        if session.id_token is not None:
            params["id_token_hint"] = session.id_token
        return f"{endpoint}{'&' if urlsplit(endpoint).query else '?'}{urlencode(params)}"

    # -- helpers ---------------------------------------------------------------------------------------

    async def _issuer_metadata(self, settings: AdminOidc) -> Mapping[str, Any]:
        found = self._metadata.get(settings.issuer)
        if found is None:
            try:
                async with httpx2.AsyncClient(verify=verifying(), follow_redirects=False) as http:
                    found = await issuer_metadata(http, settings.issuer)
            except Unavailable as exc:
                raise Refused(f"The identity provider cannot be reached: {exc}.", 502) from None
            self._metadata[settings.issuer] = found
        return found

    def _client(self, settings: AdminOidc, redirect_uri: str) -> AsyncOAuth2Client:
        method = settings.token_endpoint_auth_method or ("client_secret_basic" if settings.client_secret else "none")
        return oauth_client(
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            token_endpoint_auth_method=method,
            scope=" ".join(settings.scopes),
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
        )

    def _refusal(self, request: Request, message: str, status_code: int) -> Response:
        return self._render(request, "Sign-in refused", pages.sso_refused(_base(request), message), status_code)


async def _with_userinfo(
    http: httpx2.AsyncClient, endpoint: str, access_token: str, claims: dict[str, Any]
) -> dict[str, Any]:
    """`claims` with those of the userinfo answer the ID token left out (OpenID Connect Core 5.3: its `sub`
    must be the ID token's, or none of it is used)."""
    info = await fetch_json(
        http, "GET", endpoint, headers={"Authorization": f"Bearer {access_token}", "Accept": "application/json"}
    )
    if not isinstance(info, dict) or info.get("sub") != claims.get("sub"):
        raise Refused("The identity provider's userinfo answer is not about the person its ID token names.", 502)
    return {**info, **claims}


async def probe(settings: AdminOidc) -> str:
    """Read the identity provider's metadata and keys as a sign-in would (for `mcp-hub check --connect`): what was
    found. Raises `Unavailable` naming what could not be had."""
    async with httpx2.AsyncClient(verify=verifying(), follow_redirects=False) as http:
        metadata = await issuer_metadata(http, settings.issuer)
        try:
            for name in ("authorization_endpoint", "token_endpoint"):
                _endpoint(metadata, name, settings)
            jwks_uri = _endpoint(metadata, "jwks_uri", settings)
        except Refused as exc:
            raise Unavailable(exc.message) from None

        async def where() -> str:
            return jwks_uri

        keys = await KeySet(http, where, refetch_interval=1.0, max_age=60.0).load()
    if keys == 0:
        raise Unavailable(f"{jwks_uri} holds no public signing key the console can check ID tokens with")
    userinfo = "a userinfo endpoint" if isinstance(metadata.get("userinfo_endpoint"), str) else "no userinfo endpoint"
    return f"identity provider metadata ok; {keys} signing key(s) at {jwks_uri}; {userinfo}"


def _endpoint(metadata: Mapping[str, Any], name: str, settings: AdminOidc) -> str:
    found = metadata.get(name)
    if not isinstance(found, str) or urlsplit(found).scheme not in ("https", "http"):
        raise Refused(f"The metadata of {settings.issuer} names no {name}; check [admin.oidc] issuer.", 502)
    return found


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _client(request: Request) -> str:
    return request.client.host if request.client else "?"
