"""DPoP (RFC 9449, MCP's SEP-1932): the hub's tokens toward a server bound to a key the hub holds.

A mount whose authorization server issues DPoP-bound tokens gets a key pair of its own (`ProofKey`, made
when the mount's credential is, kept in memory only, never written anywhere). Each token request carries a
proof of that key (the `DPoP` header: a JWT, `typ` "dpop+jwt", the public key in its header, `htm` and
`htu` naming the request, a fresh `jti`, `iat`); the authorization server binds the token it issues to the
key (its `cnf.jkt`, token_type "DPoP"). Each request to the server then carries `Authorization: DPoP
TOKEN` and a fresh proof with `ath`, the token's hash, so a token copied off the wire is useless without
the key.

A server (authorization or resource) may ask for its own nonce in the proofs: it answers `use_dpop_nonce`
(a 400 from the token endpoint, a 401 from the server) with a `DPoP-Nonce` header. The nonce is kept per
origin, and the request is sent once more with a proof that carries it (`nonce_challenge`); a server may
hand a new nonce on any answer, which is kept too.

Whether a mount uses DPoP is its auth table's `dpop` (config.py `ServerAuth`): "auto" (the default) where
the authorization server's metadata lists `dpop_signing_alg_values_supported` with an algorithm the hub
signs with and the server takes DPoP too (its protected resource metadata lists the algorithms or requires
bound tokens, or its 401 challenges with the DPoP scheme: an authorization server that binds any client's
tokens says nothing of the server behind it), "always", or "never". A token endpoint that answers a proof
with a Bearer token (it does not bind) gets that token presented as Bearer.

`DPoPAuth` fits this to the SDK's OAuth client (`OAuthClientProvider`, login.py), which knows nothing of
DPoP: it wraps the provider's auth flow, adds the proof to each token request and each request the provider
authenticates, turns `Bearer` into `DPoP` for a bound token, and answers nonce challenges itself (the
provider would take the server's 401 for an expired login). It learns the authorization server's DPoP
algorithms from the metadata the provider fetches, and hands the provider the token endpoint's answer with
its token_type as "Bearer" (the SDK's token model takes no other; the binding is kept here). It learns
whether the server takes DPoP from its 401 and its protected resource metadata, passing by too.

The keys and signatures are joserfc's (the JOSE library of authlib's author; authlib.jose is deprecated in
its favour); nothing here signs or hashes by hand but `ath` (SHA-256, base64url, RFC 9449 section 4.2).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import httpx2

if TYPE_CHECKING:
    from joserfc.jwk import ECKey, RSAKey

SIGNING_ALGORITHMS = ("ES256", "PS256", "RS256")
"""The proof algorithms the hub signs with, in the order it prefers them (not EdDSA: joserfc deprecates the name,
RFC 9864, for "Ed25519", which authorization servers do not advertise yet)."""

NONCE_ERROR = "use_dpop_nonce"

_BOUND_TOKENS = 64
"""Bound access tokens remembered by `DPoPAuth` (the SDK's provider holds one at a time)."""


def htu_of(url: str) -> str:
    """The `htu` of a request to `url`: the URL without its query and fragment (RFC 9449 section 4.2)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def token_hash(access_token: str) -> str:
    """`ath`: the base64url SHA-256 of the access token (RFC 9449 section 4.2)."""
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def algorithm_for(advertised: Iterable[str] | None, setting: str) -> str | None:
    """The proof algorithm a mount uses, given the authorization server's `dpop_signing_alg_values_supported`
    (None: it lists none) and the mount's `dpop` setting; None: no DPoP."""
    if setting == "never":
        return None
    offered = [name for name in advertised or () if isinstance(name, str)]
    for name in SIGNING_ALGORITHMS:
        if name in offered:
            return name
    return SIGNING_ALGORITHMS[0] if setting == "always" else None


class ProofKey:
    """A key pair the hub proves possession of (RFC 9449), and the nonces servers asked it to put in proofs."""

    def __init__(self, algorithm: str = "ES256", private: Mapping[str, Any] | None = None) -> None:
        """A new key pair for `algorithm`, or the one `private` holds (a private JWK, as `private_jwk` gave it)."""
        if algorithm not in SIGNING_ALGORITHMS:
            raise ValueError(f"unsupported DPoP algorithm {algorithm!r}")
        self.algorithm = algorithm
        from joserfc.jwk import ECKey, JWKRegistry, RSAKey  # joserfc: only where a mount binds its tokens

        if private is not None:
            self._key: ECKey | RSAKey = JWKRegistry.import_key(dict(private))  # type: ignore[assignment]
        elif algorithm == "ES256":
            self._key = ECKey.generate_key("P-256")
        else:
            self._key = RSAKey.generate_key(2048)
        self._public = self._key.as_dict(private=False)
        self.thumbprint = self._key.thumbprint()
        """The key's JWK SHA-256 thumbprint (RFC 7638): what a bound token's `cnf.jkt` names."""
        self._nonces: dict[str, str] = {}
        """origin -> the last nonce a server there handed out."""

    def private_jwk(self) -> str:
        """The key pair, private part included, as JSON (for a person's connection, kept encrypted: its tokens
        outlive the process, and stay bound to this key)."""
        return json.dumps({"alg": self.algorithm, "jwk": self._key.as_dict(private=True)})

    @classmethod
    def from_private_jwk(cls, kept: str) -> ProofKey:
        """The key `private_jwk` gave."""
        found = json.loads(kept)
        return cls(found["alg"], found["jwk"])

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        """A fresh proof for a `method` request to `url` (with `ath` when it carries `access_token`)."""
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": htu_of(url),
            "iat": int(time.time()),
        }
        if access_token is not None:
            claims["ath"] = token_hash(access_token)
        nonce = self._nonces.get(origin_of(url))
        if nonce is not None:
            claims["nonce"] = nonce
        header = {"typ": "dpop+jwt", "alg": self.algorithm, "jwk": self._public}
        from joserfc import jwt

        return jwt.encode(header, claims, self._key, algorithms=[self.algorithm])

    def learn(self, url: str, headers: Mapping[str, str]) -> str | None:
        """Keep the `DPoP-Nonce` an answer from `url` carries; the nonce, if it carries one."""
        nonce = headers.get("dpop-nonce")
        if nonce:
            self._nonces[origin_of(url)] = nonce
        return nonce or None

    def nonce_challenge(self, url: str, status: int, headers: Mapping[str, str], body: bytes = b"") -> bool:
        """Whether an answer from `url` asks for a proof with its nonce (`use_dpop_nonce`, RFC 9449 sections 8
        and 9) and hands one: then the request is worth sending once more. The nonce is kept either way."""
        nonce = self.learn(url, headers)
        if nonce is None:
            return False
        if status == 401:
            return NONCE_ERROR in headers.get("www-authenticate", "")
        if status == 400:
            try:
                answer = json.loads(body)
            except ValueError:
                return False
            return isinstance(answer, dict) and answer.get("error") == NONCE_ERROR
        return False


def nonce_hooks(key: ProofKey | None, endpoint: str) -> dict[str, Any]:
    """authlib's client settings for token requests to `endpoint` proving `key`: keep the nonces its answers hand
    out (an authorization server's `use_dpop_nonce` error says nothing of its headers)."""
    if key is None:
        return {}

    async def learn(response: httpx2.Response) -> None:
        key.learn(endpoint, response.headers)

    return {"event_hooks": {"response": [learn]}}


class DPoPAuth(httpx2.Auth):
    """The SDK's OAuth client's flow (`inner`) with DPoP added (see the module docstring). `setting`: the mount's
    `dpop`; the key is made once the authorization server's algorithms are known (or at once, with "always")."""

    requires_response_body = True

    def __init__(self, inner: httpx2.Auth, setting: str) -> None:
        self._inner = inner
        self._setting = setting
        self.key: ProofKey | None = ProofKey() if setting == "always" else None
        self._offered: Any = None
        """The authorization server's `dpop_signing_alg_values_supported`, once its metadata passed by."""
        self._server_takes_dpop = False
        self._bound: OrderedDict[str, None] = OrderedDict()
        """Access tokens issued bound to the key (by their hash)."""

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = self._inner.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                self._prove(outgoing)
                response = yield outgoing
                body = await response.aread() if response.status_code == 400 else b""
                if self.key is not None and self.key.nonce_challenge(
                    str(outgoing.url), response.status_code, response.headers, body
                ):
                    self._prove(outgoing)  # once more, with the nonce
                    response = yield outgoing
                response = await self._seen(outgoing, response)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()  # type: ignore[attr-defined]

    def _prove(self, request: httpx2.Request) -> None:
        key = self.key
        if key is None:
            return
        if _is_token_request(request):
            request.headers["DPoP"] = key.proof(request.method, str(request.url))
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() in ("bearer", "dpop") and token and _hash(token) in self._bound:
            request.headers["Authorization"] = f"DPoP {token}"
            request.headers["DPoP"] = key.proof(request.method, str(request.url), token)

    async def _seen(self, request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
        """What the inner flow is handed for `response`: the same, but a bound token's answer as Bearer. The
        authorization server's metadata, passing by, says whether to use DPoP."""
        challenge = response.headers.get("www-authenticate", "") if response.status_code == 401 else ""
        if _DPOP_CHALLENGE.search(challenge) and not _is_token_request(request):
            self._server_takes_dpop = True  # the server challenges with the DPoP scheme
            self._decide()
        if request.method == "GET" and response.status_code == 200:
            if _is_metadata(request.url.path):
                self._learn_metadata(await response.aread())
            elif _is_resource_metadata(request.url.path):
                self._learn_resource_metadata(await response.aread())
            return response
        if not (_is_token_request(request) and response.status_code == 200):
            return response
        try:
            issued = json.loads(await response.aread())
        except ValueError:
            return response
        if not isinstance(issued, dict) or str(issued.get("token_type", "")).lower() != "dpop":
            return response
        token = issued.get("access_token")
        if isinstance(token, str):
            self._bound[_hash(token)] = None
            while len(self._bound) > _BOUND_TOKENS:
                self._bound.popitem(last=False)
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _BODY_HEADERS]
        return httpx2.Response(
            response.status_code,
            headers=headers,
            content=json.dumps({**issued, "token_type": "Bearer"}).encode(),
            request=request,
        )

    def _learn_metadata(self, body: bytes) -> None:
        metadata = _json_object(body)
        if metadata is not None and isinstance(metadata.get("token_endpoint"), str):
            self._offered = metadata.get("dpop_signing_alg_values_supported")
            self._decide()

    def _learn_resource_metadata(self, body: bytes) -> None:
        document = _json_object(body)
        if document is not None and (
            document.get("dpop_signing_alg_values_supported") or document.get("dpop_bound_access_tokens_required")
        ):
            self._server_takes_dpop = True
            self._decide()

    def _decide(self) -> None:
        """With "auto": a key once the authorization server offers DPoP and the server takes it (see
        `Authority.server_takes_dpop`: its metadata says so, or its 401 challenges with the DPoP scheme)."""
        if self.key is None and self._server_takes_dpop and self._offered:
            algorithm = algorithm_for(self._offered, self._setting)
            if algorithm is not None:
                self.key = ProofKey(algorithm)


_BODY_HEADERS = {"content-length", "content-encoding", "transfer-encoding"}


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


_DPOP_CHALLENGE = re.compile(r"(?:^|,)\s*dpop(?:\s|,|$)", re.IGNORECASE)


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _is_resource_metadata(path: str) -> bool:
    return "/.well-known/oauth-protected-resource" in path


def _is_metadata(path: str) -> bool:
    return "/.well-known/oauth-authorization-server" in path or "/.well-known/openid-configuration" in path


def _is_token_request(request: httpx2.Request) -> bool:
    """A POST of a form with a `grant_type`: a token request (RFC 6749 section 3.2)."""
    if request.method != "POST" or "application/x-www-form-urlencoded" not in request.headers.get("content-type", ""):
        return False
    try:
        form = parse_qs(request.content.decode("ascii"))
    except (UnicodeDecodeError, httpx2.RequestNotRead):
        return False
    return "grant_type" in form


class Binding:
    """DPoP for a credential that asks the token endpoint itself (client credentials, token exchange): the key,
    made at the first token request once the authorization server's metadata says which algorithm (or at once,
    with "always"); the headers of a request carrying a token; the nonce retry."""

    def __init__(self, setting: str, server_url: str) -> None:
        self.setting = setting
        self._server_url = server_url
        self.key: ProofKey | None = ProofKey() if setting == "always" else None
        self._decided = setting != "auto"

    def decide(self, metadata: Mapping[str, Any] | None) -> ProofKey | None:
        """The key token requests prove, given the authorization server's metadata (None: not discovered)."""
        if not self._decided:
            self._decided = True
            algorithm = algorithm_for((metadata or {}).get("dpop_signing_alg_values_supported"), self.setting)
            if algorithm is not None:
                self.key = ProofKey(algorithm)
        return self.key

    def client_settings(self, endpoint: str) -> dict[str, Any]:
        """authlib's client settings for token requests to `endpoint` (`nonce_hooks`)."""
        return nonce_hooks(self.key, endpoint)

    def headers(self, token_type: str, access_token: str, header: str, method: str, url: str) -> dict[str, str]:
        """The headers of a `method` request to `url` carrying the token (`header`: its Authorization value)."""
        return bound_headers(self.key, token_type, access_token, header, method, url)

    def nonce_retry(self, answer: Mapping[str, str]) -> bool:
        """The server answered 401 with `answer`'s headers: whether it asked for a nonce (send once more)."""
        return self.key is not None and self.key.nonce_challenge(self._server_url, 401, answer)


def bound_headers(
    key: ProofKey | None, token_type: str, access_token: str, header: str, method: str, url: str
) -> dict[str, str]:
    """The headers of a `method` request to `url` carrying a token (`header`: its Authorization value as issued):
    with a DPoP token and its key, `Authorization: DPoP` and a fresh proof."""
    if key is None or token_type.lower() != "dpop":
        return {"authorization": header}
    return {"authorization": f"DPoP {access_token}", "dpop": key.proof(method, url, access_token)}


class KeyRing:
    """The DPoP keys of people's connections (`Connection.dpop_key`, kept encrypted in the token file), each
    loaded once, so that it keeps the nonces servers hand it."""

    def __init__(self, server_url: str) -> None:
        self._server_url = server_url
        self._keys: dict[str, ProofKey] = {}

    def of(self, kept: str | None) -> ProofKey | None:
        """The key `kept` (`ProofKey.private_jwk`); None: the connection's tokens are bearer tokens."""
        if kept is None:
            return None
        key = self._keys.get(kept)
        if key is None:
            key = self._keys[kept] = ProofKey.from_private_jwk(kept)
        return key

    def nonce_retry(self, sent: Mapping[str, str], answer: Mapping[str, str]) -> bool:
        """The server answered 401 (`answer`: its headers) to a request with a proof: whether it asked for its
        nonce (then the request is sent once more, with a proof that carries it)."""
        return "dpop" in sent and any(key.nonce_challenge(self._server_url, 401, answer) for key in self._keys.values())


def new_key_for(metadata: Mapping[str, Any] | None, setting: str) -> ProofKey | None:
    """A new key for a person's connection, given the authorization server's metadata and the mount's `dpop`."""
    algorithm = algorithm_for((metadata or {}).get("dpop_signing_alg_values_supported"), setting)
    return ProofKey(algorithm) if algorithm is not None else None
