"""Revoking a person's sign-in toward a `mode = "user"` (or "enterprise") mount: forgotten at the hub, revoked at the
authorization server (RFC 7009) when it can be.

The tokens are forgotten first (the mount's token file, connections.py), whatever the authorization server
answers later: a revoke never leaves them in the hub. Then, when the issuer's metadata (RFC 8414, through
`Authority`) names a `revocation_endpoint`, the refresh token (hint `refresh_token`) and the access token
(hint `access_token`) are revoked there, the hub authenticating as the mount's client, as at the token
endpoint (`token_endpoint_auth_method`: client_secret_basic, client_secret_post or none), as the client
configured, the hub's client ID metadata document or the client it registered (registration.py). An authorization
server that does not revoke access tokens (`unsupported_token_type`, as oidc-provider for its JWTs) has
revoked the refresh token, and the grant with it: the last access token stays good until it expires, and the
outcome says so. An authorization server that refuses, cannot be reached, or names no revocation endpoint
does not stop the revoke: the outcome says so (`Revoked.message`), for the CLI's output, the admin console's
notice and the log.

Used by `mcp-hub connections revoke` (cli.py) and the admin console's Revoke (admin/app.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio
import httpx2
from authlib.common.errors import AuthlibBaseError

from mcp_hub.config import ServerConfig
from mcp_hub.credentials.authority import TIMEOUT_SECONDS, Authority, client_settings, oauth_client
from mcp_hub.credentials.connections import Connection, store_at
from mcp_hub.credentials.credential import CredentialError
from mcp_hub.credentials.registration import Registration

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import AsyncOAuth2Client

logger = logging.getLogger("mcp_hub.credentials")

Outcome = Literal["revoked", "forgotten", "failed"]
"""revoked: at the authorization server too; forgotten: it names no revocation endpoint, the hub only forgot
the tokens; failed: it refused or could not be reached (the hub forgot them all the same)."""


@dataclass(frozen=True)
class Revoked:
    """One connection forgotten at the hub, and what its authorization server made of the revocation."""

    connection: Connection
    outcome: Outcome
    detail: str = ""
    """Why it failed (outcome "failed")."""
    access_token_kept: bool = False
    """Outcome "revoked": the refresh token was revoked, but the authorization server does not revoke access
    tokens (RFC 7009 `unsupported_token_type`, as for self-contained JWTs): it stays good until it expires."""

    @property
    def message(self) -> str:
        """One line for a person: what happened to the tokens (never the tokens themselves)."""
        if self.outcome == "revoked" and self.access_token_kept:
            return (
                "its refresh token was revoked at the authorization server, which does not revoke access tokens "
                "(unsupported_token_type): the last one stays valid until it expires"
            )
        if self.outcome == "revoked":
            return "its tokens were revoked at the authorization server"
        if self.outcome == "forgotten":
            return (
                "the hub forgot its tokens; the authorization server publishes no revocation endpoint, "
                "so they stay valid there until they expire"
            )
        return (
            f"the hub forgot its tokens, but they could not be revoked at the authorization server ({self.detail}); "
            "they may stay valid there until they expire"
        )


async def revoke(name: str, server: ServerConfig, principal: str, issuer: str | None = None) -> list[Revoked]:
    """Forget `principal`'s connections to the mount `name` (at `issuer`, when given), then revoke each one's
    tokens at its authorization server. What was forgotten, with the outcome at the authorization server.

    Raises:
        StoreError: the token file cannot be read or written (nothing was forgotten, nothing revoked).
    """
    auth = server.auth
    assert auth.token_key is not None
    store = store_at(auth.token_store, auth.token_key)
    gone = await anyio.to_thread.run_sync(store.remove, principal, name, issuer)
    return [await revoke_at_server(server, connection) for connection in gone]


async def revoke_at_server(server: ServerConfig, connection: Connection) -> Revoked:
    """Revoke `connection`'s refresh token and access token at its authorization server (RFC 7009). Never
    raises: an authorization server that refuses or is unreachable makes the outcome "failed"."""
    assert server.url is not None
    auth = server.auth
    authority = Authority(server.name, issuer=connection.issuer, token_url=auth.token_url, resource_url=server.url)
    try:
        metadata = await authority.metadata()
    except CredentialError as exc:
        return _failed(connection, f"its metadata could not be read: {exc.reason}")
    endpoint = metadata.get("revocation_endpoint")
    if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
        logger.info(
            "server %r: %s's tokens were forgotten; %s has no revocation endpoint",
            server.name,
            connection.principal,
            connection.issuer,
        )
        return Revoked(connection, "forgotten")
    if auth.client_id is not None:
        settings = client_settings(auth, connection.issuer)
    else:  # a "user" mount's client: its metadata document, or the client the hub registered
        assert auth.token_key is not None
        registration = Registration(server.name, auth, authority, store_at(auth.token_store, auth.token_key))
        try:
            client = await registration.client()
        except CredentialError as exc:
            return _failed(connection, f"the hub's client there is not known: {exc.reason}")
        settings = {
            "client_id": client.client_id,
            "client_secret": client.client_secret,
            "token_endpoint_auth_method": client.token_endpoint_auth_method,
        }
    tokens = [(connection.refresh_token, "refresh_token"), (connection.access_token, "access_token")]
    problems: list[str] = []
    access_token_kept = False
    method = settings["token_endpoint_auth_method"]
    async with oauth_client(**settings, revocation_endpoint_auth_method=method) as oauth:
        for token, hint in tokens:
            if not token:
                continue
            error, problem = await _revoke_one(oauth, endpoint, token, hint)
            if error == "unsupported_token_type" and hint == "access_token" and connection.refresh_token:
                access_token_kept = True  # a JWT, say: the refresh token it was refreshed with is revoked
            elif problem is not None:
                problems.append(f"{hint.replace('_', ' ')}: {problem}")
    if problems:
        return _failed(connection, f"{endpoint}: {'; '.join(problems)}")
    logger.info("server %r: %s's tokens were revoked at %s", server.name, connection.principal, connection.issuer)
    return Revoked(connection, "revoked", access_token_kept=access_token_kept)


async def _revoke_one(oauth: AsyncOAuth2Client, endpoint: str, token: str, hint: str) -> tuple[str | None, str | None]:
    """Revoke one token: (None, None) when the authorization server took it, else its error code (RFC 7009
    section 2.2.1, when it gave one) and what went wrong."""
    try:
        with anyio.fail_after(TIMEOUT_SECONDS):
            response = await oauth.revoke_token(endpoint, token=token, token_type_hint=hint)
    except TimeoutError:
        return None, f"no answer within {TIMEOUT_SECONDS:.0f} s"
    except (httpx2.HTTPError, AuthlibBaseError) as exc:
        return None, f"unreachable ({exc or type(exc).__name__})"
    if response.status_code == 200:
        return None, None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        description = body.get("error_description")
        detail = f" ({description})" if isinstance(description, str) and description else ""
        return body["error"], f"refused: {body['error']}{detail}"
    return None, f"refused: HTTP {response.status_code}"


def _failed(connection: Connection, detail: str) -> Revoked:
    logger.warning(
        "server %r: %s's tokens were forgotten but not revoked at %s: %s",
        connection.mount,
        connection.principal,
        connection.issuer,
        detail,
    )
    return Revoked(connection, "failed", detail)
