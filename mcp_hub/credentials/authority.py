"""The authorization server a mount's credential comes from, and its token endpoint.

The token endpoint is configured (`token_url`) or read from the issuer's metadata
(RFC 8414: `/.well-known/oauth-authorization-server` with the issuer's path, then
the OpenID Connect forms), fetched once per `Authority` and kept. Metadata whose
`issuer` is not the configured one is refused (RFC 8414 section 3.3).
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls, issuers_match

from mcp_hub.credentials.credential import CredentialError

TIMEOUT_SECONDS = 30.0
"""How long one exchange with the authorization server may take."""


class Authority:
    """One authorization server, as a mount's auth table names it."""

    def __init__(self, server: str, *, issuer: str | None, token_url: str | None) -> None:
        assert issuer is not None or token_url is not None
        self.server = server
        self.issuer = issuer
        self._token_url = token_url
        self._lock = anyio.Lock()

    async def token_endpoint(self) -> str:
        """The token endpoint: configured, or discovered from the issuer's metadata (once).

        Raises:
            CredentialError: the metadata could not be had, or is not the issuer's.
        """
        if self._token_url is not None:
            return self._token_url
        async with self._lock:
            if self._token_url is None:
                assert self.issuer is not None
                async with httpx2.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
                    metadata = await self._metadata(http, self.issuer)
                endpoint = metadata.get("token_endpoint")
                if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
                    raise CredentialError(self.server, f"the metadata of {self.issuer} names no token_endpoint")
                self._token_url = endpoint
            return self._token_url

    async def _metadata(self, http: httpx2.AsyncClient, issuer: str) -> dict[str, Any]:
        tried: list[str] = []
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
            try:
                with anyio.fail_after(TIMEOUT_SECONDS):
                    response = await http.get(url, headers={"accept": "application/json"})
            except (httpx2.HTTPError, TimeoutError) as exc:
                raise CredentialError(self.server, f"cannot read the metadata of {issuer} at {url}: {exc}") from exc
            if response.status_code != 200:
                tried.append(f"{url} (HTTP {response.status_code})")
                continue
            try:
                metadata = response.json()
            except ValueError:
                metadata = None
            if not isinstance(metadata, dict):
                raise CredentialError(self.server, f"the metadata at {url} is not a JSON object")
            found = metadata.get("issuer")
            if not isinstance(found, str) or not issuers_match(found, issuer):
                raise CredentialError(
                    self.server, f"the metadata at {url} is for issuer {found!r}, not {issuer!r}; check issuer"
                )
            return metadata
        raise CredentialError(self.server, f"no authorization server metadata for {issuer}: tried {', '.join(tried)}")
