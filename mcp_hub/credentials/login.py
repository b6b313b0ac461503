"""The hub logs in to a server's authorization server itself: authorization code with PKCE.

The flow is the MCP SDK's `OAuthClientProvider` (an `httpx2.Auth`): on the
server's 401 it reads the server's protected resource metadata (RFC 9728) and its
authorization server's metadata (RFC 8414), registers the hub as a client
(dynamic registration, or the hub's client ID metadata document where the
authorization server takes them; or the configured `client_id`), sends the hub
to the authorization endpoint with a PKCE challenge, trades the code for tokens
and refreshes them when they expire.

The hub's client ID metadata document, where `client_metadata_url` names one, is the hub's own when the URL is
the hub's `/oauth/client-metadata.json` at its public https address: the hub serves it there (registration.py's
`client_document`), naming this mount's `redirect_uri`. The hub cannot make that URL up itself, as a `user` mount
does from its callback: this mode's `redirect_uri` is no address of the hub's (the code is read off the redirect),
so the hub's public address is not known to it; unset, the hub registers dynamically.

No person takes part: the hub opens the authorization URL itself and reads the
code off the redirect to its `redirect_uri` (`Unattended`). That suits an
authorization server that approves the hub's client without a login page (a
machine client, a test server); one that shows a page to a person is refused
with an error that says so. Each person's own login, where a person signs in
through a page of the authorization server, is `mode = "user"` (user.py).

Every request of such a mount takes the SDK client's path (`channel_ok` is
False): the provider must see each response to refresh or log in again. Where the
authorization server binds tokens to a key (DPoP, dpop.py), `DPoPAuth` wraps the
provider: proofs on the token requests and on every request to the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from mcp_hub.config import ServerAuth
from mcp_hub.credentials.authority import TIMEOUT_SECONDS
from mcp_hub.credentials.credential import CredentialError
from mcp_hub.credentials.dpop import DPoPAuth
from mcp_hub.credentials.registration import publish
from mcp_hub.tls import verifying

CLIENT_NAME = "mcp-hub"


class Login:
    """A `Credential`: the hub's own login at the server's authorization server (see the module docstring)."""

    channel_ok = False

    def __init__(self, server: str, url: str, auth: ServerAuth) -> None:
        self.server = server
        self._storage = MemoryTokens()
        self._redirect = Unattended(server, auth.redirect_uri)
        if auth.client_id is None and auth.client_metadata_url is not None:
            publish(auth)  # served by the hub where the URL is its own /oauth/client-metadata.json
        if auth.client_id is not None:  # pre-registered: no registration
            method = auth.token_endpoint_auth_method or ("client_secret_basic" if auth.client_secret else "none")
            self._storage.client_info = OAuthClientInformationFull(
                client_id=auth.client_id,
                client_secret=auth.client_secret,
                redirect_uris=[auth.redirect_uri],  # type: ignore[list-item]
                token_endpoint_auth_method=method,
                scope=auth.scope,
            )
        self._provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(
                client_name=CLIENT_NAME,
                redirect_uris=[auth.redirect_uri],  # type: ignore[list-item]
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                scope=auth.scope,
                token_endpoint_auth_method=auth.token_endpoint_auth_method,
            ),
            storage=self._storage,
            redirect_handler=self._redirect.open,
            callback_handler=self._redirect.result,
            client_metadata_url=auth.client_metadata_url,
        )

        self._auth: httpx2.Auth = self._provider if auth.dpop == "never" else DPoPAuth(self._provider, auth.dpop)

    def http_auth(self) -> httpx2.Auth:
        return self._auth

    async def headers(self, method: str, url: str) -> Mapping[str, str]:
        tokens = self._storage.tokens
        return {"authorization": f"Bearer {tokens.access_token}"} if tokens is not None else {}

    async def rejected(self, headers: Mapping[str, str], answer: Mapping[str, str]) -> bool:
        return False  # the provider handles the server's 401s on the SDK client's path


class MemoryTokens:
    """The SDK's `TokenStorage`, in memory: the tokens and client registration live as long as the mount."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Unattended:
    """The provider's redirect and callback handlers, with no person: open the authorization URL, read the code
    off the authorization server's redirect to `redirect_uri`."""

    def __init__(self, server: str, redirect_uri: str) -> None:
        self._server = server
        self._redirect_uri = redirect_uri
        self._result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(verify=verifying(), timeout=TIMEOUT_SECONDS, follow_redirects=False) as http:
            try:
                with anyio.fail_after(TIMEOUT_SECONDS):
                    response = await http.get(authorization_url)
            except (httpx2.HTTPError, TimeoutError) as exc:
                raise CredentialError(self._server, f"cannot open the authorization URL: {exc}") from exc
        location = response.headers.get("location", "")
        if not response.is_redirect or not _same_endpoint(location, self._redirect_uri):
            raise CredentialError(
                self._server,
                f"the authorization server answered HTTP {response.status_code} rather than sending the hub back "
                "to its redirect_uri: it wants a person to sign in, which this mode cannot do",
            )
        query = parse_qs(urlsplit(location).query)
        if "error" in query:
            detail = query.get("error_description", [""])[0]
            raise CredentialError(
                self._server, f"the authorization server refused: {query['error'][0]} {detail}".strip()
            )
        if "code" not in query:
            raise CredentialError(self._server, "the authorization server's redirect holds no code")
        self._result = AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )

    async def result(self) -> AuthorizationCodeResult:
        result, self._result = self._result, None
        if result is None:
            raise CredentialError(self._server, "no authorization code arrived")
        return result


def _same_endpoint(location: str, redirect_uri: str) -> bool:
    got, expected = urlsplit(location), urlsplit(redirect_uri)
    return (got.scheme, got.netloc, got.path) == (expected.scheme, expected.netloc, expected.path)
