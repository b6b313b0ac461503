"""One access token -> the caller's `Identity`: a JWT checked against the issuer's keys, any other token
through introspection; then the claims read for the principal, its scopes, groups and client.

The issuer's metadata is fetched once, when first needed (for its `jwks_uri` when none is configured);
after that, a JWT is checked without a network round trip while its key is known.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import httpx2

from mcp_hub.auth.discovery import issuer_metadata
from mcp_hub.auth.identity import Identity
from mcp_hub.auth.introspection import Introspection
from mcp_hub.auth.jwks import KeySet
from mcp_hub.auth.jwt import JwtVerifier, looks_like_jwt
from mcp_hub.auth.refusal import Refusal, Unavailable
from mcp_hub.config import OAuthSettings
from mcp_hub.policy.principal import Principal
from mcp_hub.tls import verifying

_MISSING = object()


def claim_at(claims: Mapping[str, Any], name: str) -> Any:
    """The claim `name`; when there is none and the name has dots, the nested claim it spells
    (`realm_access.roles`). None when absent."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def scopes_in(claims: Mapping[str, Any]) -> frozenset[str]:
    """The token's scopes: `scope` (RFC 9068, RFC 7662: space-separated) or `scp` (a string or a list)."""
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, list):
            return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


def _strings(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset((value,))
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


def identity_from_claims(settings: OAuthSettings, claims: Mapping[str, Any], token: str = "") -> Identity:
    """The caller a token's claims describe (checked claims: the signature or the issuer vouched for them)."""
    name = claim_at(claims, settings.principal_claim)
    if isinstance(name, int) and not isinstance(name, bool):
        name = str(name)
    if not isinstance(name, str) or not name:
        raise Refusal(f"the token has no {settings.principal_claim!r} claim, which names the caller here")
    scopes = scopes_in(claims)
    subject = claims.get("sub") if isinstance(claims.get("sub"), str) else None
    client = claims.get("client_id", claims.get("azp"))
    client_id = client if isinstance(client, str) else None
    issuer = claims.get("iss") if isinstance(claims.get("iss"), str) else settings.issuer
    principal = Principal(
        name,
        scopes=scopes,
        groups=_strings(claim_at(claims, settings.groups_claim)),
        issuer=issuer,
        subject=subject,
        client_id=client_id,
    )
    expires = claims.get("exp")
    expires_at = float(expires) if isinstance(expires, int | float) and not isinstance(expires, bool) else None
    return Identity(principal, issuer, subject, client_id, scopes, dict(claims), token, expires_at)


class TokenVerifier:
    """Access tokens issued by the configured issuer for the hub, to identities."""

    def __init__(self, settings: OAuthSettings, client: httpx2.AsyncClient) -> None:
        self.settings = settings
        self._client = client
        self._metadata: Mapping[str, Any] | None = None
        self._metadata_lock = anyio.Lock()
        self.keys = KeySet(
            client, self.jwks_uri, refetch_interval=settings.jwks_refetch_interval, max_age=settings.jwks_max_age
        )
        self._jwt = JwtVerifier(
            self.keys,
            issuer=settings.issuer,
            resource=settings.resource,
            algorithms=settings.algorithms,
            leeway=settings.leeway,
        )
        self._introspection = (
            Introspection(
                client,
                settings.introspection_endpoint,
                client_id=settings.client_id or "",
                client_secret=settings.client_secret or "",
                issuer=settings.issuer,
                resource=settings.resource,
                max_age=settings.introspection_max_age,
                leeway=settings.leeway,
            )
            if settings.introspection_endpoint is not None
            else None
        )

    async def metadata(self) -> Mapping[str, Any]:
        """The issuer's metadata (RFC 8414 / OpenID Connect), fetched once."""
        async with self._metadata_lock:
            if self._metadata is None:
                self._metadata = await issuer_metadata(self._client, self.settings.issuer)
            return self._metadata

    async def jwks_uri(self) -> str:
        if self.settings.jwks_uri is not None:
            return self.settings.jwks_uri
        found = (await self.metadata()).get("jwks_uri")
        if not isinstance(found, str):
            raise Unavailable(f"the metadata of {self.settings.issuer} names no jwks_uri; set [auth.oauth] jwks_uri")
        return found

    async def verify(self, token: str, *, scopes: bool = True) -> Identity:
        """The identity `token` proves; `Refusal` (401/403) when it proves none here, `Unavailable` when the
        issuer cannot be asked. `scopes` False: the required scopes are left to `check_scopes` (a DPoP-bound
        token's holder proves its key first, so that the answer says nothing of the token to one who does not)."""
        if looks_like_jwt(token):
            claims = await self._jwt.claims(token)
        elif self._introspection is not None:
            claims = await self._introspection.claims(token)
        else:
            raise Refusal("the token is not a JWT, and this resource has no introspection endpoint for others")
        identity = identity_from_claims(self.settings, claims, token)
        if scopes:
            self.check_scopes(identity)
        return identity

    def check_scopes(self, identity: Identity) -> None:
        """`Refusal` (403 insufficient_scope) if the identity's token lacks a scope every token must carry."""
        missing = [scope for scope in self.settings.scopes_required if scope not in identity.scopes]
        if missing:
            raise Refusal.insufficient_scope(missing)


async def probe(settings: OAuthSettings) -> str:
    """Fetch the issuer's metadata and keys as the hub would (for `mcp-hub check --connect`); what was found.

    Raises `Unavailable` naming what could not be fetched."""
    async with httpx2.AsyncClient(verify=verifying(), follow_redirects=False) as http:
        verifier = TokenVerifier(settings, http)
        metadata = await verifier.metadata()
        jwks_uri = await verifier.jwks_uri()
        keys = await verifier.keys.load()
    if keys == 0:
        raise Unavailable(f"{jwks_uri} holds no public signing key the hub can use")
    introspection = settings.introspection_endpoint or "none (JWT access tokens only)"
    found = metadata.get("introspection_endpoint")
    if settings.introspection_endpoint is None and isinstance(found, str):
        introspection += f"; the issuer offers {found}"
    return f"issuer metadata ok; {keys} signing key(s) at {jwks_uri}; introspection: {introspection}"
