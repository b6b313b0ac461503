"""A real MCP server, built on the SDK's low-level `Server`, that implements only part of what it offers.

Runs as a stdio child process (`python tests/servers/partial.py`). By default it
offers tools (`echo`) and resources (`partial://readme`), but registers no
resource-templates handler, so it answers `resources/templates/list` with
-32601 "Method not found", as servers built on the SDK's low-level `Server`
commonly do.

Options:
  --refuse         declare logging, resource subscriptions and completions, and answer
                   logging/setLevel, resources/subscribe, completion/complete and ping
                   with -32601
  --flaky-prompts  offer prompts, and answer the first prompts/list with -32603
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import mcp_types as types
from mcp.server.caching import CACHEABLE_METHODS, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, METHOD_NOT_FOUND

Ctx = ServerRequestContext[Any, Any]

ECHO = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
README = {"uri": "partial://readme", "name": "readme", "mimeType": "text/plain"}


def build_server(*, refuse: bool = False, flaky_prompts: bool = False) -> Server[Any]:
    tools = [ECHO]
    resources = [README]

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"tools": tools, "resultType": "complete"}

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        text = (params.arguments or {}).get("text", "")
        return {"content": [{"type": "text", "text": f"partial: {text}"}], "resultType": "complete"}

    async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"resources": resources, "resultType": "complete"}

    async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> Any:
        uri = str(params.uri)
        return {"contents": [{"uri": uri, "text": "read me", "mimeType": "text/plain"}], "resultType": "complete"}

    server = Server(
        "partial",
        version="1.0.0",
        cache_hints={m: CacheHint() for m in CACHEABLE_METHODS if m != "server/discover"},
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )
    if flaky_prompts:
        asked = [0]

        async def list_prompts(ctx: Ctx, params: Any) -> Any:
            asked[0] += 1
            if asked[0] == 1:
                raise MCPError(code=INTERNAL_ERROR, message="database is locked")
            return {"prompts": [{"name": "greet", "description": "Greet someone."}], "resultType": "complete"}

        server.add_request_handler("prompts/list", types.PaginatedRequestParams, list_prompts)
    if refuse:

        async def not_found(ctx: Ctx, params: Any) -> Any:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found")

        server.add_request_handler("ping", types.RequestParams, not_found)
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, not_found)
        server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, not_found)
        server.add_request_handler("completion/complete", types.CompleteRequestParams, not_found)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--refuse", action="store_true")
    parser.add_argument("--flaky-prompts", action="store_true")
    opts = parser.parse_args()
    server = build_server(refuse=opts.refuse, flaky_prompts=opts.flaky_prompts)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
