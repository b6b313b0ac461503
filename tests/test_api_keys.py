"""Who an HTTP client is by API key (auth/middleware.py), and the sessions that key opens."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from mcp_hub.config import load_config
from mcp_hub.server.http import build_app
from tests.conftest import KEYS, fixture_server, running_hub, serve_app, write_config

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.slow
async def test_a_session_opened_with_one_api_key_is_refused_to_another(tmp_path: Path) -> None:
    path = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    with path.open("a", encoding="utf-8") as file:
        file.write('\n[auth]\napi_keys = { alice = "${ALICE_KEY}", bob = "${BOB_KEY}" }\n')
    config = load_config(path, environ={"ALICE_KEY": KEYS["alice"], "BOB_KEY": KEYS["bob"]})
    async with running_hub(config) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, api_keys=KEYS)
        async with serve_app(app) as base, httpx2.AsyncClient(timeout=30) as http:
            opened = await http.post(f"{base}/mcp", json=INITIALIZE, headers={**ACCEPT, "X-API-Key": KEYS["alice"]})
            session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
            own = await http.post(f"{base}/mcp", json=PING, headers={**ACCEPT, **session, "X-API-Key": KEYS["alice"]})
            bearer = {"Authorization": f"Bearer {KEYS['alice']}"}
            own_bearer = await http.post(f"{base}/mcp", json=PING, headers={**ACCEPT, **session, **bearer})
            other = await http.post(f"{base}/mcp", json=PING, headers={**ACCEPT, **session, "X-API-Key": KEYS["bob"]})
    assert opened.status_code == own.status_code == own_bearer.status_code == 200
    assert other.status_code == 404  # answered as if the session did not exist
