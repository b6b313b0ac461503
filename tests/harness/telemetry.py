"""Spans the hub emits, caught by the OpenTelemetry SDK's in-memory exporter; an OTLP/HTTP collector that keeps
what exporters post to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mcp_hub.config import HubConfig
from mcp_hub.hub import Hub
from mcp_hub.observe.otel import Telemetry


@asynccontextmanager
async def observed(config: HubConfig) -> AsyncIterator[tuple[Hub, InMemorySpanExporter, InMemoryMetricReader]]:
    """A running hub whose spans and metrics are read in memory."""
    spans, metrics = InMemorySpanExporter(), InMemoryMetricReader()
    hub = Hub(config, telemetry=Telemetry(config.telemetry, span_exporter=spans, metric_reader=metrics))
    async with hub.running():
        await hub.wait_settled(20)
        yield hub, spans, metrics


def finished(hub: Hub, exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    hub.telemetry.flush()
    return list(exporter.get_finished_spans())


Received = dict[str, list[tuple[dict[str, str], bytes]]]
"""Signal path ("/v1/logs") -> each request posted to it: (its headers, its body, the protobuf as sent)."""


def collector(*paths: str) -> tuple[Starlette, Received]:
    """An OTLP/HTTP collector (serve it with `serve_app`) taking the signals at `paths` ("/v1/traces", "/v1/metrics",
    "/v1/logs"), answering 200 to each export, and what it received."""
    received: Received = {path: [] for path in paths}

    async def collect(request: Request) -> Response:
        received[request.url.path].append((dict(request.headers), await request.body()))
        return Response(status_code=200, media_type="application/x-protobuf")

    return Starlette(routes=[Route(path, collect, methods=["POST"]) for path in paths]), received
