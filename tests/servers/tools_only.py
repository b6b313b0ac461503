"""A server on the SDK's low-level `Server` that implements `tools/list` and `tools/call` and nothing else.

Every other request (`resources/list`, `resources/templates/list`, `prompts/list`, ...) gets the
SDK's own answer to a method it does not serve: JSON-RPC error -32601 (method not found), as many
small real-world servers do. Runs as a stdio child: `python tests/servers/tools_only.py`.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

Ctx = ServerRequestContext[Any, Any]

TOOLS = [
    types.Tool(
        name="add",
        description="Add two integers.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    ),
    types.Tool(
        name="shout",
        description="The text in capitals; a tool error for empty text.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
]


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    match params.name:
        case "add":
            total = int(arguments["a"]) + int(arguments["b"])
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(total))])
        case "shout" if arguments.get("text"):
            return types.CallToolResult(content=[types.TextContent(type="text", text=arguments["text"].upper())])
        case "shout":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="nothing to shout")], is_error=True
            )
    raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")


def build_server() -> Server:
    return Server("tools-only", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
