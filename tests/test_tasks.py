"""Tasks (SEP-2663) through the hub: a server's task handle, and `tasks/get`, `tasks/update`, `tasks/cancel`.

The server is `tests/servers/tasks_server.py` (as a stdio child, and in-process over streamable
HTTP); the clients are the SDK's, declaring the `io.modelcontextprotocol/tasks` extension. The SDK
has no typed tasks API, so its session sends the requests with their raw params, `Mcp-Name` set
to the task id as the extension requires. The handshake era's tasks are not relayed (see
mcp_hub/server/tasks.py), so only the 2026-07-28 era is tested.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, REQUEST_TIMEOUT
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY

from mcp_hub.hub import Hub
from tests.conftest import ROOT, Connect, hub_client, make_config, running_hub, script_server, serve_app, wait_for
from tests.conftest import keyed_hub as shared_keyed_hub
from tests.harness.tasks import call, follow, settled
from tests.servers.tasks_server import TASKS, build_server

pytestmark = pytest.mark.anyio

SERVER = str(ROOT / "tests" / "servers" / "tasks_server.py")


async def extensions_of(client: Client) -> dict[str, Any]:
    """The extensions the hub declares in its `server/discover` answer."""
    discovered = await client.session.send_discover("2026-07-28")
    return dict(discovered["capabilities"].get("extensions") or {})


async def test_a_task_handle_comes_with_the_hubs_id_and_its_result_with_the_hubs_uris(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"work": script_server(SERVER)})
    async with (
        running_hub(config) as hub,
        hub_client(hub, "2026-07-28", extensions=[advertise(TASKS)]) as client,
        hub_client(hub, "2026-07-28") as plain,
    ):
        assert TASKS in await extensions_of(client)
        handle = await call(client, "work_slow_compute", seconds=0.2, label="x")
        assert handle["resultType"] == "task"
        assert handle["status"] == "working"
        assert len(handle["taskId"]) == 43  # the hub's: 32 random bytes, not the server's UUID
        assert "task" not in handle
        working = await follow(client, "tasks/get", handle["taskId"])
        assert working["taskId"] == handle["taskId"]
        assert working["status"] in ("working", "completed")
        done = await settled(client, handle["taskId"])
        assert done["status"] == "completed"
        assert done["taskId"] == handle["taskId"]
        assert done["result"]["content"] == [
            {"type": "text", "text": "computed x"},
            {"type": "resource_link", "uri": "work+note://x", "name": "x"},
        ]
        assert (await follow(client, "tasks/update", handle["taskId"], inputResponses={}))["resultType"] == "complete"
        # A client that does not declare the extension is refused its follow-ups, as by a server.
        with pytest.raises(MCPError) as undeclared:
            await follow(plain, "tasks/get", handle["taskId"])
        assert undeclared.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert undeclared.value.error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
        # A client that does not declare the extension is answered synchronously.
        synchronous = await call(plain, "work_slow_compute", seconds=5)
        assert synchronous["content"][0]["text"] == "ran slow_compute synchronously"
        assert (await call(client, "work_greet", name="Ann"))["content"][0]["text"] == "Hello, Ann!"


async def test_a_handshake_era_client_is_answered_without_a_task(tmp_path: Path) -> None:
    """Its call result can be no task handle, whatever it declares: the server hears no tasks extension."""
    config = make_config(tmp_path, {"work": script_server(SERVER)})
    async with running_hub(config) as hub, hub_client(hub, "legacy", extensions=[advertise(TASKS)]) as client:
        result = await client.call_tool("work_slow_compute", {"seconds": 5})
        assert result.content == [types.TextContent(type="text", text="ran slow_compute synchronously")]
        with pytest.raises(MCPError) as undeclared:
            await follow(client, "tasks/get", "any")
        assert undeclared.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_a_cancelled_task_is_cancelled_at_its_server_and_an_unknown_id_is_unknown(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"work": script_server(SERVER)})
    async with running_hub(config) as hub, hub_client(hub, "2026-07-28", extensions=[advertise(TASKS)]) as client:
        handle = await call(client, "work_slow_compute", seconds=600, label="long")
        ack = await follow(client, "tasks/cancel", handle["taskId"])
        assert ack["resultType"] == "complete"
        assert "taskId" not in ack
        assert (await settled(client, handle["taskId"]))["status"] == "cancelled"
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            with pytest.raises(MCPError) as unknown:
                await follow(client, method, "no-such-task")
            assert unknown.value.error.code == INVALID_PARAMS
            assert unknown.value.error.message == "Unknown task: no-such-task"


def _recording(app: Any, seen: list[tuple[str, str]]) -> Any:
    """The ASGI app, noting each request's `Mcp-Method` and `Mcp-Name` headers."""

    async def recorded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            seen.append((headers.get(b"mcp-method", b"").decode(), headers.get(b"mcp-name", b"").decode()))
        await app(scope, receive, send)

    return recorded


@asynccontextmanager
async def keyed_hub(
    tmp_path: Path, seen: list[tuple[str, str]], mount: dict[str, Any] | None = None
) -> AsyncIterator[tuple[Hub, Connect]]:
    """The hub mounting the tasks server (by default over streamable HTTP), its own HTTP endpoint taking `KEYS`;
    its clients declare the tasks extension."""
    async with serve_app(_recording(build_server().streamable_http_app(), seen)) as upstream:
        mount = mount or {"url": f"{upstream}/mcp", "transport": "streamable-http"}
        async with shared_keyed_hub(tmp_path, {"work": mount}) as (hub, connect_as):

            def connect(principal: str) -> AbstractAsyncContextManager[Client]:
                return connect_as(principal, extensions=[advertise(TASKS)])

            yield hub, connect


async def test_another_principal_cannot_see_or_cancel_a_task(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    async with keyed_hub(tmp_path, seen) as (_, connect), connect("alice") as alice, connect("bob") as bob:
        assert TASKS in await extensions_of(alice)
        handle = await call(alice, "work_slow_compute", seconds=600, label="mine")
        task_id = handle["taskId"]
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            answers = []
            for task in (task_id, "no-such-task"):
                with pytest.raises(MCPError) as refused:
                    await follow(bob, method, task)
                answers.append((refused.value.error.code, refused.value.error.message.replace(task, "ID")))
            # Exactly as for a task that does not exist.
            assert answers[0] == answers[1] == (INVALID_PARAMS, "Unknown task: ID")
        assert (await follow(alice, "tasks/get", task_id))["status"] == "working"
        await follow(alice, "tasks/cancel", task_id)
        assert (await follow(alice, "tasks/get", task_id))["status"] == "cancelled"
    # The server heard each follow-up named by its own task id, in `Mcp-Name`.
    named = {name for method, name in seen if method.startswith("tasks/")}
    assert len(named) == 1
    assert named != {task_id} and named != {""}


@pytest.mark.slow
async def test_a_task_on_a_per_client_session_is_followed_on_that_session(tmp_path: Path) -> None:
    """With `isolation = "per-client"`, each principal has a server process of its own, which alone knows its
    tasks: the follow-ups go to it."""
    mount = script_server(SERVER, isolation="per-client")
    async with keyed_hub(tmp_path, [], mount) as (_, connect), connect("alice") as alice, connect("bob") as bob:
        mine = await call(alice, "work_slow_compute", seconds=0.1, label="alice")
        theirs = await call(bob, "work_slow_compute", seconds=600, label="bob")
        assert (await settled(alice, mine["taskId"]))["result"]["content"][0]["text"] == "computed alice"
        assert (await follow(bob, "tasks/get", theirs["taskId"]))["status"] == "working"


@pytest.mark.slow
async def test_a_follow_up_has_its_servers_timeout(tmp_path: Path) -> None:
    mount = script_server(SERVER, timeout=1)
    config = make_config(tmp_path, {"work": mount})
    async with running_hub(config) as hub, hub_client(hub, "2026-07-28", extensions=[advertise(TASKS)]) as client:
        handle = await call(client, "work_stuck_job")
        with anyio.fail_after(10), pytest.raises(MCPError) as timed_out:
            await follow(client, "tasks/get", handle["taskId"])
        assert timed_out.value.error.code == REQUEST_TIMEOUT
        assert "did not answer tasks/get within 1s" in timed_out.value.error.message
        assert (await follow(client, "tasks/cancel", handle["taskId"]))["resultType"] == "complete"


@pytest.mark.slow
async def test_a_follow_up_the_client_cancels_is_cancelled_at_its_server(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"work": script_server(SERVER)})
    async with running_hub(config) as hub, hub_client(hub, "2026-07-28", extensions=[advertise(TASKS)]) as client:
        handle = await call(client, "work_stuck_job")
        with anyio.move_on_after(2) as waiting:  # the client gives up on its tasks/get
            await follow(client, "tasks/get", handle["taskId"])
        assert waiting.cancelled_caught
        await follow(client, "tasks/cancel", handle["taskId"])

        async def interrupted() -> bool:
            return (await follow(client, "tasks/get", handle["taskId"]))["interruptedGets"] == 1

        await wait_for(interrupted)
