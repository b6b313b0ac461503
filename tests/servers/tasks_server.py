"""A real MCP server that answers some calls with a task (SEP-2663, the `io.modelcontextprotocol/tasks` extension).

It advertises the extension, and for a request that declares it (in its client capabilities),
`slow_compute` answers with a task handle (`resultType: "task"`) whose status is `working` for
`seconds` seconds and then `completed`, with the tool's result inlined on `tasks/get`.
`tasks/cancel` settles a working task as `cancelled`; `tasks/update` acknowledges. `greet` is
always synchronous. Unknown task ids are answered with -32602, as the extension requires.

`python tests/servers/tasks_server.py` serves stdio; `--http PORT` serves streamable HTTP.
"""

from __future__ import annotations

import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"

Ctx = ServerRequestContext[Any, Any]


class TaskParams(types.RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str


_TOOLS = [
    {
        "name": "greet",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
    {
        "name": "slow_compute",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
        },
    },
]


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _declares_tasks(ctx: Ctx) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and bool(caps.extensions) and TASKS in (caps.extensions or {})


def build_server(name: str = "tasks") -> Server[Any]:
    tasks: dict[str, dict[str, Any]] = {}

    def status_of(task: dict[str, Any]) -> str:
        if task["status"] == "working" and time.monotonic() - task["started"] >= task["seconds"]:
            task["status"] = "completed"
            task["lastUpdatedAt"] = _now()
        return str(task["status"])

    def known(task_id: str) -> dict[str, Any]:
        task = tasks.get(task_id)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown task: {task_id}")
        return task

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"tools": _TOOLS, "resultType": "complete"}

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        arguments = params.arguments or {}
        if params.name == "greet":
            text = f"Hello, {arguments.get('name', 'World')}!"
            return {"content": [{"type": "text", "text": text}], "resultType": "complete"}
        label = str(arguments.get("label", ""))
        result = {
            "content": [
                {"type": "text", "text": f"computed {label}"},
                {"type": "resource_link", "uri": f"note://{label}", "name": label},
            ],
            "isError": False,
        }
        if not _declares_tasks(ctx):
            return {**result, "resultType": "complete"}
        task_id = str(uuid.uuid4())
        now = _now()
        tasks[task_id] = {
            "started": time.monotonic(),
            "seconds": float(arguments.get("seconds", 0)),
            "status": "working",
            "createdAt": now,
            "lastUpdatedAt": now,
            "result": result,
        }
        return {
            "resultType": "task",
            "taskId": task_id,
            "status": "working",
            "createdAt": now,
            "lastUpdatedAt": now,
            "ttlMs": 60_000,
            "pollIntervalMs": 50,
        }

    async def get_task(ctx: Ctx, params: TaskParams) -> Any:
        task = known(params.task_id)
        status = status_of(task)
        answer: dict[str, Any] = {
            "taskId": params.task_id,
            "status": status,
            "createdAt": task["createdAt"],
            "lastUpdatedAt": task["lastUpdatedAt"],
            "ttlMs": 60_000,
            "resultType": "complete",
        }
        if status == "completed":
            answer["result"] = task["result"]
        return answer

    async def cancel_task(ctx: Ctx, params: TaskParams) -> Any:
        task = known(params.task_id)
        if status_of(task) == "working":
            task["status"] = "cancelled"
            task["lastUpdatedAt"] = _now()
        return {"resultType": "complete"}

    async def update_task(ctx: Ctx, params: TaskParams) -> Any:
        known(params.task_id)
        return {"resultType": "complete"}

    hints = {"tools/list": CacheHint()}
    server = Server(name, version="1.0.0", cache_hints=hints, on_list_tools=list_tools, on_call_tool=call_tool)
    server.extensions[TASKS] = {}
    server.add_request_handler("tasks/get", TaskParams, get_task)
    server.add_request_handler("tasks/cancel", TaskParams, cancel_task)
    server.add_request_handler("tasks/update", TaskParams, update_task)
    return server


async def _serve_stdio() -> None:
    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        import uvicorn

        uvicorn.run(build_server().streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        anyio.run(_serve_stdio)


if __name__ == "__main__":
    main()
