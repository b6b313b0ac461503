"""Token exchange (RFC 8693): the caller's token traded for one meant for the server.

The hub presents the token its caller signed in with (the subject token) at the
authorization server's token endpoint and asks for an access token whose audience
is the mounted server (`audience`, and `resource`, by default the server's URL).
Each exchanged token is kept per subject token, until shortly before it expires
(token.py), in a bounded cache, so a principal's calls cost one exchange per
token lifetime.

The caller's token reaches `headers` through `CALLER_TOKEN`, a context variable
(it crosses the HTTP clients' auth flows, which the hub does not own), holding the
`CallerToken` of the client's session: the supervisor (upstream/supervisor.py)
puts the caller's validated token (`Origin.access_token`, the request's
`Identity.token`) in it around each of the client's requests to such a mount,
which is always sent on the caller's own session (config.py makes the mount
`isolation = "per-client"`). The channel sends in the caller's task; the
session's own task, started from the first request, holds the same `CallerToken`,
so what the session sends by itself later (its standalone GET stream when it
connects again; over legacy SSE, every message) carries the latest token the
client brought, not the one it opened the session with, which may have expired
since. A caller without a token is refused there, before anything is sent. The
mount's shared session, which carries only the hub's own requests (listing,
health checks), presents the hub's client credentials token instead (see
`credential_for`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from contextvars import ContextVar
from functools import partial

import httpx2
from cachetools import LRUCache

from mcp_hub.config import ServerAuth
from mcp_hub.credentials.authority import Authority, client_settings, oauth_client
from mcp_hub.credentials.client_credentials import request_token
from mcp_hub.credentials.credential import CredentialAuth, CredentialError
from mcp_hub.credentials.dpop import Binding
from mcp_hub.credentials.token import CachedToken, Token

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
PRINCIPALS = 4096
"""Subject tokens whose exchanged token is kept at once (the least recently used goes first)."""


class CallerToken:
    """The validated token of the caller a client's session is for: the latest one its requests brought (a
    client refreshes its token during a long session)."""

    __slots__ = ("__weakref__", "token")

    def __init__(self, token: str) -> None:
        self.token = token


CALLER_TOKEN: ContextVar[CallerToken | None] = ContextVar("mcp_hub_caller_token", default=None)
"""The caller's token for what a client's session sends (None: the caller signed in with no token)."""


def _subject() -> str | None:
    caller = CALLER_TOKEN.get()
    return caller.token if caller is not None else None


class TokenExchange:
    """A `Credential`: the caller's token exchanged for one whose audience is the server."""

    channel_ok = True

    def __init__(self, server: str, url: str, auth: ServerAuth) -> None:
        assert auth.client_id is not None
        self.server = server
        self._auth = auth
        self._resource = auth.resource or url
        self._authority = Authority(server, issuer=auth.issuer, token_url=auth.token_url, resource_url=url)
        self._tokens: LRUCache[str, CachedToken] = LRUCache(PRINCIPALS)
        self._dpop = Binding(auth.dpop, url)

    def http_auth(self) -> httpx2.Auth:
        return CredentialAuth(self)

    async def headers(self, method: str, url: str) -> Mapping[str, str]:
        subject = _subject()
        if subject is None:
            raise CredentialError(
                self.server, "token exchange needs the caller's OAuth token, and this caller signed in without one"
            )
        token = await self.exchanged(subject)
        return self._dpop.headers(token.token_type, token.access_token, token.header, method, url)

    async def rejected(self, headers: Mapping[str, str], answer: Mapping[str, str]) -> bool:
        if self._dpop.nonce_retry(answer):
            return True
        subject = _subject()
        cached = self._tokens.get(_key(subject)) if subject is not None else None
        if cached is not None:
            cached.invalidate_header(headers.get("authorization"))
        return cached is not None

    async def exchanged(self, subject_token: str) -> Token:
        """The token `subject_token` is exchanged for (kept until shortly before it expires)."""
        key = _key(subject_token)
        cached = self._tokens.get(key)
        if cached is None:
            cached = self._tokens[key] = CachedToken(partial(self._exchange, subject_token))
        return await cached.get()

    async def _exchange(self, subject_token: str) -> Token:
        auth = self._auth
        params = {
            "grant_type": GRANT_TYPE,
            "subject_token": subject_token,
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "resource": self._resource,
        }
        if auth.audience is not None:
            params["audience"] = auth.audience
        key = self._dpop.decide(await self._authority.dpop_metadata(auth.dpop))
        endpoint = await self._authority.token_endpoint()
        settings = client_settings(auth, self._authority.issuer or endpoint)
        async with oauth_client(**settings, scope=auth.scope, **self._dpop.client_settings(endpoint)) as oauth:
            return await request_token(self.server, oauth, endpoint, key, **params)


def _key(subject_token: str) -> str:
    return hashlib.sha256(subject_token.encode()).hexdigest()
