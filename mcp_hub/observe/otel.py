"""OpenTelemetry for the hub: providers built from `[telemetry]`, the instruments, the upstream side.

Traces and metrics are each "off" (the default), "console" (JSON lines on stderr, never
stdout: over stdio, stdout is the MCP channel) or "otlp" (OTLP over HTTP). The providers
are the hub's own rather than the process-wide ones, so a hub embedded in another
application, or two hubs in one process, report separately. The OpenTelemetry SDK is
imported only when one of them is on.

What the hub reports, by OpenTelemetry's MCP conventions where they name it:

- a SERVER span per client request (see chain/telemetry.py), parented on the
  `traceparent` of the request's `_meta` when the client sent one (SEP-414);
- a CLIENT span per request the hub sends a mounted server on a client's behalf,
  child of that request's span, its context injected into the outgoing `_meta`
  (`traceparent`, `tracestate`), so the server's own spans join the trace;
- `mcp.server.operation.duration` (client requests) and `mcp.client.operation.duration`
  (requests to mounted servers, including the hub's own listings and pings):
  histograms in seconds whose counts are the request counts, by method, mount, tool or
  prompt, outcome and `error.type`;
- `mcp_hub.upstream.up`, `mcp_hub.upstream.state`, `mcp_hub.upstream.restarts` and
  `mcp_hub.upstream.sessions`, read from the supervisors when metrics are collected.
- `mcp_hub.audit.sink.up`, `.buffered`, `.sent` and `.dropped`, read from the audit sinks
  ([[audit.sinks]]) when metrics are collected.

Metrics are on when `[telemetry] metrics` exports them, and when the admin console's dashboard reads them in
the hub's own process (`add_reader`; observe/dashboard.py), exported or not.

`CURRENT` holds the telemetry of the hub a task works for, set only while telemetry
is on: with it off, a request to a mounted server costs one context-variable read.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import anyio
from mcp.shared.exceptions import MCPError
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.metrics import CallbackOptions, Histogram, Observation
from opentelemetry.trace import SpanKind, StatusCode, Tracer

from mcp_hub import __version__
from mcp_hub.config import ServerConfig, TelemetrySettings
from mcp_hub.errors import HubError

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

SCOPE = "mcp_hub"
"""The instrumentation scope of every span and instrument the hub makes."""

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120, 300)
"""Histogram buckets (seconds): OpenTelemetry's advice for MCP operation durations."""

TARGET_ATTRIBUTE = {
    "tools/call": "gen_ai.tool.name",
    "prompts/get": "gen_ai.prompt.name",
    "resources/read": "mcp.resource.uri",
    "skills/get": "mcp.resource.uri",
    "resources/directory/read": "mcp.resource.uri",
}
"""Method -> the attribute that names what it is about (the value is `params.name`, or `params.uri`)."""


class SinkStatus(Protocol):
    """One audit sink as its instruments report it (audit_sink.AuditSink)."""

    @property
    def description(self) -> str: ...
    @property
    def buffered(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    @property
    def sent(self) -> int: ...
    @property
    def down_since(self) -> float | None: ...


class MountStatus(NamedTuple):
    """One mount as the upstream instruments report it."""

    name: str
    up: bool
    restarts: int
    sessions: int
    state: str = "up"
    """The supervisor's state (starting, up, down, disabled, stopped)."""


CURRENT: ContextVar[Telemetry | None] = ContextVar("mcp_hub.telemetry", default=None)
"""The telemetry of the hub this task serves a request (or supervises a mount) for; None when off."""

SHOWN_TARGET: ContextVar[tuple[str, str] | None] = ContextVar("mcp_hub.shown_target", default=None)
"""(target, as shown) while a call whose target (a resource URI) a guard found something in is sent on: the spans
and measurements of requests to servers show that target redacted (the chain's guardrails link sets it)."""


class Telemetry:
    """Tracer, meter and instruments, built by `start()` from the settings and torn down by `shutdown()`.

    `span_exporter` and `metric_reader` replace the configured exporters (and switch
    the signal on): the way to read what the hub reports in-process.
    """

    def __init__(
        self,
        settings: TelemetrySettings,
        *,
        span_exporter: SpanExporter | None = None,
        metric_reader: MetricReader | None = None,
    ) -> None:
        self.settings = settings
        self.tracing = span_exporter is not None or settings.traces != "off"
        self.exporting = metric_reader is not None or settings.metrics != "off"
        """Metrics leave the process (or a reader given here reads them all)."""
        self.measuring = self.exporting
        self._span_exporter = span_exporter
        self._metric_reader = metric_reader
        self._readers: list[MetricReader] = []
        """Readers in the hub's own process (the console's dashboard: admin/dashboard.py), beside the exporter."""
        self._tracer_provider: TracerProvider | None = None
        self._meter_provider: MeterProvider | None = None
        self.tracer: Tracer | None = None
        """Set while running with traces on."""
        self.request_duration: Histogram | None = None
        """`mcp.server.operation.duration`; set while running with metrics on."""
        self.upstream_duration: Histogram | None = None
        """`mcp.client.operation.duration`; set while running with metrics on."""

    @property
    def enabled(self) -> bool:
        return self.tracing or self.measuring

    @property
    def upstream(self) -> bool:
        """Requests to mounted servers are traced or measured (`CURRENT` is set for them): with traces on, or
        metrics exported. The console's dashboard reads the client requests' measurements only, so with it
        alone the requests to servers cost nothing more."""
        return self.tracing or self.exporting

    def add_reader(self, reader: MetricReader) -> None:
        """Read the metrics in-process with `reader` too (before `start`): metrics are on from then on, exported
        only as `[telemetry] metrics` says."""
        self._readers.append(reader)
        self.measuring = True

    # -- lifecycle ---------------------------------------------------------------

    def start(
        self, mounts: Callable[[], Iterable[MountStatus]], sinks: Callable[[], Iterable[SinkStatus]] = tuple
    ) -> None:
        """Build the providers (their export threads start here); `mounts` feeds the upstream gauges, `sinks` the
        audit sinks'."""
        if not self.enabled:
            return
        resource = self._resource()
        if self.tracing:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
            tracer_provider.add_span_processor(BatchSpanProcessor(self._span_exporter or self._configured_exporter()))
            self._tracer_provider = tracer_provider
            self.tracer = tracer_provider.get_tracer(SCOPE, __version__)
        if self.measuring:
            from opentelemetry.sdk.metrics import MeterProvider

            readers = list(self._readers)
            if self.exporting:
                readers.insert(0, self._metric_reader or self._configured_reader())
            meter_provider = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
            self._meter_provider = meter_provider
            meter = meter_provider.get_meter(SCOPE, __version__)
            self.request_duration = meter.create_histogram(
                "mcp.server.operation.duration",
                unit="s",
                description="Client requests to the hub, from receipt until answered.",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            )
            if self.exporting:
                self.upstream_duration = meter.create_histogram(
                    "mcp.client.operation.duration",
                    unit="s",
                    description="Requests from the hub to mounted servers, from sending until answered.",
                    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
                )
            _observe_mounts(meter, mounts)
            _observe_sinks(meter, sinks)

    def flush(self) -> None:
        """Export what is buffered now (blocks until exported)."""
        if self._tracer_provider is not None:
            self._tracer_provider.force_flush()
        if self._meter_provider is not None:
            self._meter_provider.force_flush()

    def shutdown(self) -> None:
        """Export what is left and stop the export threads (blocks; bounded by the exporters' timeouts)."""
        tracer_provider, meter_provider = self._tracer_provider, self._meter_provider
        self._tracer_provider = self._meter_provider = None
        self.tracer = None
        self.request_duration = self.upstream_duration = None
        if tracer_provider is not None:
            tracer_provider.shutdown()
        if meter_provider is not None:
            meter_provider.shutdown()

    def _resource(self) -> Resource:
        from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource

        resource = Resource.create({SERVICE_VERSION: __version__})  # with OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME
        if self.settings.service_name is not None:
            return resource.merge(Resource({SERVICE_NAME: self.settings.service_name}))
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            return resource.merge(Resource({SERVICE_NAME: "mcp-hub"}))
        return resource

    def _configured_exporter(self) -> SpanExporter:
        settings = self.settings
        if settings.traces == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter(out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n")
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=_signal_url(settings.endpoint, "traces"), headers=settings.headers or None)

    def _configured_reader(self) -> MetricReader:
        from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader

        settings = self.settings
        exporter: MetricExporter
        if settings.metrics == "console":
            from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

            exporter = ConsoleMetricExporter(out=sys.stderr, formatter=lambda data: data.to_json(indent=None) + "\n")
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            exporter = OTLPMetricExporter(
                endpoint=_signal_url(settings.endpoint, "metrics"), headers=settings.headers or None
            )
        interval = settings.metric_interval
        return PeriodicExportingMetricReader(exporter, export_interval_millis=interval * 1000 if interval else None)

    # -- requests to mounted servers ---------------------------------------------

    async def upstream_request(
        self,
        config: ServerConfig,
        protocol: str | None,
        method: str,
        params: Mapping[str, Any] | None,
        send: Callable[[Mapping[str, Any] | None], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """`send(params)` to the mount of `config`, measured; traced as a child of the current span, if any.

        The span's context goes into the request's `_meta`, where the server finds its parent.
        """
        target = target_of(method, params)
        attributes: dict[str, Any] = {"mcp.method.name": method, "mcp_hub.mount": config.name}
        shown = SHOWN_TARGET.get() if target is not None else None
        if target is not None:
            attributes[target[0]] = shown[1] if shown is not None and shown[0] == target[1] else target[1]
        span = None
        token = None
        if self.tracer is not None and trace.get_current_span().get_span_context().is_valid:
            span = self.tracer.start_span(
                span_name(method, target),
                kind=SpanKind.CLIENT,
                attributes={
                    **attributes,
                    "mcp.protocol.version": protocol or "",
                    "network.transport": "pipe" if config.kind == "stdio" else "tcp",
                    **({"gen_ai.operation.name": "execute_tool"} if method == "tools/call" else {}),
                },
            )
            current = trace.set_span_in_context(span)
            meta = dict(params.get("_meta") or {}) if params else {}
            propagate.inject(meta, context=current)
            params = {**(params or {}), "_meta": meta}
            token = otel_context.attach(current)
        started = time.perf_counter()
        failure: Failure | None = None
        try:
            result = await send(params)
            if result.get("isError") is True:
                failure = Failure("tool_error")
            return result
        except BaseException as exc:
            failure = Failure.of(exc).showing(shown)
            raise
        finally:
            elapsed = time.perf_counter() - started
            if failure is not None:
                attributes["error.type"] = failure.type
            if self.upstream_duration is not None:
                self.upstream_duration.record(elapsed, attributes)
            if span is not None:
                if failure is not None:
                    failure.mark(span)
                span.end()
            if token is not None:
                otel_context.detach(token)


class Failure(NamedTuple):
    """How a request failed, as `error.type` (a JSON-RPC error code, "tool_error", "cancelled" or
    the class of an unexpected exception), with the wire error's code and message when there is one."""

    type: str
    code: int | None = None
    message: str | None = None

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        if isinstance(exc, MCPError):
            return cls(str(exc.code), exc.code, exc.message)
        if isinstance(exc, HubError):
            return cls(str(exc.code), exc.code, str(exc))
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            return cls("cancelled")
        return cls(type(exc).__qualname__, None, str(exc))

    def showing(self, target: tuple[str, str] | None) -> Failure:
        """This failure, its message showing `target[0]` as `target[1]` (a URI as a guard redacted it: a server's
        error may quote what it was asked)."""
        if target is None or not self.message:
            return self
        return self._replace(message=self.message.replace(*target))

    def mark(self, span: trace.Span) -> None:
        """Record the failure on `span`: `error.type`, the JSON-RPC code, an ERROR status."""
        span.set_attribute("error.type", self.type)
        if self.code is not None:
            span.set_attribute("rpc.response.status_code", str(self.code))
        span.set_status(StatusCode.ERROR, self.message)


def target_of(method: str, params: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(attribute, value) naming what a request is about: its tool, its prompt or its resource's URI."""
    attribute = TARGET_ATTRIBUTE.get(method)
    if attribute is None or not params:
        return None
    value = params.get("uri" if attribute == "mcp.resource.uri" else "name")
    return (attribute, value) if isinstance(value, str) else None


def span_name(method: str, target: tuple[str, str] | None) -> str:
    """`{method} {tool or prompt}`; the method alone for the rest (URIs are too many to name spans by)."""
    if target is None or target[0] == "mcp.resource.uri":
        return method
    return f"{method} {target[1]}"


def _signal_url(endpoint: str | None, signal: str) -> str | None:
    return f"{endpoint.rstrip('/')}/v1/{signal}" if endpoint else None


def _observe_sinks(meter: Any, sinks: Callable[[], Iterable[SinkStatus]]) -> None:
    def observe(read: Callable[[SinkStatus], int]) -> Callable[[CallbackOptions], Iterator[Observation]]:
        def callback(options: CallbackOptions) -> Iterator[Observation]:
            for sink in sinks():
                yield Observation(read(sink), {"mcp_hub.audit.sink": sink.description})

        return callback

    meter.create_observable_gauge(
        "mcp_hub.audit.sink.up",
        callbacks=[observe(lambda sink: int(sink.down_since is None))],
        unit="1",
        description="0 while the audit sink's destination is down (its last send failed), else 1.",
    )
    meter.create_observable_gauge(
        "mcp_hub.audit.sink.buffered",
        callbacks=[observe(lambda sink: sink.buffered)],
        unit="{event}",
        description="Audit events the sink holds, not yet sent.",
    )
    meter.create_observable_counter(
        "mcp_hub.audit.sink.sent",
        callbacks=[observe(lambda sink: sink.sent)],
        unit="{event}",
        description="Audit events the sink's destination took.",
    )
    meter.create_observable_counter(
        "mcp_hub.audit.sink.dropped",
        callbacks=[observe(lambda sink: sink.dropped)],
        unit="{event}",
        description="Audit events the sink lost: the oldest beyond its buffer, or left when the hub stopped.",
    )


def _observe_mounts(meter: Any, mounts: Callable[[], Iterable[MountStatus]]) -> None:
    def observe(read: Callable[[MountStatus], int]) -> Callable[[CallbackOptions], Iterator[Observation]]:
        def callback(options: CallbackOptions) -> Iterator[Observation]:
            for mount in mounts():
                yield Observation(read(mount), {"mcp_hub.mount": mount.name})

        return callback

    meter.create_observable_gauge(
        "mcp_hub.upstream.up",
        callbacks=[observe(lambda mount: int(mount.up))],
        unit="1",
        description="1 while the mount is connected, else 0.",
    )
    meter.create_observable_counter(
        "mcp_hub.upstream.restarts",
        callbacks=[observe(lambda mount: mount.restarts)],
        unit="{restart}",
        description="Reconnections (restarts, for stdio servers) since the hub started.",
    )

    def states(options: CallbackOptions) -> Iterator[Observation]:
        for mount in mounts():
            yield Observation(1, {"mcp_hub.mount": mount.name, "mcp_hub.state": mount.state})

    meter.create_observable_gauge(
        "mcp_hub.upstream.state",
        callbacks=[states],
        unit="1",
        description="1 for the state each mount is in (starting, up, down, disabled, stopped), by `mcp_hub.state`.",
    )
    meter.create_observable_gauge(
        "mcp_hub.upstream.sessions",
        callbacks=[observe(lambda mount: mount.sessions)],
        unit="{session}",
        description="Per-client sessions open on the mount (0 for shared mounts).",
    )
