"""The authorization server a mount's credential comes from, and its token endpoint.

The token endpoint is configured (`token_url`) or read from the issuer's metadata
(RFC 8414: `/.well-known/oauth-authorization-server` with the issuer's path, then
the OpenID Connect forms), fetched once per `Authority` and kept. Metadata whose
`issuer` is not the configured one is refused (RFC 8414 section 3.3). With neither
configured, the issuer is the first authorization server the MCP server's own
protected resource metadata names (RFC 9728, as MCP clients find it), provided
that metadata is for the server's URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    issuers_match,
)
from mcp.shared.auth_utils import check_resource_allowed

from mcp_hub.config import ServerAuth, signing_algorithm
from mcp_hub.credentials.credential import CredentialError
from mcp_hub.tls import verifying

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import AsyncOAuth2Client

TIMEOUT_SECONDS = 30.0
"""How long one exchange with the authorization server may take."""


def oauth_client(**settings: Any) -> AsyncOAuth2Client:
    """authlib's OAuth 2.0 client over httpx, for exchanges with the authorization server (`settings`: the client's,
    as `AsyncOAuth2Client` takes them). authlib's httpx integration (with its OpenID Connect parts, about 0.1 s to
    import) loads with the first one: a hub whose mounts never ask an authorization server never loads it."""
    from authlib.integrations.httpx_client import AsyncOAuth2Client

    return AsyncOAuth2Client(timeout=TIMEOUT_SECONDS, **settings)


def client_settings(auth: ServerAuth, audience: str) -> dict[str, Any]:
    """The hub's client at the authorization server, as `oauth_client` takes it: its id, and how it authenticates
    at the token endpoint (`token_endpoint_auth_method`; unset: client_secret_basic with a secret,
    private_key_jwt with a client_key, else none). private_key_jwt (RFC 7523 section 2.2, authlib's
    `PrivateKeyJWT`): a JWT signed with `client_key` (`iss` and `sub` the client id, a fresh `jti`, a short
    life), whose `aud` is `audience` (the issuer, as SEP-1046 asks, or the token endpoint when no issuer is
    known)."""
    method = auth.token_endpoint_auth_method or (
        "client_secret_basic" if auth.client_secret else "private_key_jwt" if auth.client_key else "none"
    )
    if method != "private_key_jwt":
        return {"client_id": auth.client_id, "client_secret": auth.client_secret, "token_endpoint_auth_method": method}
    from authlib.oauth2.rfc7523 import PrivateKeyJWT
    from joserfc.jwk import ECKey, OKPKey, RSAKey

    assert auth.client_key is not None
    alg = signing_algorithm(auth.client_key)
    kind = RSAKey if alg == "RS256" else OKPKey if alg == "EdDSA" else ECKey
    return {
        "client_id": auth.client_id,
        "client_secret": kind.import_key(auth.client_key),
        "token_endpoint_auth_method": PrivateKeyJWT(audience, alg=alg),
    }


class Authority:
    """One authorization server, as a mount's auth table names it."""

    def __init__(self, server: str, *, issuer: str | None, token_url: str | None, resource_url: str) -> None:
        self.server = server
        self.issuer = issuer
        self._resource_url = resource_url
        self._server_dpop: bool | None = None
        self._token_url = token_url
        self._metadata_found: dict[str, Any] | None = None
        self._lock = anyio.Lock()

    async def dpop_metadata(self, setting: str) -> dict[str, Any] | None:
        """The metadata a mount's `dpop` setting is decided on, for "auto": the issuer's (where it is discovered
        or configured), provided the server takes DPoP too (`server_takes_dpop`); None: no DPoP for "auto" (and
        nothing asked for "always" and "never", or where only a `token_url` is configured)."""
        if setting != "auto" or (self.issuer is None and self._token_url is not None):
            return None
        metadata = await self.metadata()
        if not metadata.get("dpop_signing_alg_values_supported") or not await self.server_takes_dpop():
            return None
        return metadata

    async def server_takes_dpop(self) -> bool:
        """Whether the MCP server's protected resource metadata (RFC 9728) says it takes DPoP-bound tokens
        (`dpop_signing_alg_values_supported`, or `dpop_bound_access_tokens_required`): an authorization server
        that binds tokens for every client is no sign that the server behind it reads the DPoP scheme. Read once;
        no metadata: False."""
        if self._server_dpop is None:
            self._server_dpop = False
            async with httpx2.AsyncClient(verify=verifying(), timeout=TIMEOUT_SECONDS) as http:
                for url in build_protected_resource_metadata_discovery_urls(None, self._resource_url):
                    document = await self._document(http, url, [])
                    if document is not None:
                        self._server_dpop = bool(
                            document.get("dpop_signing_alg_values_supported")
                            or document.get("dpop_bound_access_tokens_required") is True
                        )
                        break
        return self._server_dpop

    async def token_endpoint(self) -> str:
        """The token endpoint: configured, or discovered from the issuer's metadata (once).

        Raises:
            CredentialError: the metadata could not be had, or is not the issuer's.
        """
        if self._token_url is not None:
            return self._token_url
        self._token_url = await self.endpoint("token_endpoint")
        return self._token_url

    async def endpoint(self, name: str) -> str:
        """The issuer's endpoint `name` (its metadata's key: "token_endpoint", "authorization_endpoint").

        Raises:
            CredentialError: the metadata could not be had, is not the issuer's, or names no such endpoint.
        """
        metadata = await self.metadata()
        endpoint = metadata.get(name)
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            raise CredentialError(self.server, f"the metadata of {self.issuer} names no {name}")
        return endpoint

    async def metadata(self) -> dict[str, Any]:
        """The issuer's metadata (RFC 8414), fetched once; `issuer` is set once it is known."""
        async with self._lock:
            if self._metadata_found is None:
                async with httpx2.AsyncClient(verify=verifying(), timeout=TIMEOUT_SECONDS) as http:
                    if self.issuer is None:
                        self.issuer = await self._named_by_server(http)
                    self._metadata_found = await self._metadata(http, self.issuer)
            return self._metadata_found

    async def _named_by_server(self, http: httpx2.AsyncClient) -> str:
        """The first authorization server the MCP server's protected resource metadata names."""
        tried: list[str] = []
        for url in build_protected_resource_metadata_discovery_urls(None, self._resource_url):
            document = await self._document(http, url, tried)
            if document is None:
                continue
            resource = document.get("resource")
            if isinstance(resource, str) and not check_resource_allowed(self._resource_url, resource):
                raise CredentialError(
                    self.server, f"the protected resource metadata at {url} is for {resource}, not this server"
                )
            servers = document.get("authorization_servers")
            if isinstance(servers, list) and servers and isinstance(servers[0], str):
                return servers[0]
            raise CredentialError(
                self.server, f"the protected resource metadata at {url} names no authorization server"
            )
        raise CredentialError(
            self.server,
            f"no issuer or token_url is configured, and the server publishes no protected resource metadata "
            f'(tried {", ".join(tried)}); add issuer = "https://..."',
        )

    async def _document(self, http: httpx2.AsyncClient, url: str, tried: list[str]) -> dict[str, Any] | None:
        """The JSON object at `url`; None (noted in `tried`) if it answers other than 200."""
        try:
            with anyio.fail_after(TIMEOUT_SECONDS):
                response = await http.get(url, headers={"accept": "application/json"})
        except (httpx2.HTTPError, TimeoutError) as exc:
            raise CredentialError(self.server, f"cannot read {url}: {exc or type(exc).__name__}") from exc
        if response.status_code != 200:
            tried.append(f"{url} (HTTP {response.status_code})")
            return None
        try:
            document = response.json()
        except ValueError:
            document = None
        if not isinstance(document, dict):
            raise CredentialError(self.server, f"{url} does not answer with a JSON object")
        return document

    async def _metadata(self, http: httpx2.AsyncClient, issuer: str) -> dict[str, Any]:
        tried: list[str] = []
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
            metadata = await self._document(http, url, tried)
            if metadata is None:
                continue
            found = metadata.get("issuer")
            if not isinstance(found, str) or not issuers_match(found, issuer):
                raise CredentialError(
                    self.server, f"the metadata at {url} is for issuer {found!r}, not {issuer!r}; check issuer"
                )
            return metadata
        raise CredentialError(self.server, f"no authorization server metadata for {issuer}: tried {', '.join(tried)}")
