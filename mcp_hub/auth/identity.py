"""The caller as its access token says: `Identity`, kept on the request beside the principal.

The HTTP layer puts it in the ASGI scope's state under `IDENTITY_KEY` (the principal, a
`policy.Principal`, goes under the server's `PRINCIPAL_KEY` as for an API key). Links that act for
the caller toward other servers (token exchange, RFC 8693) read `token` from here; it is never
logged and never sent on to a mounted server as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from mcp_hub.policy.principal import Principal

IDENTITY_KEY = "mcp_hub.identity"
"""Where the HTTP layer puts the caller's `Identity`, in the ASGI scope's state (absent: no token)."""


@dataclass(frozen=True)
class Identity:
    """A validated access token and what it says."""

    principal: Principal
    """The policy's principal: the configured claim's value, with the token's scopes and groups."""
    issuer: str
    subject: str | None
    client_id: str | None
    scopes: frozenset[str]
    claims: Mapping[str, Any] = field(repr=False)
    """Every claim of the token (a JWT's payload, or the introspection answer)."""
    token: str = field(repr=False)
    """The access token as presented: for exchanging at the issuer, never for sending on."""
    expires_at: float | None = None
    """`exp`, seconds since the epoch (None: the token does not say)."""


PRINCIPAL_KEY = "mcp_hub.principal"
"""Where the HTTP layer puts the authenticated principal, in the ASGI scope's state."""
ANONYMOUS = "anonymous"
"""The principal of an HTTP client when the hub has no API keys and no OAuth configured."""
HTTP_PRINCIPAL: ContextVar[str] = ContextVar("mcp_hub_http_principal", default=ANONYMOUS)
"""The principal of the HTTP request being handled, as in the scope's state (`PRINCIPAL_KEY`), for code
that runs without the request at hand (`Listings.input_schema`). Set by `auth.middleware.Credentials`."""


def identity_in(scope_state: Mapping[str, Any]) -> Identity | None:
    """The caller's `Identity` in an ASGI scope's state (None: the request carried no access token)."""
    found = scope_state.get(IDENTITY_KEY)
    return found if isinstance(found, Identity) else None
