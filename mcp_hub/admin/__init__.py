"""The admin console: the hub seen and governed from a browser, at `/admin` of the HTTP endpoint.

Off unless `[admin] enabled = true` (with `keys`, the administrators' login keys, or `[admin.oidc]`, single
sign-on through the organisation's identity provider: sso.py). Pages: Status (live; a failing mount's attempts
and its server's stderr, masked), Catalog (titles, icons drawn only from data, "view as principal"), Pins
(accept or reject a changed tool), Connections (people's sign-ins to `mode = "user"` servers and the clients
they allowed: revoke, withdraw), Audit (filtered, paged, live) and Explain. Rendered on the server; one small
script follows the live parts (server-sent events). Sessions are kept on the server (in Redis with `[cluster]`)
and end at logout or when their key leaves `[admin] keys` (a person's: when the single sign-on settings
change); login attempts are rate-limited.
"""

from mcp_hub.admin.app import console

__all__ = ["console"]
