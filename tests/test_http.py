"""Streamable HTTP and legacy SSE: upstreams over the network, and the hub's own HTTP endpoint."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from anyio.abc import TaskStatus
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore, StreamId
from mcp.shared.exceptions import MCPError
from sse_starlette.event import ServerSentEvent

from mcp_hub.hub import Hub
from mcp_hub.sdk.server import split_sse_lines_fast as _split_sse_lines_fast
from mcp_hub.server.http import build_app
from mcp_hub.server.http import exchange as deferred
from mcp_hub.server.hub_server import session_connections
from tests.conftest import fixture_server, free_port, hub_client, make_config, running_hub, serve_app, wait_for
from tests.harness.wire import JSON_HEADERS, MODERN_META, legacy_session
from tests.servers.fixture import BASE_TOOLS, build_server, sse_app

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
TWO_MIB = 2 * 1024 * 1024


@asynccontextmanager
async def hub_over_http(hub: Hub, **options: Any) -> AsyncIterator[str]:
    app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, **options)
    async with serve_app(app) as base:
        yield base


@asynccontextmanager
async def raw_legacy_session(
    tmp_path: Path, **options: Any
) -> AsyncIterator[tuple[Hub, httpx2.AsyncClient, str, dict[str, str]]]:
    """A hub with one fixture server, `srv`, over HTTP (`options` for `build_app`), and a handshake-era
    session opened on it by hand: the hub, the HTTP client, the endpoint's URL and the session's headers."""
    config = make_config(tmp_path, {"srv": fixture_server("srv")})
    async with running_hub(config) as hub, hub_over_http(hub, **options) as base, httpx2.AsyncClient(timeout=30) as web:
        url = f"{base}/mcp"
        yield hub, web, url, await legacy_session(web, url)


@pytest.mark.parametrize("mode", MODES)
async def test_streamable_http_upstream_with_results_over_one_mib(tmp_path: Path, mode: str) -> None:
    upstream_app = build_server("remote").streamable_http_app(stateless_http=False)
    async with serve_app(upstream_app) as upstream:
        config = make_config(tmp_path, {"remote": {"url": f"{upstream}/mcp"}, "local": fixture_server("local")})
        async with running_hub(config) as hub, hub_client(hub, mode) as client:
            assert hub.health()["servers"]["remote"]["transport"] == "streamable-http"
            echo = await client.call_tool("remote_echo", {"text": "over http"})
            big = await client.call_tool("remote_big", {"size": TWO_MIB})
            note = await client.read_resource("remote+fixture://notes/1")
    assert echo.structured_content == {"text": "over http", "server": "remote"}
    assert len(big.content[0].text) == TWO_MIB  # type: ignore[union-attr]
    assert note.contents[0].uri == "remote+fixture://notes/1"


def counting_connections(app: Any, seen: set[tuple[str, int]]) -> Any:
    """ASGI middleware: remember the client address (host, port) of every HTTP request, one per TCP connection."""

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.add(tuple(scope["client"]))
        await app(scope, receive, send)

    return counted


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_streamable_http_upstream_keeps_its_connection_across_calls(tmp_path: Path, protocol: str) -> None:
    """A call answered on an SSE stream leaves the rest of that stream to arrive; the hub lets it (aiohttp's
    response left open for its own POSTs of handshake-era calls, the SDK's client's response read to its end for
    2026-07-28 ones), so the connection is kept and the next call does not open a new one."""
    seen: set[tuple[str, int]] = set()
    upstream_app = counting_connections(build_server("remote").streamable_http_app(), seen)
    async with serve_app(upstream_app) as upstream:
        config = make_config(tmp_path, {"remote": {"url": f"{upstream}/mcp", "protocol": protocol}})
        async with running_hub(config) as hub, hub_client(hub) as client:
            await client.call_tool("remote_echo", {"text": "warm-up"})
            before = set(seen)
            for i in range(10):
                result = await client.call_tool("remote_echo", {"text": str(i)})
                assert result.structured_content == {"text": str(i), "server": "remote"}
            big = await client.call_tool("remote_big", {"size": TWO_MIB})
            assert len(big.content[0].text) == TWO_MIB  # type: ignore[union-attr]
            await client.call_tool("remote_echo", {"text": "after big"})
            opened = seen - before
    assert len(opened) <= 1, f"12 calls opened {len(opened)} new TCP connections to the upstream"


@asynccontextmanager
async def http_fixture(name: str) -> AsyncIterator[str]:
    """The fixture server over streamable HTTP, in this process; yields its endpoint URL."""
    async with serve_app(build_server(name).streamable_http_app()) as upstream:
        yield f"{upstream}/mcp"


async def _exists(path: Path) -> bool:
    return path.exists()


@pytest.mark.parametrize("upstream_era", MODES)
@pytest.mark.parametrize("mode", MODES)
async def test_a_call_its_client_cancels_is_cancelled_on_an_http_server(
    tmp_path: Path, mode: str, upstream_era: str
) -> None:
    """A call the client abandons is cancelled on the HTTP server (by notice on a handshake-era
    session, by closing its stream on 2026-07-28), and the mount serves on."""
    marker = tmp_path / "call"
    async with http_fixture("remote") as url:
        config = make_config(tmp_path, {"remote": {"url": url, "protocol": upstream_era}})
        async with running_hub(config) as hub, hub_client(hub, mode) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "remote_wait", {"marker": str(marker)})
                await wait_for(lambda: _exists(Path(f"{marker}.started")))
                tg.cancel_scope.cancel()
            await wait_for(lambda: _exists(Path(f"{marker}.cancelled")), timeout=10)
            echo = await client.call_tool("remote_echo", {"text": "after"})
    assert echo.structured_content == {"text": "after", "server": "remote"}


@pytest.mark.slow
@pytest.mark.parametrize("upstream_era", MODES)
async def test_a_call_past_its_deadline_is_cancelled_on_an_http_server(tmp_path: Path, upstream_era: str) -> None:
    """An HTTP server that does not answer within the mount's timeout: the client gets -32001 naming
    the mount, the server learns the call is cancelled, and the next call is served."""
    marker = tmp_path / "call"
    async with http_fixture("remote") as url:
        config = make_config(tmp_path, {"remote": {"url": url, "protocol": upstream_era, "timeout": 0.5}})
        async with running_hub(config) as hub, hub_client(hub) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("remote_wait", {"marker": str(marker)})
            await wait_for(lambda: _exists(Path(f"{marker}.cancelled")), timeout=10)
            echo = await client.call_tool("remote_echo", {"text": "after"})
    assert caught.value.error.code == -32001 and "'remote'" in caught.value.error.message
    assert echo.structured_content == {"text": "after", "server": "remote"}


@pytest.mark.slow
@pytest.mark.parametrize("upstream_era", MODES)
@pytest.mark.parametrize("mode", MODES)
async def test_progress_from_an_http_server_reaches_the_caller(tmp_path: Path, mode: str, upstream_era: str) -> None:
    """Progress an HTTP server reports on a call's stream reaches the client that called (over HTTP:
    the SDK's in-process 2026-07-28 client sends no progress token)."""
    heard: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async with http_fixture("remote") as url:
        config = make_config(tmp_path, {"remote": {"url": url, "protocol": upstream_era}})
        async with (
            running_hub(config) as hub,
            hub_over_http(hub) as base,
            Client(f"{base}/mcp", mode=mode, cache=None) as client,
        ):
            result = await client.call_tool("remote_slow", {"steps": 3, "seconds": 0.3}, progress_callback=on_progress)
    assert not result.is_error
    assert heard == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


def misbehaving(app: Any) -> Any:
    """ASGI middleware: answer a `tools/call` of `echo` whose text names a fault with that fault; pass the
    rest to the server. Faults: `garbage` (a 200 JSON body that is not JSON), `cut` (an SSE stream that
    ends before the answer), `unresumable` (one that ends after an event with an id, which the server,
    keeping no events, cannot resume), `resume-later` (one asking to be resumed in an hour), `500` (a bare
    HTTP 500), `error-400` (a JSON-RPC error at HTTP 400)."""

    async def faulty(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        chunks = []
        while True:
            event = await receive()
            chunks.append(event.get("body", b""))
            if not event.get("more_body"):
                break
        body = b"".join(chunks)
        message = json.loads(body)
        params = message.get("params") or {} if isinstance(message, dict) else {}
        fault = (params.get("arguments") or {}).get("text") if params.get("name") == "echo" else None
        replies = {
            "garbage": (200, "application/json", b"{not json"),
            "cut": (200, "text/event-stream", b'event: message\r\ndata: {"jsonrpc": "2.0", "method": "x"}\r\n\r\n'),
            "unresumable": (200, "text/event-stream", b"id: 1\r\nretry: 10\r\ndata: \r\n\r\n"),
            "resume-later": (200, "text/event-stream", b"id: 1\r\nretry: 3600000\r\ndata: \r\n\r\n"),
            "500": (500, "text/plain", b"boom"),
            "error-400": (
                400,
                "application/json",
                json.dumps(
                    {"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": -32602, "message": "bad"}}
                ).encode(),
            ),
        }
        if fault not in replies:
            delivered = False

            async def replay() -> dict[str, Any]:
                nonlocal delivered
                if delivered:
                    return await receive()
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}

            return await app(scope, replay, send)
        status, content_type, payload = replies[fault]
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type.encode())]}
        )
        await send({"type": "http.response.body", "body": payload})

    return faulty


@pytest.mark.parametrize("upstream_era", MODES)
async def test_an_http_server_that_answers_nonsense_gets_its_caller_an_error(tmp_path: Path, upstream_era: str) -> None:
    """An HTTP server that answers a call with a body that is not JSON, a stream without the answer (one it
    cannot resume too), a bare 500 or a JSON-RPC error at HTTP 400: each call gets a JSON-RPC error at once,
    and the server, and the hub's other mounts, serve on."""
    async with serve_app(misbehaving(build_server("remote").streamable_http_app())) as upstream:
        servers = {"remote": {"url": f"{upstream}/mcp", "protocol": upstream_era}, "local": fixture_server("local")}
        config = make_config(tmp_path, servers)
        async with running_hub(config) as hub, hub_client(hub) as client:
            errors = {}
            for fault in ("garbage", "cut", "unresumable", "500", "error-400"):
                with anyio.fail_after(10), pytest.raises(MCPError) as caught:
                    await client.call_tool("remote_echo", {"text": fault})
                errors[fault] = caught.value.error.code
            echo = await client.call_tool("remote_echo", {"text": "fine"})
            local = await client.call_tool("local_echo", {"text": "fine"})
    assert errors["error-400"] == -32602
    assert all(isinstance(code, int) for code in errors.values())
    assert echo.structured_content == {"text": "fine", "server": "remote"}
    assert local.structured_content == {"text": "fine", "server": "local"}


class EventLog(EventStore):
    """Every event of every stream, kept in order, so a stream can be resumed (the SDK ships no event store)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, StreamId, types.JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: StreamId, message: types.JSONRPCMessage | None) -> str:
        self.events.append((event_id := str(len(self.events) + 1), stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> StreamId | None:
        ids = [event_id for event_id, _, _ in self.events]
        if last_event_id not in ids:
            return None
        index = ids.index(last_event_id)
        stream = self.events[index][1]
        for event_id, stream_id, message in self.events[index + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def interrupting_server() -> Server[Any]:
    """A server whose one tool, `interrupted`, reports progress, closes its call's SSE stream (the SDK's
    `close_sse_stream`, as a server polling a long operation does), reports progress again and answers."""
    tool = {"name": "interrupted", "description": "Answer after closing the call's stream.", "inputSchema": {}}

    async def list_tools(ctx: Any, params: Any) -> Any:
        return {"tools": [{**tool, "inputSchema": {"type": "object"}}]}

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        if ctx.close_sse_stream is None:
            return {"content": [{"type": "text", "text": "no stream to close"}], "isError": True}
        await ctx.session.report_progress(1, 2, "before the close")
        await ctx.close_sse_stream()
        await ctx.session.report_progress(2, 2, "after the close")
        return {"content": [{"type": "text", "text": "answered after the close"}]}

    return Server("interrupting", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def resumptions(app: Any, seen: list[str]) -> Any:
    """ASGI middleware: remember the `Last-Event-ID` of every GET that carries one."""

    async def recorded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            headers = dict(scope["headers"])
            if b"last-event-id" in headers:
                seen.append(headers[b"last-event-id"].decode())
        await app(scope, receive, send)

    return recorded


async def test_a_call_whose_stream_the_http_server_closes_is_resumed_and_answered(tmp_path: Path) -> None:
    """A server that closes a call's SSE stream before the answer, after an event with an id and a `retry`
    delay: the hub resumes the stream with a GET carrying `Last-Event-ID` and the call gets its answer,
    with the progress reported before and after the close."""
    heard: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    resumed: list[str] = []
    app = interrupting_server().streamable_http_app(event_store=EventLog(), retry_interval=100)
    async with serve_app(resumptions(app, resumed)) as upstream:
        config = make_config(tmp_path, {"remote": {"url": f"{upstream}/mcp", "protocol": "legacy", "timeout": 20}})
        async with running_hub(config) as hub, hub_client(hub) as client:
            with anyio.fail_after(20):
                result = await client.call_tool("remote_interrupted", {}, progress_callback=on_progress)
    assert not result.is_error, result
    assert result.content[0].text == "answered after the close"  # type: ignore[union-attr]
    assert heard == [(1.0, 2.0, "before the close"), (2.0, 2.0, "after the close")]
    assert len(resumed) == 1


@pytest.mark.slow
@pytest.mark.parametrize("upstream_era", MODES)
async def test_a_stream_to_resume_later_than_the_calls_deadline_times_the_call_out(
    tmp_path: Path, upstream_era: str
) -> None:
    """A call's stream that ends asking to be resumed in an hour: the mount's timeout still ends the call
    (-32001 naming the mount), and the server serves on."""
    async with serve_app(misbehaving(build_server("remote").streamable_http_app())) as upstream:
        servers = {"remote": {"url": f"{upstream}/mcp", "protocol": upstream_era, "timeout": 0.5}}
        async with running_hub(make_config(tmp_path, servers)) as hub, hub_client(hub) as client:
            with anyio.fail_after(10), pytest.raises(MCPError) as caught:
                await client.call_tool("remote_echo", {"text": "resume-later"})
            echo = await client.call_tool("remote_echo", {"text": "after"})
    assert caught.value.error.code == -32001 and "'remote'" in caught.value.error.message
    assert echo.structured_content == {"text": "after", "server": "remote"}


async def test_legacy_sse_upstream(tmp_path: Path) -> None:
    async with serve_app(sse_app(build_server("old"))) as upstream:
        config = make_config(tmp_path, {"old": {"url": f"{upstream}/sse", "transport": "sse"}})
        async with running_hub(config) as hub, hub_client(hub) as client:
            assert hub.health()["servers"]["old"]["state"] == "up"
            echo = await client.call_tool("old_echo", {"text": "sse"})
            prompt = await client.get_prompt("old_greet", {"who": "sse"})
            big = await client.call_tool("old_big", {"size": TWO_MIB})
    assert echo.structured_content == {"text": "sse", "server": "old"}
    assert prompt.messages[0].content.text == "Hello, sse, from old"  # type: ignore[union-attr]
    assert len(big.content[0].text) == TWO_MIB  # type: ignore[union-attr]


@pytest.mark.slow
async def test_an_http_server_that_goes_away_is_reconnected(tmp_path: Path) -> None:
    port = free_port()
    config = make_config(tmp_path, {"remote": {"url": f"http://127.0.0.1:{port}/mcp"}, "local": fixture_server("l")})

    async def run_upstream(name: str, stop: anyio.Event, *, task_status: TaskStatus[None]) -> None:
        async with serve_app(build_server(name).streamable_http_app(), port=port):
            task_status.started()
            await stop.wait()

    async def remote_answers_as(name: str) -> bool:
        try:
            result = await client.call_tool("remote_echo", {"text": "x"})
        except MCPError:
            return False
        return result.structured_content == {"text": "x", "server": name}

    async with anyio.create_task_group() as tg:
        stop_first = anyio.Event()
        await tg.start(run_upstream, "first", stop_first)
        async with running_hub(config) as hub, hub_client(hub) as client:
            assert await remote_answers_as("first")
            stop_first.set()

            # The server is gone: calls fail promptly, naming it; the other mount serves on.
            async def failing() -> bool:
                try:
                    await client.call_tool("remote_echo", {"text": "x"})
                except MCPError as exc:
                    return "Server 'remote'" in exc.message
                return False

            await wait_for(failing, timeout=10)
            assert (await client.call_tool("local_echo", {"text": "3"})).structured_content == {
                "text": "3",
                "server": "l",
            }

            stop_second = anyio.Event()
            await tg.start(run_upstream, "second", stop_second)
            await wait_for(lambda: remote_answers_as("second"), timeout=40)
            assert hub.upstreams["remote"].restarts >= 1
            stop_second.set()


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_hub_serves_streamable_http_in_both_eras(tmp_path: Path, mode: str) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    config = make_config(tmp_path, {"a": fixture_server("a"), "b": fixture_server("b")})
    async with running_hub(config) as hub, hub_over_http(hub) as base:
        # The SDK client caps one SSE event at 1 MiB unless told otherwise; this one takes 2 MiB results.
        transport = streamable_http_client(f"{base}/mcp", max_sse_event_size=None)
        async with Client(transport, mode=mode, cache=None) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            echo = await client.call_tool("b_echo", {"text": "http"})
            failed = await client.call_tool("a_fail", {"message": "as sent"})
            big = await client.call_tool("a_big", {"size": TWO_MIB})
            slow = await client.call_tool("a_slow", {"seconds": 0.2, "steps": 2}, progress_callback=on_progress)
    assert {"a_echo", "b_echo"} <= names
    assert echo.structured_content == {"text": "http", "server": "b"}
    assert failed.is_error is True and failed.content[0].text == "as sent"  # type: ignore[union-attr]
    assert len(big.content[0].text) == TWO_MIB  # type: ignore[union-attr]
    assert slow.content[0].text == "done"  # type: ignore[union-attr]
    assert progress == [1, 2]


async def test_healthz_reports_each_mount(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        {
            "good": fixture_server("good"),
            "bad": fixture_server("bad", "--exit-on-start"),
            "off": fixture_server("off", enabled=False),
        },
    )
    async with running_hub(config) as hub, hub_over_http(hub) as base, httpx2.AsyncClient() as http:
        response = await http.get(f"{base}/healthz")
    report = response.json()
    assert response.status_code == 200
    assert report["status"] == "degraded"
    assert set(report["servers"]) == {"good", "bad"}
    good = report["servers"]["good"]
    assert good["state"] == "up" and good["tools"] == len(BASE_TOOLS) and good["transport"] == "stdio"
    assert good["last_error"] is None
    assert report["servers"]["bad"]["state"] in ("down", "starting")
    assert report["servers"]["bad"]["last_error"]


async def test_http_endpoint_refuses_foreign_hosts(tmp_path: Path) -> None:
    """Bound to loopback, the endpoint refuses other Host headers (DNS rebinding protection)."""
    config = make_config(tmp_path, {"a": fixture_server("a")})
    async with running_hub(config) as hub, hub_over_http(hub) as base, httpx2.AsyncClient() as http:
        response = await http.post(
            f"{base}/mcp",
            headers={"Host": "evil.example:80", "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
    assert response.status_code in (400, 403, 421)


class _ReferenceEvent(ServerSentEvent):
    _LINE_SEP_EXPR = re.compile(r"\r\n|\r|\n")


@pytest.mark.parametrize(
    "data", ['{"jsonrpc":"2.0","id":1,"result":{}}', "", "a\r\nb\rc\nd", "\n", "ends\r", "x" * 100_000, "\u2028\x85"]
)
def test_the_hubs_sse_events_are_encoded_as_sse_starlette_encodes_them(data: str) -> None:
    _split_sse_lines_fast()
    _split_sse_lines_fast()
    assert not isinstance(ServerSentEvent._LINE_SEP_EXPR, re.Pattern), "the fast path is no longer applied"
    options: list[dict[str, Any]] = [
        {},
        {"id": "7", "event": "message"},
        {"id": "a\nb", "event": "m\r\n", "comment": "c\nd", "retry": 5},
    ]
    for option in options:
        assert ServerSentEvent(data, **option).encode() == _ReferenceEvent(data, **option).encode()


async def test_a_handshake_era_call_is_answered_as_json_unless_it_has_more_to_say(tmp_path: Path) -> None:
    """The answer alone comes as application/json; a call that reports progress streams it, answer last."""
    async with raw_legacy_session(tmp_path) as (_hub, http, url, session):
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "srv_echo", "arguments": {"text": "hi"}}
        plain = await http.post(url, json=call, headers=session)
        unknown = await http.post(url, json={**call, "id": 3, "params": {"name": "nope"}}, headers=session)
        call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call"}
        call["params"] = {
            "name": "srv_slow",
            "arguments": {"seconds": 0.1, "steps": 2},
            "_meta": {"progressToken": "p"},
        }
        streamed = await http.post(url, json=call, headers=session)
    assert plain.status_code == 200
    assert plain.headers["content-type"] == "application/json"
    assert plain.headers["mcp-session-id"] == session["Mcp-Session-Id"]
    assert plain.json()["result"]["structuredContent"] == {"text": "hi", "server": "srv"}
    assert unknown.headers["content-type"] == "application/json"
    assert unknown.json()["error"]["message"] == "Unknown tool: nope"
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")]
    assert [e.get("method") for e in events] == ["notifications/progress"] * 2 + [None]
    assert events[-1]["result"]["content"][0]["text"] == "done"


@pytest.mark.slow
async def test_a_quiet_call_outlasting_the_window_is_streamed_answer_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that sends nothing for `deferred.WINDOW` starts its SSE stream anyway (a proxy would
    time out an idle response); the answer is the stream's last event, and the session serves on."""
    monkeypatch.setattr(deferred, "WINDOW", 0.05)
    async with raw_legacy_session(tmp_path) as (_hub, http, url, session):
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
        call["params"] = {"name": "srv_slow", "arguments": {"seconds": 0.5, "steps": 1}}
        streamed = await http.post(url, json=call, headers=session)
        echo = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "srv_echo"}}
        echo["params"]["arguments"] = {"text": "after"}
        plain = await http.post(url, json=echo, headers=session)
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.headers["mcp-session-id"] == session["Mcp-Session-Id"]
    events = [json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")]
    assert [(e["id"], e["result"]["content"][0]["text"]) for e in events] == [(7, "done")]
    assert plain.headers["content-type"] == "application/json"
    assert plain.json()["result"]["structuredContent"] == {"text": "after", "server": "srv"}


@pytest.mark.slow
async def test_a_list_is_answered_in_each_clients_era_however_often_it_is_asked(tmp_path: Path) -> None:
    """The hub keeps a page's answer to send again; it keeps one per protocol era, as the SDK shapes it."""
    async with raw_legacy_session(tmp_path) as (_hub, http, url, session):
        modern = {**JSON_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
        answers: list[tuple[str, dict[str, Any]]] = []
        for request_id, (era, headers, params) in enumerate(
            [("legacy", session, {}), ("legacy", session, {}), ("modern", modern, {"_meta": MODERN_META})] * 2
        ):
            body = {"jsonrpc": "2.0", "id": request_id + 10, "method": "tools/list", "params": params}
            response = await http.post(url, json=body, headers=headers)
            assert response.status_code == 200, response.text
            answers.append((era, response.json()["result"]))
    names = {f"srv_{tool['name']}" for tool in BASE_TOOLS}
    for era, result in answers:
        assert {tool["name"] for tool in result["tools"]} == names
        assert "nextCursor" not in result
        if era == "legacy":
            assert "resultType" not in result and "ttlMs" not in result
        else:
            assert result["resultType"] == "complete" and result["ttlMs"] == 0 and result["cacheScope"] == "private"


def _events(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a POST's answer, whether plain JSON or an SSE stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return [response.json()]


@pytest.mark.slow
async def test_a_call_outlasting_the_session_idle_timeout_holds_its_session(tmp_path: Path) -> None:
    """A handshake-era session's only activity is a call (served past the SDK's message loop) that takes
    longer than `session_idle_timeout`: the call holds the session, which serves the next request; once
    nothing is in flight the countdown starts again, and the session, left idle, is closed (404)."""
    async with raw_legacy_session(tmp_path, session_idle_timeout=0.5) as (hub, http, url, session):
        session_id = session["Mcp-Session-Id"]
        connections = session_connections(hub.endpoint.server)
        slow = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        slow["params"] = {"name": "srv_slow", "arguments": {"seconds": 1.5, "steps": 1}}  # 3x the timeout
        echo = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
        echo["params"] = {"name": "srv_echo", "arguments": {"text": "still here"}}
        with anyio.fail_after(20):
            held = await http.post(url, json=slow, headers=session)
            after = await http.post(url, json=echo, headers=session)
        await wait_for(lambda: session_id not in connections, timeout=20)
        gone = await http.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=session)
    assert held.status_code == 200, held.text
    assert _events(held) == [{"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "done"}]}}]
    assert after.status_code == 200, after.text
    assert _events(after)[-1]["result"]["structuredContent"] == {"text": "still here", "server": "srv"}
    assert gone.status_code == 404  # the SDK's answer for a session it no longer has
    assert gone.json()["error"]["code"] == -32600


@pytest.mark.slow
async def test_a_request_whose_body_outlasts_the_session_idle_timeout_holds_its_session(tmp_path: Path) -> None:
    """A session is held from the moment a request for it arrives, as the SDK holds it: a body that takes
    longer than `session_idle_timeout` to arrive is served on the session, which serves on (both for a
    request served past the message loop, and for one handed to the SDK: here, for a key it ignores)."""
    async with raw_legacy_session(tmp_path, session_idle_timeout=0.5) as (_hub, http, url, session):
        answers = []
        for request_id, extra in [(2, {}), (3, {"x-note": "handed to the SDK"})]:
            call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", **extra}
            call["params"] = {"name": "srv_echo", "arguments": {"text": "slow body"}}
            body = json.dumps(call).encode()

            async def trickle(body: bytes = body) -> AsyncIterator[bytes]:
                yield body[:10]
                await anyio.sleep(1.25)  # past the idle timeout (2.5x), mid-body
                yield body[10:]

            with anyio.fail_after(20):
                answers.append(await http.post(url, content=trickle(), headers=session))
        ping = await http.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=session)
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert _events(answer)[-1]["result"]["structuredContent"] == {"text": "slow body", "server": "srv"}
    assert ping.status_code == 200 and ping.json() == {"jsonrpc": "2.0", "id": 4, "result": {}}


@pytest.mark.slow
async def test_a_request_reusing_the_id_of_a_streaming_call_in_flight_is_refused_and_that_call_keeps_its_answer(
    tmp_path: Path,
) -> None:
    """A client that reuses the id of a call still in flight (the spec forbids it; the SDK would let the
    newer request take the id over) gets INVALID_REQUEST on the second POST; the first call still gets its
    progress and its answer, and the session serves on."""
    async with raw_legacy_session(tmp_path) as (_hub, http, url, session):
        first = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
        first["params"] = {
            "name": "srv_slow",
            "arguments": {"seconds": 1.5, "steps": 3},
            "_meta": {"progressToken": "first"},
        }
        second = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
        second["params"] = {"name": "srv_echo", "arguments": {"text": "second"}}
        events: list[dict[str, Any]] = []
        with anyio.fail_after(20):
            # Its headers come with its first progress report: from then on the call streams.
            async with http.stream("POST", url, json=first, headers=session) as streaming:
                reused = await http.post(url, json=second, headers=session)
                with anyio.move_on_after(10):  # its answer, or the POST given up (closed, not left open)
                    async for line in streaming.aiter_lines():
                        if line.startswith("data:"):
                            events.append(json.loads(line[5:]))
            ping = await http.post(url, json={"jsonrpc": "2.0", "id": 8, "method": "ping"}, headers=session)
    assert reused.status_code == 400
    assert reused.json()["id"] == 7 and reused.json()["error"]["code"] == types.INVALID_REQUEST
    done = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "done"}]}}
    assert events and events[-1] == done, f"the first call's POST ended without its answer: {events}"
    assert [e["params"]["progressToken"] for e in events[:-1]] == ["first"] * 3
    assert ping.json() == {"jsonrpc": "2.0", "id": 8, "result": {}}


# -- an upstream's SSE answer, read -----------------------------------------------------------------------------

_SSE_BODY = (
    b": a comment\r\n"
    b"id: prime-1\r\nretry: 250\r\ndata:\r\n\r\n"  # a priming event: an id, no message
    b'event: message\r\nid: 7\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'  # data over two lines
    b"event: other\ndata: skipped\n\n"  # not a `message` event
    b'id: bad\x00id\ndata:{"b":2}\n\n'  # an id with NUL is ignored; no space after the colon
    b'data: {"cut": true}\n'  # cut off by the end of the body: never dispatched
)


def _read_sse(chunks: list[bytes]) -> tuple[list[bytes], str | None, int | None]:
    from mcp_hub.upstream.http import _Cursor, _SseEvents  # pyright: ignore[reportPrivateUsage]

    cursor = _Cursor()
    events = _SseEvents(cursor)
    messages = [message for chunk in chunks for message in events.feed(chunk)]
    return messages, cursor.event_id, cursor.retry_ms


def test_an_upstreams_sse_body_reads_the_same_however_it_is_cut_into_chunks() -> None:
    """Each `message` event's data, the last event id and the retry delay, whether the body arrives whole, cut
    in two at any byte, or a byte at a time: lines and events joined across chunks, CRLF and LF alike."""
    whole = _read_sse([_SSE_BODY])
    assert whole == ([b'{"a":\n1}', b'{"b":2}'], "7", 250)
    assert _read_sse([_SSE_BODY[i : i + 1] for i in range(len(_SSE_BODY))]) == whole
    for cut in range(1, len(_SSE_BODY)):
        assert _read_sse([_SSE_BODY[:cut], _SSE_BODY[cut:]]) == whole, cut


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_answered_on_an_sse_stream_leaves_no_async_generator_for_the_loop_to_close(
    tmp_path: Path, mode: str
) -> None:
    """A handshake-era server answers a call on an SSE stream, which the hub reads until the answer. An async
    generator left suspended there would be closed by the event loop through a thread-safe wake-up and a task
    of its own, on every call; nothing of the hub's is left for it to close."""
    import sys

    closed_by_loop: list[str] = []
    hooks = sys.get_asyncgen_hooks()

    def finalizer(agen: Any) -> None:
        closed_by_loop.append(agen.ag_code.co_filename)
        if hooks.finalizer is not None:
            hooks.finalizer(agen)

    async with http_fixture("remote") as url:
        config = make_config(tmp_path, {"remote": {"url": url, "protocol": "legacy"}})
        async with running_hub(config) as hub, hub_client(hub, mode) as client:
            await client.call_tool("remote_echo", {"text": "warm-up"})
            sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=finalizer)
            try:
                for i in range(20):
                    result = await client.call_tool("remote_echo", {"text": str(i)})
                    assert result.structured_content == {"text": str(i), "server": "remote"}
            finally:
                sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=hooks.finalizer)
    assert [name for name in closed_by_loop if "mcp_hub" in name] == []


def _streaming_on_after_the_answer(seen: set[tuple[str, int]], dropped: list[float]) -> Any:
    """An HTTP server answering every POSTed request on an SSE stream, then ending the stream 0.05 s later
    (`params.name` "short") or streaming comments on for 5 s ("long"). `seen`: the client address of each
    request; `dropped`: when the client dropped a "long" stream (monotonic clock)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        seen.add(tuple(scope["client"]))
        body = b""
        while (message := await receive())["type"] == "http.request":
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body)
        answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"ok": True}}).encode()
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"event: message\ndata: " + answer + b"\n\n", "more_body": True}
        )
        if request["params"]["name"] == "short":
            await anyio.sleep(0.05)
            await send({"type": "http.response.body", "body": b""})
            return
        async with anyio.create_task_group() as tg:

            async def ping() -> None:
                for _ in range(100):
                    await anyio.sleep(0.05)
                    await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
                await send({"type": "http.response.body", "body": b""})
                tg.cancel_scope.cancel()

            tg.start_soon(ping)
            if (await receive())["type"] == "http.disconnect":
                dropped.append(anyio.current_time())
                tg.cancel_scope.cancel()

    return app


async def test_an_answer_before_the_end_of_its_body_keeps_its_connection_and_a_body_that_streams_on_is_dropped() -> (
    None
):
    """The hub takes an upstream's answer as soon as it arrives on the stream. When the rest of the body ends
    soon after, the connection goes back to the pool (the next requests reuse it); when the server streams on,
    the response is closed after `_DRAIN_SECONDS` and its connection dropped, nothing left open."""
    from mcp_hub.upstream.http import _DRAIN_SECONDS, HttpChannel  # pyright: ignore[reportPrivateUsage]

    seen: set[tuple[str, int]] = set()
    dropped: list[float] = []
    headers = {"mcp-protocol-version": "2025-11-25"}
    async with serve_app(_streaming_on_after_the_answer(seen, dropped)) as base:
        transport_writes, transport_reads = anyio.create_memory_object_stream[Any](1)
        channel = HttpChannel(f"{base}/mcp", {})
        async with transport_writes, transport_reads, channel.merging(transport_reads) as merged:
            for _ in range(3):
                with anyio.fail_after(5):
                    assert await channel.request("tools/call", {"name": "short"}, headers) == {"ok": True}
                await anyio.sleep(0.2)  # the body has ended meanwhile
            assert len(seen) == 1  # one connection for all three
            started = anyio.current_time()
            with anyio.fail_after(5):
                assert await channel.request("tools/call", {"name": "long"}, headers) == {"ok": True}
            assert anyio.current_time() - started < _DRAIN_SECONDS  # answered before the body ends
            await wait_for(lambda: _true(bool(dropped)), timeout=5)
            assert dropped[0] - started >= _DRAIN_SECONDS * 0.9
            assert channel._unfinished == set()  # pyright: ignore[reportPrivateUsage]
            await merged.aclose()


async def _true(value: bool) -> bool:
    return value
