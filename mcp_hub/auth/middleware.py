"""`Credentials`: pure ASGI middleware in front of the MCP endpoint: who is calling, by API key or by
OAuth access token.

- `X-API-Key: KEY`, or `Authorization: Bearer KEY` matching a configured key: the key's name is the
  principal (constant-time comparison of every key; keys never logged).
- `Authorization: Bearer TOKEN` otherwise, with [auth.oauth]: the token is verified (verifier.py); its
  identity goes on the request (`IDENTITY_KEY`) and its principal, a `policy.Principal`, under
  `PRINCIPAL_KEY`. A token is read from that header only, never from the query string or the body.
- `Authorization: DPoP TOKEN` and one `DPoP` proof header: the token is verified, and must be bound to a key
  (`cnf.jkt`) the proof shows the client holds (dpop.py). A bound token sent as Bearer is refused, and with
  `dpop = "require"` so is any Bearer token.
- Nothing usable: 401; a valid token without a required scope: 403; each with the `WWW-Authenticate`
  challenge of metadata.py when OAuth is configured. An unreachable issuer: 503 (the token may be good).

Every authenticated request also carries the SDK's `AuthenticatedUser` (`scope["user"]`), naming the
principal, its issuer and its client: the SDK's session manager binds a session to the credential that
opened it and answers a request on it with another's as if the session did not exist (404).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.auth.identity import HTTP_PRINCIPAL, IDENTITY_KEY, PRINCIPAL_KEY, Identity
from mcp_hub.auth.metadata import challenge
from mcp_hub.auth.refusal import Refusal, Unavailable

if TYPE_CHECKING:
    from mcp_hub.auth.dpop import ProofChecker
    from mcp_hub.auth.verifier import TokenVerifier

logger = logging.getLogger("mcp_hub.auth")


def _dpop_checks() -> Any:
    """mcp_hub.auth.dpop, imported where a token is checked for its key (joserfc: only with [auth.oauth])."""
    from mcp_hub.auth import dpop

    return dpop


StepUp = Callable[[str, str, str, str], Sequence[str]]
"""(principal, method, kind, public name) -> the scopes the policy asks of a token for that item (a rule's `scopes`
that would let the principal use it; empty: none, or more would not help). A token without them is answered
403 insufficient_scope, naming them, so that its client asks for a token that has them (step-up)."""

API_KEY_CLIENT = "mcp-hub:api-key"
"""The client id of an API key's requests, for the SDK's session binding."""


class Credentials:
    """Pure ASGI middleware: the request's principal from its API key or access token, or a refusal."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_keys: Mapping[str, str] | None = None,
        verifier: TokenVerifier | None = None,
        step_up: StepUp | None = None,
        proofs: ProofChecker | None = None,
    ) -> None:
        self._app = app
        self._keys = [(name, key.encode()) for name, key in (api_keys or {}).items()]
        self._verifier = verifier
        self._proofs = proofs
        self._step_up = step_up

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        try:
            principal, user, identity = await self._authenticate(scope)
        except Refusal as refusal:
            await self._refuse(refusal, scope, receive, send)
            return
        except Unavailable as exc:
            logger.warning("an access token could not be checked: the authorization server is unavailable: %s", exc)
            body = {"error": "temporarily_unavailable", "message": "the authorization server cannot be reached"}
            await JSONResponse(body, status_code=503, headers={"Retry-After": "5"})(scope, receive, send)
            return
        if identity is not None and self._step_up is not None and scope.get("method") == "POST":
            target, receive = await _target_of(scope, receive)
            needed = self._step_up(principal, *target) if target is not None else ()
            missing = sorted(set(needed) - identity.scopes)
            if missing:
                held = (
                    (*self._verifier.settings.scopes_required, *sorted(identity.scopes), *needed)
                    if self._verifier
                    else needed
                )
                refusal = Refusal.insufficient_scope(missing, needed=tuple(dict.fromkeys(held)))
                if _dpop_checks().bound_key(identity.claims) is not None:
                    refusal.scheme = "DPoP"
                await self._refuse(refusal, scope, receive, send)
                return
        state = scope.setdefault("state", {})
        state[PRINCIPAL_KEY] = principal
        if identity is not None:
            state[IDENTITY_KEY] = identity
        scope["user"] = user
        scope["auth"] = AuthCredentials(sorted(identity.scopes) if identity is not None else [])
        token = HTTP_PRINCIPAL.set(principal)
        try:
            await self._app(scope, receive, send)
        finally:
            HTTP_PRINCIPAL.reset(token)

    async def _authenticate(self, scope: Scope) -> tuple[str, AuthenticatedUser, Identity | None]:
        api_key, scheme, credential, proofs = _presented(scope)
        if api_key is not None:
            name = self._key_name(api_key)
            if name is None:
                raise Refusal("the API key is not known", error=None)
            return name, _key_user(name), None
        if credential is None:
            raise Refusal(self._how_to_authenticate(), error=None)
        name = self._key_name(credential) if self._keys and scheme == "bearer" else None
        if name is not None:
            return name, _key_user(name), None
        if self._verifier is None:
            raise Refusal("the API key is not known", error=None)
        if scheme == "dpop":
            identity = await self._dpop(scope, credential, proofs)
        else:
            identity = await self._verifier.verify(credential)
            if _dpop_checks().bound_key(identity.claims) is not None:
                raise Refusal(
                    "the token is bound to a key (DPoP): present it as Authorization: DPoP TOKEN, with a proof",
                    scheme="DPoP",
                )
            if self._verifier.settings.dpop == "require":
                raise Refusal(
                    "this resource takes DPoP-bound tokens only: present one as Authorization: DPoP TOKEN with a proof",
                    scheme="DPoP",
                )
        return identity.principal, _token_user(identity, self._verifier.settings.resource), identity

    async def _dpop(self, scope: Scope, token: str, proofs: list[str]) -> Identity:
        """The identity of a DPoP-bound `token` whose proof (the one `DPoP` header) shows the client holds its key."""
        assert self._verifier is not None
        try:
            if self._proofs is None:
                raise Refusal("this resource takes no DPoP-bound tokens", scheme="DPoP")
            if len(proofs) != 1:
                raise _dpop_checks().proof_refusal("send one DPoP header, with the proof of the token's key")
            identity = await self._verifier.verify(token, scopes=False)
            bound = _dpop_checks().bound_key(identity.claims)
            if bound is None:
                raise Refusal("the token is bound to no key (it has no cnf.jkt): present it as Bearer", scheme="DPoP")
            await self._proofs.check(proofs[0], method=scope["method"], url=_url_of(scope), token=token, bound=bound)
            self._verifier.check_scopes(identity)
        except Refusal as refusal:
            refusal.scheme = "DPoP"
            raise
        return identity

    def _key_name(self, presented: str) -> str | None:
        given = presented.encode()
        found = None
        for name, key in self._keys:  # every key compared, so timing says nothing about which matched
            if hmac.compare_digest(given, key):
                found = name
        return found

    def _how_to_authenticate(self) -> str:
        ways = []
        if self._verifier is not None:
            dpop = self._verifier.settings.dpop
            ways.append(
                "a DPoP-bound access token: Authorization: DPoP TOKEN, with a DPoP proof"
                if dpop == "require"
                else "an access token: Authorization: Bearer TOKEN (or DPoP TOKEN, with a DPoP proof)"
            )
        if self._keys:
            ways.append("an API key: Authorization: Bearer KEY, or X-API-Key: KEY")
        return "send " + ", or ".join(ways)

    async def _refuse(self, refusal: Refusal, scope: Scope, receive: Receive, send: Send) -> None:
        if self._verifier is not None:
            headers = {"WWW-Authenticate": challenge(self._verifier.settings, refusal)}
        else:
            headers = {"WWW-Authenticate": 'Bearer realm="mcp-hub"'}
        body: dict[str, Any] = {"error": refusal.error or "unauthorized", "message": refusal.description}
        if refusal.error is not None:
            body["error_description"] = refusal.description
        await JSONResponse(body, status_code=refusal.status, headers=headers)(scope, receive, send)


def _presented(scope: Scope) -> tuple[str | None, str | None, str | None, list[str]]:
    """The request's `X-API-Key`; its `Authorization` scheme ("bearer" or "dpop") and credential; its `DPoP`
    headers. `Refusal` for a header sent twice, or an Authorization header of another scheme with no API key
    beside it."""
    api_key = authorization = None
    proofs: list[str] = []
    for key, value in scope["headers"]:
        if key == b"dpop":
            proofs.append(value.decode("latin-1").strip())
        elif key in (b"x-api-key", b"authorization"):
            if (api_key if key == b"x-api-key" else authorization) is not None:
                name = key.decode()
                raise Refusal(f"{name} is sent twice; send one", error="invalid_request", status=400)
            if key == b"x-api-key":
                api_key = value.decode("latin-1").strip()
            else:
                authorization = value.decode("latin-1").strip()
    scheme = credential = None
    if authorization is not None:
        given, _, rest = authorization.partition(" ")
        if given.lower() in ("bearer", "dpop") and rest.strip():
            scheme, credential = given.lower(), rest.strip()
        elif not api_key:
            raise Refusal("the Authorization header must be Bearer (or DPoP) and a credential", error=None)
    return api_key or None, scheme, credential, proofs


def _url_of(scope: Scope) -> str:
    """The URL the request was sent to, as its Host header and scheme say (no query)."""
    host = next((value.decode("latin-1") for key, value in scope["headers"] if key == b"host"), "")
    if not host and scope.get("server"):
        name, port = scope["server"]
        host = f"{name}:{port}"
    return f"{scope.get('scheme', 'http')}://{host}{scope.get('root_path', '')}{scope['path']}"


STEP_UP_BODY = 1024 * 1024
"""The largest request body read for the item it calls (larger ones are not checked here; the policy still is)."""

_NAMED_BY = {"tools/call": ("tool", "name"), "prompts/get": ("prompt", "name"), "resources/read": ("resource", "uri")}


async def _target_of(scope: Scope, receive: Receive) -> tuple[tuple[str, str, str] | None, Receive]:
    """(method, kind, public name) of the one request a POST carries, if it calls a tool, gets a prompt or reads a
    resource; and `receive`, to read the body again. From the `Mcp-Method`/`Mcp-Name` headers (2026-07-28), or
    else the JSON body (read whole, up to `STEP_UP_BODY`)."""
    headers = dict(scope["headers"])
    method = headers.get(b"mcp-method", b"").decode("latin-1").strip()
    name = headers.get(b"mcp-name", b"").decode("latin-1").strip()
    if method and name:
        named = _NAMED_BY.get(method)
        return ((method, named[0], name) if named is not None else None), receive
    length = headers.get(b"content-length", b"")
    if not length.isdigit() or int(length) > STEP_UP_BODY:
        return None, receive
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    try:
        request = json.loads(body)
    except ValueError:
        return None, replay
    if not isinstance(request, dict) or not isinstance(request.get("params"), dict):
        return None, replay
    named = _NAMED_BY.get(str(request.get("method")))
    value = request["params"].get(named[1]) if named is not None else None
    return ((str(request["method"]), named[0], value) if named and isinstance(value, str) else None), replay


def _key_user(name: str) -> AuthenticatedUser:
    return AuthenticatedUser(AccessToken(token="", client_id=API_KEY_CLIENT, scopes=[], subject=name))


def _token_user(identity: Identity, resource: str) -> AuthenticatedUser:
    """The SDK's user for an access token: for session binding, the principal as its subject, with its issuer
    and client."""
    token = AccessToken(
        token=identity.token,
        client_id=identity.client_id or "",
        scopes=sorted(identity.scopes),
        expires_at=int(identity.expires_at) if identity.expires_at is not None else None,
        resource=resource,
        subject=str(identity.principal),
        claims={"iss": identity.issuer},
    )
    return AuthenticatedUser(token)
