"""Audit events as OpenTelemetry log records, exported over OTLP/HTTP to a collector.

Each event becomes one log record made by the OpenTelemetry SDK's logs API (a `LoggerProvider`'s logger, scope
"mcp_hub.audit"): its time the event's, its body the event in the sink's format (the hub's JSON line or OCSF
JSON), its event name "mcp_hub.audit" (or "ocsf.api_activity"), its severity from the outcome (INFO for a call that
went through, WARN for a refusal or failure, ERROR for a blocked call or a changed tool), and attributes a
collector can route on without parsing the body: `mcp_hub.outcome`, `mcp_hub.principal`, `mcp.method.name`,
`mcp_hub.mount`, `mcp_hub.decision_id`. The resource is the hub's (`service.name` as `[telemetry]` says).

The records do not go through the SDK's batch processor: its queue drops the newest records when full, and its
export gives up on a batch once the exporter's retries time out. The audit sink (audit_sink.py) keeps them
instead, and the transport exports each batch itself with the OTLP exporter; a batch the collector did not take
(refused, unreachable, an error status) raises, and stays buffered for the next try.

The SDK's logs API and the OTLP log exporter are public but still under underscored module names
(`opentelemetry.sdk._logs`, `opentelemetry.exporter.otlp.proto.http._log_exporter`): this module alone imports them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from mcp_hub import __version__
from mcp_hub.observe.audit_ocsf import epoch_ms, outcome_status
from mcp_hub.observe.audit_sink import Entry

TIMEOUT = 5.0
"""Seconds an export may take, the exporter's own retries included."""

_ATTRIBUTES = {
    "outcome": "mcp_hub.outcome",
    "principal": "mcp_hub.principal",
    "method": "mcp.method.name",
    "mount": "mcp_hub.mount",
    "decision_id": "mcp_hub.decision_id",
}


class OtlpTransport:
    """Log records to an OTLP/HTTP collector (`endpoint`: the base URL, "/v1/logs" appended; None: the OTEL_*
    variables, else http://localhost:4318)."""

    def __init__(
        self,
        endpoint: str | None,
        *,
        headers: Mapping[str, str] | None = None,
        service_name: str | None = None,
        format: str = "hub",
        timeout: float = TIMEOUT,
    ) -> None:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadableLogRecord, ReadWriteLogRecord
        from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource

        resource = Resource.create({SERVICE_VERSION: __version__})  # with OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME
        if service_name is not None:
            resource = resource.merge(Resource({SERVICE_NAME: service_name}))
        elif str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: "mcp-hub"}))
        url = f"{endpoint.rstrip('/')}/v1/logs" if endpoint else None
        self.description = f"otlp {url or 'from OTEL_EXPORTER_OTLP_(LOGS_)ENDPOINT'}"
        self._exporter = OTLPLogExporter(endpoint=url, headers=dict(headers) if headers else None, timeout=timeout)
        made: list[Any] = []
        self._made = made

        class Collect(LogRecordProcessor):
            """Keeps each record the logger makes, for `send` to export."""

            def on_emit(self, log_record: ReadWriteLogRecord) -> None:
                made.append(
                    ReadableLogRecord(
                        log_record=log_record.log_record,
                        resource=log_record.resource or resource,
                        instrumentation_scope=log_record.instrumentation_scope,
                        limits=log_record.limits,
                    )
                )

            def shutdown(self) -> None:
                pass

            def force_flush(self, timeout_millis: int = 30000) -> bool:
                return True

        self._provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        self._provider.add_log_record_processor(Collect())
        self._logger = self._provider.get_logger("mcp_hub.audit", __version__)
        self._event_name = "ocsf.api_activity" if format == "ocsf" else "mcp_hub.audit"
        self._lock = threading.Lock()

    def open(self) -> None:
        """Nothing: the first `send` connects."""

    def send(self, entries: Sequence[Entry]) -> None:
        from opentelemetry._logs import SeverityNumber
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        with self._lock:
            self._made.clear()
            for entry in entries:
                fields = entry.fields
                severity = _SEVERITY[outcome_status(str(fields.get("outcome")))[1]]
                self._logger.emit(
                    timestamp=epoch_ms(str(fields.get("time"))) * 1_000_000,
                    severity_number=SeverityNumber[severity],
                    severity_text=severity,
                    body=entry.text,
                    event_name=self._event_name,
                    attributes={
                        name: str(fields[key]) for key, name in _ATTRIBUTES.items() if fields.get(key) is not None
                    },
                )
            records, self._made[:] = list(self._made), []
        if records and self._exporter.export(records) is not LogRecordExportResult.SUCCESS:
            raise ConnectionError(f"the collector did not take {len(records)} log records (see the exporter's log)")

    def probe(self) -> str:
        """Export an empty request (no record), as a collector takes any."""
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        if self._exporter.export([]) is not LogRecordExportResult.SUCCESS:
            raise ConnectionError("the collector did not take an empty export (see the exporter's log)")
        return "the collector answered"

    def close(self) -> None:
        """Nothing to close between tries: each export is a request of its own."""


_SEVERITY = {0: "INFO", 1: "INFO", 2: "WARN", 3: "WARN", 4: "ERROR", 5: "FATAL", 6: "FATAL"}
"""OCSF severity_id -> OpenTelemetry severity: Informational -> INFO, Low and Medium -> WARN, High -> ERROR."""
