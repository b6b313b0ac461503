"""A JWT access token checked, with joserfc: signature, algorithm, issuer, audience, times.

- The algorithm is the header's, and must be in the configured allow-list, which holds public-key
  algorithms only (config.py): `none` and HMAC are refused before any key is looked at, and the
  key must be of the algorithm's type (an RSA key never verifies an HS256 signature).
- The key is the issuer's, by the header's `kid` (jwks.py).
- `iss` must be the issuer; `aud` must name the hub's canonical resource URI (RFC 8707, compared
  as URIs: a trailing slash aside); `exp` is required; `exp`, `nbf` and `iat` are checked with
  the configured leeway.

A client sends the same token with every request until it expires, and checking its signature is
most of what a request's authentication costs (an RS256 signature about 80 us, ES256 about 150).
A token that passed is kept, by its SHA-256, with the key that verified it, until its `exp` (plus
the leeway) passes; it is taken again without a second check only while that very key is still
the issuer's key for its id (`KeySet.key`, which fetches the set again when it is due). So a kept
token is taken exactly when checking it again would take it: nothing about a token but the time
and the issuer's keys can change whether it passes. Refused tokens are not kept.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from cachetools import TLRUCache
from joserfc.errors import (
    BadSignatureError,
    ClaimError,
    DecodeError,
    ExpiredTokenError,
    JoseError,
)
from joserfc.jwk import Key
from joserfc.jws import extract_compact, validate_compact
from joserfc.jwt import JWTClaimsRegistry

from mcp_hub.auth.jwks import KeySet
from mcp_hub.auth.refusal import Refusal

VERIFIED_ENTRIES = 10_000
"""How many verified tokens are kept (the least recently used go first)."""


def looks_like_jwt(token: str) -> bool:
    """Whether `token` is a JWS in compact form (three base64url parts, a JSON header with an `alg`)."""
    return token.count(".") == 2 and _header(token) is not None


def _header(token: str) -> Mapping[str, Any] | None:
    head = token.split(".", 1)[0]
    try:
        header = json.loads(binascii.a2b_base64(head.replace("-", "+").replace("_", "/") + "=" * (-len(head) % 4)))
    except (ValueError, binascii.Error):
        return None
    return header if isinstance(header, dict) and isinstance(header.get("alg"), str) else None


def same_resource(a: str, b: str) -> bool:
    """Whether two resource URIs name the same resource: equal, a trailing slash aside."""
    return a.rstrip("/") == b.rstrip("/")


class JwtVerifier:
    """Checks JWT access tokens issued by `issuer` for `resource`."""

    def __init__(
        self,
        keys: KeySet,
        *,
        issuer: str,
        resource: str,
        algorithms: Collection[str],
        leeway: int,
        now: Callable[[], int] | None = None,
    ) -> None:
        self._keys = keys
        self._issuer = issuer
        self._resource = resource
        self._algorithms = frozenset(algorithms)
        self._leeway = leeway
        self._claims = JWTClaimsRegistry(
            now=now, leeway=leeway, iss={"essential": True, "value": issuer}, exp={"essential": True}
        )
        clock: Callable[[], float] = now if now is not None else time.time
        self._verified: TLRUCache[bytes, tuple[float, str | None, Key, dict[str, Any]]] = TLRUCache(
            maxsize=VERIFIED_ENTRIES, ttu=lambda _digest, kept, _now: kept[0], timer=clock
        )
        """Tokens that passed, by SHA-256: until when (their `exp` plus the leeway), their key id, the key
        that verified them, their claims."""
        self.signature_checks = 0
        """How many signatures were checked (for the tests)."""

    async def claims(self, token: str) -> dict[str, Any]:
        """The token's claims once every check passes; `Refusal` naming the first that fails."""
        digest = hashlib.sha256(token.encode()).digest()
        kept = self._verified.get(digest)
        if kept is not None:
            _, kid, verified_by, claims = kept
            if await self._keys.key(kid) is verified_by:  # the issuer's key for that id still: taken as before
                return dict(claims)
        header = _header(token)
        if header is None:
            raise Refusal("the token is not a JWT")
        algorithm = header["alg"]
        if algorithm not in self._algorithms:
            raise Refusal(f"the token is signed with {algorithm!r}, which this resource does not accept")
        if "crit" in header:
            raise Refusal("the token has critical header parameters this resource does not understand")
        kid = header.get("kid")
        kid = kid if isinstance(kid, str) else None
        key = await self._keys.key(kid)
        self.signature_checks += 1
        try:
            signed = extract_compact(token.encode())
            if not validate_compact(signed, key, algorithms=[algorithm]):
                raise Refusal("the token's signature does not verify")
            payload = json.loads(signed.payload or b"")
        except BadSignatureError:
            raise Refusal("the token's signature does not verify") from None
        except (JoseError, ValueError) as exc:
            raise Refusal(f"the token cannot be read as a signed JWT ({type(exc).__name__})") from None
        if not isinstance(payload, dict):
            raise Refusal("the token's payload is not a JSON object")
        self._check_claims(payload)
        expires = payload["exp"]  # required, and checked as a time by now
        if isinstance(expires, int | float) and not isinstance(expires, bool):
            self._verified[digest] = (expires + self._leeway, kid, key, payload)
        return dict(payload)

    def _check_claims(self, claims: dict[str, Any]) -> None:
        try:
            self._claims.validate(claims)
        except ExpiredTokenError:
            raise Refusal("the token has expired") from None
        except ClaimError as exc:
            name = exc.claim
            if name == "iss":
                raise Refusal(f"the token was not issued by {self._issuer}") from None
            if name == "nbf":
                raise Refusal("the token is not valid yet (nbf)") from None
            raise Refusal(f"the token's {name!r} claim is missing or invalid") from None
        except DecodeError:
            raise Refusal("the token's claims cannot be read") from None
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if not any(isinstance(each, str) and same_resource(each, self._resource) for each in audiences):
            raise Refusal(f"the token is not for this resource ({self._resource}): its audience does not name it")
