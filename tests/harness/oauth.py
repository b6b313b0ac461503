"""The hub as an OAuth resource server: the policy its principals get, and reading its challenges."""

from __future__ import annotations

import re

import httpx2
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from tests.conftest import ROOT

POLICY = """
[principals]
carol = "operator"
hub-client = "reader"           # the oidc-provider test's client (its tokens' sub)

[scopes]
"hub:admin" = "operator"
"hub:read" = "reader"

[groups]
engineering = "operator"

[profiles.reader]
[[profiles.reader.rules]]
id = "read"
effect = "allow"
tools = ["srv/echo"]

[profiles.operator]
extends = ["reader"]
[[profiles.operator.rules]]
id = "pid"
effect = "allow"
tools = ["srv/pid"]
[[profiles.operator.rules]]
id = "notes-writers"
effect = "allow"
tools = ["srv/delete_note"]
scopes = ["notes:write"]
"""


ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def challenge_of(response: httpx2.Response) -> dict[str, str]:
    """The WWW-Authenticate Bearer challenge's parameters (RFC 6750 §3: auth-params with quoted values)."""
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer ")
    params = dict(re.findall(r'([a-z_]+)="([^"]*)"', value))
    assert re.fullmatch(r'Bearer [a-z_]+="[^"]*"(, [a-z_]+="[^"]*")*', value), value
    return params


NODE = ROOT / "tests" / "npm" / "node_modules" / ".bin" / "node"


class Tokens:
    """The SDK client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info
