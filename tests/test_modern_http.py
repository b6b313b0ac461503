"""2026-07-28 requests over the hub's HTTP endpoint, served past the SDK's entry (`server/modern.py`).

The SDK's own entry (`handle_modern_request`) is the reference: every request here is also sent to the
same hub with the hub's entry taken out, and must be answered alike.
"""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp_types import ClientCapabilities

import mcp_hub.server.http.app
from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from mcp_hub.server.http import exchange as deferred
from mcp_hub.server.origin import relayed_capabilities
from mcp_hub.server.serving import KEPT_BYTES, Envelopes
from tests.conftest import fixture_server, make_config, running_hub, serve_app
from tests.harness.wire import JSON_HEADERS, MODERN, MODERN_META, modern_call, read_answer

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def two_entries(tmp_path: Path) -> AsyncIterator[tuple[httpx2.AsyncClient, str, str]]:
    """One hub with a fixture server, `srv`, served twice over HTTP: through the hub's 2026-07-28 entry and
    through the SDK's alone. The HTTP client and the two endpoints' URLs."""
    config = make_config(tmp_path, {"srv": fixture_server("srv")})
    async with running_hub(config) as hub:
        hub_app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mcp_hub.server.http.app, "ModernRequests", lambda *_: None)
            sdk_app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(hub_app) as hub_base, serve_app(sdk_app) as sdk_base, httpx2.AsyncClient() as http:
            yield http, f"{hub_base}/mcp", f"{sdk_base}/mcp"


def _request(method: str, params: dict[str, Any] | None = None, **headers: str) -> tuple[dict[str, str], Any]:
    sent = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method, **headers}
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 5, "method": method}
    if params is not None:
        body["params"] = params
    return sent, body


INFO = "io.modelcontextprotocol/clientInfo"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"


def with_meta(headers: dict[str, str], body: dict[str, Any], **meta: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """The request `body`, with `meta` over its envelope."""
    params = body["params"]
    return headers, {**body, "params": {**params, "_meta": {**params["_meta"], **meta}}}


def _cases() -> dict[str, tuple[dict[str, str], Any]]:
    call, body = modern_call("srv_echo", {"text": "hi"})
    cases: dict[str, tuple[dict[str, str], Any]] = {
        "call": (call, body),
        "tool error": modern_call("srv_fail", {"message": "no"}),
        "unknown tool": modern_call("nope", {}),
        "progress": (
            modern_call("srv_slow", {})[0] | {"Mcp-Name": "srv_slow"},
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {
                    "name": "srv_slow",
                    "arguments": {"seconds": 0.1, "steps": 2},
                    "_meta": {**MODERN_META, "progressToken": "p"},
                },
            },
        ),
        "client info in the envelope": with_meta(call, body, **{INFO: {"name": "c", "version": "1"}}),
        "malformed client info": with_meta(call, body, **{INFO: {"name": 3}}),
        "malformed capabilities": with_meta(call, body, **{CAPABILITIES: {"sampling": 1}}),
        "list": _request("tools/list", {"_meta": MODERN_META}),
        "read": _request("resources/read", {"uri": "fixture://notes/a", "_meta": MODERN_META}, **{"Mcp-Name": "x"}),
        "unknown method": _request("nothing/here", {"_meta": MODERN_META}),
        "no envelope": _request("tools/list", {}),
        "name header disagrees": (call | {"Mcp-Name": "srv_other"}, body),
        "method header disagrees": (call | {"Mcp-Method": "tools/list"}, body),
        "params not an object": (call, {**body, "params": [1]}),
        "unknown version": (call | {"MCP-Protocol-Version": "2099-01-01"}, body),
        "notification": (call, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}),
        "batch": (call, [body]),
        "not json": (call, "{"),
        "float id": (call, {**body, "id": 1.5}),
        "no sse accepted": (call | {"Accept": "application/json"}, body),
        "wrong content type": (call | {"Content-Type": "text/plain"}, body),
        "a 40 MiB body": (call, " " * (40 * 1024 * 1024)),
        "foreign host": (call | {"Host": "evil.example:80"}, body),
        "foreign origin": (call | {"Origin": "http://evil.example"}, body),
    }
    return cases


CASES = _cases()


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
async def test_the_hubs_entry_answers_as_the_sdks_does(tmp_path: Path, case: str) -> None:
    headers, body = CASES[case]
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    async with two_entries(tmp_path) as (http, hub_url, sdk_url):
        through_hub = await http.post(hub_url, content=content, headers=headers)
        through_sdk = await http.post(sdk_url, content=content, headers=headers)
    assert read_answer(through_hub) == read_answer(through_sdk)
    if case.startswith("foreign"):
        assert through_hub.status_code in (403, 421)
    if case == "a 40 MiB body":
        assert through_hub.status_code == 413
    if case == "call":
        assert read_answer(through_hub)[:2] == (200, "application/json")
        result = through_hub.json()["result"]
        assert result["structuredContent"] == {"text": "hi", "server": "srv"}
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-hub"
    if case == "progress":
        status, kind, events = read_answer(through_hub)
        assert (status, kind) == (200, "text/event-stream")
        assert [e.get("method") for e in events] == ["notifications/progress"] * 2 + [None]


@pytest.mark.slow
async def test_a_quiet_2026_call_outlasting_the_window_is_pinged_and_answered_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that sends nothing for `deferred.WINDOW` starts its SSE stream with a ping (a proxy would time
    out an idle response) and pings it every window; the answer is the stream's last event."""
    monkeypatch.setattr(deferred, "WINDOW", 0.1)
    config = make_config(tmp_path, {"srv": fixture_server("srv")})
    async with running_hub(config) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(app) as base, httpx2.AsyncClient(timeout=30) as http:
            headers, body = modern_call("srv_slow", {"seconds": 0.5, "steps": 1})
            streamed = await http.post(f"{base}/mcp", json=body, headers=headers)
            headers, body = modern_call("srv_echo", {"text": "after"}, request_id=2)
            plain = await http.post(f"{base}/mcp", json=body, headers=headers)
    assert streamed.status_code == 200
    assert streamed.headers["content-type"] == "text/event-stream"
    assert streamed.text.startswith(": ping\r\n\r\n")
    assert streamed.text.count(": ping") >= 2
    events = [json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")]
    assert [(e["id"], e["result"]["content"][0]["text"]) for e in events] == [(1, "done")]
    assert plain.headers["content-type"] == "application/json"
    assert plain.json()["result"]["structuredContent"] == {"text": "after", "server": "srv"}


async def test_each_result_gets_its_own_copy_of_the_server_info_stamp(tmp_path: Path) -> None:
    hub = Hub(make_config(tmp_path, {"srv": fixture_server("srv")}))
    server = hub.endpoint.server
    first, second = server.server_info_stamp, server.server_info_stamp
    assert first == second == Server.server_info_stamp.fget(server)  # type: ignore[attr-defined]
    first["name"] = "changed"
    assert server.server_info_stamp["name"] == "mcp-hub"


ENVELOPES = {
    "both": ({"name": "c", "version": "1"}, {"sampling": {}, "roots": {"listChanged": True}}),
    "capabilities alone": (None, {"elicitation": {"form": {}}}),
    "malformed capabilities": ({"name": "c", "version": "1"}, {"sampling": 1}),
    "malformed info": ({"name": 3}, {"sampling": {}}),
    "neither": (None, None),
    "an integer beyond 64 bits": ({"name": "c", "version": "1"}, {"experimental": {"x": {"n": 2**70}}}),
    "over the kept size": (
        {"name": "c", "version": "1"},
        {"sampling": {}, "experimental": {"x": {"y": "z" * KEPT_BYTES}}},
    ),
}
FRESH = {"an integer beyond 64 bits", "over the kept size"}
"""Envelopes typed afresh for each request."""


@pytest.mark.parametrize("case", list(ENVELOPES))
async def test_a_connection_from_a_kept_envelope_is_the_one_the_sdk_builds(case: str) -> None:
    info, capabilities = ENVELOPES[case]
    expected = Connection.from_envelope(MODERN, info, capabilities)
    envelopes = Envelopes()
    built = [envelopes.connection(MODERN, info, capabilities) for _ in range(3)]
    for connection in built:
        assert connection.protocol_version == MODERN and connection.initialized.is_set()
        assert connection.client_params == expected.client_params
        assert connection.client_capabilities == expected.client_capabilities
        assert connection.outbound is expected.outbound
    assert len({id(connection) for connection in built}) == 3  # a connection of its own for each request
    shared = {id(connection.client_capabilities) for connection in built}
    if case in FRESH:
        assert len(shared) == 3
    elif expected.client_capabilities is not None:
        assert len(shared) == 1


async def test_kept_envelopes_stay_apart() -> None:
    envelopes = Envelopes(size=2)
    info = {"name": "c", "version": "1"}
    asks = [{"sampling": {}}, {"elicitation": {"form": {}}}, {}]
    for _ in range(2):
        for capabilities in asks:  # three envelopes through two places: each is typed afresh when evicted
            built = envelopes.connection(MODERN, info, capabilities)
            assert built.client_capabilities == Connection.from_envelope(MODERN, info, capabilities).client_capabilities


def test_relayed_capabilities_are_kept_no_longer_than_their_model() -> None:
    declared = ClientCapabilities.model_validate({"sampling": {}, "roots": {"listChanged": True}, "experimental": {}})
    relayed = relayed_capabilities(declared)
    assert relayed == {"sampling": {}, "roots": {"listChanged": True}}
    assert relayed_capabilities(declared) is relayed  # kept while the model lives
    other = ClientCapabilities.model_validate({"elicitation": {"form": {}}})
    assert relayed_capabilities(other) == {"elicitation": {"form": {}}}
    watch = weakref.ref(declared)
    del declared
    gc.collect()
    assert watch() is None  # the cache does not keep the model alive
    fresh = ClientCapabilities.model_validate({})
    assert relayed_capabilities(fresh) == {}  # whatever id it was given
