"""Spans the hub emits, caught by the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

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
