"""What the console's dashboard costs a call: the same call through a hub with the dashboard and without, same run.

    python benchmarks/dashboard.py [--rounds N] [--calls N] [--series N]

Four sides over stdio, each with its own tests/servers/counting.py (2026-07-28), the hubs with the same policy
(one profile, `default = "allow"`, no rate limit, no cache):

- direct: the client speaks to the server itself;
- hub, no console: `[admin]` off (no metrics: the default without a console);
- hub, dashboard off: the console on, `[admin] dashboard = false`;
- hub, dashboard on: the console on with its default dashboard (metrics on, read in-process every 2 s).

The sides take turns, `--calls` sequential uncached `tools/call lookup` calls each per round, the order rotating
each round. Printed per side: the median over rounds of the p50 and p95, the ratio of the p50 to the hub
without a console, and the hub's CPU per call (from /proc, the mean over rounds; the dashboard's collection every
2 s, off the call path, is in it).

Then, in this process, what the one measurement a call adds costs (a histogram record, timed over 100,000), and
what one collection costs (every 2 s: the OpenTelemetry SDK's part in a worker thread,
adding it to the rings on the hub's event loop): a hub's telemetry with the dashboard's reader, 50 and `--series`
distinct tool x principal pairs recorded, collected and added to the rings, each part timed; and what drawing the
overview's live part costs with 50 tools x 10 principals busy in every slot of the hour.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
from cache import stdio_side
from cluster import lookup_new, timed

from mcp_hub.config import TelemetrySettings
from mcp_hub.observe.dashboard import Dashboard
from mcp_hub.observe.otel import MountStatus, Telemetry

COUNTING = str(bench.ROOT / "tests" / "servers" / "counting.py")
POLICY = '[principals]\n"*" = "all"\n\n[profiles.all]\ndefault = "allow"\n'
ADMIN = '\n[admin]\nenabled = true\nkeys = { root = "benchmark-admin-key-0123456789" }\n'
SIDES = {
    "hub, no console": "",
    "hub, dashboard off": ADMIN + "dashboard = false\n",
    "hub, dashboard on": ADMIN,
}


def hub_config(work: Path, name: str, tail: str) -> Path:
    policies = work / f"{name}-policies"
    policies.mkdir()
    (policies / "policy.toml").write_text(POLICY, encoding="utf-8")
    upstream = {"command": sys.executable, "args": [COUNTING], "protocol": bench.MODERN}
    path = bench.hub_config(work / f"{name}.toml", {"up": upstream})
    with path.open("a", encoding="utf-8") as file:
        file.write(f'\n[policy]\ndir = "{policies}"\nreload = false\n\n[cache]\nenabled = false\n{tail}')
    return path


async def calls(rounds: int, calls: int, work: Path) -> None:
    with open(work / "stderr.log", "w") as errlog:
        async with AsyncExitStack() as stack:
            direct = stdio_side("direct", [sys.executable, COUNTING], bench.MODERN, "", errlog)
            sides = [await stack.enter_async_context(direct)]
            for index, (label, tail) in enumerate(SIDES.items()):
                command = bench.hub_command(hub_config(work, f"side{index}", tail))
                sides.append(await stack.enter_async_context(stdio_side(label, command, bench.MODERN, "up_", errlog)))
            print(f"{rounds} rounds, {calls} calls per side per round; 2026-07-28 client and upstream")
            for side in sides:  # warm up
                await timed(_call(side.prefix), side.client, 30)
            p50: dict[str, list[float]] = {side.label: [] for side in sides}
            p95: dict[str, list[float]] = {side.label: [] for side in sides}
            cpu: dict[str, list[float]] = {side.label: [] for side in sides}
            for index in range(rounds):
                for side in sides[index % len(sides) :] + sides[: index % len(sides)]:
                    pid = side.pids.get("hub")
                    used = bench.cpu_seconds(pid) if pid else 0.0
                    samples = await timed(_call(side.prefix), side.client, calls)
                    if pid:
                        cpu[side.label].append((bench.cpu_seconds(pid) - used) / len(samples) * 1e3)
                    p50[side.label].append(bench.percentile(samples, 0.5) * 1e3)
                    p95[side.label].append(bench.percentile(samples, 0.95) * 1e3)
            base = statistics.median(p50["hub, no console"])
            print(f"{'side':20s} {'p50':>10s} {'p95':>10s} {'p50 / no console':>17s} {'hub CPU per call':>17s}")
            for side in sides:
                median = statistics.median(p50[side.label])
                hub_cpu = f"{statistics.fmean(cpu[side.label]):10.3f} ms" if cpu[side.label] else ""
                print(
                    f"{side.label:20s} {median:7.3f} ms {statistics.median(p95[side.label]):7.3f} ms "
                    f"{median / base:16.3f}x {hub_cpu:>17s}"
                )


def _call(prefix: str):  # type: ignore[no-untyped-def]
    if prefix:
        return lookup_new

    async def direct(client, n):  # type: ignore[no-untyped-def]
        return await client.call_tool("lookup", {"q": f"new-{n}-{time.perf_counter_ns()}"})

    return direct


def collection(series: int) -> None:
    telemetry = Telemetry(TelemetrySettings())
    dashboard = Dashboard(telemetry)
    telemetry.start(lambda: [MountStatus(f"m{i}", True, 0, 0, "up") for i in range(10)])
    histogram = telemetry.request_duration
    assert histogram is not None
    tools, principals = max(1, series // 10), 10
    timings: list[float] = []
    adding: list[float] = []
    for _ in range(20):
        for index in range(series):
            attributes = {
                "mcp.method.name": "tools/call",
                "mcp_hub.outcome": "ok",
                "mcp_hub.mount": f"m{index % 10}",
                "gen_ai.tool.name": f"m{index % 10}_tool{index % tools}",
                "mcp_hub.principal": f"p{index // tools % principals}",
            }
            histogram.record(0.002 + index * 1e-5, attributes)
        started = time.perf_counter()
        data = dashboard.read()
        read = time.perf_counter()
        dashboard.add(data)
        timings.append(read - started)
        adding.append(time.perf_counter() - read)
    telemetry.shutdown()
    kept = len(dashboard.rings.slot(dashboard.now()))
    print(
        f"one collection of {series} tool x principal series ({kept} cells kept: hub, mounts, tools, principals and "
        f"their pairs): the SDK's collection (a worker thread) median {statistics.median(timings) * 1e3:.2f} ms, "
        f"max {max(timings) * 1e3:.2f} ms; adding it to the rings (the event loop) median "
        f"{statistics.median(adding) * 1e3:.2f} ms, max {max(adding) * 1e3:.2f} ms; every 2 s, off the call path"
    )


def recording(records: int = 100_000) -> None:
    """What the one measurement a call adds costs: `mcp.server.operation.duration`'s record, with a call's
    attributes, into the dashboard's reader alone (no exporter), timed in this process."""
    telemetry = Telemetry(TelemetrySettings())
    Dashboard(telemetry)
    telemetry.start(lambda: [])
    histogram = telemetry.request_duration
    assert histogram is not None
    attributes = {
        "mcp.method.name": "tools/call",
        "mcp_hub.outcome": "ok",
        "mcp_hub.mount": "up",
        "gen_ai.tool.name": "up_lookup",
        "mcp_hub.principal": "alice",
    }
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(records):
            histogram.record(0.0021, dict(attributes))
        timings.append((time.perf_counter() - started) / records)
    telemetry.shutdown()
    median = statistics.median(timings) * 1e6
    print(f"one call's measurement (histogram record, a fresh attribute dict): median {median:.1f} µs")


def drawing(tools: int = 50, principals: int = 10) -> None:
    """What drawing the overview's live part costs (on the event loop, once per collection, however many pages
    follow it), with `tools` x `principals` pairs busy in every slot of the hour."""
    from mcp_hub.admin import dashboard as pages
    from mcp_hub.observe.series import SLOTS, Rings

    rings, last = Rings(), 100_000
    for slot in range(last - SLOTS + 1, last + 1):
        for tool in range(tools):
            principal = f"p{tool % principals}"
            keys = [("hub",), ("mount", f"m{tool % 10}"), ("tool", f"t{tool}"), ("principal", principal)]
            for key in [*keys, ("principal_tool", principal, f"t{tool}")]:
                cell = rings.cell(slot, key)
                cell.calls += 1
                cell.buckets[5] = cell.buckets.get(5, 0) + 1
    timings = []
    for _ in range(5):
        rings.cell(last, ("hub",)).calls += 1  # a collection came: the sums kept for the last drawing are dropped
        started = time.perf_counter()
        points = rings.points(("hub",), last, SLOTS)
        html = pages._headline(rings.total(("hub",), last, 30)) + pages._charts("hub", points, last)
        html += pages._decision_chart(points, last)
        html += pages._timelines("", [f"m{i}" for i in range(10)], rings, last, SLOTS)
        html += pages._table("", "tool", rings, last, SLOTS, 10) + pages._decisions(rings, last, SLOTS, "mount", "")
        html += pages._table("", "principal", rings, last, SLOTS, 20)
        timings.append(time.perf_counter() - started)
    print(
        f"drawing the overview ({tools} tools x {principals} principals busy all hour): median "
        f"{statistics.median(timings) * 1e3:.0f} ms, {len(html) // 1024} KiB, once per collection"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="The dashboard's cost on a call, and one collection's.")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--series", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-hub-dashboard-") as tmp:
        anyio.run(calls, args.rounds, args.calls, Path(tmp))
    recording()
    for series in (50, args.series):
        collection(series)
    drawing()


if __name__ == "__main__":
    main()
