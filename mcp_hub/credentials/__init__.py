"""The credentials the hub presents to the servers it mounts: per mount, never its client's.

A remote mount's `[servers.NAME.auth]` table (config.py `ServerAuth`) chooses one:

- "static": the mount's `headers` only, as written (secrets as `${VAR}`);
- "client_credentials": a token the hub fetches for itself (client_credentials.py);
- "token_exchange": the caller's token exchanged for one meant for the server (token_exchange.py);
- "authorization_code": the hub logs in to the server's authorization server (login.py);
- "user": each person's own login there, their tokens kept encrypted (user.py, connections.py);
- "workload": the hub's own token by its workload's identity token, the JWT bearer grant (workload.py);
- "enterprise": each person's identity assertion from the organisation's identity provider traded for an
  ID-JAG, and that for their token (enterprise.py; kept as "user" keeps theirs).

Modules: credential.py (what a credential is to the HTTP clients), token.py (a
token kept until shortly before it expires, fetched once for all who wait),
authority.py (the authorization server and its token endpoint), dpop.py (tokens
bound to a key of the hub's, RFC 9449, and the proofs of it), then one module
per kind. The credential of a mount lives as long as the mount (its tokens outlive
a reconnection); `credential_for` makes it.
"""

from __future__ import annotations

from mcp_hub.config import ServerConfig
from mcp_hub.credentials.credential import Credential, CredentialAuth, CredentialError

__all__ = ["Credential", "CredentialAuth", "CredentialError", "credential_for"]


def credential_for(config: ServerConfig, *, for_clients: bool = False) -> Credential | None:
    """The credential a mount's auth table asks for; None: "static" (its headers are all), or a local process.

    A "token_exchange" mount has two: its clients' sessions (`for_clients`) present each caller's exchanged
    token; its own session (listing, health checks, list changes; never a client's request) presents the
    hub's own token, by the client credentials grant with the same client at the same authorization server.
    A "user" mount's clients' sessions present each person's own token; its own session only its headers. So
    does an "enterprise" mount that takes each caller's assertion; one configured with the one person's
    `id_token` presents that person's token on every session.
    """
    auth = config.auth
    if config.url is None or auth.mode == "static":
        return None
    if auth.mode == "enterprise":
        if auth.per_caller and not for_clients:
            return None
        from mcp_hub.credentials.enterprise import EnterpriseLogin

        return EnterpriseLogin(config.name, config.url, auth)
    if auth.mode == "user":
        if not for_clients:
            return None
        from mcp_hub.credentials.user import UserLogin

        return UserLogin(config.name, config.url, auth)
    if auth.mode == "token_exchange" and for_clients:
        from mcp_hub.credentials.token_exchange import TokenExchange

        return TokenExchange(config.name, config.url, auth)
    if auth.mode == "workload":
        from mcp_hub.credentials.workload import WorkloadIdentity

        return WorkloadIdentity(config.name, config.url, auth)
    if auth.mode in ("client_credentials", "token_exchange"):
        from mcp_hub.credentials.client_credentials import ClientCredentials

        return ClientCredentials(config.name, config.url, auth)
    from mcp_hub.credentials.login import Login

    return Login(config.name, config.url, auth)
