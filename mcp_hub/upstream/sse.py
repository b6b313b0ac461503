"""A legacy SSE server (the 2024-11-05 HTTP+SSE transport): the SDK's client, as it is.

Its requests take the SDK session's own path (no channel): the transport gives
the SDK a client of its own, whose POSTs are read whole. The one change is the
size of an event, which the SDK's client caps at 1 MiB and the hub does not
(`sdk.client.sse_within_origin_uncapped`, applied by `sdk.client.install()`).
"""

from __future__ import annotations

from mcp.client import Transport
from mcp.client.sse import sse_client

from mcp_hub.config import ServerConfig
from mcp_hub.credentials import Credential

SSE_READ_SECONDS = 300.0
"""How long the event stream may stay silent before the connection counts as broken."""


def sse_transport(config: ServerConfig, credential: Credential | None = None) -> Transport:
    """The SDK's legacy SSE client for `config`'s URL, presenting `credential` (see mcp_hub/credentials/)."""
    assert config.url is not None
    auth = credential.http_auth() if credential is not None else None
    return sse_client(config.url, headers=dict(config.headers), sse_read_timeout=SSE_READ_SECONDS, auth=auth)
