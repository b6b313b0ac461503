"""A real MCP server that asks its client for roots on its own, as filesystem servers do.

Right after the client's `notifications/initialized`, and again after each
`notifications/roots/list_changed`, it asks `roots/list` from a background task,
outside any call. Its one tool, `heard`, answers what each of those questions got,
in order, as a JSON list of strings: the root URIs, space-separated ("" for an
empty list), or "error CODE: MESSAGE".

Run as a stdio child process: `python tests/servers/roots_asker.py`.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

Ctx = ServerRequestContext[Any, Any]

TOOLS = [
    {
        "name": "heard",
        "description": "What each roots/list this server asked on its own was answered, in order.",
        "inputSchema": {"type": "object"},
    }
]


def build_server(task_group: anyio.abc.TaskGroup) -> Server[Any]:
    heard: list[str] = []

    async def ask(session: ServerSession) -> None:
        try:
            answer = await session.send_request(types.ListRootsRequest(), types.ListRootsResult)
        except MCPError as exc:
            heard.append(f"error {exc.error.code}: {exc.error.message}")
            return
        heard.append(" ".join(str(root.uri) for root in answer.roots))

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"tools": TOOLS}

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        return {"content": [{"type": "text", "text": json.dumps(heard)}]}

    server = Server("roots-asker", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)

    async def initialized(ctx: Ctx, params: types.NotificationParams) -> None:
        task_group.start_soon(ask, ctx.session)

    async def roots_changed(ctx: Ctx, params: types.NotificationParams) -> None:
        task_group.start_soon(ask, ctx.session)

    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, roots_changed)
    return server


def main() -> None:
    async def run() -> None:
        async with anyio.create_task_group() as tg, stdio_server() as (read_stream, write_stream):
            server = build_server(tg)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()

    anyio.run(run)


if __name__ == "__main__":
    main()
