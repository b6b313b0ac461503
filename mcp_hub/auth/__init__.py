"""Who an HTTP client is, by OAuth 2.1 access token: the hub as a resource server (MCP authorization).

The settings are `config.OAuthSettings` ([auth.oauth]). From them:

- metadata.py: the protected resource metadata (RFC 9728) and the WWW-Authenticate challenges that
  point to it;
- discovery.py: the issuer's own metadata (RFC 8414 / OpenID Connect);
- jwks.py: the issuer's keys, cached, refetched at a bounded rate;
- jwt.py: a JWT access token checked against them (joserfc);
- introspection.py: an opaque token asked about (RFC 7662), the answers cached;
- verifier.py: one `verify(token) -> Identity` over both;
- dpop.py: DPoP proofs (RFC 9449) of the key a token is bound to;
- middleware.py: the ASGI middleware in front of the MCP endpoint (with the API keys);
- identity.py: `Identity`, the caller as the token says, on the request for the links that need it.
"""

from mcp_hub.auth.identity import IDENTITY_KEY, Identity
from mcp_hub.auth.refusal import Refusal

__all__ = ["IDENTITY_KEY", "Identity", "Refusal"]
