"""Tasks (SEP-2663, the `io.modelcontextprotocol/tasks` extension of 2026-07-28): a call that a server
answers with a task handle, and the requests that follow it (`tasks/get`, `tasks/update`, `tasks/cancel`).

A server's handle (`resultType: "task"`) reaches the client with a task id of the hub's own: 32 random
bytes, URL-safe, kept with the principal that made the call, the mount that answered it and the
server's own id. A follow-up request is looked up under the caller's principal only, so another
principal's request for that id, like a request for an id the hub never issued or has forgotten,
is answered as the extension answers an unknown task (-32602): nothing tells the two apart. The
follow-up goes to the mount with the server's id (and, over HTTP, `Mcp-Name` set to it), on behalf
of the calling client (its capabilities, its per-client session), and its answer comes back with the
hub's id; a completed task's inlined result has its resource URIs mapped as a call's.

The policy decides at the call: a task exists at the hub only if the call that created it was
allowed, and its follow-ups are allowed to whoever made that call. A `tasks/get` answer passes the
guards on results (`TaskGuards`, the guardrails link's `guard_task`) as the call's result would have, and a
`tasks/update`'s answers to the task's questions (`inputResponses`) the guards on its arguments: the task
keeps what the call was (its method, tool, principal and session). The table is bounded (per
principal, and in principals); a task is forgotten when its server's `ttlMs` has passed.
`tasks/list` and `tasks/result` do not exist in the extension, and the handshake era's tasks (the
2025-11-25 `tasks` capability) are not relayed: the SDK validates a handshake-era call's result as a
`CallToolResult`, which a task handle is not.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cachetools import LRUCache
from mcp.shared.inbound import decode_header_value

from mcp_hub.catalog.catalog import Kind
from mcp_hub.chain.context import CallContext
from mcp_hub.chain.router import Router
from mcp_hub.errors import CapabilityMissing, HeaderMismatch, UnknownName
from mcp_hub.upstream import Origin

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, under `capabilities.extensions`."""

TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
"""The requests that follow a task, each naming it by `taskId`."""

_PRINCIPALS = 256
"""How many principals' tasks the hub keeps (the least recently used principal's go first); principals are
the configured API keys, plus `anonymous` and `stdio`."""
_TASKS_PER_PRINCIPAL = 1_000
"""How many tasks of one principal the hub keeps (the least recently used go first)."""


class TaskGuards(Protocol):
    """The guards on a task's follow-ups, as on the call (given) that created the task (the guardrails link)."""

    async def guard_task(self, ctx: CallContext, answer: dict[str, Any]) -> dict[str, Any]:
        """A `tasks/get` answer, guarded as the call's result."""
        ...

    async def guard_task_update(self, ctx: CallContext, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """A `tasks/update`'s params, its answers guarded as the call's arguments. Raises `Refused` when blocked."""
        ...


@dataclass(frozen=True, slots=True)
class _Call:
    """What the call that created a task was (for its guards), without its params and client."""

    method: str
    kind: Kind
    native: str
    public: str
    session: str | None
    via: str | None

    def context(self, principal: str, mount: str, origin: Origin) -> CallContext:
        return CallContext(
            method=self.method,
            kind=self.kind,
            mount=mount,
            native=self.native,
            public=self.public,
            params={},
            principal=principal,
            session=self.session,
            origin=origin,
            via=self.via,
        )


@dataclass(frozen=True, slots=True)
class _Task:
    call: _Call
    mount: str
    native: str
    """The server's own task id."""
    expires: float | None
    """Monotonic time after which the server no longer keeps the task (None: it said nothing)."""


class Tasks:
    """The tasks the hub relays, by principal and the hub's task id."""

    def __init__(self, router: Router, guards: TaskGuards | None = None) -> None:
        self._router = router
        self._guards = guards
        self._tasks: LRUCache[str, LRUCache[str, _Task]] = LRUCache(maxsize=_PRINCIPALS)

    def adopt(self, call: CallContext, result: dict[str, Any]) -> dict[str, Any]:
        """A call's result: a task handle is kept and given the hub's id; any other result is returned as is."""
        native = result.get("taskId")
        if result.get("resultType") != "task" or not isinstance(native, str):
            return result
        ttl = result.get("ttlMs")
        expires = time.monotonic() + ttl / 1000 if isinstance(ttl, int | float) and ttl > 0 else None
        own = self._tasks.get(call.principal)
        if own is None:
            own = self._tasks[call.principal] = LRUCache(maxsize=_TASKS_PER_PRINCIPAL)
        task_id = secrets.token_urlsafe(32)
        kept = _Call(call.method, call.kind, call.native, call.public, call.session, call.via)
        own[task_id] = _Task(kept, call.mount, native, expires)
        return {**result, "taskId": task_id}

    def _find(self, principal: str, task_id: Any) -> _Task:
        own = self._tasks.get(principal)
        task = own.get(task_id) if own is not None and isinstance(task_id, str) else None
        if task is None or (task.expires is not None and time.monotonic() > task.expires):
            if task is not None and own is not None:
                own.pop(task_id, None)
            raise UnknownName("task", str(task_id))
        return task

    async def follow(
        self, method: str, principal: str, params: Mapping[str, Any], origin: Origin | None, named: str | None = None
    ) -> dict[str, Any]:
        """Send a task's follow-up request (`TASK_METHODS`) to the server that issued it.

        `named` is the request's `Mcp-Name` header, if it came over HTTP. Raises `TaskNameMismatch` when it is
        not the task id, `TasksUndeclared` for a client that did not declare the extension, `UnknownName`
        for a task id the caller's principal was not given."""
        if named is not None and decode_header_value(named.strip()) != params.get("taskId"):
            raise HeaderMismatch(f"{method}: the Mcp-Name header does not match params.taskId")
        extensions = origin.capabilities.get("extensions") if origin is not None and origin.capabilities else None
        if not isinstance(extensions, Mapping) or TASKS_EXTENSION not in extensions:
            raise CapabilityMissing(
                f"{method} needs the client capability extensions[{TASKS_EXTENSION!r}]",
                {"extensions": {TASKS_EXTENSION: {}}},
            )
        task_id = params.get("taskId")
        task = self._find(principal, task_id)
        guards = self._guards
        call = task.call.context(principal, task.mount, origin) if guards is not None and origin is not None else None
        if method == "tasks/update" and guards is not None and call is not None:
            params = await guards.guard_task_update(call, params)
        native = {**params, "taskId": task.native}
        result = await self._router.forward(method, task.mount, native, origin=origin)
        if result.get("taskId") == task.native:
            result["taskId"] = task_id
        if method == "tasks/get" and guards is not None and call is not None:
            result = await guards.guard_task(call, result)
        return result
