"""The HTTP doors' check of a POST's headers (server/http/acceptance.py): the SDK's verdict, remembered."""

from __future__ import annotations

import itertools

import pytest
from mcp.server.streamable_http import StreamableHTTPServerTransport, check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request

from mcp_hub.server.http import acceptance
from mcp_hub.server.http.acceptance import Acceptance

pytestmark = pytest.mark.anyio

LOOPBACK = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", "https://app.example"],
)

ACCEPTS = [None, "application/json, text/event-stream", "*/*", "application/json", "text/*, application/*", ""]
CONTENT_TYPES = [None, "application/json", "application/json; charset=utf-8", "text/plain", "Application/JSON"]
HOSTS = [None, "127.0.0.1:8765", "localhost:1", "evil.example:80", "127.0.0.1"]
ORIGINS = [None, "http://localhost:3000", "https://app.example", "https://evil.example"]


def _request(headers: dict[str, str]) -> Request:
    raw = [(name.encode(), value.encode()) for name, value in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/mcp", "headers": raw, "query_string": b""})


async def _sdk_verdicts(
    headers: dict[str, str], security: TransportSecurityMiddleware, transport: StreamableHTTPServerTransport
) -> tuple[bool, bool]:
    """What the SDK says, each check run on a Starlette request as the SDK runs it: (2026-07-28, handshake era)."""
    request = _request(headers)
    has_json, has_sse = check_accept_headers(request)
    takes = has_json and has_sse and await security.validate_request(request, is_post=True) is None
    return takes, takes and transport._check_content_type(request)  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("settings", [LOOPBACK, None], ids=["loopback", "unprotected"])
async def test_the_verdict_on_a_posts_headers_is_the_sdks_for_every_combination(
    settings: TransportSecuritySettings | None,
) -> None:
    """Every combination of the four headers the SDK reads, asked twice (the second answer is the kept one):
    the same verdicts as the SDK's own checks, in both eras."""
    checks = Acceptance(settings)
    security = TransportSecurityMiddleware(settings)
    transport = StreamableHTTPServerTransport(mcp_session_id="s", security_settings=settings)
    for _ in range(2):
        for accept, content_type, host, origin in itertools.product(ACCEPTS, CONTENT_TYPES, HOSTS, ORIGINS):
            values = {"accept": accept, "content-type": content_type, "host": host, "origin": origin}
            headers = {name: value for name, value in values.items() if value is not None}
            expected = await _sdk_verdicts(headers, security, transport)
            got = (await checks.modern(headers), await checks.handshake(headers, transport))
            assert got == expected, headers


async def test_past_its_bound_the_kept_verdicts_start_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients that send ever new header values cannot grow what is kept past `KEPT` combinations."""
    monkeypatch.setattr(acceptance, "KEPT", 8)
    checks = Acceptance(LOOPBACK)
    for port in range(100):
        headers = {"accept": "*/*", "content-type": "application/json", "host": f"127.0.0.1:{port}"}
        assert await checks.modern(headers)
        assert len(checks._modern) <= 8  # pyright: ignore[reportPrivateUsage]
