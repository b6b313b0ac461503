"""What audit sinks ([[audit.sinks]], docs/audit.md) cost a call, and how fast they send.

Three measurements, printed as Markdown:

1. `AuditLog.record()` (what runs on the event loop, in the path of every call): the audit file alone, against the
   file and two syslog sinks (hub JSON and OCSF) whose receiver is up, and whose receiver is down;
2. a sink's throughput to a real rsyslogd over TCP (tests/syslog_receiver.py), in the hub's JSON and in OCSF;
3. tool calls through a running hub (the SDK's client in-process, the fixture server over stdio): the audit file
   alone against the file and a syslog sink whose receiver is down, in alternating rounds.

Needs rsyslogd (Debian's rsyslog). Run: .venv/bin/python benchmarks/audit_sinks.py [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_hub.config import load_config  # noqa: E402
from mcp_hub.hub import Hub  # noqa: E402
from mcp_hub.observe.audit_log import AuditEvent, AuditLog  # noqa: E402
from mcp_hub.observe.audit_sink import AuditSink  # noqa: E402
from mcp_hub.observe.audit_syslog import SyslogTransport  # noqa: E402
from tests.conftest import fixture_server, free_port, hub_client, write_config  # noqa: E402
from tests.syslog_receiver import SyslogReceiver  # noqa: E402

EVENT = AuditEvent(
    time=AuditLog.now(),
    decision_id="0" * 32,
    principal="alice",
    session="s-1",
    method="tools/call",
    mount="notes",
    name="add_note",
    via=None,
    arguments={"title": "café", "count": 3},
    outcome="allowed",
    rule="allow-notes",
    reason=None,
    latency_ms=1.5,
    policy_revision="rev-1",
)


def record_cost(folder: Path, sinks: list[AuditSink], count: int) -> tuple[float, float]:
    """(p50, p99) of one `record()`, in microseconds."""
    log = AuditLog(folder / f"audit-{time.monotonic_ns()}.jsonl", sinks=sinks, queue_size=10 * count)
    log.start()
    durations = []
    for _ in range(count):
        started = time.perf_counter()
        log.record(EVENT)
        durations.append(time.perf_counter() - started)
    log.stop()
    durations.sort()
    return statistics.median(durations) * 1e6, durations[int(len(durations) * 0.99)] * 1e6


def syslog_sinks(port: int) -> list[AuditSink]:
    return [
        AuditSink(SyslogTransport("127.0.0.1", port, tls=None), format, buffer=100_000, stop_timeout=1)
        for format in ("hub", "ocsf")
    ]


def throughput(port: int, format: str, count: int) -> float:
    """Events a second one sink sent to the receiver."""
    sink = AuditSink(SyslogTransport("127.0.0.1", port, tls=None), format, buffer=count)
    sink.start()
    line = EVENT.to_json()
    started = time.perf_counter()
    for _ in range(count):
        sink.offer(line)
    while sink.sent < count:
        time.sleep(0.002)
    elapsed = time.perf_counter() - started
    sink.stop()
    return count / elapsed


async def call_latencies(folder: Path, dead_port: int, rounds: int, calls: int) -> dict[str, list[float]]:
    """Per-call seconds through a hub with the audit file alone, and with a syslog sink whose receiver is down."""
    configs = {}
    for name, sink in (("file alone", ""), ("file + syslog sink, receiver down", f"127.0.0.1:{dead_port}")):
        home = folder / name.split()[-1]
        home.mkdir()
        path = write_config(home / "hub.toml", {"srv": fixture_server("srv")})
        with path.open("a", encoding="utf-8") as file:
            file.write('\n[audit]\nfile = "audit.jsonl"\n')
            if sink:
                file.write(f'\n[[audit.sinks]]\ndestination = "syslog"\naddress = "{sink}"\ntls = false\n')
        configs[name] = load_config(path, environ={})
    found: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, config in configs.items():
            hub = Hub(config)
            async with hub.running():
                await hub.wait_settled(20)
                async with hub_client(hub) as client:
                    for number in range(calls // 10):  # warm-up
                        await client.call_tool("srv_echo", {"text": str(number)})
                    for number in range(calls):
                        started = time.perf_counter()
                        await client.call_tool("srv_echo", {"text": str(number)})
                        found[name].append(time.perf_counter() - started)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = [f"# Audit sinks ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]})", ""]
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        receiver = SyslogReceiver(folder / "rsyslog")
        receiver.start()
        try:
            dead = free_port()
            lines += ["## `AuditLog.record()`, on the event loop (20,000 events, µs)", ""]
            lines += ["| sinks | p50 | p99 |", "|---|---|---|"]
            for name, sinks in (
                ("the file alone", lambda: []),
                ("the file + 2 syslog sinks (hub, OCSF), receiver up", lambda: syslog_sinks(receiver.port)),
                ("the file + 2 syslog sinks (hub, OCSF), receiver down", lambda: syslog_sinks(dead)),
            ):
                results = [record_cost(folder, sinks(), 20_000) for _ in range(3)]
                p50, p99 = min(r[0] for r in results), min(r[1] for r in results)
                lines.append(f"| {name} | {p50:.1f} | {p99:.1f} |")
            lines += ["", "## One sink's throughput to rsyslogd over TCP (50,000 events)", ""]
            lines += ["| format | events/s |", "|---|---|"]
            for format in ("hub", "ocsf"):
                lines.append(f"| {format} | {throughput(receiver.port, format, 50_000):,.0f} |")
        finally:
            receiver.kill()
        latencies = anyio.run(call_latencies, folder, free_port(), 3, 300)
        lines += ["", "## Tool calls through a hub (in-process client, fixture server over stdio; 3 x 300 calls)", ""]
        lines += ["| audit | p50 ms | p90 ms | max ms |", "|---|---|---|---|"]
        for name, found in latencies.items():
            found.sort()
            p50, p90 = statistics.median(found) * 1e3, found[int(len(found) * 0.9)] * 1e3
            lines.append(f"| {name} | {p50:.2f} | {p90:.2f} | {found[-1] * 1e3:.2f} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
