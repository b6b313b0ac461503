"""The era a client's request reaches its server in, with `protocol = "auto"` (upstream/era.py).

The server is the tests' fixture over streamable HTTP, in this process, offering both eras (or, wrapped,
refusing one of them); its `request_meta` tool answers with the `_meta` a request carried, which names the
2026-07-28 envelope's protocol version when the request came in that era and nothing of it in the handshake.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp_types import PROTOCOL_VERSION_META_KEY

from mcp_hub.admin.pages import mounts
from mcp_hub.hub import Hub
from mcp_hub.upstream.era import PROBE_SAMPLES, PROBE_TOOL
from tests.conftest import fixture_server, hub_client, make_config, running_hub, serve_app, wait_for
from tests.servers.fixture import build_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from servers_http import lowlevel_server, mcpserver_server

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]


def refusing(app: Any, method: str) -> Any:
    """ASGI middleware: answer a POST of JSON-RPC `method` with -32601, as a server without that era does."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body) if body else {}
        if isinstance(request, dict) and request.get("method") == method:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            answer = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": error}).encode()
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return guarded


@asynccontextmanager
async def auto_mount(tmp_path: Path, refuse: str | None = None, **mount: Any) -> AsyncIterator[Hub]:
    """A hub with the fixture over HTTP as "remote", mounted as `mcp-hub import` writes it (plus `mount`)."""
    app = build_server("remote").streamable_http_app()
    async with serve_app(refusing(app, refuse) if refuse else app) as upstream:
        config = make_config(tmp_path, {"remote": {"url": f"{upstream}/mcp", **mount}})
        async with running_hub(config) as hub:
            yield hub


async def era_of_a_call(client: Any) -> str:
    """The era the fixture served `request_meta` in."""
    result = await client.call_tool("remote_request_meta", {})
    meta = result.structured_content or {}
    return "2026-07-28" if PROTOCOL_VERSION_META_KEY in meta else "handshake"


async def test_each_client_s_request_reaches_the_server_in_its_own_era(tmp_path: Path) -> None:
    async with auto_mount(tmp_path) as hub:
        async with hub_client(hub, "legacy") as old, hub_client(hub, "2026-07-28") as new:
            assert await era_of_a_call(old) == "handshake"
            assert await era_of_a_call(new) == "2026-07-28"
            assert (await old.call_tool("remote_echo", {"text": "hi"})).structured_content == {
                "text": "hi",
                "server": "remote",
            }
        report = hub.health()["servers"]["remote"]
    assert report["protocol"] == "2026-07-28"
    serves = {row["serves"]: row["protocol"] for row in report["sessions"]}
    assert serves["2026-07-28 clients and the hub's own requests"] == "2026-07-28"
    assert serves["handshake-era clients"] == "2025-11-25"
    assert all(row["why"] for row in report["sessions"])


async def test_a_server_without_2026_07_28_has_its_2026_clients_bridged(tmp_path: Path) -> None:
    async with auto_mount(tmp_path, refuse="server/discover") as hub:
        async with hub_client(hub, "legacy") as old, hub_client(hub, "2026-07-28") as new:
            assert await era_of_a_call(old) == "handshake"
            assert await era_of_a_call(new) == "handshake"
        (row,) = hub.health()["servers"]["remote"]["sessions"]
    assert row["serves"] == "every client"
    assert "offers only the handshake era" in row["why"]


async def test_a_server_that_refuses_the_handshake_has_its_handshake_clients_bridged(tmp_path: Path) -> None:
    async with auto_mount(tmp_path, refuse="initialize") as hub:
        upstream = hub.upstreams["remote"]
        await upstream.sessions_ready()
        async with hub_client(hub, "legacy") as old:
            assert await era_of_a_call(old) == "2026-07-28"
            assert (await old.call_tool("remote_echo", {"text": "hi"})).structured_content == {
                "text": "hi",
                "server": "remote",
            }
        rows = hub.health()["servers"]["remote"]["sessions"]
    assert [row["protocol"] for row in rows] == ["2026-07-28", "2026-07-28"]
    assert rows[1]["why"].startswith("bridged on the 2026-07-28 session")


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_a_pinned_protocol_is_every_request_s_era(tmp_path: Path, protocol: str) -> None:
    era = "handshake" if protocol == "legacy" else "2026-07-28"
    async with auto_mount(tmp_path, protocol=protocol) as hub:
        async with hub_client(hub, "legacy") as old, hub_client(hub, "2026-07-28") as new:
            assert await era_of_a_call(old) == era
            assert await era_of_a_call(new) == era
        (row,) = hub.health()["servers"]["remote"]["sessions"]
    assert row["why"] == f'protocol = "{protocol}" in its configuration'


async def test_a_stdio_server_keeps_one_session_in_one_era(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"remote": fixture_server("remote")})
    async with running_hub(config) as hub:
        async with hub_client(hub, "legacy") as old:
            assert await era_of_a_call(old) == "2026-07-28"  # bridged: one child process
        (row,) = hub.health()["servers"]["remote"]["sessions"]
    assert row["serves"] == "every client" and "handshake-era clients are bridged" in row["why"]


async def test_a_handshake_client_s_own_session_is_in_its_era(tmp_path: Path) -> None:
    async with auto_mount(tmp_path, isolation="per-client") as hub:
        async with hub_client(hub, "legacy") as old:
            assert await era_of_a_call(old) == "handshake"
            assert hub.upstreams["remote"].client_sessions == 1
        rows = hub.health()["servers"]["remote"]["sessions"]
    assert rows[-1]["serves"] == "each client's own session (isolation = per-client)"


class Heard:
    """What a client heard from the hub outside answers: list changes and log messages."""

    def __init__(self) -> None:
        self.changed = anyio.Event()
        self.logs: list[str] = []

    async def __call__(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.changed.set()

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(str(params.data))


@pytest.mark.slow
async def test_a_list_change_announced_on_the_handshake_session_reaches_both_eras(tmp_path: Path) -> None:
    """The server announces a change on the session of the request that caused it: the handshake-era one."""
    heard = Heard()
    async with auto_mount(tmp_path) as hub:
        async with hub_client(hub, "legacy", message_handler=heard) as old:
            with anyio.fail_after(15):  # a notice sent before the session's GET stream is open is lost: grow again
                while not heard.changed.is_set():
                    await old.call_tool("remote_grow", {"name": "sprouted"})
                    with anyio.move_on_after(0.5):
                        await heard.changed.wait()
            assert "remote_sprouted" in {tool.name for tool in (await old.list_tools()).tools}
        async with hub_client(hub, "2026-07-28") as new:
            assert "remote_sprouted" in {tool.name for tool in (await new.list_tools()).tools}


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging/setLevel
async def test_a_handshake_client_is_asked_the_server_s_question_and_hears_its_logs(tmp_path: Path) -> None:
    heard = Heard()

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    options: dict[str, Any] = {"elicitation_callback": elicit, "logging_callback": heard.log}
    async with auto_mount(tmp_path) as hub, hub_client(hub, "legacy", **options) as old:
        await old.set_logging_level("warning")
        answer = await old.call_tool("remote_ask", {"what": "elicitation", "text": "Sure?"})
        assert answer.content[0].text == "elicited: accept {'answer': 'yes'}"  # type: ignore[union-attr]
        logged = await old.call_tool("remote_log", {"text": "x"})
        assert logged.content[0].text == "logged at warning"  # type: ignore[union-attr]
        await wait_for(lambda: heard.logs)
    assert heard.logs == ["warning: x"]


async def test_check_and_the_console_show_each_session_s_era(tmp_path: Path) -> None:
    async with auto_mount(tmp_path) as hub:
        await hub.upstreams["remote"].sessions_ready()
        report = hub.health()
    page = mounts(report, {})
    assert "handshake-era clients: <b>2025-11-25</b>" in page
    assert "2026-07-28 clients and the hub&#x27;s own requests: <b>2026-07-28</b>" in page


# -- the era probe (era_probe = true, the shipped default) -----------------------------------------------------


class Shaped:
    """ASGI middleware in front of the fixture: what the server was asked, and a cost added to one era's POSTs
    (`slow`: "handshake", the requests of a session, or "2026-07-28", those without one), or a probe answered
    with HTTP 500 (`break_probe`)."""

    def __init__(self, app: Any, slow: str | None = None, seconds: float = 0.02, break_probe: bool = False) -> None:
        self.app, self.slow, self.seconds, self.break_probe = app, slow, seconds, break_probe
        self.probes = {"handshake": 0, "2026-07-28": 0}
        self.deleted = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "DELETE"):
            await self.app(scope, receive, send)
            return
        era = "handshake" if any(name == b"mcp-session-id" for name, _ in scope["headers"]) else "2026-07-28"
        if scope["method"] == "DELETE":
            self.deleted += 1
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if PROBE_TOOL.encode() in body:
            self.probes[era] += 1
            if self.break_probe:
                await send({"type": "http.response.start", "status": 500, "headers": []})
                await send({"type": "http.response.body", "body": b"probe refused"})
                return
        if era == self.slow:
            await anyio.sleep(self.seconds)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


@asynccontextmanager
async def probed_mount(tmp_path: Path, app: Any, **mount: Any) -> AsyncIterator[Hub]:
    """A hub with `app` over HTTP as "remote", mounted as `mcp-hub import` writes it (the probe on), sessions up."""
    async with serve_app(app) as upstream:
        config = make_config(tmp_path, {"remote": {"url": f"{upstream}/mcp", "era_probe": True, **mount}})
        async with running_hub(config) as hub:
            await hub.upstreams["remote"].sessions_ready()
            yield hub


@pytest.mark.slow
async def test_the_probe_keeps_the_handshake_era_where_2026_07_28_costs_the_server_more(tmp_path: Path) -> None:
    shaped = Shaped(build_server("remote").streamable_http_app(), slow="2026-07-28")
    async with probed_mount(tmp_path, shaped) as hub:
        async with hub_client(hub, "legacy") as old, hub_client(hub, "2026-07-28") as new:
            assert await era_of_a_call(old) == "handshake"
            assert await era_of_a_call(new) == "2026-07-28"
        rows = hub.health()["servers"]["remote"]["sessions"]
    assert shaped.probes == {"handshake": PROBE_SAMPLES + 1, "2026-07-28": PROBE_SAMPLES + 1}
    assert rows[1]["protocol"] == "2025-11-25"
    assert "; measured: a probe tools/call took" in rows[1]["why"]
    assert shaped.deleted == 1  # the handshake-era session closed with the hub


@pytest.mark.slow
async def test_the_probe_bridges_handshake_clients_where_2026_07_28_is_as_cheap(tmp_path: Path) -> None:
    shaped = Shaped(build_server("remote").streamable_http_app(), slow="handshake")
    async with probed_mount(tmp_path, shaped) as hub:
        assert shaped.deleted == 1  # its handshake-era session, closed once measured
        async with hub_client(hub, "legacy") as old, hub_client(hub, "2026-07-28") as new:
            assert await era_of_a_call(old) == "2026-07-28"
            assert await era_of_a_call(new) == "2026-07-28"
            assert (await old.call_tool("remote_echo", {"text": "hi"})).structured_content == {
                "text": "hi",
                "server": "remote",
            }
        rows = hub.health()["servers"]["remote"]["sessions"]
        assert hub.upstreams["remote"].state == "up"
    assert [row["protocol"] for row in rows] == ["2026-07-28", "2026-07-28"]
    assert rows[1]["why"].startswith("bridged on the 2026-07-28 session: 2026-07-28 measured as cheap: a probe")
    assert shaped.probes == {"handshake": PROBE_SAMPLES + 1, "2026-07-28": PROBE_SAMPLES + 1}


@pytest.mark.slow
async def test_a_handshake_client_s_own_session_follows_the_probe(tmp_path: Path) -> None:
    shaped = Shaped(build_server("remote").streamable_http_app(), slow="handshake")
    async with probed_mount(tmp_path, shaped, isolation="per-client") as hub, hub_client(hub, "legacy") as old:
        assert await era_of_a_call(old) == "2026-07-28"


async def test_a_server_that_fails_the_probe_keeps_working_in_each_client_s_era(tmp_path: Path) -> None:
    shaped = Shaped(build_server("remote").streamable_http_app(), break_probe=True)
    async with probed_mount(tmp_path, shaped) as hub:
        async with hub_client(hub, "legacy") as old, hub_client(hub, "2026-07-28") as new:
            assert await era_of_a_call(old) == "handshake"
            assert await era_of_a_call(new) == "2026-07-28"
        upstream = hub.upstreams["remote"]
        assert (upstream.state, upstream.restarts) == ("up", 0)
        rows = hub.health()["servers"]["remote"]["sessions"]
    assert "measured" not in rows[1]["why"]


async def test_without_the_probe_the_server_never_sees_it(tmp_path: Path) -> None:
    shaped = Shaped(build_server("remote").streamable_http_app(), slow="handshake")
    async with probed_mount(tmp_path, shaped, era_probe=False) as hub, hub_client(hub, "legacy") as old:
        assert await era_of_a_call(old) == "handshake"
    assert shaped.probes == {"handshake": 0, "2026-07-28": 0}


async def test_a_low_level_server_with_many_tools_keeps_its_handshake_clients_era(tmp_path: Path) -> None:
    """The SDK low-level server of benchmarks/servers_http.py (53 real tools, no get_tool_input_schema), which
    lists its tools on every 2026-07-28 tools/call with arguments: nothing added to its cost."""
    async with probed_mount(tmp_path, lowlevel_server().streamable_http_app()) as hub:
        rows = hub.health()["servers"]["remote"]["sessions"]
        assert rows[1]["protocol"] == "2025-11-25", rows
        async with hub_client(hub, "legacy") as old:
            result = await old.call_tool("remote_git_status", {"repo_path": "/x"})
    assert result.content[0].text == 'git_status: {"repo_path": "/x"}'  # type: ignore[union-attr]


async def test_an_mcpserver_has_its_handshake_clients_bridged(tmp_path: Path) -> None:
    """The SDK's `MCPServer` (benchmarks/servers_http.py) looks its schemas up directly and spends less on a
    2026-07-28 request than on a handshake-era session's."""
    async with probed_mount(tmp_path, mcpserver_server().streamable_http_app()) as hub:
        rows = hub.health()["servers"]["remote"]["sessions"]
        assert [row["protocol"] for row in rows] == ["2026-07-28", "2026-07-28"], rows
        async with hub_client(hub, "legacy") as old:
            result = await old.call_tool("remote_echo", {"text": "hi"})
    assert result.content[0].text == "hi"  # type: ignore[union-attr]
