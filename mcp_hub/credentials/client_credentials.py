"""OAuth client credentials: the hub's own token for a server (RFC 6749 section 4.4).

The hub asks the authorization server's token endpoint for a token with its
client ID and secret (`client_secret_basic` unless configured otherwise), or a JWT
signed with its private key (`private_key_jwt`, RFC 7523; SEP-1046), the
configured scope and, as resource indicator (RFC 8707), the server's URL or the
configured `resource`. The request is authlib's OAuth 2 client's. The token is
kept until shortly before it expires and fetched anew then, once for all the
callers waiting (token.py); one the server refuses with a 401 is dropped, and the
request that met the 401 is sent once more with a fresh one. Where the authorization
server binds tokens to a key (DPoP, dpop.py), each token request carries a proof and
each request to the server a fresh one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from authlib.common.errors import AuthlibBaseError

from mcp_hub.config import ServerAuth
from mcp_hub.credentials.authority import TIMEOUT_SECONDS, Authority, client_settings, oauth_client
from mcp_hub.credentials.credential import CredentialAuth, CredentialError
from mcp_hub.credentials.dpop import NONCE_ERROR, Binding, ProofKey
from mcp_hub.credentials.token import CachedToken, Token

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import AsyncOAuth2Client


class ClientCredentials:
    """A `Credential`: a token for the hub itself, by the client credentials grant."""

    channel_ok = True

    def __init__(self, server: str, url: str, auth: ServerAuth) -> None:
        assert auth.client_id is not None
        self.server = server
        self._auth = auth
        self._resource = auth.resource or url
        self._authority = Authority(server, issuer=auth.issuer, token_url=auth.token_url, resource_url=url)
        self._token = CachedToken(self._fetch)
        self._dpop = Binding(auth.dpop, url)

    def http_auth(self) -> httpx2.Auth:
        return CredentialAuth(self)

    async def headers(self, method: str, url: str) -> Mapping[str, str]:
        token = await self._token.get()
        return self._dpop.headers(token.token_type, token.access_token, token.header, method, url)

    async def rejected(self, headers: Mapping[str, str], answer: Mapping[str, str]) -> bool:
        if not self._dpop.nonce_retry(answer):
            self._token.invalidate_header(headers.get("authorization"))
        return True

    async def _fetch(self) -> Token:
        key = self._dpop.decide(await self._authority.dpop_metadata(self._auth.dpop))
        endpoint = await self._authority.token_endpoint()
        settings = client_settings(self._auth, self._authority.issuer or endpoint)
        async with oauth_client(**settings, scope=self._auth.scope, **self._dpop.client_settings(endpoint)) as oauth:
            return await request_token(self.server, oauth, endpoint, key, **self.grant(), resource=self._resource)

    def grant(self) -> dict[str, str]:
        """The grant's own parameters."""
        return {"grant_type": "client_credentials"}


async def request_token(
    server: str, oauth: AsyncOAuth2Client, endpoint: str, key: ProofKey | None = None, **params: str
) -> Token:
    """Ask `endpoint` for a token with `params` (the grant's); the token it issued.

    Raises:
        CredentialError: the request failed, or the authorization server refused it.
    """
    now = time.monotonic()
    issued = await fetch_issued(server, oauth, endpoint, key, **params)
    access_token = issued["access_token"]
    expires_in = issued.get("expires_in")
    lifetime = float(expires_in) if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) else None
    return Token.issued(access_token, issued.get("token_type"), lifetime, now)


async def fetch_issued(
    server: str, oauth: AsyncOAuth2Client, endpoint: str, key: ProofKey | None = None, **params: str
) -> dict[str, Any]:
    """Ask `endpoint` for a token with `params` (with a DPoP proof of `key`, and once more with the nonce the
    authorization server asks for, if it does); the token endpoint's answer, which holds an `access_token`.

    Raises:
        CredentialError: the request failed, or the authorization server refused it.
    """
    try:
        with anyio.fail_after(TIMEOUT_SECONDS):
            try:
                issued = await oauth.fetch_token(endpoint, headers=_proof(key, endpoint), **params)
            except AuthlibBaseError as exc:
                if key is None or getattr(exc, "error", None) != NONCE_ERROR:
                    raise
                issued = await oauth.fetch_token(endpoint, headers=_proof(key, endpoint), **params)
    except AuthlibBaseError as exc:
        detail = f": {exc.description}" if getattr(exc, "description", None) else ""
        raise CredentialError(
            server, f"the authorization server refused the token request ({exc.error}{detail})"
        ) from exc
    except (httpx2.HTTPError, TimeoutError, ValueError) as exc:
        raise CredentialError(server, f"the token request to {endpoint} failed: {exc or type(exc).__name__}") from exc
    access_token = issued.get("access_token")
    if not isinstance(access_token, str) or not access_token:
        raise CredentialError(server, f"the answer of {endpoint} holds no access_token")
    return dict(issued)


def _proof(key: ProofKey | None, endpoint: str) -> dict[str, str] | None:
    return {"DPoP": key.proof("POST", endpoint)} if key is not None else None
