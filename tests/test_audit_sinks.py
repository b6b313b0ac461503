"""Audit sinks ([[audit.sinks]]): the audit events as OCSF API Activity, to a syslog receiver (RFC 5424 over TCP and
TLS), as OpenTelemetry log records to an OTLP collector, and to more files; a sink that is down buffers to its bound
and never holds up a call.

The receiver is a real rsyslogd (tests/syslog_receiver.py), the collector a real HTTP server decoding the OTLP
protobuf the exporter sent, the OCSF events are validated against the published JSON Schema of class 6003
(tests/data/ocsf), and the hub is a running one with the SDK's client and the fixture server as its upstream.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import statistics
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp.shared.exceptions import MCPError

from mcp_hub.config import load_config, parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.hub import Hub
from mcp_hub.observe.audit_log import AuditEvent, appending
from mcp_hub.observe.audit_ocsf import OUTCOMES, to_ocsf
from mcp_hub.observe.audit_sink import AuditSink, Entry
from mcp_hub.observe.audit_sinks import sinks_of
from mcp_hub.observe.audit_syslog import frame, message
from tests.conftest import fixture_server, free_port, hub_client, serve_app, wait_for, write_config
from tests.harness.cli import mcp_hub
from tests.harness.telemetry import collector, observed
from tests.syslog_receiver import OSSL_DRIVER, RSYSLOGD, SyslogReceiver

SCHEMA = json.loads((Path(__file__).parent / "data" / "ocsf" / "api_activity-1.8.0.schema.json").read_text())
OCSF = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)

needs_rsyslog = pytest.mark.skipif(
    RSYSLOGD is None, reason="rsyslogd is not installed (Debian's rsyslog; .ci/run installs it)"
)

BASE = AuditEvent(
    time="2026-12-05T04:05:06.123Z",
    decision_id="0" * 32,
    principal="alice",
    session="s-1",
    method="tools/call",
    mount="notes",
    name="add_note",
    via=None,
    arguments={"title": "café ☕", "token": "***"},
    outcome="allowed",
    rule="allow-notes",
    reason=None,
    latency_ms=1.5,
    policy_revision="rev-1",
)


def ocsf_of(event: AuditEvent) -> dict[str, Any]:
    """The OCSF event of `event`, as a sink makes it (from the audit line), checked against the schema."""
    ocsf = to_ocsf(json.loads(event.to_json()))
    errors = [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in OCSF.iter_errors(ocsf)]
    assert not errors, errors
    return ocsf


# -- OCSF ---------------------------------------------------------------------------------------------------------

ALL_OUTCOMES = sorted({*OUTCOMES, "enabled", "disabled", "something-new"})


@pytest.mark.parametrize("outcome", ALL_OUTCOMES)
def test_every_outcome_is_a_valid_ocsf_api_activity(outcome: str) -> None:
    for event in (
        replace(BASE, outcome=outcome),
        replace(BASE, outcome=outcome, session=None, arguments=None, rule=None, latency_ms=None, policy_revision=None),
        replace(BASE, outcome=outcome, method="resources/read", name="file:///etc/x", arguments=None),
        replace(BASE, outcome=outcome, reason="why", issuer="https://idp", subject="sub-1", client_id="cli"),
    ):
        ocsf = ocsf_of(event)
        assert (ocsf["class_uid"], ocsf["category_uid"], ocsf["status_code"]) == (6003, 6, outcome)
        assert ocsf["type_uid"] == 600300 + ocsf["activity_id"]


def test_ocsf_fields_of_a_denied_call_by_a_token_holder() -> None:
    event = replace(
        BASE,
        outcome="denied",
        reason="denied by rule no-delete",
        rule="no-delete",
        issuer="https://idp.example",
        subject="248289761001",
        client_id="claude",
        cost=None,
    )
    ocsf = ocsf_of(event)
    assert ocsf["time"] == 1796443506123  # 2026-12-05T04:05:06.123Z in ms
    assert (ocsf["status_id"], ocsf["status"], ocsf["severity_id"], ocsf["severity"]) == (2, "Failure", 3, "Medium")
    assert (ocsf["activity_id"], ocsf["activity_name"]) == (99, "tools/call")
    assert ocsf["actor"] == {
        "user": {"name": "alice", "uid": "248289761001", "type_id": 1, "type": "User"},
        "idp": {"uid": "https://idp.example"},
        "app_uid": "claude",
        "session": {"uid": "s-1"},
    }
    assert ocsf["api"] == {"operation": "tools/call", "service": {"name": "notes"}, "request": {"uid": "0" * 32}}
    assert ocsf["resources"] == [{"name": "add_note", "type": "tool", "group": {"name": "notes"}}]
    assert ocsf["src_endpoint"] == {"uid": "s-1", "name": "MCP client"}
    assert ocsf["message"] == ocsf["status_detail"] == "denied by rule no-delete"
    assert ocsf["duration"] == 2
    assert ocsf["metadata"]["product"]["name"] == "mcp-hub" and ocsf["metadata"]["version"] == "1.8.0"
    assert ocsf["metadata"]["uid"] == "0" * 32
    assert ocsf["unmapped"] == {
        "arguments": {"title": "café ☕", "token": "***"},
        "rule": "no-delete",
        "policy_revision": "rev-1",
    }


def test_ocsf_of_an_allowed_read_an_administrators_revoke_and_the_hubs_own_event() -> None:
    read = ocsf_of(replace(BASE, method="resources/read", name="fixture://notes/1", arguments=None))
    assert (read["activity_id"], read["status_id"], read["severity_id"]) == (2, 1, 1)
    assert read["resources"][0]["type"] == "resource"
    revoke = ocsf_of(
        AuditEvent.revoked(
            "root",
            principal="bob",
            mount="gh",
            issuer="https://i",
            message="forgotten",
            policy_revision=None,
            via="cli",
        )
    )
    assert (revoke["activity_id"], revoke["actor"]["user"], revoke["src_endpoint"]) == (
        4,
        {"name": "admin:root", "type_id": 2, "type": "Admin"},
        {"name": "cli"},
    )
    changed = replace(BASE, principal="mcp-hub", session=None, outcome="tool_changed", rule=None)
    ocsf = ocsf_of(changed)
    assert (ocsf["actor"]["user"]["type"], ocsf["severity"], ocsf["status_id"]) == ("System", "High", 99)
    assert ocsf["src_endpoint"] == {"name": "mcp-hub"}


# -- settings -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "key", "says"),
    [
        ('destination = "syslog"', "audit.sinks[0]", 'needs address, like address = "siem.example.com:6514"'),
        ('destination = "syslog"\naddress = "siem"', "audit.sinks[0].address", 'address must be "HOST:PORT"'),
        ('destination = "syslog"\naddress = "::1:514"', "audit.sinks[0].address", '(or "[::1]:6514")'),
        ('destination = "file"', "audit.sinks[0]", 'needs path, like path = "audit-ocsf.jsonl"'),
        ('destination = "otlp"\npath = "x"', "audit.sinks[0].path", 'applies to destination = "file" only'),
        ('destination = "syslog"\naddress = "h:1"\ntls = false\nca = "ca.pem"', "audit.sinks[0].ca", "tls = false"),
        ('destination = "syslog"\naddress = "h:1"\nkey = "k.pem"', "audit.sinks[0].key", "set cert too"),
        ('destination = "syslog"\naddress = "h:1"\nfacility = "local9"', "audit.sinks[0].facility", "local7"),
        ('destination = "otlp"\nendpoint = "collector:4318"', "audit.sinks[0].endpoint", "http:// or https://"),
        ('destination = "kafka"', "audit.sinks[0].destination", "'file', 'syslog' or 'otlp'"),
        ('destination = "file"\npath = "a"\nformat = "cef"', "audit.sinks[0].format", "'hub' or 'ocsf'"),
        ('destination = "file"\npath = "a"\nbuffer = 0', "audit.sinks[0].buffer", "greater than or equal to 1"),
    ],
)
def test_a_sink_setting_that_cannot_work_is_refused_naming_the_key(table: str, key: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"[[audit.sinks]]\n{table}\n", environ={})
    assert caught.value.key == key and says in caught.value.reason, str(caught.value)


def test_tls_is_on_by_default_and_the_buffer_has_a_bound() -> None:
    config = parse_config('[[audit.sinks]]\ndestination = "syslog"\naddress = "[::1]:6514"\n', environ={})
    (sink,) = config.audit.sinks
    assert (sink.tls, sink.buffer, sink.format, sink.facility) == (True, 10_000, "hub", "authpriv")


def test_a_tls_file_that_cannot_be_read_stops_the_hub_naming_the_key(tmp_path: Path) -> None:
    path = write_config(tmp_path / "hub.toml", {})
    with path.open("a", encoding="utf-8") as file:
        file.write('\n[[audit.sinks]]\ndestination = "syslog"\naddress = "127.0.0.1:1"\nca = "missing-ca.pem"\n')
    with pytest.raises(ConfigError) as caught:
        Hub(load_config(path, environ={}))
    assert caught.value.key == "audit.sinks[0].ca" and "No such file" in caught.value.reason


# -- the buffer ---------------------------------------------------------------------------------------------------


class Outage:
    """A destination that is down until `restore()`: each `send` raises ConnectionRefusedError while down."""

    description = "an outage"

    def __init__(self) -> None:
        self.down = True
        self.received: list[Entry] = []
        self.tries = 0

    def open(self) -> None:
        pass

    def send(self, entries: Sequence[Entry]) -> None:
        self.tries += 1
        if self.down:
            raise ConnectionRefusedError(111, "Connection refused")
        self.received.extend(entries)

    def close(self) -> None:
        pass


def line(number: int) -> str:
    return replace(BASE, decision_id=f"{number:032d}").to_json()


@pytest.mark.slow
def test_a_sink_that_is_down_keeps_its_latest_events_up_to_its_buffer(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "mcp_hub.audit.errors")
    destination = Outage()
    sink = AuditSink(destination, "ocsf", buffer=50)
    sink.start()
    try:
        started = time.perf_counter()
        for number in range(200):
            sink.offer(line(number))
        offered = time.perf_counter() - started
        deadline = time.monotonic() + 10
        while not (sink.down_since is not None and sink.buffered == 50) and time.monotonic() < deadline:
            time.sleep(0.01)  # it tried, failed, put the events back, and is backing off
        assert sink.buffered == 50 and sink.dropped == 150 and sink.down_since is not None
        destination.down = False
        while len(destination.received) < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sink.stop()
    assert offered < 0.5  # 200 offers to a dead destination: no waiting
    assert [entry.fields["decision_id"] for entry in destination.received] == [f"{n:032d}" for n in range(150, 200)]
    assert all(json.loads(entry.text)["class_uid"] == 6003 for entry in destination.received)
    assert (sink.sent, sink.dropped, sink.down_since) == (50, 150, None)
    said = [record.getMessage() for record in caplog.records]
    assert any("audit sink an outage is down (ConnectionRefusedError" in text for text in said), said
    assert any("events dropped so far" in text and "oldest" in text for text in said), said
    assert any("audit sink an outage is back" in text for text in said), said


def test_stop_gives_up_on_a_dead_destination_within_its_bound_and_counts_what_it_held() -> None:
    destination = Outage()
    sink = AuditSink(destination, buffer=10, stop_timeout=0.5)
    sink.start()
    for number in range(5):
        sink.offer(line(number))
    started = time.monotonic()
    sink.stop()
    assert time.monotonic() - started < 3
    assert (sink.sent, sink.dropped, sink.buffered) == (0, 5, 0)


# -- syslog -------------------------------------------------------------------------------------------------------


def test_an_rfc5424_message_and_its_octet_counted_frame() -> None:
    ascii_line = replace(BASE, arguments={"q": "plain"}, outcome="denied").to_json()
    entry = Entry(json.loads(ascii_line), ascii_line)
    msg = message(entry, facility="authpriv", app_name="mcp-hub", hostname="hub.example", procid=42)
    assert msg == f"<84>1 2026-12-05T04:05:06.123Z hub.example mcp-hub 42 denied - {ascii_line}".encode()
    assert frame(msg) == b"%d %s" % (len(msg), msg)
    utf8 = Entry(json.loads(BASE.to_json()), BASE.to_json())  # "café ☕": UTF-8, so the MSG starts with the BOM
    assert message(utf8, facility="local0", app_name="a", hostname="h", procid=1).split(b" - ", 1)[1] == (
        b"\xef\xbb\xbf" + BASE.to_json().encode()
    )


POLICY = """
[principals]
stdio = "operator"

[profiles.operator]
default = "allow"
[[profiles.operator.rules]]
id = "no-crash"
effect = "deny"
tools = ["srv/crash"]
"""


def hub_config(tmp_path: Path, sinks: list[str], *, audit_file: bool = True, telemetry: str = "") -> Path:
    """A hub.toml serving the fixture server as "srv", a policy that denies srv_crash, and `sinks` as [[audit.sinks]]
    tables (TOML bodies)."""
    policies = tmp_path / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "hub.toml").write_text(POLICY, encoding="utf-8")
    path = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    with path.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n\n[audit]\n')
        file.write('file = "audit.jsonl"\n' if audit_file else "file = false\n")
        for sink in sinks:
            file.write(f"\n[[audit.sinks]]\n{sink}\n")
        file.write(telemetry)
    return path


@asynccontextmanager
async def running(path: Path) -> AsyncIterator[Hub]:
    hub = Hub(load_config(path, environ={}))
    async with hub.running():
        await hub.wait_settled(20)
        yield hub


async def allowed_and_denied(hub: Hub) -> None:
    async with hub_client(hub) as client:
        assert not (await client.call_tool("srv_echo", {"text": "héllo"})).is_error
        with pytest.raises(MCPError, match="Unknown tool"):  # denied: answered as a tool that does not exist
            await client.call_tool("srv_crash", {})


@pytest.fixture
def receiver(tmp_path: Path) -> Any:
    server = SyslogReceiver(tmp_path / "rsyslog")
    server.start()
    try:
        yield server
    finally:
        server.kill()


async def received(server: SyslogReceiver, count: int, timeout: float = 15) -> list[dict[str, Any]]:
    await wait_for(lambda: len(server.messages()) >= count, timeout=timeout)
    return server.messages()


@needs_rsyslog
@pytest.mark.slow
async def test_calls_reach_rsyslog_as_rfc5424_messages_in_both_formats(
    tmp_path: Path, receiver: SyslogReceiver
) -> None:
    address = f'address = "127.0.0.1:{receiver.port}"\ntls = false'
    path = hub_config(
        tmp_path,
        [
            f'destination = "syslog"\n{address}',
            f'destination = "syslog"\n{address}\nformat = "ocsf"\nfacility = "local3"',
        ],
    )
    async with running(path) as hub:
        await allowed_and_denied(hub)
        messages = await received(receiver, 4)
    audit_file = [json.loads(text) for text in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [entry["outcome"] for entry in audit_file] == ["allowed", "denied"]  # the file is as it was

    hub_format = [m for m in messages if m["facility"] == "authpriv"]
    ocsf_format = [m for m in messages if m["facility"] == "local3"]
    for got in (hub_format, ocsf_format):  # rsyslog parsed each as RFC 5424, header field by field
        assert [(m["version"], m["app_name"], m["msgid"], m["structured_data"]) for m in got] == [
            ("1", "mcp-hub", "allowed", "-"),
            ("1", "mcp-hub", "denied", "-"),
        ]
        assert [m["severity"] for m in got] == ["info", "warning"]
        assert all(m["procid"] == str(os.getpid()) for m in got)
    for message_, line_ in zip(hub_format, audit_file, strict=True):
        assert json.loads(message_["msg"].removeprefix("\ufeff")) == line_  # the hub's own line, whole
        assert message_["time"] == line_["time"]
    for message_, line_ in zip(ocsf_format, audit_file, strict=True):
        ocsf = json.loads(message_["msg"].removeprefix("\ufeff"))
        assert not list(OCSF.iter_errors(ocsf))
        assert ocsf["metadata"]["uid"] == line_["decision_id"] and ocsf["status_code"] == line_["outcome"]
    assert json.loads(ocsf_format[0]["msg"].removeprefix("\ufeff"))["unmapped"]["arguments"] == {"text": "héllo"}


@pytest.fixture
def certificates(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """(CA, receiver certificate, receiver key, another CA) PEM files: the receiver's for 127.0.0.1 and localhost."""
    import trustme

    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    folder = tmp_path / "tls"
    folder.mkdir()
    paths = (folder / "ca.pem", folder / "receiver.pem", folder / "receiver.key", folder / "other-ca.pem")
    ca.cert_pem.write_to_path(str(paths[0]))
    server.cert_chain_pems[0].write_to_path(str(paths[1]))
    server.private_key_pem.write_to_path(str(paths[2]))
    other.cert_pem.write_to_path(str(paths[3]))
    return paths


@needs_rsyslog
@pytest.mark.skipif(OSSL_DRIVER is None, reason="rsyslog's OpenSSL driver is missing (Debian's rsyslog-openssl)")
@pytest.mark.slow
async def test_tls_syslog_verifies_the_receiver_and_delivers(
    tmp_path: Path, certificates: tuple[Path, Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "mcp_hub.audit.errors")
    ca, cert, key, other_ca = certificates
    server = SyslogReceiver(tmp_path / "rsyslog", tls=(ca, cert, key))
    server.start()
    try:
        trusted = f'destination = "syslog"\naddress = "127.0.0.1:{server.port}"\nca = "{ca}"\nformat = "ocsf"'
        untrusted = f'destination = "syslog"\naddress = "localhost:{server.port}"\nca = "{other_ca}"\napp_name = "x"'
        async with running(hub_config(tmp_path, [trusted, untrusted])) as hub:
            await allowed_and_denied(hub)
            messages = await received(server, 2)
            untrusted_sink = hub.audit.sinks[1]
            await wait_for(lambda: untrusted_sink.down_since is not None, timeout=10)
            assert untrusted_sink.sent == 0 and untrusted_sink.buffered == 2
    finally:
        server.kill()
    assert [m["msgid"] for m in messages] == ["allowed", "denied"]
    assert all(m["app_name"] == "mcp-hub" for m in messages)  # none from the sink that does not trust it
    for m in messages:
        assert not list(OCSF.iter_errors(json.loads(m["msg"].removeprefix("\ufeff"))))
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "audit sink syslog tls://localhost:" in said and "CERTIFICATE_VERIFY_FAILED" in said


@needs_rsyslog
@pytest.mark.skipif(OSSL_DRIVER is None, reason="rsyslog's OpenSSL driver is missing (Debian's rsyslog-openssl)")
@pytest.mark.slow
async def test_mutual_tls_sends_the_hubs_certificate_and_a_refused_sink_keeps_its_events(tmp_path: Path) -> None:
    """A receiver that requires a client certificate of its CA: the sink with `cert` and `key` delivers; the one
    without is refused after its handshake (TLS 1.3), and keeps its events rather than writing them into a
    connection the receiver is closing."""
    import trustme

    ca = trustme.CA()
    server, client = ca.issue_cert("127.0.0.1"), ca.issue_cert("mcp-hub.test")
    folder = tmp_path / "tls"
    folder.mkdir()
    for name, pem in [
        ("ca.pem", ca.cert_pem),
        ("receiver.pem", server.cert_chain_pems[0]),
        ("receiver.key", server.private_key_pem),
        ("hub.pem", client.cert_chain_pems[0]),
        ("hub.key", client.private_key_pem),
    ]:
        pem.write_to_path(str(folder / name))
    receiver = SyslogReceiver(
        tmp_path / "rsyslog",
        tls=(folder / "ca.pem", folder / "receiver.pem", folder / "receiver.key"),
        clients="x509/certvalid",
    )
    receiver.start()
    try:
        sink = f'destination = "syslog"\naddress = "127.0.0.1:{receiver.port}"\nca = "tls/ca.pem"'
        with_certificate = f'{sink}\ncert = "tls/hub.pem"\nkey = "tls/hub.key"'
        async with running(hub_config(tmp_path, [with_certificate, f'{sink}\napp_name = "uncertified"'])) as hub:
            await allowed_and_denied(hub)
            messages = await received(receiver, 2)
            refused = hub.audit.sinks[1]
            await wait_for(lambda: refused.down_since is not None and refused.buffered == 2, timeout=10)
            assert refused.sent == 0 and refused.dropped == 0
    finally:
        receiver.kill()
    assert [(m["app_name"], m["msgid"]) for m in messages] == [("mcp-hub", "allowed"), ("mcp-hub", "denied")]


# -- OTLP ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_audit_events_arrive_at_the_collector_as_otlp_log_records(tmp_path: Path) -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    app, received = collector("/v1/logs")
    bodies = received["/v1/logs"]
    async with serve_app(app) as base:
        sinks = ['destination = "otlp"\nformat = "ocsf"\nheaders = { x-token = "s3cret" }', 'destination = "otlp"']
        telemetry = f'\n[telemetry]\nendpoint = "{base}"\nservice_name = "hub-under-test"\n'
        async with running(hub_config(tmp_path, sinks, audit_file=False, telemetry=telemetry)) as hub:
            await allowed_and_denied(hub)
            await wait_for(lambda: sum(_count(body) for _, body in bodies) >= 4, timeout=15)

    records = []
    for headers, body in bodies:
        assert headers["content-type"] == "application/x-protobuf"
        for resource_logs in ExportLogsServiceRequest.FromString(body).resource_logs:
            resource = {a.key: a.value.string_value for a in resource_logs.resource.attributes}
            assert resource["service.name"] == "hub-under-test"
            for scope in resource_logs.scope_logs:
                assert scope.scope.name == "mcp_hub.audit"
                for record in scope.log_records:
                    attributes = {a.key: a.value.string_value for a in record.attributes}
                    records.append((headers.get("x-token"), record, attributes))
    ocsf = [(r, a) for token, r, a in records if token == "s3cret"]
    hub_format = [(r, a) for token, r, a in records if token is None]
    for got, event_name in ((ocsf, "ocsf.api_activity"), (hub_format, "mcp_hub.audit")):
        assert [a["mcp_hub.outcome"] for _, a in got] == ["allowed", "denied"]
        assert [(r.severity_text, r.event_name) for r, _ in got] == [("INFO", event_name), ("WARN", event_name)]
        assert all(a["mcp.method.name"] == "tools/call" and a["mcp_hub.mount"] == "srv" for _, a in got)
    for record, attributes in ocsf:
        event = json.loads(record.body.string_value)
        assert not list(OCSF.iter_errors(event))
        assert event["metadata"]["uid"] == attributes["mcp_hub.decision_id"]
        assert record.time_unix_nano == event["time"] * 1_000_000
    assert json.loads(hub_format[1][0].body.string_value)["rule"] == "no-crash"


def _count(body: bytes) -> int:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest.FromString(body)
    return sum(len(scope.log_records) for logs in request.resource_logs for scope in logs.scope_logs)


@pytest.mark.slow
async def test_records_a_collector_missed_while_down_arrive_when_it_is_back(tmp_path: Path) -> None:
    """The collector goes away mid-run and comes back on the same port: the records of the calls made meanwhile
    arrive then, in order, none twice."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    app, received = collector("/v1/logs")

    def texts() -> list[str]:
        return [
            json.loads(record.body.string_value)["arguments"]["text"]
            for _, body in received["/v1/logs"]
            for logs in ExportLogsServiceRequest.FromString(body).resource_logs
            for scope in logs.scope_logs
            for record in scope.log_records
        ]

    port = free_port()
    path = hub_config(tmp_path, [f'destination = "otlp"\nendpoint = "http://127.0.0.1:{port}"'], audit_file=False)
    async with running(path) as hub, hub_client(hub) as client:
        sink = hub.audit.sinks[0]
        async with serve_app(app, port):
            await client.call_tool("srv_echo", {"text": "before"})
            await wait_for(lambda: texts() == ["before"], timeout=15)
        for number in range(3):
            await client.call_tool("srv_echo", {"text": f"while down {number}"})
        await wait_for(lambda: sink.down_since is not None, timeout=20)
        async with serve_app(app, port):
            await wait_for(lambda: len(texts()) == 4, timeout=60)
            await client.call_tool("srv_echo", {"text": "after"})
            await wait_for(lambda: len(texts()) == 5, timeout=15)
    assert texts() == ["before", "while down 0", "while down 1", "while down 2", "after"]
    assert sink.dropped == 0


@pytest.mark.slow
async def test_a_file_sink_in_ocsf_beside_the_audit_file_and_from_a_command_run_beside_the_hub(tmp_path: Path) -> None:
    path = hub_config(tmp_path, ['destination = "file"\npath = "siem/ocsf.jsonl"\nformat = "ocsf"'])
    async with running(path) as hub:
        await allowed_and_denied(hub)
    config = load_config(path, environ={})
    with appending(config.audit_file(), sinks_of(config, rotate=False)) as log:  # as `mcp-hub connections` does
        log.record(
            AuditEvent.withdrawn(
                "root", principal="bob", client="c", mount="srv", browsers=1, policy_revision=None, via="cli"
            )
        )
    hub_lines = [json.loads(text) for text in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    ocsf = [json.loads(text) for text in (tmp_path / "siem" / "ocsf.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [e["outcome"] for e in hub_lines] == ["allowed", "denied", "withdrawn"]
    assert [e["metadata"]["uid"] for e in ocsf] == [e["decision_id"] for e in hub_lines]
    for event in ocsf:
        assert not list(OCSF.iter_errors(event))
    assert [(e["activity_id"], e["status"], e["actor"]["user"]["name"]) for e in ocsf] == [
        (99, "Success", "stdio"),
        (99, "Failure", "stdio"),
        (4, "Success", "admin:root"),
    ]


# -- a sink that is down ------------------------------------------------------------------------------------------


@needs_rsyslog
@pytest.mark.slow
async def test_a_dead_receiver_neither_blocks_calls_nor_loses_events_beyond_its_buffer(
    tmp_path: Path, receiver: SyslogReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "mcp_hub.audit.errors")
    buffer, outage_calls = 20, 30
    # A second sink whose receiver accepts the connection and never answers the TLS handshake: each try of it
    # hangs until its timeout. Neither may hold up a call.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        sinks = [
            f'destination = "syslog"\naddress = "127.0.0.1:{receiver.port}"\ntls = false\nbuffer = {buffer}',
            f'destination = "syslog"\naddress = "127.0.0.1:{silent.getsockname()[1]}"\nbuffer = {buffer}',
        ]
        async with running(hub_config(tmp_path, sinks)) as hub, hub_client(hub) as client:
            sink = hub.audit.sinks[0]

            async def timed_calls(count: int) -> list[float]:
                durations = []
                for number in range(count):
                    started = time.perf_counter()
                    await client.call_tool("srv_echo", {"text": f"call {number}"})
                    durations.append(time.perf_counter() - started)
                return durations

            before = await timed_calls(10)
            await received(receiver, 10)
            receiver.kill()
            during = await timed_calls(outage_calls)
            await wait_for(lambda: sink.down_since is not None and sink.buffered == buffer, timeout=10)
            assert sink.dropped == outage_calls - buffer
            receiver.start()  # the same port
            messages = await received(receiver, 10 + buffer, timeout=60)  # the back-off is at most 30 s
            await wait_for(lambda: sink.down_since is None, timeout=10)
            await timed_calls(5)
            messages = await received(receiver, 10 + buffer + 5)

    texts = [json.loads(m["msg"].removeprefix("\ufeff"))["arguments"]["text"] for m in messages]
    kept = [f"call {n}" for n in range(outage_calls - buffer, outage_calls)]  # the latest `buffer` of the outage
    assert texts == [f"call {n}" for n in range(10)] + kept + [f"call {n}" for n in range(5)]
    assert sink.dropped == outage_calls - buffer
    audit_file = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(audit_file) == 10 + outage_calls + 5  # the file lost nothing
    # Calls while both sinks were down took what they took before (no connect, handshake or back-off in them).
    assert max(during) < 1.0, during
    assert statistics.median(during) < max(3 * statistics.median(before), statistics.median(before) + 0.05)
    said = [record.getMessage() for record in caplog.records]
    assert any(f"syslog tcp://127.0.0.1:{receiver.port} is down" in text for text in said), said
    assert any(f"{outage_calls - buffer} events dropped so far" in text for text in said), said
    assert any("is back after" in text for text in said), said


@needs_rsyslog
@pytest.mark.slow
def test_check_lists_the_sinks_and_check_connect_reaches_each(tmp_path: Path, receiver: SyslogReceiver) -> None:
    dead = free_port()
    path = hub_config(
        tmp_path,
        [
            f'destination = "syslog"\naddress = "127.0.0.1:{receiver.port}"\ntls = false',
            f'destination = "syslog"\naddress = "127.0.0.1:{dead}"\nformat = "ocsf"',
        ],
    )
    listed = mcp_hub("check", "--config", str(path))
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert f"audit sinks: syslog tcp://127.0.0.1:{receiver.port} (hub), syslog tls://127.0.0.1:{dead} (ocsf)" in (
        listed.stdout
    )
    connected = mcp_hub("check", "--config", str(path), "--connect")
    assert connected.returncode == 1, connected.stdout + connected.stderr
    assert f"audit sink syslog tcp://127.0.0.1:{receiver.port}: reachable (plain TCP)" in connected.stdout
    assert f"audit sink syslog tls://127.0.0.1:{dead}: unreachable: ConnectionRefusedError" in connected.stdout
    assert "srv: up" in connected.stdout
    assert receiver.messages() == []  # a probe sends no event


@pytest.mark.slow
async def test_each_sinks_state_is_measured(tmp_path: Path) -> None:
    """With metrics on, a sink whose receiver is down reads up 0, what it holds as buffered, none sent."""
    dead = free_port()
    path = hub_config(tmp_path, [f'destination = "syslog"\naddress = "127.0.0.1:{dead}"\ntls = false\nbuffer = 5'])
    async with observed(load_config(path, environ={})) as (hub, _, metrics), hub_client(hub) as client:
        for number in range(7):
            await client.call_tool("srv_echo", {"text": str(number)})
        sink = hub.audit.sinks[0]
        await wait_for(lambda: sink.down_since is not None and sink.buffered == 5, timeout=10)
        data = metrics.get_metrics_data()
    assert data is not None
    points = {
        metric.name: [(dict(point.attributes or {}), point.value) for point in metric.data.data_points]
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name.startswith("mcp_hub.audit.sink.")
    }
    named = {"mcp_hub.audit.sink": f"syslog tcp://127.0.0.1:{dead}"}
    assert points == {
        "mcp_hub.audit.sink.up": [(named, 0)],
        "mcp_hub.audit.sink.buffered": [(named, 5)],
        "mcp_hub.audit.sink.sent": [(named, 0)],
        "mcp_hub.audit.sink.dropped": [(named, 2)],
    }


@pytest.mark.slow
def test_a_file_sink_it_cannot_write_stops_the_start_naming_the_key_and_leaves_no_thread(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the sink's folder would be", encoding="utf-8")
    path = hub_config(
        tmp_path,
        [
            f'destination = "syslog"\naddress = "127.0.0.1:{free_port()}"\ntls = false',
            'destination = "file"\npath = "not-a-folder/ocsf.jsonl"\nformat = "ocsf"',
        ],
    )
    log = Hub(load_config(path, environ={})).audit

    def sinks() -> set[str]:  # the sinks' own threads (other tests' idle worker threads come and go meanwhile)
        return {thread.name for thread in threading.enumerate() if thread.name.startswith("mcp-hub audit sink")}

    before = sinks()
    with pytest.raises(ConfigError) as caught:
        log.start()
    assert caught.value.key == "audit.sinks[1].path" and "cannot write the audit sink's file" in caught.value.reason
    assert sinks() == before
