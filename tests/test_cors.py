"""Browser clients: CORS on the hub's HTTP endpoint for the origins `[http] cors_origins` allows.

Each test is real HTTP to the hub served by uvicorn: the requests a browser sends for a web page's MCP
client (its preflight, then the request itself), and what the browser reads of the answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_hub.config import parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.server.http import build_app
from tests.conftest import fixture_server, make_config, running_hub, serve_app
from tests.harness.wire import JSON_HEADERS, modern_call

pytestmark = pytest.mark.anyio

PAGE = "https://app.example.com"
"""The origin allowed in these tests."""
OTHER = "https://evil.example"

CLIENT_HEADERS = "content-type, accept, mcp-protocol-version, mcp-method, mcp-name, mcp-param-region, authorization"
"""What a browser asks to send for a 2026-07-28 tools/call of the TypeScript SDK's client (one header a
tool's schema names among them)."""

KEY = "k" * 24


@asynccontextmanager
async def hub_for_browsers(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[httpx2.AsyncClient, str]]:
    """A hub with the fixture server `srv`, over HTTP on loopback with `options` for `build_app`; an HTTP client
    and the endpoint's URL."""
    config = make_config(tmp_path, {"srv": fixture_server("srv")})
    async with running_hub(config) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, **options)
        async with serve_app(app) as base, httpx2.AsyncClient(timeout=30) as http:
            yield http, f"{base}/mcp"


def preflight(origin: str, method: str = "POST", headers: str = CLIENT_HEADERS) -> dict[str, str]:
    return {"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}


def listed(value: str | None) -> set[str]:
    return {part.strip().lower() for part in (value or "").split(",") if part.strip()}


async def test_without_allowed_origins_there_is_no_cors(tmp_path: Path) -> None:
    async with hub_for_browsers(tmp_path) as (http, url):
        answer = await http.options(url, headers=preflight(PAGE))
    assert answer.status_code == 403  # a foreign origin, on loopback
    assert "access-control-allow-origin" not in answer.headers


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_an_allowed_origins_preflight_is_answered(tmp_path: Path, method: str) -> None:
    async with hub_for_browsers(tmp_path, cors_origins=[PAGE]) as (http, url):
        answer = await http.options(url, headers=preflight(PAGE, method, f"{CLIENT_HEADERS}, mcp-session-id"))
    assert answer.status_code == 200, answer.text
    assert answer.headers["access-control-allow-origin"] == PAGE
    assert listed(answer.headers["access-control-allow-methods"]) == {"get", "post", "delete", "options"}
    assert listed(answer.headers["access-control-allow-headers"]) == listed(f"{CLIENT_HEADERS}, mcp-session-id")
    assert "origin" in listed(answer.headers["vary"])


@pytest.mark.parametrize(
    ("origin", "headers"),
    [
        (OTHER, CLIENT_HEADERS),
        (f"{PAGE}:8443", CLIENT_HEADERS),  # another port is another origin
        (PAGE, f"{CLIENT_HEADERS}, x-not-mcp"),  # a header no MCP client sends
        (PAGE, "mcp-param-"),
    ],
)
async def test_any_other_preflight_is_refused(tmp_path: Path, origin: str, headers: str) -> None:
    async with hub_for_browsers(tmp_path, cors_origins=[PAGE]) as (http, url):
        answer = await http.options(url, headers=preflight(origin, headers=headers))
    assert answer.status_code == 400
    assert "access-control-allow-origin" not in answer.headers


async def test_a_call_from_an_allowed_origin_shows_the_page_the_mcp_headers(tmp_path: Path) -> None:
    async with hub_for_browsers(tmp_path, cors_origins=[PAGE]) as (http, url):
        headers, body = modern_call("srv_echo", {"text": "from a page"})
        call = await http.post(url, json=body, headers={**headers, "Origin": PAGE})
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "page", "version": "0"},
            },
        }
        session = await http.post(url, json=init, headers={**JSON_HEADERS, "Origin": PAGE})
        closed = await http.delete(url, headers={"Origin": PAGE, "Mcp-Session-Id": session.headers["mcp-session-id"]})
    assert call.status_code == 200
    assert call.json()["result"]["structuredContent"] == {"text": "from a page", "server": "srv"}
    for answer in (call, session, closed):
        assert answer.headers["access-control-allow-origin"] == PAGE
        exposed = listed(answer.headers["access-control-expose-headers"])
        assert {"mcp-session-id", "mcp-protocol-version", "www-authenticate"} <= exposed
    assert closed.status_code == 200


async def test_a_call_from_another_origin_is_refused_as_before(tmp_path: Path) -> None:
    """Bound to loopback, the endpoint refuses an origin that is neither loopback nor allowed (DNS rebinding
    protection), and tells no browser it may read the answer."""
    async with hub_for_browsers(tmp_path, cors_origins=[PAGE]) as (http, url):
        headers, body = modern_call("srv_echo", {"text": "x"})
        refused = await http.post(url, json=body, headers={**headers, "Origin": OTHER})
        local = await http.post(url, json=body, headers={**headers, "Origin": "http://localhost:5173"})
    assert refused.status_code == 403
    assert "access-control-allow-origin" not in refused.headers
    assert local.status_code == 200 and "access-control-allow-origin" not in local.headers


async def test_an_api_key_is_not_asked_of_a_preflight_and_its_absence_is_readable(tmp_path: Path) -> None:
    """A preflight carries no credentials; a call without a key is answered 401, and the page may read why."""
    async with hub_for_browsers(tmp_path, cors_origins=[PAGE], api_keys={"page": KEY}) as (http, url):
        checked = await http.options(url, headers=preflight(PAGE))
        headers, body = modern_call("srv_echo", {"text": "x"})
        unauthorized = await http.post(url, json=body, headers={**headers, "Origin": PAGE})
        authorized = await http.post(
            url, json=body, headers={**headers, "Origin": PAGE, "Authorization": f"Bearer {KEY}"}
        )
    assert checked.status_code == 200
    assert unauthorized.status_code == 401
    assert unauthorized.headers["access-control-allow-origin"] == PAGE
    assert "www-authenticate" in listed(unauthorized.headers["access-control-expose-headers"])
    assert authorized.status_code == 200 and authorized.headers["access-control-allow-origin"] == PAGE


def test_the_allowed_origins_are_read_from_hub_toml() -> None:
    servers = '[servers.a]\ncommand = "x"\n'
    config = parse_config(f'{servers}[http]\ncors_origins = ["{PAGE}", "http://localhost:5173"]\n')
    assert config.http.cors_origins == (PAGE, "http://localhost:5173")
    assert parse_config(servers).http.cors_origins == ()


@pytest.mark.parametrize(
    ("origin", "reason"),
    [
        (f"{PAGE}/", "goes on past its host and port"),
        (f"{PAGE}/app", "goes on past its host and port"),
        ("*", "list each origin"),
        ("app.example.com", "not an http:// or https:// origin"),
        ("https://app.example.com:443", "default port"),
        ("https://App.Example.com", "lowercase"),
        ("https://app.example.com:99999", "invalid port"),
    ],
)
def test_an_origin_that_is_no_origin_is_a_config_error(origin: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f'[servers.a]\ncommand = "x"\n[http]\ncors_origins = ["{PAGE}", "{origin}"]\n')
    assert "http.cors_origins[1]" in str(caught.value) and reason in str(caught.value)
