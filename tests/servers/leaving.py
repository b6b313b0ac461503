"""A real MCP server that dies leaving its stdout open, as one does that started a process on its stdout.

Told that its client's roots changed (`notifications/roots/list_changed`), it starts a process that keeps its
stdout (and not its stdin) open for a minute, or until killed, writes that process's id to the file named by
its one argument, and exits: its stdin then has no reader, so the client's next message cannot be written,
while its stdout has not ended. Its one tool, `echo` {"text"}, answers the text.

Run as a stdio child process: `python tests/servers/leaving.py PID_FILE`.
"""

from __future__ import annotations

import os
import sys
import time
from io import TextIOWrapper
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

Ctx = ServerRequestContext[Any, Any]

TOOLS = [
    {
        "name": "echo",
        "description": "Answer the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
]


def build_server(pid_file: Path) -> Server[Any]:
    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"tools": TOOLS}

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        return {"content": [{"type": "text", "text": str((params.arguments or {}).get("text"))}]}

    async def roots_changed(ctx: Ctx, params: types.NotificationParams) -> None:
        if os.fork() == 0:  # the keeper: the server's stdout, not its stdin
            os.close(0)
            written = pid_file.with_name(pid_file.name + ".tmp")
            written.write_text(str(os.getpid()), encoding="utf-8")
            os.replace(written, pid_file)
            time.sleep(60)
            os._exit(0)
        os._exit(0)

    server = Server("leaving", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, roots_changed)
    return server


def main() -> None:
    server = build_server(Path(sys.argv[1]))

    async def run() -> None:
        # Its own streams on fds 0 and 1 (stdio_server's default serves duplicates of them, which the keeper would
        # hold too): closing fd 0 in the keeper leaves the stdin pipe without a reader once the server is gone.
        stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
        async with stdio_server(stdin, stdout) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
