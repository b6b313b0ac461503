"""OAuth client credentials: the hub's own token for a server (RFC 6749 section 4.4).

The hub asks the authorization server's token endpoint for a token with its
client ID and secret (`client_secret_basic` unless configured otherwise), or a JWT
signed with its private key (`private_key_jwt`, RFC 7523; SEP-1046), the
configured scope and, as resource indicator (RFC 8707), the server's URL or the
configured `resource`. The request is authlib's OAuth 2 client's. The token is
kept until shortly before it expires and fetched anew then, once for all the
callers waiting (token.py); one the server refuses with a 401 is dropped, and the
request that met the 401 is sent once more with a fresh one.
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

    def http_auth(self) -> httpx2.Auth:
        return CredentialAuth(self)

    async def headers(self) -> Mapping[str, str]:
        return {"authorization": (await self._token.get()).header}

    async def rejected(self, headers: Mapping[str, str]) -> bool:
        self._token.invalidate_header(headers.get("authorization"))
        return True

    async def _fetch(self) -> Token:
        endpoint = await self._authority.token_endpoint()
        settings = client_settings(self._auth, self._authority.issuer or endpoint)
        async with oauth_client(**settings, scope=self._auth.scope) as oauth:
            return await request_token(self.server, oauth, endpoint, **self.grant(), resource=self._resource)

    def grant(self) -> dict[str, str]:
        """The grant's own parameters."""
        return {"grant_type": "client_credentials"}


async def request_token(server: str, oauth: AsyncOAuth2Client, endpoint: str, **params: str) -> Token:
    """Ask `endpoint` for a token with `params` (the grant's); the token it issued.

    Raises:
        CredentialError: the request failed, or the authorization server refused it.
    """
    now = time.monotonic()
    issued = await fetch_issued(server, oauth, endpoint, **params)
    access_token = issued["access_token"]
    expires_in = issued.get("expires_in")
    lifetime = float(expires_in) if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) else None
    return Token.issued(access_token, issued.get("token_type"), lifetime, now)


async def fetch_issued(server: str, oauth: AsyncOAuth2Client, endpoint: str, **params: str) -> dict[str, Any]:
    """Ask `endpoint` for a token with `params`; the token endpoint's answer, which holds an `access_token`.

    Raises:
        CredentialError: the request failed, or the authorization server refused it.
    """
    try:
        with anyio.fail_after(TIMEOUT_SECONDS):
            issued = await oauth.fetch_token(endpoint, **params)
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
