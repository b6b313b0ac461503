"""Requests written by hand as a client puts them on the wire: a 2026-07-28 call, a handshake-era session,
and reading what came back."""

from __future__ import annotations

import json
from typing import Any

import httpx2

JSON_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MODERN = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def modern_call(tool: str, arguments: dict[str, Any], request_id: int = 1) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and body of a 2026-07-28 `tools/call`, as a client would POST it."""
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}
    params = {"name": tool, "arguments": arguments, "_meta": MODERN_META}
    return headers, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def legacy_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """Open a handshake-era session by hand; the headers its requests carry."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    response = await http.post(url, json=init, headers=JSON_HEADERS)
    assert response.status_code == 200, response.text
    headers = {**JSON_HEADERS, "Mcp-Session-Id": response.headers["mcp-session-id"]}
    headers["MCP-Protocol-Version"] = "2025-11-25"
    initialized = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert initialized.status_code == 202
    return headers


def read_answer(response: httpx2.Response) -> tuple[int, str, Any]:
    """Status, content type and what a client reads: the JSON body, or the SSE stream's events."""
    kind = response.headers.get("content-type", "").split(";")[0]
    if kind == "text/event-stream":
        body: Any = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    else:
        body = response.json() if kind == "application/json" else response.text
    return response.status_code, kind, body
