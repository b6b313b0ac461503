"""A client's calls, served past the SDK's runner (`server/lane.py`), over stdio in both eras and over HTTP
(the 2026-07-28 era over HTTP in test_modern_http.py).

The SDK's runner is the reference: the same requests are sent to a hub as it is and to one with its lane
taken out, and everything each sends back must be the same.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

import mcp_hub.server.http.app
from mcp_hub.server.http import build_app
from mcp_hub.server.lane import CallLane
from tests.conftest import fixture_server, hub_command, make_config, running_hub, serve_app, write_config
from tests.harness.wire import JSON_HEADERS, MODERN_META, read_answer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

_WITHOUT_LANE = (
    "import sys, mcp_hub.server.stdio as stdio; stdio.lane_of = lambda server: None; "
    "sys.argv[0] = 'mcp-hub'; from mcp_hub.cli import main; main()"
)
"""The hub, launched with its lane for calls taken out: every request goes through the SDK's runner."""


INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
"""A handshake-era client's `initialize` params: it declares nothing it could be asked."""


class _Wire:
    """A client's raw JSON-RPC lines to a hub over its stdio, and what the hub writes back."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        await self._process.stdin.send(json.dumps(message).encode() + b"\n")

    async def exchange(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """Send a request; what the hub writes up to and including its answer (but the notifications that its
        lists changed, which come when the hub's catalog does, up to a quarter of a second after the change)."""
        await self.send(message)
        heard: list[dict[str, Any]] = []
        with anyio.fail_after(20):
            while True:
                line = await self._stdout.receive_until(b"\n", 64 * 1024 * 1024)
                written = json.loads(line)
                if str(written.get("method", "")).endswith("/list_changed"):
                    continue
                heard.append(written)
                if heard[-1].get("id") == message["id"] and "method" not in heard[-1]:
                    return heard


@asynccontextmanager
async def _hub(tmp_path: Path, lane: bool, era: str) -> AsyncIterator[_Wire]:
    """A hub over stdio with the fixture server `srv` (its calls time out after 0.5 s), its tools listed to a
    client of `era`: a handshake-era client initialized; a 2026-07-28 one with the era opened by its first
    request."""
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv", timeout=0.5)})
    serve = ["serve", "--config", str(config)]
    command = hub_command(*serve) if lane else [sys.executable, "-c", _WITHOUT_LANE, *serve]
    async with await anyio.open_process(command, cwd=tmp_path) as process:
        wire = _Wire(process)
        if era == "legacy":
            await wire.exchange({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT})
            await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for attempt in range(200):
            listing = {"jsonrpc": "2.0", "id": f"list-{attempt}", "method": "tools/list"}
            listed = await wire.exchange(_in_era(listing, era))
            if any(tool["name"] == "srv_echo" for tool in listed[-1]["result"]["tools"]):
                break
            await anyio.sleep(0.05)
        try:
            yield wire
        finally:
            await process.stdin.aclose()  # type: ignore[union-attr]
            with anyio.move_on_after(10):
                await process.wait()


def _call(name: str, arguments: Any = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return {"method": "tools/call", "params": params}


CASES: dict[str, dict[str, Any]] = {
    "call": _call("srv_echo", {"text": "hi"}),
    "call with a string id": {**_call("srv_echo", {"text": "hi"}), "id": "abc"},
    "tool error": _call("srv_fail", {"message": "no"}),
    "unknown tool": _call("nope", {}),
    "no name": {"method": "tools/call", "params": {"arguments": {}}},
    "arguments not an object": _call("srv_echo", "text"),
    "no params": {"method": "tools/call"},
    "a field no version has": _call("srv_echo", {"text": "hi"}, extra=1),
    "progress": _call("srv_slow", {"seconds": 0.1, "steps": 2}, _meta={"progressToken": "p"}),
    "log messages": _call("srv_log", {"text": "hi"}),
    "resource links": _call("srv_link", {}),
    "request _meta": _call("srv_request_meta", {}, _meta={"example.com/k": "v", "progressToken": 7}),
    "a question the client cannot answer": _call("srv_ask", {"what": "sampling", "text": "hi"}),
    "timeout": _call("srv_hang", {}),
    "prompt": {"method": "prompts/get", "params": {"name": "srv_greet", "arguments": {"who": "ada"}}},
    "unknown prompt": {"method": "prompts/get", "params": {"name": "srv_nope"}},
    "resource": {"method": "resources/read", "params": {"uri": "NOTE"}},
    "unknown resource": {"method": "resources/read", "params": {"uri": "fixture://nowhere"}},
    "resource uri not a string": {"method": "resources/read", "params": {"uri": 5}},
}


def _in_era(message: dict[str, Any], era: str) -> dict[str, Any]:
    """`message` as a client of `era` sends it: a 2026-07-28 request carries the envelope in its params."""
    params = message.get("params", {})
    if era == "legacy" or not isinstance(params, dict):
        return message
    meta = params.get("_meta", {})
    return {**message, "params": {**params, "_meta": {**meta, **MODERN_META}}}


async def _answers(wire: _Wire, era: str) -> dict[str, list[dict[str, Any]]]:
    listed = await wire.exchange(_in_era({"jsonrpc": "2.0", "id": "resources", "method": "resources/list"}, era))
    note = next(r["uri"] for r in listed[-1]["result"]["resources"] if r["name"].endswith("note-1"))
    answers: dict[str, list[dict[str, Any]]] = {}
    for number, (case, request) in enumerate(CASES.items()):
        message = {"jsonrpc": "2.0", "id": number, **request}
        if case == "resource":
            message["params"] = {"uri": note}
        if case != "no params":
            message = _in_era(message, era)
        answers[case] = await wire.exchange(message)
    return answers


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_the_lane_answers_every_call_as_the_sdks_runner_does(tmp_path: Path, era: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with _hub(tmp_path / "a", lane=True, era=era) as wire:
        laned = await _answers(wire, era)
    async with _hub(tmp_path / "b", lane=False, era=era) as wire:
        reference = await _answers(wire, era)
    for case in CASES:
        assert laned[case] == reference[case], case
    # The cases say what they claim to: results, tool errors and JSON-RPC errors of each kind.
    assert laned["call"][-1]["result"]["structuredContent"] == {"text": "hi", "server": "srv"}
    if era == "legacy":
        assert "resultType" not in laned["call"][-1]["result"]  # sieved for the client's version
    else:
        assert laned["call"][-1]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-hub"
    assert laned["tool error"][-1]["result"]["isError"] is True
    assert laned["unknown tool"][-1]["error"]["code"] == -32602
    assert laned["no name"][-1]["error"] == {"code": -32602, "message": "Invalid request parameters", "data": ""}
    assert [m["method"] for m in laned["progress"][:-1]] == ["notifications/progress"] * 2
    if era == "legacy":  # a 2026-07-28 client hears log messages only when its request asks
        assert [m["params"]["level"] for m in laned["log messages"][:-1]] == ["debug", "info", "warning"]
    assert laned["timeout"][-1]["error"]["code"] == -32001
    assert laned["prompt"][-1]["result"]["messages"][0]["content"]["text"] == "Hello, ada, from srv"
    assert laned["resource"][-1]["result"]["contents"][0]["text"] == "first note"


async def test_an_observed_servers_calls_take_the_lane_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an access log (or telemetry) the observer sees each call in the lane, as it sees every other
    request: a call takes the same path whatever the configuration."""
    caplog.set_level(logging.INFO, logger="mcp_hub.access")
    served: list[str] = []
    answer = CallLane._answer  # pyright: ignore[reportPrivateUsage]

    async def noted(self: CallLane, runner: Any, ctx: Any) -> dict[str, Any]:
        served.append(ctx.method)
        return await answer(self, runner, ctx)

    monkeypatch.setattr(CallLane, "_answer", noted)
    config = make_config(tmp_path, {"srv": fixture_server("srv")}, access_log=True)
    async with running_hub(config) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(app) as base, httpx2.AsyncClient() as http:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}
            opened = await http.post(f"{base}/mcp", json=body, headers=JSON_HEADERS)
            headers = {**JSON_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
            headers["mcp-protocol-version"] = "2025-11-25"
            await http.post(
                f"{base}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
            )
            caplog.clear()
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            call["params"] = {"name": "srv_echo", "arguments": {"text": "hi"}}
            answered = read_answer(await http.post(f"{base}/mcp", json=call, headers=headers))
    assert answered[-1]["result"]["structuredContent"]["text"] == "hi"
    assert served == ["tools/call"]
    lines = [r.getMessage().rsplit(" duration_ms=", 1)[0] for r in caplog.records if r.name == "mcp_hub.access"]
    assert lines == ["method=tools/call name=srv_echo mount=srv principal=anonymous outcome=ok"]


@asynccontextmanager
async def _http_sessions(tmp_path: Path) -> AsyncIterator[tuple[httpx2.AsyncClient, list[tuple[str, str]]]]:
    """One hub with `srv` served twice over HTTP, with its lane and without; the HTTP client and, for each,
    the endpoint's URL and an initialized handshake-era session's id."""
    config = make_config(tmp_path, {"srv": fixture_server("srv", timeout=0.5)})
    async with running_hub(config) as hub:
        laned = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mcp_hub.server.http.app, "lane_of", lambda server: None)
            plain = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(laned) as laned_base, serve_app(plain) as plain_base, httpx2.AsyncClient() as http:
            sessions = []
            for base in (laned_base, plain_base):
                init = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                }
                body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}
                opened = await http.post(f"{base}/mcp", json=body, headers=JSON_HEADERS)
                session = opened.headers["mcp-session-id"]
                headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await http.post(f"{base}/mcp", json=initialized, headers=headers)
                sessions.append((f"{base}/mcp", session))
            yield http, sessions


async def test_over_http_the_lane_answers_every_call_as_the_sdks_runner_does(tmp_path: Path) -> None:
    async with _http_sessions(tmp_path) as (http, sessions):
        answers: list[dict[str, Any]] = []
        for url, session in sessions:
            headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            answered: dict[str, Any] = {}
            for number, (case, request) in enumerate(CASES.items()):
                message = {"jsonrpc": "2.0", "id": number, **request}
                if case == "resource":
                    message["params"] = {"uri": "srv+fixture://notes/1"}
                answered[case] = read_answer(await http.post(url, json=message, headers=headers))
            answers.append(answered)
    laned, reference = answers
    for answered in answers:  # the hub's own token for the server: its request ids run on across both
        answered["request _meta"][2]["result"]["structuredContent"]["progressToken"] = "hub-n"
    for case in CASES:
        assert laned[case] == reference[case], case
    assert laned["call"][2]["result"]["structuredContent"] == {"text": "hi", "server": "srv"}
    assert laned["timeout"][2]["error"]["code"] == -32001
    assert laned["resource"][2]["result"]["contents"][0]["text"] == "first note"
    assert [event.get("method") for event in laned["progress"][2]] == ["notifications/progress"] * 2 + [None]
