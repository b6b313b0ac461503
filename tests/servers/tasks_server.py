"""A real MCP server that answers some calls with a task (SEP-2663, the `io.modelcontextprotocol/tasks` extension).

The fixtures the conformance suite's `tasks-*` scenarios (0.2.x) call: it advertises the
extension, and for a request that declares it (in its client capabilities) a task-supporting tool
answers with a task handle (`resultType: "task"`). `slow_compute` works `seconds` seconds (its
`statusMessage` "computing <label>"; with `opaque`, its task id is 32 random URL-safe bytes, not a
UUID), then completes with its result (inlined on `tasks/get`);
`failing_job` completes after a second with a tool error (and needs the extension: -32021 without
it); `protocol_error_job` fails with a JSON-RPC
error; `confirm_delete` and `multi_input` wait on one and two elicitations, answered with
`tasks/update`; `test_tool_with_task` asks a name in an `input_required` round, then creates a
task that greets it; `tasks/get` of a working `stuck_job` never answers (once cancelled, it tells how many such requests
were cancelled, in `interruptedGets`). `tasks/cancel` settles an unfinished
task as `cancelled`. `greet` is synchronous;
without the extension the others are too. Unknown task ids are -32602, follow-ups from a client
without the extension -32021, and an `Mcp-Name` other than the task id -32020. With `TASKS_RECORD` set to a
file, the answers each `tasks/update` brings are appended to it (a JSON line each): what reached the server.

`python tests/servers/tasks_server.py` serves stdio; `--http PORT` serves streamable HTTP.
"""

from __future__ import annotations

import json
import os
import secrets
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
from mcp.shared.inbound import decode_header_value
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.jsonrpc import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"

Ctx = ServerRequestContext[Any, Any]


class TaskParams(types.RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str


def _tool(tool: str, **properties: str) -> dict[str, Any]:
    schema = {k: {"type": t} for k, t in properties.items()}
    return {"name": tool, "inputSchema": {"type": "object", "properties": schema}}


_TOOLS = [
    _tool("greet", name="string"),
    _tool("slow_compute", seconds="number", label="string", opaque="boolean"),
    _tool("failing_job"),
    _tool("protocol_error_job"),
    _tool("confirm_delete", filename="string"),
    _tool("multi_input"),
    _tool("stuck_job"),
    _tool("test_tool_with_task"),
]
_REQUIRED = frozenset({"failing_job", "test_tool_with_task"})
"""Tools that run only as tasks: a caller without the extension is answered -32021."""


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _declares_tasks(ctx: Ctx) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and bool(caps.extensions) and TASKS in (caps.extensions or {})


def _undeclared() -> MCPError:
    data = {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    return MCPError(code=MISSING_REQUIRED_CLIENT_CAPABILITY, message="the tasks extension is required", data=data)


def _text(text: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


def _confirm(message: str, field: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {field: {"type": "boolean" if field == "confirm" else "string"}}}
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def build_server(name: str = "tasks") -> Server[Any]:
    tasks: dict[str, dict[str, Any]] = {}

    def status_of(task: dict[str, Any]) -> str:
        due = time.monotonic() - task["started"] >= task["seconds"]
        if task["status"] == "working" and not task["pending"] and due:
            task["status"] = "failed" if "error" in task else "completed"
            task["lastUpdatedAt"] = _now()
        if task["status"] == "working" and task["pending"]:
            return "input_required"
        return str(task["status"])

    def known(ctx: Ctx, params: TaskParams) -> dict[str, Any]:
        if not _declares_tasks(ctx):
            raise _undeclared()
        named = ctx.request.headers.get("mcp-name") if ctx.request is not None else None
        if named is not None and decode_header_value(named.strip()) != params.task_id:
            raise MCPError(code=HEADER_MISMATCH, message="Mcp-Name does not match params.taskId")
        task = tasks.get(params.task_id)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown task: {params.task_id}")
        return task

    def outcome(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """What a task-supporting tool's task does: how long it works, what it asks, how it ends."""
        if tool == "slow_compute":
            label = str(arguments.get("label", ""))
            result = _text(f"computed {label}")
            result["content"].append({"type": "resource_link", "uri": f"note://{label}", "name": label})
            seconds = float(arguments.get("seconds", 0))
            return {"seconds": seconds, "result": result, "message": f"computing {label}"}
        if tool == "failing_job":
            return {"seconds": 1.0, "result": _text("the job failed", error=True)}
        if tool == "protocol_error_job":
            label = arguments.get("label")
            message = f"the job crashed on {label}" if label else "the job crashed"
            return {"seconds": 0.0, "error": {"code": INTERNAL_ERROR, "message": message}}
        if tool == "confirm_delete":
            filename = str(arguments.get("filename", ""))
            pending = {"confirm": _confirm(f"Delete {filename}?", "confirm")}
            return {"seconds": 0.0, "pending": pending, "result": _text(f"deleted {filename}")}
        if tool == "test_tool_with_task":
            return {"seconds": 0.0, "result": _text(f"Hello, {arguments['name']}!")}
        if tool == "stuck_job":
            return {"seconds": 600.0, "stuck": True, "result": _text("never")}
        pending = {"first": _confirm("First input", "name"), "second": _confirm("Second input", "name")}
        return {"seconds": 0.0, "pending": pending, "result": _text("both inputs received")}

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"tools": _TOOLS, "resultType": "complete"}

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        arguments = params.arguments or {}
        if params.name == "greet":
            return {**_text(f"Hello, {arguments.get('name', 'World')}!"), "resultType": "complete"}
        if params.name not in {tool["name"] for tool in _TOOLS}:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        if not _declares_tasks(ctx):
            if params.name in _REQUIRED:
                raise _undeclared()
            return {**_text(f"ran {params.name} synchronously"), "resultType": "complete"}
        if params.name == "test_tool_with_task":
            # An input_required round first; the call that brings the answer creates the task.
            answers = (ctx.params or {}).get("inputResponses") or {}
            answer = answers.get("user_name") if isinstance(answers, dict) else None
            if not isinstance(answer, dict):
                asked = {"user_name": _confirm("What is your name?", "name")}
                return {"resultType": "input_required", "inputRequests": asked}
            arguments = {"name": str((answer.get("content") or {}).get("name", ""))}
        task_id = secrets.token_urlsafe(32) if arguments.get("opaque") else str(uuid.uuid4())
        now = _now()
        task = {"status": "working", "started": time.monotonic(), "createdAt": now, "lastUpdatedAt": now}
        tasks[task_id] = {"pending": {}, **task, **outcome(params.name, arguments)}
        return {"resultType": "task", "taskId": task_id, **_envelope(task), "pollIntervalMs": 50}

    def _envelope(task: dict[str, Any]) -> dict[str, Any]:
        fields = {"status": task["status"], "createdAt": task["createdAt"], "lastUpdatedAt": task["lastUpdatedAt"]}
        return {**fields, "ttlMs": 60_000}

    async def get_task(ctx: Ctx, params: TaskParams) -> Any:
        task = known(ctx, params)
        if task.get("stuck") and task["status"] == "working":
            try:
                await anyio.sleep_forever()  # until the request is cancelled
            except anyio.get_cancelled_exc_class():
                task["interrupted"] = task.get("interrupted", 0) + 1
                raise
        status = status_of(task)
        answer: dict[str, Any] = {"taskId": params.task_id, **_envelope(task), "status": status}
        if task.get("stuck"):
            answer["interruptedGets"] = task.get("interrupted", 0)
        if status == "working" and "message" in task:
            answer["statusMessage"] = task["message"]
        if status == "input_required":
            answer["inputRequests"] = dict(task["pending"])
        elif status == "completed":
            answer["result"] = task["result"]
        elif status == "failed":
            answer["error"] = task["error"]
        return {**answer, "resultType": "complete"}

    async def cancel_task(ctx: Ctx, params: TaskParams) -> Any:
        task = known(ctx, params)
        if status_of(task) in ("working", "input_required"):
            task["status"] = "cancelled"
            task["lastUpdatedAt"] = _now()
        return {"resultType": "complete"}

    async def update_task(ctx: Ctx, params: TaskParams) -> Any:
        task = known(ctx, params)
        answers = (params.model_extra or {}).get("inputResponses") or {}
        if os.environ.get("TASKS_RECORD"):
            with open(os.environ["TASKS_RECORD"], "a", encoding="utf-8") as file:
                file.write(json.dumps(answers, ensure_ascii=False) + "\n")
        for key in answers:
            task["pending"].pop(key, None)
        task["lastUpdatedAt"] = _now()
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
