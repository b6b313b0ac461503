"""DPoP proofs checked (RFC 9449): a client that presents `Authorization: DPoP TOKEN` proves it holds the key
the token is bound to.

The proof is the request's one `DPoP` header, a JWT the client signed with that key, and is taken only when
(RFC 9449 section 4.3):

- its header says `typ` "dpop+jwt", an `alg` of the configured `dpop_algorithms` (public-key ones only,
  config.py) and a `jwk` that is a public key (no private part), and the signature verifies with that key;
- its `htm` is the request's method and its `htu` the request's URL, or the hub's configured resource when
  the request is for the resource's path (behind a proxy that ends TLS, the hub sees http:// and another
  host), both without query and fragment;
- its `iat` is within `dpop_proof_age` seconds before now (and no more than `leeway` after);
- its `ath` is the hash of the token presented with it;
- its `jti` was not presented before within that window: proofs are remembered by key and `jti` for as long
  as they would be taken (a TTL cache of this process, or Redis with `[cluster]`, so a proof replayed to
  another replica is refused too).

Then the token's `cnf.jkt` (a JWT's claim, or the introspection answer's, RFC 9449 section 6) must be the
proof key's SHA-256 thumbprint (RFC 7638); middleware.py refuses a bound token presented as Bearer.

A refused proof is answered 401 `invalid_dpop_proof` with a `DPoP` challenge naming the algorithms taken
(section 7.1). The hub hands out no nonces of its own (section 9 makes them optional): `jti` replay and the
`iat` window bound a proof's use. Keys and signatures are joserfc's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any
from urllib.parse import urlsplit

from cachetools import LRUCache, TTLCache
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry
from joserfc.jws import JWSRegistry, extract_compact, validate_compact

from mcp_hub.auth.refusal import Refusal

PROOF_ERROR = "invalid_dpop_proof"
REPLAY_ENTRIES = 100_000
"""Proofs remembered at once by a hub without [cluster] (the oldest go first past that)."""
KEY_ENTRIES = 4096
"""Clients' proof keys kept imported, with their thumbprints (a client proves the same key with each request)."""


class _ProofRegistry(JWSRegistry):
    """joserfc's JWS rules, with room for the public key a proof's header carries (an RSA key's `n` alone
    outgrows joserfc's default 512 bytes of header)."""

    max_header_length = 4096


Claim = Callable[[str, float], Awaitable[bool]]
"""`claim(key, seconds)`: whether `key` is claimed for the first time, for `seconds` (cluster.py `Cluster.claim`)."""


def token_hash(access_token: str) -> str:
    """`ath`: the base64url SHA-256 of the access token (RFC 9449 section 4.2)."""
    digest = hashlib.sha256(access_token.encode("ascii", "replace")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def bound_key(claims: dict[str, Any]) -> str | None:
    """The thumbprint a token's claims bind it to (`cnf.jkt`); None: the token is bound to no key."""
    confirmation = claims.get("cnf")
    if isinstance(confirmation, dict) and isinstance(confirmation.get("jkt"), str):
        return str(confirmation["jkt"])
    return None


def _normalized(url: str) -> tuple[str, str, str] | None:
    parts = urlsplit(url)
    if parts.query or parts.fragment or not parts.scheme or not parts.netloc:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return scheme, f"{host}:{port}", parts.path or "/"


def proof_refusal(description: str) -> Refusal:
    return Refusal(description, error=PROOF_ERROR, scheme="DPoP")


class ProofChecker:
    """Checks DPoP proofs (see the module docstring). `claim`: the cluster's, to remember `jti`s in Redis."""

    def __init__(
        self,
        *,
        algorithms: Collection[str],
        max_age: int,
        leeway: int,
        resource: str,
        claim: Claim | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.algorithms = tuple(algorithms)
        self._max_age = max_age
        self._leeway = leeway
        self._resource = _normalized(resource)
        self._claim = claim
        self._clock = clock
        self._seen: TTLCache[str, bool] = TTLCache(REPLAY_ENTRIES, ttl=max_age + 2 * leeway, timer=time.monotonic)
        self._keys: LRUCache[str, tuple[Any, str]] = LRUCache(KEY_ENTRIES)
        """A proof's `jwk` (as JSON) -> the public key it imports as, and its thumbprint."""
        self._registries = {name: _ProofRegistry(algorithms=[name]) for name in self.algorithms}
        self._reading = _ProofRegistry()

    async def check(self, proof: str, *, method: str, url: str, token: str, bound: str) -> None:
        """Whether `proof` shows, for a `method` request to `url` carrying `token`, the key whose thumbprint is
        `bound` (the token's `cnf.jkt`); `Refusal` (401) naming the first check that fails. A proof that passes
        is used up."""
        try:
            signed = extract_compact(proof.encode("ascii"), registry=self._reading)
        except (JoseError, ValueError, UnicodeEncodeError):
            raise proof_refusal("the DPoP proof is not a JWT") from None
        header = signed.protected
        if header.get("typ") != "dpop+jwt":
            raise proof_refusal('the DPoP proof\'s typ must be "dpop+jwt"')
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            raise proof_refusal(f"the DPoP proof is signed with {algorithm!r}; use one of {', '.join(self.algorithms)}")
        jwk = header.get("jwk")
        if not isinstance(jwk, dict):
            raise proof_refusal("the DPoP proof's header has no jwk, the public key it is signed with")
        if "d" in jwk:
            raise proof_refusal("the DPoP proof's jwk holds a private key; send the public key only")
        key, thumbprint = self._imported(jwk)
        try:
            verified = validate_compact(signed, key, registry=self._registries[algorithm])
        except (JoseError, ValueError):
            verified = False
        if not verified:
            raise proof_refusal("the DPoP proof's signature does not verify with its jwk")
        try:
            claims = json.loads(signed.payload or b"")
        except ValueError:
            claims = None
        if not isinstance(claims, dict):
            raise proof_refusal("the DPoP proof's claims are not a JSON object")
        self._check_claims(claims, method, url, token)
        if thumbprint != bound:
            raise Refusal("the DPoP proof's key is not the key the token is bound to (its cnf.jkt)", scheme="DPoP")
        await self._first_use(f"{thumbprint}:{claims['jti']}")

    def _imported(self, jwk: dict[str, Any]) -> tuple[Any, str]:
        """The public key a proof's `jwk` is, and its thumbprint (RFC 7638); `Refusal` if it is no public key."""
        text = json.dumps(jwk, sort_keys=True)
        found = self._keys.get(text)
        if found is None:
            try:
                key = JWKRegistry.import_key(jwk)
            except (JoseError, ValueError, TypeError):
                raise proof_refusal("the DPoP proof's jwk is not a key") from None
            if key.is_private:
                raise proof_refusal("the DPoP proof's jwk holds a private key; send the public key only")
            found = self._keys[text] = (key, key.thumbprint())
        return found

    def _check_claims(self, claims: dict[str, Any], method: str, url: str, access_token: str) -> None:
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti or len(jti) > 256:
            raise proof_refusal("the DPoP proof has no jti")
        if claims.get("htm") != method:
            raise proof_refusal(f"the DPoP proof's htm is not this request's method ({method})")
        htu = claims.get("htu")
        target = _normalized(htu) if isinstance(htu, str) else None
        if target is None or not (target == _normalized(url) or self._is_resource(target, url)):
            raise proof_refusal("the DPoP proof's htu is not this request's URL")
        issued = claims.get("iat")
        if not isinstance(issued, int | float) or isinstance(issued, bool):
            raise proof_refusal("the DPoP proof has no iat")
        now = self._clock()
        if issued > now + self._leeway or issued < now - self._max_age - self._leeway:
            raise proof_refusal("the DPoP proof's iat is too old or in the future: make a fresh proof for each request")
        if claims.get("ath") != token_hash(access_token):
            raise proof_refusal("the DPoP proof's ath is not the hash of the access token presented with it")

    def _is_resource(self, target: tuple[str, str, str], url: str) -> bool:
        """`htu` names the configured resource, and the request is for the resource's path."""
        requested = _normalized(url)
        return (
            self._resource is not None
            and requested is not None
            and target == self._resource
            and requested[2] == self._resource[2]
        )

    async def _first_use(self, used: str) -> None:
        key = "dpop:" + hashlib.sha256(used.encode()).hexdigest()
        ttl = float(self._max_age + 2 * self._leeway)
        if self._claim is not None:
            first = await self._claim(key, ttl)
        else:
            first = key not in self._seen
            self._seen[key] = True
        if not first:
            raise proof_refusal("the DPoP proof was presented before: make a fresh proof (a new jti) for each request")
