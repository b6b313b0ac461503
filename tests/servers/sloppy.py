"""A real MCP server that lists malformed items: JSON-RPC written by hand over stdio, handshake era only.

SDK servers validate their own answers, so a server whose lists break the
schema has to be written without one, as some are. It lists:

- tools: `echo` (well formed), a tool without a name, `stringly` (its inputSchema
  is a string), a second `echo`, `spare` (well formed);
- resources: `sloppy://readme` (well formed) and a resource without a uri.

It answers initialize, ping, tools/list, tools/call, resources/list,
resources/templates/list (none) and resources/read; anything else with -32601.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS: list[dict[str, Any]] = [
    {"name": "echo", "description": "Echo the text back.", "inputSchema": {"type": "object"}},
    {"description": "A tool without a name.", "inputSchema": {"type": "object"}},
    {"name": "stringly", "description": "Its inputSchema is a string.", "inputSchema": "object"},
    {"name": "echo", "description": "A second echo.", "inputSchema": {"type": "object"}},
    {"name": "spare", "description": "Well formed.", "inputSchema": {"type": "object"}},
]
RESOURCES: list[dict[str, Any]] = [
    {"uri": "sloppy://readme", "name": "readme", "mimeType": "text/plain"},
    {"name": "nowhere", "mimeType": "text/plain"},
]


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "sloppy", "version": "1.0.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        text = (params.get("arguments") or {}).get("text", "")
        return {"content": [{"type": "text", "text": f"sloppy {params.get('name')}: {text}"}]}
    if method == "resources/list":
        return {"resources": RESOURCES}
    if method == "resources/templates/list":
        return {"resourceTemplates": []}
    if method == "resources/read":
        return {"contents": [{"uri": params.get("uri"), "text": "read me", "mimeType": "text/plain"}]}
    raise LookupError(method)


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue  # a notification, or an answer
        try:
            reply: dict[str, Any] = {"result": answer(request)}
        except LookupError:
            reply = {"error": {"code": -32601, "message": "Method not found"}}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **reply}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
