"""Workload identity federation (`mode = "workload"`): the hub's own token, by its workload's identity token.

Where the hub runs as a workload with an identity token of its platform's (a Kubernetes projected service
account token, a cloud's instance identity token, a CI job's OIDC token), it needs no client secret: it
presents that token to the server's authorization server with the JWT bearer grant (RFC 7523 section 2.1:
`grant_type` `urn:ietf:params:oauth:grant-type:jwt-bearer`, `assertion` the token; SEP-1933), which trusts
the platform's issuer, and gets its access token. The token is configured (`assertion`, as ${VAR}) or read
from a file (`assertion_file`) at each token request, as a projected token is rotated in place. The
client authenticates as configured (by default a public client, `client_id` in the body). The access token
is kept and renewed as client credentials' is (client_credentials.py: the same request, another grant).
A refusal (`invalid_grant`, `invalid_scope`, `unauthorized_client`) is the call's error; the hub tries no
other grant.
"""

from __future__ import annotations

from pathlib import Path

from mcp_hub.credentials.client_credentials import ClientCredentials
from mcp_hub.credentials.credential import CredentialError

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
"""The JWT bearer grant (RFC 7523 section 2.1)."""


class WorkloadIdentity(ClientCredentials):
    """A `Credential`: a token for the hub itself, by the JWT bearer grant with its workload's identity token."""

    def grant(self) -> dict[str, str]:
        auth = self._auth
        if auth.assertion is not None:
            return {"grant_type": JWT_BEARER, "assertion": auth.assertion}
        assert auth.assertion_file is not None
        try:
            assertion = Path(auth.assertion_file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CredentialError(self.server, f"cannot read assertion_file {auth.assertion_file}: {exc}") from exc
        if not assertion:
            raise CredentialError(self.server, f"assertion_file {auth.assertion_file} is empty")
        return {"grant_type": JWT_BEARER, "assertion": assertion}
