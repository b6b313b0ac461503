"""A real MCP server whose names come from its command line, for tests of what the hub quotes to a person.

`python tests/servers/names.py '"delete\\u202efdp.exe"' ...`: each argument is a JSON string, so a
name can hold any character (a right-to-left override, a zero-width space). Each names a tool,
which answers "ran NAME" with the arguments it was called with, and a resource `note://NAME`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

Ctx = ServerRequestContext[Any, Any]


def build_server(names: list[str]) -> Server[Any]:
    tools = [{"name": name, "inputSchema": {"type": "object"}} for name in names]
    resources = [{"uri": f"note://{name}", "name": name} for name in names]

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"tools": tools, "resultType": "complete"}

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        text = f"ran {params.name} {json.dumps(params.arguments or {}, sort_keys=True)}"
        return {"content": [{"type": "text", "text": text}], "resultType": "complete"}

    async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"resources": resources, "resultType": "complete"}

    async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> Any:
        contents = [{"uri": str(params.uri), "text": f"read {params.uri}"}]
        return {"contents": contents, "resultType": "complete"}

    async def list_templates(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"resourceTemplates": [], "resultType": "complete"}

    hints = {
        "tools/list": CacheHint(),
        "resources/list": CacheHint(),
        "resources/templates/list": CacheHint(),
        "resources/read": CacheHint(),
    }
    return Server(
        "names",
        version="1.0.0",
        cache_hints=hints,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def main() -> None:
    server = build_server([json.loads(arg) for arg in sys.argv[1:]])

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
