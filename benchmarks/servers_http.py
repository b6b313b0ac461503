"""Servers shaped like the ones users mount, each over streamable HTTP in a process of its own.

    python benchmarks/servers_http.py KIND --port PORT

KIND:

- `lowlevel`: an SDK 2.x low-level `Server` with a realistic catalog: the 53 tools
  that four real servers answer `tools/list` with (github, filesystem, git and
  sequential-thinking, from `tests/data/tool_corpus.json`: rich schemas, long
  descriptions), its `tools/list` handler building typed `Tool`s on each call as such
  servers do, and no `get_tool_input_schema`, as `mcp-hub import` finds them. Its
  `tools/call` answers any of them with a line of text.
- `mcpserver`: the SDK's high-level `MCPServer` (decorated functions, schemas derived
  from their signatures), with a few tools.

Both run behind the SDK's own `streamable_http_app()` and uvicorn at log level
`warning`, as fixture_http.py serves the tests' small fixture; `SERVERS` in
default_path.py names these two, the fixture and npm's server-everything (the
TypeScript SDK), with the tool each benchmark calls.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "tool_corpus.json"
CORPUS_SERVERS = ("github", "filesystem", "git", "sequential-thinking")
"""The corpus servers whose tools the low-level server serves: 26 + 14 + 12 + 1 = 53 tools."""


def corpus_tools() -> list[dict[str, Any]]:
    servers = json.loads(CORPUS.read_text(encoding="utf-8"))["servers"]
    return [tool for name in CORPUS_SERVERS for tool in servers[name]["tools"]]


def lowlevel_server() -> Server[Any]:
    catalog = corpus_tools()

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        return types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in catalog])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        arguments = json.dumps(params.arguments or {}, sort_keys=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name}: {arguments}")])

    return Server("realistic", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def mcpserver_server() -> MCPServer:
    mcp = MCPServer("high-level")

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool()
    def search(query: str, limit: int = 10, include_archived: bool = False) -> list[str]:
        """Search the notes for `query`; at most `limit` titles."""
        return [f"{query} #{i}" for i in range(min(limit, 3))]

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve a user-shaped MCP server over streamable HTTP.")
    parser.add_argument("kind", choices=("lowlevel", "mcpserver"))
    parser.add_argument("--port", type=int, required=True)
    opts = parser.parse_args()
    server = lowlevel_server() if opts.kind == "lowlevel" else mcpserver_server()
    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=opts.port, log_level="warning")


if __name__ == "__main__":
    main()
