"""A small OAuth authorization server for the tests, served for real (see `tests.conftest.serve_app`).

It publishes its metadata (RFC 8414) at `/.well-known/oauth-authorization-server` and
issues opaque tokens at `/token` for two grants: client credentials (RFC 6749 4.4),
to a registered client whose secret it checks (HTTP Basic or in the body), and token
exchange (RFC 8693), of a subject token it issued, for one whose audience is the
`resource`/`audience` asked for. It registers any client (RFC 7591) and shows a login page
at its authorization endpoint, which it never approves by itself: a person (a test's HTTP client,
as a browser would) posts the form with their user name, and is sent back to the client's
redirect URI with a code, which the client trades, with its PKCE verifier, for an access token
and a refresh token (authorization code grant, RFC 6749 4.1, RFC 7636); refresh tokens are
rotated on use. It revokes tokens (RFC 7009) at `/revoke`, for the client they were issued to, and
answers 200 for a token it does not know (`revocation = False`: no such endpoint, none in its metadata).
It also takes both parts of enterprise-managed authorization (SEP-990): as the organisation's identity provider,
it exchanges a subject token it issued for an ID-JAG (`requested_token_type`
`urn:ietf:params:oauth:token-type:id-jag`: a JWT, `typ` `oauth-id-jag+jwt`, signed with its own EC key, for the
`audience` and `resource` asked, naming `jag_client_id` as the client at that authorization server); as a server's
authorization server, it takes the JWT bearer grant (RFC 7523) with an ID-JAG its `trusts` identity provider
signed, for it (`aud`), naming the authenticated client, and issues a token for the ID-JAG's resource and subject.
It keeps every token it issued and every token and revocation
request it was sent, so a test can check what a client asked for, and it can revoke a
token or refuse every request.

With `dpop`, it advertises DPoP (RFC 9449, `dpop_signing_alg_values_supported`) and binds the
token it issues for a token request that carries a DPoP proof to the proof's key (token_type
"DPoP"); with `dpop_nonce` too, it answers a proof without that nonce `use_dpop_nonce`, and so does
`guarded`. Proofs are checked here with joserfc (`proof_key`), independently of the hub's own checks.

`guarded` wraps an MCP server's ASGI app: it records the headers of every request
and answers 401 (with `WWW-Authenticate: Bearer`) to one whose bearer token this
server did not issue, has revoked, or issued for another resource, and to a bound
token without a good proof of its key; it publishes the
server's protected resource metadata (RFC 9728), naming this authorization server.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, JWKRegistry
from joserfc.jws import extract_compact, validate_compact
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


@dataclass
class Issued:
    client_id: str
    audience: str | None
    expires_at: float
    subject: str | None = None
    """The subject token's owner, for an exchanged token."""
    jkt: str | None = None
    """The thumbprint of the key the token is bound to (DPoP); None: a bearer token."""


def _b64url_sha256(value: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(value.encode()).digest()).rstrip(b"=").decode()


def proof_key(proof: str | None, method: str, url: str, token: str | None, nonce: str | None) -> str:
    """The thumbprint of the key a DPoP proof shows, for a `method` request to `url` (carrying `token`, with the
    server's `nonce`); `ValueError` saying what is wrong ("use_dpop_nonce": the nonce is missing)."""
    if not proof:
        raise ValueError("no DPoP proof")
    try:
        signed = extract_compact(proof.encode())
        key = JWKRegistry.import_key(signed.protected["jwk"])
        if signed.protected.get("typ") != "dpop+jwt" or key.is_private:
            raise ValueError("not a DPoP proof")
        if not validate_compact(signed, key, algorithms=[signed.protected["alg"]]):
            raise ValueError("bad signature")
    except (JoseError, KeyError) as exc:
        raise ValueError(f"unreadable proof: {exc}") from None
    claims = json.loads(signed.payload or b"")
    target = urlsplit(url)
    if claims.get("htm") != method or claims.get("htu") != f"{target.scheme}://{target.netloc}{target.path}":
        raise ValueError("htm or htu")
    if abs(time.time() - claims.get("iat", 0)) > 60 or not claims.get("jti"):
        raise ValueError("iat or jti")
    if token is not None and claims.get("ath") != _b64url_sha256(token):
        raise ValueError("ath")
    if nonce is not None and claims.get("nonce") != nonce:
        raise ValueError("use_dpop_nonce")
    return key.thumbprint()


@dataclass
class AuthorizationServer:
    clients: dict[str, str]
    """client_id -> client_secret."""
    expires_in: int = 3600
    issuer: str = ""
    """Set once served: its base URL."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every token request: its form fields and the client it authenticated as."""
    tokens: dict[str, Issued] = field(default_factory=dict)
    revoked: set[str] = field(default_factory=set)
    refuse_all: bool = False
    """Answer every token request with `invalid_client`."""
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    """Authorization code -> what it was issued for (client, redirect URI, PKCE challenge, user, resource)."""
    refresh_tokens: dict[str, Issued] = field(default_factory=dict)
    revocation: bool = True
    """Serve `/revoke` and publish it in the metadata."""
    revocations: list[dict[str, Any]] = field(default_factory=list)
    """Every revocation request: its form fields, the client it authenticated as, and the status answered."""
    key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256", parameters={"kid": "idp-1"}))
    """What it signs ID-JAGs with."""
    jag_client_id: str = "the-hub"
    """As an identity provider: the client an ID-JAG names (the hub's client at the server's authorization server)."""
    id_jags: list[dict[str, Any]] = field(default_factory=list)
    """As an identity provider: the claims of every ID-JAG it issued."""
    trusts: AuthorizationServer | None = None
    """As a server's authorization server: the identity provider whose ID-JAGs it takes."""
    dpop: bool = False
    """Advertise DPoP and bind a token to the key of the proof its request carries."""
    dpop_nonce: str | None = None
    """The nonce a DPoP proof must carry, here and at `guarded` servers (None: none)."""
    proofs: list[str] = field(default_factory=list)
    """Every DPoP proof a token request or a guarded server received."""

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", self._metadata),
                Route("/token", self._token, methods=["POST"]),
                Route("/register", self._register, methods=["POST"]),
                Route("/authorize", self._authorize, methods=["GET", "POST"]),
                *([Route("/revoke", self._revoke, methods=["POST"])] if self.revocation else []),
            ]
        )

    def subject_token(self, who: str, audience: str = "the-hub") -> str:
        """A token this server issued to `who` (as a hub's client would hold), to exchange."""
        token = secrets.token_urlsafe(24)
        self.tokens[token] = Issued("a-client-app", audience, time.time() + 3600, subject=who)
        return token

    def valid(self, token: str, resource: str) -> bool:
        issued = self.tokens.get(token)
        return (
            issued is not None
            and token not in self.revoked
            and issued.expires_at > time.time()
            and issued.audience == resource
        )

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.issuer,
                "token_endpoint": f"{self.issuer}/token",
                "authorization_endpoint": f"{self.issuer}/authorize",
                "registration_endpoint": f"{self.issuer}/register",
                "code_challenge_methods_supported": ["S256"],
                "grant_types_supported": [
                    "client_credentials",
                    EXCHANGE,
                    "authorization_code",
                    "refresh_token",
                ],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                **({"revocation_endpoint": f"{self.issuer}/revoke"} if self.revocation else {}),
                **({"dpop_signing_alg_values_supported": ["ES256"]} if self.dpop else {}),
            }
        )

    async def _register(self, request: Request) -> Response:
        """Dynamic registration (RFC 7591): any client is registered, as a public client."""
        metadata = await request.json()
        client_id = f"registered-{len(self.clients)}"
        self.clients[client_id] = ""
        return JSONResponse({**metadata, "client_id": client_id, "token_endpoint_auth_method": "none"}, 201)

    async def _authorize(self, request: Request) -> Response:
        """The login page a person fills in (GET): this server never approves by itself. The form posted
        (POST, the query as it was) signs the person in and sends them back to the client with a code."""
        if request.method == "GET":
            return HTMLResponse("<form method=post><input name=user><input name=password type=password></form>")
        query = request.query_params
        user = str((await request.form()).get("user", ""))
        redirect_uri = query.get("redirect_uri", "")
        if (
            not user
            or query.get("client_id") not in self.clients
            or query.get("response_type") != "code"
            or query.get("code_challenge_method") != "S256"
            or not query.get("code_challenge")
            or not redirect_uri
        ):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(24)
        self.codes[code] = {
            "client_id": query["client_id"],
            "redirect_uri": redirect_uri,
            "challenge": query["code_challenge"],
            "user": user,
            "resource": query.get("resource", ""),
        }
        back = urlencode({"code": code, "state": query.get("state", ""), "iss": self.issuer})
        return RedirectResponse(f"{redirect_uri}?{back}", status_code=302)

    def _issue(
        self, client_id: str, audience: str | None, subject: str | None, refresh: bool, jkt: str | None = None
    ) -> Response:
        token = secrets.token_urlsafe(24)
        self.tokens[token] = Issued(client_id, audience, time.time() + self.expires_in, subject, jkt)
        kind = "DPoP" if jkt else "Bearer"
        answer: dict[str, Any] = {"access_token": token, "token_type": kind, "expires_in": self.expires_in}
        if refresh:
            answer["refresh_token"] = secrets.token_urlsafe(24)
            issued = Issued(client_id, audience, time.time() + 86400, subject, jkt)
            self.refresh_tokens[answer["refresh_token"]] = issued
        return JSONResponse(answer, headers={"cache-control": "no-store"})

    def _code_grant(self, client_id: str, form: dict[str, Any], jkt: str | None) -> Response:
        issued = self.codes.pop(str(form.get("code")), None)  # good once
        verifier = str(form.get("code_verifier", ""))
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if (
            issued is None
            or issued["client_id"] != client_id
            or issued["redirect_uri"] != form.get("redirect_uri")
            or not secrets.compare_digest(issued["challenge"], challenge)
        ):
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return self._issue(client_id, issued["resource"] or None, issued["user"], refresh=True, jkt=jkt)

    def _refresh_grant(self, client_id: str, form: dict[str, Any], jkt: str | None) -> Response:
        issued = self.refresh_tokens.pop(str(form.get("refresh_token")), None)  # rotated: good once
        if issued is None or issued.client_id != client_id or issued.jkt != jkt:  # a bound one: by the same key
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return self._issue(client_id, issued.audience, issued.subject, refresh=True, jkt=jkt)

    async def _token(self, request: Request) -> Response:
        form = dict(await request.form())
        client_id = self._authenticated(request, form)
        self.requests.append({**form, "authenticated_as": client_id})
        if client_id is None or self.refuse_all:
            return JSONResponse({"error": "invalid_client", "error_description": "bad client secret"}, status_code=401)
        jkt = None
        if self.dpop and "dpop" in request.headers:
            self.proofs.append(request.headers["dpop"])
            try:
                jkt = proof_key(request.headers["dpop"], "POST", f"{self.issuer}/token", None, self.dpop_nonce)
            except ValueError as exc:
                if str(exc) == "use_dpop_nonce":
                    nonce = {"dpop-nonce": str(self.dpop_nonce)}
                    return JSONResponse({"error": "use_dpop_nonce"}, status_code=400, headers=nonce)
                return JSONResponse({"error": "invalid_dpop_proof", "error_description": str(exc)}, status_code=400)
        if form.get("grant_type") == "authorization_code":
            return self._code_grant(client_id, form, jkt)
        if form.get("grant_type") == "refresh_token":
            return self._refresh_grant(client_id, form, jkt)
        audience = str(form.get("audience") or form.get("resource") or "") or None
        subject = None
        if form.get("grant_type") == EXCHANGE:
            exchanged = self.tokens.get(str(form.get("subject_token")))
            if exchanged is None or exchanged.subject is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            subject = exchanged.subject
            if form.get("requested_token_type") == ID_JAG:
                return self._id_jag(form, subject)
        elif form.get("grant_type") == JWT_BEARER:
            return self._jwt_bearer(client_id, form, jkt)
        elif form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        token = secrets.token_urlsafe(24)
        self.tokens[token] = Issued(client_id, audience, time.time() + self.expires_in, subject, jkt)
        return JSONResponse(
            {"access_token": token, "token_type": "DPoP" if jkt else "Bearer", "expires_in": self.expires_in},
            headers={"cache-control": "no-store"},
        )

    def _id_jag(self, form: dict[str, Any], subject: str) -> Response:
        """As an identity provider: an ID-JAG for `subject`, for the authorization server `audience`."""
        audience, resource = form.get("audience"), form.get("resource")
        if not audience or not resource:
            return JSONResponse({"error": "invalid_request", "error_description": "audience and resource"}, 400)
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience,
            "client_id": self.jag_client_id,
            "resource": resource,
            "jti": secrets.token_urlsafe(12),
            "iat": now,
            "exp": now + 300,
        }
        self.id_jags.append(claims)
        grant = jwt.encode({"alg": "ES256", "typ": "oauth-id-jag+jwt"}, claims, self.key, algorithms=["ES256"])
        answer = {"access_token": grant, "issued_token_type": ID_JAG, "token_type": "N_A", "expires_in": 300}
        return JSONResponse(answer, headers={"cache-control": "no-store"})

    def _jwt_bearer(self, client_id: str, form: dict[str, Any], jkt: str | None = None) -> Response:
        """As a server's authorization server: a token for the subject and resource of an ID-JAG from `trusts`."""
        if self.trusts is None:
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        try:
            grant = jwt.decode(str(form.get("assertion", "")), self.trusts.key, algorithms=["ES256"])
        except (JoseError, ValueError):
            return JSONResponse({"error": "invalid_grant", "error_description": "not a signed ID-JAG"}, 400)
        claims = grant.claims
        if (
            grant.header.get("typ") != "oauth-id-jag+jwt"
            or claims.get("iss") != self.trusts.issuer
            or claims.get("aud") != self.issuer
            or claims.get("client_id") != client_id
            or not isinstance(claims.get("exp"), int)
            or claims["exp"] < time.time()
        ):
            return JSONResponse({"error": "invalid_grant", "error_description": "not an ID-JAG for this client"}, 400)
        return self._issue(client_id, claims.get("resource"), claims.get("sub"), refresh=False, jkt=jkt)

    async def _revoke(self, request: Request) -> Response:
        """RFC 7009: the client authenticates; a token issued to it is revoked (an access token is refused from
        then on, a refresh token is good for nothing); a token it does not know is answered 200 all the same; a
        token issued to another client is refused."""
        form = dict(await request.form())
        client_id = self._authenticated(request, form)
        token = str(form.get("token", ""))
        record = {**form, "authenticated_as": client_id}
        self.revocations.append(record)
        if client_id is None or self.refuse_all:
            record["status"] = 401
            return JSONResponse({"error": "invalid_client", "error_description": "bad client secret"}, status_code=401)
        if not token:
            record["status"] = 400
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        issued = self.tokens.get(token) or self.refresh_tokens.get(token)
        if issued is not None and issued.client_id != client_id:
            record["status"] = 400
            return JSONResponse({"error": "unauthorized_client"}, status_code=400)
        if issued is not None:
            self.revoked.add(token)
            self.refresh_tokens.pop(token, None)
        record["status"] = 200
        return Response(status_code=200)

    def _authenticated(self, request: Request, form: dict[str, Any]) -> str | None:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
        else:
            client_id, secret = str(form.get("client_id", "")), str(form.get("client_secret", ""))
        if client_id in self.clients and secrets.compare_digest(self.clients[client_id], secret):
            return client_id
        return None


def guarded(
    app: Any,
    server: AuthorizationServer,
    resource: str,
    seen: list[dict[str, str]],
    *,
    public: bool = False,
    says_dpop: bool | None = None,
) -> Any:
    """`app` behind a bearer token check (tokens `server` issued for `resource`), recording every request's headers.

    `public`: a request with no `Authorization` at all passes too (a server whose listing anyone may read).
    `says_dpop`: its protected resource metadata lists DPoP algorithms (default: when `server` binds tokens)."""
    says = server.dpop if says_dpop is None else says_dpop

    async def guard(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if scope["path"].startswith("/.well-known/oauth-protected-resource"):
            document: dict[str, Any] = {"resource": resource, "authorization_servers": [server.issuer]}
            if says:
                document["dpop_signing_alg_values_supported"] = ["ES256"]
            await JSONResponse(document)(scope, receive, send)
            return
        seen.append(headers)
        if public and "authorization" not in headers:
            await app(scope, receive, send)
            return
        kind, _, token = headers.get("authorization", "").partition(" ")
        issued = server.tokens.get(token)
        bound = issued.jkt if issued is not None else None
        if kind.lower() != ("dpop" if bound else "bearer") or not server.valid(token, resource):
            response = Response(status_code=401, headers={"www-authenticate": 'Bearer error="invalid_token"'})
            await response(scope, receive, send)
            return
        if bound:
            server.proofs.append(headers.get("dpop", ""))
            try:
                shown = proof_key(headers.get("dpop"), scope["method"], resource, token, server.dpop_nonce)
            except ValueError as exc:
                error = "use_dpop_nonce" if str(exc) == "use_dpop_nonce" else "invalid_dpop_proof"
                challenge = {"www-authenticate": f'DPoP error="{error}"', "dpop-nonce": str(server.dpop_nonce)}
                await Response(status_code=401, headers=challenge)(scope, receive, send)
                return
            if shown != bound:
                await Response(status_code=401, headers={"www-authenticate": "DPoP"})(scope, receive, send)
                return
        await app(scope, receive, send)

    return guard


def recording(app: Any, seen: list[dict[str, str]]) -> Any:
    """`app`, recording the headers of every HTTP request it receives."""

    async def record(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append({key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]})
        await app(scope, receive, send)

    return record
