"""Telemetry: spans, metrics, trace context to and from servers, access logs, /readyz, [telemetry] config.

Real hubs, the real fixture server, the SDK's client; what the hub reports is read with the
OpenTelemetry SDK's in-memory exporter and reader, or from a real OTLP/HTTP endpoint.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx2
import pytest
import tomlkit
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from mcp_hub.chain.telemetry import RequestObserver
from mcp_hub.config import HubConfig, load_config, parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import fixture_server, hub_client, serve_app
from tests.harness.telemetry import collector, finished, observed

pytestmark = pytest.mark.anyio

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


def config_for(
    tmp_path: Path,
    servers: dict[str, dict[str, Any]],
    telemetry: dict[str, Any] | None = None,
    hub: dict[str, Any] | None = None,
    policies: str | None = None,
) -> HubConfig:
    document = tomlkit.document()
    if hub:
        document["hub"] = hub
    if telemetry:
        document["telemetry"] = telemetry
    if policies is not None:
        (tmp_path / "policies").mkdir()
        (tmp_path / "policies" / "hub.toml").write_text(textwrap.dedent(policies), encoding="utf-8")
        document["policy"] = {"dir": "policies", "reload": False}
    document["servers"] = servers
    path = tmp_path / "hub.toml"
    path.write_text(tomlkit.dumps(document), encoding="utf-8")
    return load_config(path)


def one(spans: list[ReadableSpan], name: str, kind: SpanKind) -> ReadableSpan:
    found = [s for s in spans if s.name == name and s.kind == kind]
    assert len(found) == 1, [(s.name, s.kind) for s in spans]
    return found[0]


def points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], Any]]:
    """(attributes, data point) of every point of the metric `name`."""
    data = reader.get_metrics_data()
    assert data is not None
    return [
        (dict(point.attributes or {}), point)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


# -- spans ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_span_per_request_and_a_child_span_per_upstream_call(tmp_path: Path, mode: str) -> None:
    config = config_for(tmp_path, {"a": fixture_server("a")})
    async with observed(config) as (hub, exporter, _), hub_client(hub, mode) as client:
        await client.list_tools()
        await client.call_tool("a_echo", {"text": "hi"})
        await client.get_prompt("a_greet", {"who": "you"})
        await client.read_resource("a+fixture://notes/1")
        spans = finished(hub, exporter)

    listing = one(spans, "tools/list", SpanKind.SERVER)
    assert listing.attributes is not None and listing.attributes["mcp_hub.principal"] == "stdio"
    assert listing.attributes["mcp_hub.outcome"] == "ok"
    assert not [s for s in spans if s.kind == SpanKind.CLIENT and s.name == "tools/list"]  # served from the catalog

    call = one(spans, "tools/call a_echo", SpanKind.SERVER)
    assert call.parent is None
    attributes = dict(call.attributes or {})
    assert attributes.pop("mcp.protocol.version") and attributes.pop("jsonrpc.request.id")
    assert attributes == {
        "mcp.method.name": "tools/call",
        "mcp_hub.principal": "stdio",
        "gen_ai.tool.name": "a_echo",
        "gen_ai.operation.name": "execute_tool",
        "mcp_hub.mount": "a",
        "mcp_hub.native_name": "echo",
        "mcp_hub.outcome": "ok",
    }
    upstream = one(spans, "tools/call echo", SpanKind.CLIENT)
    assert upstream.parent is not None and call.context is not None and upstream.context is not None
    assert upstream.parent.span_id == call.context.span_id
    assert upstream.context.trace_id == call.context.trace_id
    assert upstream.attributes is not None
    assert upstream.attributes["mcp_hub.mount"] == "a" and upstream.attributes["gen_ai.tool.name"] == "echo"
    assert upstream.attributes["network.transport"] == "pipe"
    # one span for the client's request, one for the server's: nothing doubled
    assert len([s for s in spans if s.context and s.context.trace_id == call.context.trace_id]) == 2

    prompt = one(spans, "prompts/get a_greet", SpanKind.SERVER)
    assert prompt.attributes is not None and prompt.attributes["mcp_hub.native_name"] == "greet"
    one(spans, "prompts/get greet", SpanKind.CLIENT)
    read = one(spans, "resources/read", SpanKind.SERVER)
    assert read.attributes is not None
    assert read.attributes["mcp.resource.uri"] == "a+fixture://notes/1"
    assert read.attributes["mcp_hub.native_name"] == "fixture://notes/1"
    upstream_read = one(spans, "resources/read", SpanKind.CLIENT)
    assert upstream_read.attributes is not None and upstream_read.attributes["mcp.resource.uri"] == "fixture://notes/1"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_trace_context_reaches_the_server(tmp_path: Path, mode: str) -> None:
    config = config_for(tmp_path, {"a": fixture_server("a")})
    async with observed(config) as (hub, exporter, _), hub_client(hub, mode) as client:
        result = await client.call_tool("a_request_meta", {})
        spans = finished(hub, exporter)
    upstream = one(spans, "tools/call request_meta", SpanKind.CLIENT)
    assert upstream.context is not None
    meta = result.structured_content or {}
    version, trace_id, parent_id, _flags = meta["traceparent"].split("-")
    assert (version, trace_id, parent_id) == (
        "00",
        f"{upstream.context.trace_id:032x}",
        f"{upstream.context.span_id:016x}",
    )


async def test_the_clients_trace_context_is_the_parent(tmp_path: Path) -> None:
    config = config_for(tmp_path, {"a": fixture_server("a")})
    traceparent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    async with observed(config) as (hub, exporter, _), hub_client(hub) as client:
        result = await client.call_tool("a_request_meta", {}, meta={"traceparent": traceparent})  # type: ignore[typeddict-unknown-key]
        spans = finished(hub, exporter)
    call = one(spans, "tools/call a_request_meta", SpanKind.SERVER)
    assert call.parent is not None and call.context is not None
    assert (f"{call.context.trace_id:032x}", f"{call.parent.span_id:016x}") == (CLIENT_TRACE, CLIENT_SPAN)
    upstream = one(spans, "tools/call request_meta", SpanKind.CLIENT)
    assert upstream.context is not None
    # the server's parent is the hub's span for its request, in the client's trace
    assert (result.structured_content or {})["traceparent"].startswith(
        f"00-{CLIENT_TRACE}-{upstream.context.span_id:016x}-"
    )


async def test_over_http_the_span_names_the_key_holder_and_the_session(tmp_path: Path) -> None:
    key = "k" * 32
    config = config_for(tmp_path, {"a": fixture_server("a")})
    config = config.model_copy(update={"auth": config.auth.model_copy(update={"api_keys": {"ci-bot": key}})})
    async with observed(config) as (hub, exporter, _):
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, api_keys={"ci-bot": key})
        async with (
            serve_app(app) as base,
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy", cache=None) as client,
        ):
            await client.call_tool("a_echo", {"text": "x"})
        spans = finished(hub, exporter)
    call = one(spans, "tools/call a_echo", SpanKind.SERVER)
    assert call.attributes is not None
    assert call.attributes["mcp_hub.principal"] == "ci-bot"
    assert call.attributes["mcp.session.id"]


POLICY = """
[principals]
stdio = "p"

[profiles.p]
default = "allow"
[[profiles.p.rules]]
id = "no-crash"
effect = "deny"
tools = ["a/crash"]
[[profiles.p.rules]]
id = "docs-only"
effect = "allow"
tools = ["a/read_file"]
[profiles.p.rules.arguments.path]
path_within = ["{root}"]
"""


async def test_outcomes(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    policies = POLICY.replace("{root}", str(tmp_path / "docs"))
    config = config_for(tmp_path, {"a": fixture_server("a")}, policies=policies)
    async with observed(config) as (hub, exporter, reader), hub_client(hub) as client:
        failed = await client.call_tool("a_fail", {"message": "no"})
        refused = await client.call_tool("a_read_file", {"path": "/etc/passwd"})
        with pytest.raises(MCPError):
            await client.call_tool("a_crash", {})  # denied: answered as unknown
        with pytest.raises(MCPError):
            await client.call_tool("a_nonexistent", {})
        spans = finished(hub, exporter)
        durations = points(reader, "mcp.server.operation.duration")
    assert failed.is_error and refused.is_error

    def outcome(name: str) -> tuple[Any, ...]:
        span = one(spans, name, SpanKind.SERVER)
        attributes = span.attributes or {}
        return attributes["mcp_hub.outcome"], attributes.get("error.type"), span.status.status_code

    assert outcome("tools/call a_fail") == ("tool_error", "tool_error", StatusCode.ERROR)
    assert outcome("tools/call a_read_file") == ("refused", "tool_error", StatusCode.ERROR)
    assert outcome("tools/call a_crash") == ("denied", "-32602", StatusCode.ERROR)
    assert outcome("tools/call a_nonexistent") == ("error", "-32602", StatusCode.ERROR)
    # nothing reached the server for the refused and denied calls
    assert {s.name for s in spans if s.kind == SpanKind.CLIENT} == {"tools/call fail"}

    by_outcome = {(a["mcp_hub.outcome"], a.get("gen_ai.tool.name")) for a, _ in durations if "mcp_hub.outcome" in a}
    assert {("tool_error", "a_fail"), ("refused", "a_read_file"), ("denied", "a_crash")} <= by_outcome
    # a name the catalog does not know is no time series of its own
    assert ("error", None) in by_outcome
    assert not any(a.get("gen_ai.tool.name") == "a_nonexistent" for a, _ in durations)


# -- metrics -------------------------------------------------------------------------------------


async def test_metrics_count_requests_and_report_mounts(tmp_path: Path) -> None:
    config = config_for(
        tmp_path, {"a": fixture_server("a"), "bad": fixture_server("bad", "--exit-on-start", connect_timeout=5)}
    )
    async with observed(config) as (hub, exporter, reader), hub_client(hub) as client:
        for _ in range(3):
            await client.call_tool("a_echo", {"text": "x"})
        await client.list_tools()
        requests = points(reader, "mcp.server.operation.duration")
        upstream = points(reader, "mcp.client.operation.duration")
        up = points(reader, "mcp_hub.upstream.up")
        restarts = points(reader, "mcp_hub.upstream.restarts")
        states = points(reader, "mcp_hub.upstream.state")
        sessions = points(reader, "mcp_hub.upstream.sessions")
        spans = finished(hub, exporter)

    echo = {
        "mcp.method.name": "tools/call",
        "mcp_hub.outcome": "ok",
        "mcp_hub.mount": "a",
        "gen_ai.tool.name": "a_echo",
        "mcp_hub.principal": "stdio",
    }
    assert [p.count for a, p in requests if a == echo] == [3]
    # lists are counted by method (and principal) alone
    assert [a for a, _ in requests if a["mcp.method.name"] == "tools/list"] == [
        {"mcp.method.name": "tools/list", "mcp_hub.outcome": "ok", "mcp_hub.principal": "stdio"}
    ]
    to_server = {"mcp.method.name": "tools/call", "mcp_hub.mount": "a", "gen_ai.tool.name": "echo"}
    assert [p.count for a, p in upstream if a == to_server] == [3]
    # the hub's own listing of the mount is measured too, but traced only within a client's request
    assert any(a == {"mcp.method.name": "tools/list", "mcp_hub.mount": "a"} for a, _ in upstream)
    assert not [s for s in spans if s.name == "tools/list" and s.kind == SpanKind.CLIENT]
    assert {a["mcp_hub.mount"]: p.value for a, p in up} == {"a": 1, "bad": 0}
    assert {a["mcp_hub.mount"] for a, _ in restarts} == {"a", "bad"}
    state = {a["mcp_hub.mount"]: a["mcp_hub.state"] for a, _ in states}
    assert state["a"] == "up" and state["bad"] in ("down", "starting")  # backing off, or trying again
    assert {a["mcp_hub.mount"]: p.value for a, p in sessions} == {"a": 0, "bad": 0}


# -- off, and the access log ---------------------------------------------------------------------


def observers(hub: Hub) -> list[str]:
    """The server middleware that observe requests: the hub's, or the SDK's own span per message."""
    return [
        type(m).__name__
        for m in hub.endpoint.server.middleware
        if isinstance(m, RequestObserver) or type(m).__name__ == "OpenTelemetryMiddleware"
    ]


def links(hub: Hub) -> list[str]:
    """The links of the hub's call chain, outermost first, by class (the router, last, is not one)."""
    names: list[str] = []
    call = hub.endpoint._call
    while isinstance(call, functools.partial):
        names.append(type(call.func).__name__)
        call = call.keywords["call_next"]
    assert call == hub.router.call
    return names


async def test_off_by_default_adds_no_middleware_no_link_and_no_trace_context(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_hub")
    hub = Hub(config_for(tmp_path, {"a": fixture_server("a")}))
    assert not hub.telemetry.enabled
    assert not observers(hub)
    assert links(hub) == ["ResultBudget", "CacheLink"]  # no telemetry link: the result budget and cache (on by default)
    traceparent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    async with hub.running():
        await hub.wait_settled(20)
        async with hub_client(hub) as client:
            plain = await client.call_tool("a_request_meta", {})
            passed = await client.call_tool("a_request_meta", {}, meta={"traceparent": traceparent})  # type: ignore[typeddict-unknown-key]
    assert "traceparent" not in (plain.structured_content or {})
    assert (passed.structured_content or {})["traceparent"] == traceparent  # the client's own, untouched


async def test_access_log_line_per_request(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcp_hub.access")
    hub = Hub(config_for(tmp_path, {"a": fixture_server("a")}, hub={"access_log": True}))
    assert not hub.telemetry.enabled
    assert observers(hub) == ["RequestObserver"]
    async with hub.running():
        await hub.wait_settled(20)
        async with hub_client(hub) as client:
            caplog.clear()
            await client.call_tool("a_echo", {"text": "x"})
            await client.call_tool("a_fail", {})
            with pytest.raises(MCPError):
                await client.call_tool("a_missing", {})
    records = [r for r in caplog.records if r.name == "mcp_hub.access" and "method=tools/call" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.INFO] * 3
    lines = [r.getMessage().rsplit(" duration_ms=", 1)[0] for r in records]
    assert lines == [
        "method=tools/call name=a_echo mount=a principal=stdio outcome=ok",
        "method=tools/call name=a_fail mount=a principal=stdio outcome=tool_error",
        "method=tools/call name=a_missing principal=stdio outcome=error error=-32602",
    ]
    fields = records[0].access  # type: ignore[attr-defined]
    assert fields["mount"] == "a" and isinstance(fields["duration_ms"], float)


async def test_a_2026_07_28_call_over_http_leaves_one_access_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK checks a 2026-07-28 call's Mcp-Param headers against the tool's schema before dispatch; the
    hub hands it the schema, so no tools/list of the hub's own runs (and is logged) for each call."""
    caplog.set_level(logging.INFO, logger="mcp_hub.access")
    hub = Hub(config_for(tmp_path, {"a": fixture_server("a")}, hub={"access_log": True}))
    async with hub.running():
        await hub.wait_settled(20)
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(app) as base, Client(f"{base}/mcp", mode="2026-07-28", cache=None) as client:
            await client.list_tools()
            caplog.clear()
            for text in ("x", "y", "z"):
                await client.call_tool("a_echo", {"text": text})
    methods = [r.access["method"] for r in caplog.records if r.name == "mcp_hub.access"]  # type: ignore[attr-defined]
    assert methods == ["tools/call"] * 3


async def test_access_log_costs_nothing_when_disabled(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`access_log = true` with the logger above info: nothing is installed, as with `access_log = false`."""
    caplog.set_level(logging.WARNING, logger="mcp_hub.access")
    hub = Hub(config_for(tmp_path, {"a": fixture_server("a")}, hub={"access_log": True}))
    assert not observers(hub)
    assert links(hub) == ["ResultBudget", "CacheLink"]


# -- exporters -----------------------------------------------------------------------------------


async def test_console_exporters_write_to_stderr_never_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_for(tmp_path, {"a": fixture_server("a")}, telemetry={"traces": "console", "metrics": "console"})
    hub = Hub(config)
    async with hub.running():
        await hub.wait_settled(20)
        async with hub_client(hub) as client:
            await client.call_tool("a_echo", {"text": "x"})
    out, err = capsys.readouterr()
    assert out == ""
    exported = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    names = {item.get("name") for item in exported}
    assert {"tools/call a_echo", "tools/call echo"} <= names
    metric_names = {
        metric["name"]
        for item in exported
        for resource in item.get("resource_metrics", [])
        for scope in resource["scope_metrics"]
        for metric in scope["metrics"]
    }
    assert {"mcp.server.operation.duration", "mcp_hub.upstream.up"} <= metric_names
    span = next(item for item in exported if item.get("name") == "tools/call a_echo")
    assert span["resource"]["attributes"]["service.name"] == "mcp-hub"


async def test_otlp_export_to_a_collector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    app, received = collector("/v1/traces", "/v1/metrics")
    monkeypatch.setenv("COLLECTOR_TOKEN", "s3cret")
    async with serve_app(app) as base:
        config = config_for(
            tmp_path,
            {"a": fixture_server("a")},
            telemetry={
                "traces": "otlp",
                "metrics": "otlp",
                "endpoint": base,
                "headers": {"x-collector-token": "${COLLECTOR_TOKEN}"},
                "service_name": "hub-under-test",
            },
        )
        hub = Hub(config)
        async with hub.running():
            await hub.wait_settled(20)
            async with hub_client(hub) as client:
                await client.call_tool("a_echo", {"text": "x"})
        # leaving the hub exported what was left

    assert received["/v1/traces"] and received["/v1/metrics"]
    span_names = set()
    for headers, body in received["/v1/traces"]:
        assert headers["x-collector-token"] == "s3cret"
        assert headers["content-type"] == "application/x-protobuf"
        traces = ExportTraceServiceRequest.FromString(body)
        for resource in traces.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"]
            assert service == "hub-under-test"
            span_names |= {span.name for scope in resource.scope_spans for span in scope.spans}
    assert {"tools/call a_echo", "tools/call echo"} <= span_names
    metric_names = {
        metric.name
        for _, body in received["/v1/metrics"]
        for resource in ExportMetricsServiceRequest.FromString(body).resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert {"mcp.server.operation.duration", "mcp.client.operation.duration", "mcp_hub.upstream.up"} <= metric_names


# -- /readyz -------------------------------------------------------------------------------------


async def test_readyz_waits_for_the_mounts(tmp_path: Path) -> None:
    config = config_for(tmp_path, {"a": fixture_server("a"), "bad": fixture_server("bad", "--exit-on-start")})
    hub = Hub(config)
    app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, ready=hub.ready)
    async with serve_app(app) as base, httpx2.AsyncClient() as http:
        before = await http.get(f"{base}/readyz")  # no mount has tried yet
        async with hub.running():
            await hub.wait_settled(20)
            after = await http.get(f"{base}/readyz")
            health = await http.get(f"{base}/healthz")
    assert before.status_code == 503
    assert set(before.json()) == {"status", "servers"} and before.json()["status"] == "down"
    assert after.status_code == 200  # every mount settled, one up
    assert after.json()["status"] == "degraded" and set(after.json()) == set(health.json())


async def test_readyz_refuses_while_no_mount_is_up(tmp_path: Path) -> None:
    config = config_for(tmp_path, {"bad": fixture_server("bad", "--exit-on-start")})
    hub = Hub(config)
    app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, ready=hub.ready)
    async with serve_app(app) as base, httpx2.AsyncClient() as http, hub.running():
        await hub.wait_settled(20)
        response = await http.get(f"{base}/readyz")
    assert response.status_code == 503 and response.json()["servers"]["bad"]["state"] in ("down", "starting")


# -- configuration -------------------------------------------------------------------------------


def test_telemetry_is_off_by_default() -> None:
    settings = parse_config("", environ={}).telemetry
    assert (settings.traces, settings.metrics, settings.endpoint, settings.service_name) == ("off", "off", None, None)


@pytest.mark.parametrize(
    ("table", "key", "fragment"),
    [
        ('traces = "on"', "telemetry.traces", "'off', 'console' or 'otlp'"),
        ('metrics = "prometheus"', "telemetry.metrics", "'off', 'console' or 'otlp'"),
        ('tracing = "console"', "telemetry.tracing", "did you mean 'traces'?"),
        ('endpoint = "localhost:4318"', "telemetry.endpoint", "http://localhost:4318"),
        ("metric_interval = 0", "telemetry.metric_interval", "greater than 0"),
        ('metric_interval = "10"', "telemetry.metric_interval", "remove the quotes"),
        ('headers = { x = "${UNSET_TOKEN}" }', "telemetry.headers.x", "UNSET_TOKEN is not set"),
        ('service_name = ""', "telemetry.service_name", "at least 1 character"),
    ],
)
def test_bad_settings_name_the_key(table: str, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"[telemetry]\n{table}\n", environ={})
    assert caught.value.key == key
    assert fragment in caught.value.reason


def test_otlp_without_the_exporter_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)  # as if not installed
    with pytest.raises(ConfigError) as caught:
        parse_config('[telemetry]\nmetrics = "otlp"\n', environ={})
    assert caught.value.key == "telemetry.metrics"
    assert "pip install -e '.[otlp]' from the checkout" in caught.value.reason


@pytest.mark.slow
def test_endpoint_and_headers_expand_variables() -> None:
    settings = parse_config(
        '[telemetry]\ntraces = "otlp"\nendpoint = "${COLLECTOR:-http://collector:4318}"\nheaders = { a = "${K}" }\n',
        environ={"K": "s3cret-value"},
    ).telemetry
    assert (settings.endpoint, settings.headers) == ("http://collector:4318", {"a": "s3cret-value"})
    assert "s3cret" not in repr(settings)
