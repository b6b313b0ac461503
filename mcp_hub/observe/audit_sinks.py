"""The audit sinks `[[audit.sinks]]` asks for, built from hub.toml: a file, a syslog receiver, an OTLP collector.

Building one opens nothing on the network: a syslog sink connects, and an OTLP sink exports, from its own thread
once events come (audit_sink.py), so a receiver that is down at start-up delays nothing and is retried. A file sink
opens its file when the audit log starts, and an unwritable path stops the hub there, as `[audit] file` does; a CA,
certificate or key that cannot be read stops it too, naming the key.
"""

from __future__ import annotations

import ssl

from mcp_hub.config import AuditSinkSettings, HubConfig, host_port
from mcp_hub.errors import ConfigError
from mcp_hub.observe.audit_sink import AuditSink, FileTransport, Transport


def sinks_of(config: HubConfig, *, rotate: bool = True) -> list[AuditSink]:
    """One `AuditSink` per `[[audit.sinks]]` entry, in file order. `rotate=False`: file sinks append without
    rotating (a command run beside the hub, which rotates them itself)."""
    return [
        AuditSink(_transport(config, settings, index, rotate), settings.format, buffer=settings.buffer)
        for index, settings in enumerate(config.audit.sinks)
    ]


def _transport(config: HubConfig, settings: AuditSinkSettings, index: int, rotate: bool) -> Transport:
    if settings.destination == "file":
        assert settings.path is not None
        max_bytes = settings.max_bytes if rotate else 0
        path = config.relative(settings.path)
        return FileTransport(path, max_bytes=max_bytes, backups=settings.backups, key=f"audit.sinks[{index}].path")
    if settings.destination == "syslog":
        from mcp_hub.observe.audit_syslog import SyslogTransport, tls_context

        assert settings.address is not None
        host, port = host_port(settings.address)
        context = None
        if settings.tls:
            paths = {key: getattr(settings, key) for key in ("ca", "cert", "key")}
            try:
                context = tls_context(*(None if path is None else config.relative(path) for path in paths.values()))
            except (OSError, ssl.SSLError) as exc:
                named = [key for key, path in paths.items() if path is not None] or ["ca"]
                key = f"audit.sinks[{index}].{named[0] if len(named) == 1 else '/'.join(named)}"
                why = getattr(exc, "strerror", None) or str(exc)
                raise ConfigError(
                    str(config.path), key, f"cannot load the syslog sink's TLS files: {why}; name readable PEM files"
                ) from exc
        return SyslogTransport(
            host,
            port,
            tls=context,
            server_name=settings.server_name,
            facility=settings.facility,
            app_name=settings.app_name,
        )
    from mcp_hub.observe.audit_otlp import OtlpTransport

    telemetry = config.telemetry
    return OtlpTransport(
        settings.endpoint or telemetry.endpoint,
        headers=settings.headers or telemetry.headers,
        service_name=telemetry.service_name,
        format=settings.format,
    )
