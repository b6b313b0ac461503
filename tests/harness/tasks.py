"""Calling a tool as a task and following it to its end."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from pydantic import TypeAdapter

_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


class _TaskRequest(types.Request[dict[str, Any], str]):
    name_param = "taskId"  # sent as `Mcp-Name`


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    request = types.Request[dict[str, Any], str](method="tools/call", params={"name": tool, "arguments": arguments})
    return await client.session.send_request(request, _RAW)


async def follow(client: Client, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    return await client.session.send_request(_TaskRequest(method=method, params={"taskId": task_id, **params}), _RAW)


async def settled(client: Client, task_id: str) -> dict[str, Any]:
    """`tasks/get` until the task is no longer working (bounded)."""
    with anyio.fail_after(15):
        while (task := await follow(client, "tasks/get", task_id))["status"] == "working":
            await anyio.sleep(0.05)
    return task
