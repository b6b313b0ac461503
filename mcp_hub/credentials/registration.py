"""Who the hub is at a server's authorization server when people sign in there (`mode = "user"`): its client.

In the order the MCP authorization specification gives its clients ("Client Registration Approaches"):

1. the client configured for the mount (`client_id`, and `client_secret`): registered there beforehand;
2. the hub's client ID metadata document, where the authorization server's metadata says
   `client_id_metadata_document_supported`: the client ID is the URL of a JSON document the hub itself serves
   (`document_url`: beside its `/oauth/callback`, at `CLIENT_DOCUMENT_PATH`, unless `client_metadata_url`
   names another), which the authorization server fetches to learn the client's name, redirect URIs and
   grants (an https URL only, as client ID metadata documents must be: a hub whose callback is plain http, a
   desktop hub's loopback one, registers instead); a public client (`token_endpoint_auth_method` "none",
   PKCE); nothing is registered, nothing kept;
3. dynamic client registration (RFC 7591) at its `registration_endpoint`, the registration kept in the
   mount's token file (connections.py) per mount and issuer, so that a restarted hub is the same client, to
   which people's refresh tokens were issued. With replicas (`[cluster]`, `share_with`), the registration is
   one for them all: kept in Redis (`mcp-hub:client-registration:...`, encrypted with the mount's `token_key`,
   which every replica has), and made once, by the replica that holds the lock (`...:lock`, redis-py's `Lock`)
   while the others wait for it and then take it; each keeps it in its token file too. A registration a token
   file held before the replicas shared one is the one shared. While Redis is down, each replica registers as
   it would alone;
4. none of these: the sign-in cannot begin, and the error says to configure `client_id`.

The document (`document`) names the hub (`client_name`), its redirect URI, the grants it uses
(authorization code, refresh token), `response_types` code, `application_type` web, and no secret: the hub
holds no key to sign with, so it publishes no `jwks`. `client_document` serves it (no credential: the
authorization server fetches it), for every `user` mount whose document URL has that path; a mount made
with the hub registers its document (`publish`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import httpx2
from cryptography.fernet import Fernet, InvalidToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mcp_hub.cluster import KEY_PREFIX, TIMEOUT, Cluster, errors
from mcp_hub.config import CLIENT_DOCUMENT_PATH, USER_CALLBACK_PATH, ServerAuth
from mcp_hub.credentials.authority import TIMEOUT_SECONDS, Authority
from mcp_hub.credentials.connections import ConnectionStore, StoreError
from mcp_hub.credentials.credential import CredentialError
from mcp_hub.tls import verifying

logger = logging.getLogger("mcp_hub.credentials")

CLIENT_NAME = "mcp-hub"
GRANT_TYPES = ("authorization_code", "refresh_token")

_DOCUMENTS: dict[str, set[str]] = {}
"""The hub's client ID metadata documents: URL -> the redirect URIs it lists."""

_SHARED: list[Cluster] = []
"""The Redis replicas share registrations in (`share_with`), or none."""

LOCK_SECONDS = TIMEOUT_SECONDS + 5
"""How long the registration lock is held at most (a registration takes `TIMEOUT_SECONDS` at most), and how long a
replica waits for another's registration."""


def share_with(cluster: Cluster | None) -> None:
    """Share the clients registered dynamically with the replicas of `cluster` (None: this hub's own, as alone)."""
    _SHARED[:] = [cluster] if cluster is not None else []


@dataclass(frozen=True)
class Client:
    """The hub's client at one authorization server."""

    client_id: str
    client_secret: str | None
    token_endpoint_auth_method: str
    how: Literal["configured", "metadata document", "registered"]

    def __repr__(self) -> str:  # never show the secret
        return f"Client(client_id={self.client_id!r}, how={self.how!r})"


def document_url(auth: ServerAuth) -> str:
    """The URL of the hub's client ID metadata document for a `user` mount: `client_metadata_url`, or the
    mount's `redirect_uri` with `/oauth/callback` replaced by `CLIENT_DOCUMENT_PATH`."""
    if auth.client_metadata_url is not None:
        return auth.client_metadata_url
    return auth.redirect_uri.split("?", 1)[0].removesuffix(USER_CALLBACK_PATH) + CLIENT_DOCUMENT_PATH


def document(url: str, redirect_uris: set[str] | list[str], scope: str | None = None) -> dict[str, Any]:
    """The client ID metadata document whose URL is `url`."""
    found: dict[str, Any] = {
        "client_id": url,
        "client_name": CLIENT_NAME,
        "redirect_uris": sorted(redirect_uris),
        "grant_types": list(GRANT_TYPES),
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
    }
    if scope is not None:
        found["scope"] = scope
    return found


def publish(auth: ServerAuth) -> str:
    """Serve the document of a `user` mount from now on (`client_document`); its URL."""
    url = document_url(auth)
    _DOCUMENTS.setdefault(url, set()).add(auth.redirect_uri)
    return url


async def client_document(request: Request) -> Response:
    """The hub's client ID metadata document: the one published whose URL has this request's path (and,
    among several, its host)."""
    path = request.url.path
    found = [url for url in _DOCUMENTS if urlsplit(url).path.endswith(path)]
    host = request.headers.get("host", "")
    found.sort(key=lambda url: urlsplit(url).netloc != host)
    if not found:
        return JSONResponse({"error": "not_found", "error_description": "no user-mode server uses it"}, 404)
    url = found[0]
    return JSONResponse(document(url, _DOCUMENTS[url]), headers={"cache-control": "max-age=300"})


def _client_of(kept: dict[str, str]) -> Client:
    secret = kept.get("client_secret") or None
    method = kept.get("token_endpoint_auth_method") or ("client_secret_basic" if secret else "none")
    return Client(kept["client_id"], secret, method, "registered")


class Registration:
    """The hub's client at a mount's authorization server, found once (see the module docstring)."""

    def __init__(self, server: str, auth: ServerAuth, authority: Authority, store: ConnectionStore) -> None:
        self.server = server
        self._auth = auth
        self._authority = authority
        self._store = store
        self._found: Client | None = None
        self._lock = anyio.Lock()
        if auth.client_id is None:
            publish(auth)

    async def client(self) -> Client:
        """The hub's client there.

        Raises:
            CredentialError: the authorization server takes no document and registers no client, refused the
                registration, or cannot be reached.
        """
        async with self._lock:
            if self._found is None:
                self._found = await self._find()
            return self._found

    async def _find(self) -> Client:
        auth = self._auth
        if auth.client_id is not None:
            method = auth.token_endpoint_auth_method or ("client_secret_basic" if auth.client_secret else "none")
            return Client(auth.client_id, auth.client_secret, method, "configured")
        metadata = await self._authority.metadata()
        issuer = self._authority.issuer
        assert issuer is not None
        url = document_url(auth)
        if metadata.get("client_id_metadata_document_supported") is True and urlsplit(url).scheme == "https":
            logger.info("server %r: the hub is the client of its metadata document %s at %s", self.server, url, issuer)
            return Client(url, None, "none", "metadata document")
        endpoint = metadata.get("registration_endpoint")
        if isinstance(endpoint, str) and endpoint.startswith(("https://", "http://")):
            return await self._registered(issuer, endpoint, metadata)
        raise CredentialError(
            self.server,
            f"{issuer} takes no client ID metadata documents and has no registration endpoint; register the hub "
            'there and add client_id = "..." to the auth table',
        )

    async def _registered(self, issuer: str, endpoint: str, metadata: dict[str, Any]) -> Client:
        cluster = _SHARED[0] if _SHARED else None
        if cluster is not None and cluster.up:
            try:
                return _client_of(await self._shared(cluster, issuer, endpoint, metadata))
            except errors() as exc:  # Redis lost: as alone, below
                cluster.failed(exc)
        try:
            kept = self._store.registered(self.server, issuer)
        except StoreError as exc:
            raise CredentialError(self.server, str(exc)) from exc
        if kept is None:
            kept = await self._register(endpoint, metadata)
            try:
                self._store.register(self.server, issuer, kept)
            except StoreError as exc:
                raise CredentialError(self.server, str(exc)) from exc
            logger.info("server %r: the hub registered as client %s at %s", self.server, kept["client_id"], issuer)
        return _client_of(kept)

    async def _shared(self, cluster: Cluster, issuer: str, endpoint: str, metadata: dict[str, Any]) -> dict[str, str]:
        """The registration the replicas share (see the module docstring): read from Redis, or made under the lock
        by this replica, or by another while this one waited."""
        from redis.exceptions import LockError

        key = f"{KEY_PREFIX}client-registration:" + hashlib.sha256(f"{self.server}\0{issuer}".encode()).hexdigest()
        sealing = Fernet(str(self._auth.token_key).encode())
        found = await self._read_shared(cluster, key, sealing)
        if found is None:
            try:
                async with cluster.client.lock(
                    key + ":lock", timeout=LOCK_SECONDS, blocking_timeout=LOCK_SECONDS, sleep=0.05
                ):
                    found = await self._read_shared(cluster, key, sealing)  # made while this one waited?
                    if found is None:
                        found = self._kept(issuer) or await self._register(endpoint, metadata)
                        with anyio.fail_after(TIMEOUT):
                            await cluster.client.set(key, sealing.encrypt(json.dumps(found).encode()))
                        logger.info(
                            "server %r: the hub registered as client %s at %s, for every replica",
                            self.server,
                            found["client_id"],
                            issuer,
                        )
            except LockError as exc:
                raise CredentialError(
                    self.server, f"another replica held the registration at {issuer} for {LOCK_SECONDS:g} s: {exc}"
                ) from exc
        if self._kept(issuer) != found:
            try:
                self._store.register(self.server, issuer, found)
            except StoreError as exc:
                raise CredentialError(self.server, str(exc)) from exc
        return found

    async def _read_shared(self, cluster: Cluster, key: str, sealing: Fernet) -> dict[str, str] | None:
        with anyio.fail_after(TIMEOUT):
            value = await cluster.client.get(key)
        if not isinstance(value, bytes):
            return None
        try:
            found = json.loads(sealing.decrypt(value))
        except (InvalidToken, ValueError):
            raise CredentialError(
                self.server,
                "the client registration the replicas share cannot be decrypted with this replica's token_key: give "
                "every replica the same token_key",
            ) from None
        return {str(k): str(v) for k, v in found.items()}

    def _kept(self, issuer: str) -> dict[str, str] | None:
        try:
            return self._store.registered(self.server, issuer)
        except StoreError as exc:
            raise CredentialError(self.server, str(exc)) from exc

    async def _register(self, endpoint: str, metadata: dict[str, Any]) -> dict[str, str]:
        """Register the hub at `endpoint` (RFC 7591): a confidential client where the authorization server
        takes client_secret_basic or client_secret_post, else a public one."""
        supported = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        method = next((m for m in ("client_secret_basic", "client_secret_post") if m in supported), "none")
        asked = document(document_url(self._auth), [self._auth.redirect_uri], self._auth.scope)
        del asked["client_id"]
        asked["token_endpoint_auth_method"] = method
        try:
            async with httpx2.AsyncClient(verify=verifying(), timeout=TIMEOUT_SECONDS) as http:
                with anyio.fail_after(TIMEOUT_SECONDS):
                    response = await http.post(endpoint, json=asked)
        except (httpx2.HTTPError, TimeoutError) as exc:
            raise CredentialError(self.server, f"cannot register at {endpoint}: {exc or type(exc).__name__}") from exc
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if response.status_code not in (200, 201) or not isinstance(answer, dict) or not answer.get("client_id"):
            detail = answer.get("error_description") or answer.get("error") if isinstance(answer, dict) else None
            raise CredentialError(
                self.server, f"{endpoint} refused the hub's registration (HTTP {response.status_code}: {detail})"
            )
        registered = {"client_id": str(answer["client_id"])}
        if answer.get("client_secret"):
            registered["client_secret"] = str(answer["client_secret"])
        registered["token_endpoint_auth_method"] = str(
            answer.get("token_endpoint_auth_method") or (method if "client_secret" in registered else "none")
        )
        return registered
