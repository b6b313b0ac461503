"""Enterprise-managed authorization (`mode = "enterprise"`): the organisation's identity provider decides.

The MCP extension `io.modelcontextprotocol/enterprise-managed-authorization` (SEP-990, built on the IETF
draft "Identity Assertion JWT Authorization Grant"): a person signed in at their organisation's identity
provider (IdP) reaches a server without consenting there server by server. For each person the hub

1. exchanges their identity assertion (an OpenID Connect ID token, by default) at the IdP's token endpoint
   (RFC 8693 token exchange: `requested_token_type` `urn:ietf:params:oauth:token-type:id-jag`, `audience`
   the server's authorization server, `resource` the server) for an Identity Assertion JWT Authorization
   Grant (ID-JAG), the hub authenticating as its client at the IdP (`idp_client_id`, `idp_client_secret`);
2. presents the ID-JAG to the server's authorization server with the JWT bearer grant (RFC 7523:
   `grant_type` `urn:ietf:params:oauth:grant-type:jwt-bearer`, `assertion` the ID-JAG), authenticating as
   its client there (`client_id`, `client_secret`), and gets the person's access token for the server.

Whose assertion: the one configured (`id_token`, a hub that acts for one person; an ID token unless
`subject_token_type` says otherwise), or, unset, each caller's own token, the one they signed in to the hub
with (`CALLER_TOKEN`, as token exchange reads it; an access token of the IdP unless `subject_token_type` says
otherwise, so the hub's `[auth.oauth]` must take the IdP's tokens), and the mount is served per client. The
person is the caller's principal (`CALLER_PRINCIPAL`), or, with a configured assertion, its `sub` (read as a
name, not verified: the hub's own configuration).

The access token is kept per person in the mount's token file, encrypted (connections.py, as `mode =
"user"` keeps people's tokens), keyed by principal, mount and the authorization server's issuer; it is used
until shortly before it expires, then refreshed with the refresh token when one was issued, else obtained
again by the two steps above; a token the server refuses (a 401) is replaced the same way, once for all the
calls that need it (one lock per person). `mcp-hub connections revoke` and the admin console forget it and
revoke it at the authorization server (revocation.py); the next call obtains a new one if the IdP still
issues the person an ID-JAG: who may reach which server is the IdP's policy. Where the server's authorization
server binds tokens to a key (DPoP, dpop.py), each person's token is bound to a key of its own, kept with it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import anyio
import httpx2
from authlib.common.errors import AuthlibBaseError
from joserfc.errors import JoseError
from joserfc.jws import extract_compact

from mcp_hub.config import ServerAuth
from mcp_hub.credentials.authority import Authority, client_settings, oauth_client
from mcp_hub.credentials.client_credentials import fetch_issued
from mcp_hub.credentials.connections import Connection, StoreError, issued_connection, store_at
from mcp_hub.credentials.credential import CredentialAuth, CredentialError
from mcp_hub.credentials.dpop import KeyRing, ProofKey, bound_headers, new_key_for, nonce_hooks
from mcp_hub.credentials.token import EARLY_SECONDS
from mcp_hub.credentials.token_exchange import CALLER_TOKEN, GRANT_TYPE
from mcp_hub.credentials.user import CALLER_PRINCIPAL

logger = logging.getLogger("mcp_hub.credentials")

ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
"""The token type of an Identity Assertion JWT Authorization Grant."""
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
"""The JWT bearer grant (RFC 7523 section 2.1)."""
SUBJECT_TYPES = {
    "id_token": "urn:ietf:params:oauth:token-type:id_token",
    "saml2": "urn:ietf:params:oauth:token-type:saml2",
    "access_token": "urn:ietf:params:oauth:token-type:access_token",
}


class EnterpriseLogin:
    """A `Credential`: the person's token for the server, by an ID-JAG from the organisation's IdP."""

    channel_ok = True

    def __init__(self, server: str, url: str, auth: ServerAuth) -> None:
        assert auth.client_id is not None and auth.token_key is not None and auth.idp_client_id is not None
        self.server = server
        self._auth = auth
        self._resource = auth.resource or url
        self._authority = Authority(server, issuer=auth.issuer, token_url=auth.token_url, resource_url=url)
        self._idp = Authority(
            server, issuer=auth.idp_issuer, token_url=auth.idp_token_url, resource_url=auth.idp_issuer or url
        )
        self._subject_type = auth.subject_token_type or ("id_token" if auth.id_token is not None else "access_token")
        self.store = store_at(auth.token_store, auth.token_key)
        self._stale: set[tuple[str, str]] = set()
        """(principal, access token) the server refused: replaced before it is sent again."""
        self._locks: dict[str, anyio.Lock] = {}
        self._keys = KeyRing(url)
        """The people's tokens' DPoP keys (where the authorization server binds tokens, dpop.py)."""

    def http_auth(self) -> httpx2.Auth:
        return CredentialAuth(self)

    def _caller(self) -> tuple[str, str | None]:
        """The person a request is sent for, and their identity assertion when the hub has it."""
        if self._auth.id_token is not None:
            return _subject_of(self._auth.id_token), self._auth.id_token
        principal = CALLER_PRINCIPAL.get()
        caller = CALLER_TOKEN.get()
        if principal is None or caller is None:
            raise CredentialError(
                self.server,
                "enterprise-managed authorization needs the caller's identity assertion (the token they signed in "
                "to the hub with), and this caller signed in without one; sign in to the hub with the identity "
                "provider's token, or configure id_token",
            )
        return principal, caller.token

    async def headers(self, method: str, url: str) -> Mapping[str, str]:
        principal, assertion = self._caller()
        connection = await self.connection(principal, assertion)
        kind = "Bearer" if connection.token_type.lower() == "bearer" else connection.token_type
        key = self._keys.of(connection.dpop_key)
        header = f"{kind} {connection.access_token}"
        return bound_headers(key, connection.token_type, connection.access_token, header, method, url)

    async def rejected(self, headers: Mapping[str, str], answer: Mapping[str, str]) -> bool:
        sent = headers.get("authorization", "")
        if not sent:
            return False
        if self._keys.nonce_retry(headers, answer):
            return True  # the server asked for its nonce, which the next proof carries
        principal, _ = self._caller()
        self._stale.add((principal, sent.partition(" ")[2]))
        return True

    async def issuer(self) -> str:
        """The server's authorization server (found in the server's metadata when not configured)."""
        await self._authority.metadata()
        assert self._authority.issuer is not None
        return self._authority.issuer

    async def connection(self, principal: str, assertion: str | None) -> Connection:
        """The person's token, obtained or refreshed first when none is kept, it is about to expire, or the
        server refused it.

        Raises:
            CredentialError: the IdP or the authorization server refused or cannot be reached, or the token
                file cannot be read or written.
        """
        issuer = await self.issuer()
        found = self._stored(principal, issuer)
        if found is not None and self._usable(found):
            return found
        async with self._locks.setdefault(principal, anyio.Lock()):
            current = self._stored(principal, issuer)  # obtained by the call this one waited for?
            if current is not None and self._usable(current):
                return current
            fresh = await self._renewed(current) if current is not None else None
            if fresh is None:
                if assertion is None:
                    raise CredentialError(self.server, f"{principal} has no identity assertion to exchange")
                fresh = await self._obtain(principal, issuer, assertion)
            self._keep(fresh)
            return fresh

    async def _obtain(self, principal: str, issuer: str, assertion: str) -> Connection:
        """Both steps: the assertion exchanged at the IdP for an ID-JAG, the ID-JAG for the person's token."""
        grant = await self.id_jag(assertion, issuer)
        key = new_key_for(await self._authority.dpop_metadata(self._auth.dpop), self._auth.dpop)
        issued = await self._at_server(key, grant_type=JWT_BEARER, assertion=grant, resource=self._resource)
        logger.info("server %r: %s's token obtained with an ID-JAG from the identity provider", self.server, principal)
        connection = issued_connection(principal, self.server, issuer, issued, None)
        if key is not None and connection.token_type.lower() == "dpop":
            connection = replace(connection, dpop_key=key.private_jwk())
        return connection

    async def id_jag(self, assertion: str, audience: str) -> str:
        """The ID-JAG the IdP issues for `assertion`, meant for the authorization server `audience`.

        Raises:
            CredentialError: the IdP refused, cannot be reached, or answered with something else.
        """
        auth = self._auth
        params = {
            "grant_type": GRANT_TYPE,
            "requested_token_type": ID_JAG,
            "subject_token": assertion,
            "subject_token_type": SUBJECT_TYPES[self._subject_type],
            "audience": audience,
            "resource": self._resource,
        }
        if auth.scope is not None:
            params["scope"] = auth.scope
        endpoint = await self._idp.token_endpoint()
        async with oauth_client(
            client_id=auth.idp_client_id,
            client_secret=auth.idp_client_secret,
            token_endpoint_auth_method="client_secret_basic" if auth.idp_client_secret else "none",
        ) as oauth:
            issued = await fetch_issued(self.server, oauth, endpoint, **params)
        kind = issued.get("issued_token_type")
        if kind != ID_JAG:
            raise CredentialError(
                self.server, f"the identity provider at {endpoint} issued a {kind or 'token of no type'}, not an ID-JAG"
            )
        return str(issued["access_token"])

    async def _renewed(self, connection: Connection) -> Connection | None:
        """`connection` refreshed with its refresh token; None: it has none, or the refresh was refused (the
        caller then obtains a new one from the IdP)."""
        self._stale.discard((connection.principal, connection.access_token))
        if connection.refresh_token is None:
            return None
        try:
            key = self._keys.of(connection.dpop_key)
            issued = await self._at_server(key, grant_type="refresh_token", refresh_token=connection.refresh_token)
        except CredentialError as exc:
            if not isinstance(exc.__cause__, AuthlibBaseError):
                raise
            logger.info("server %r: the refresh of %s's token was refused: %s", self.server, connection.principal, exc)
            return None
        return issued_connection(connection.principal, self.server, connection.issuer, issued, connection)

    async def _at_server(self, key: ProofKey | None, **params: str) -> dict[str, Any]:
        """The server's authorization server's answer to `params` (with a DPoP proof of `key`, when given)."""
        endpoint = await self._authority.token_endpoint()
        settings = client_settings(self._auth, self._authority.issuer or endpoint)
        async with oauth_client(**settings, scope=self._auth.scope, **nonce_hooks(key, endpoint)) as oauth:
            return await fetch_issued(self.server, oauth, endpoint, key, **params)

    def _stored(self, principal: str, issuer: str) -> Connection | None:
        try:
            return self.store.get(principal, self.server, issuer)
        except StoreError as exc:
            raise CredentialError(self.server, str(exc)) from exc

    def _keep(self, connection: Connection) -> None:
        try:
            self.store.put(connection)
        except StoreError as exc:
            raise CredentialError(self.server, str(exc)) from exc

    def _usable(self, connection: Connection) -> bool:
        return (connection.principal, connection.access_token) not in self._stale and connection.fresh(EARLY_SECONDS)


def _subject_of(assertion: str) -> str:
    """The `sub` of a configured ID token, as the name of the person its tokens are kept for (not verified:
    the IdP verifies it); "id_token" for an assertion that is no JWT or names no subject."""
    try:
        claims = json.loads(extract_compact(assertion.encode()).payload)
    except (JoseError, ValueError, TypeError):
        claims = {}
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) and subject else "id_token"
