"""What a mount's credential is to the hub's HTTP clients: headers to add, and what to do on a 401.

A `Credential` gives the headers a request to the server carries (`headers`, a
token fetched or refreshed first when need be, and a DPoP proof made for that
request where the token is bound to a key, dpop.py) and hears when the server refused
them (`rejected`: a 401 to a request that carried those headers), after which a
request is sent once more with fresh headers, and only once.

Two clients send a streamable HTTP mount's requests (see upstream/http.py): the
SDK's, on httpx2, for the session's own requests, and the hub's channel, on
aiohttp, for the forwarded ones. `CredentialAuth` fits a credential to the first
(an `httpx2.Auth`); the channel calls `headers` and `rejected` itself.

No credential ever comes from the hub's own client: the `Authorization` or
`X-API-Key` a client sends the hub stops at the hub (nothing in upstream/ reads a
client's headers), and the headers here are the mount's alone.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Protocol

import httpx2

from mcp_hub.errors import UpstreamError


class CredentialError(UpstreamError):
    """The hub could not get its credential for a server (the authorization server refused, or is down)."""

    def __init__(self, server: str, reason: str) -> None:
        self.reason = reason
        super().__init__(server, f"cannot be called: the hub has no credential for it ({reason})")


class Credential(Protocol):
    """A mount's credential toward its server (see the module docstring)."""

    channel_ok: bool
    """True: the hub's channel may send requests with `headers`; False: every request must take the SDK
    client's path, through `http_auth()`, whose flow must see each response (a login; see login.py)."""

    def http_auth(self) -> httpx2.Auth:
        """The credential as the SDK client's `httpx2.Auth` (mostly `CredentialAuth(self)`)."""
        ...

    async def headers(self, method: str, url: str) -> Mapping[str, str]:
        """The headers a `method` request to `url` (the server's) carries now: its token, and with DPoP a fresh
        proof for that request.

        Raises:
            CredentialError: no credential could be had (the authorization server refused or failed).
        """
        ...

    async def rejected(self, headers: Mapping[str, str], answer: Mapping[str, str]) -> bool:
        """The server answered 401 (with the headers `answer`) to a request that carried `headers`: forget them,
        unless the server asked for a DPoP nonce (which the next proof carries).

        Returns True if fresh headers may fare better (the request is then sent once more).
        """
        ...


class CredentialAuth(httpx2.Auth):
    """A `Credential` as an `httpx2.Auth`: each request carries its headers; a 401 is retried once, with
    fresh headers, if the credential says they may fare better."""

    def __init__(self, credential: Credential) -> None:
        self._credential = credential

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        method, url = request.method, str(request.url)
        sent = await self._credential.headers(method, url)
        request.headers.update(sent)
        response = yield request
        if response.status_code == 401 and await self._credential.rejected(sent, response.headers):
            request.headers.update(await self._credential.headers(method, url))
            yield request
