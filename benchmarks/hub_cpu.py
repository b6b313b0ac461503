"""The hub's CPU per call, checkouts side by side in short alternating blocks: a paired A/B for a busy machine.

    python benchmarks/hub_cpu.py CHECKOUT [CHECKOUT ...] [--era legacy|2026-07-28] [--server NAME]
                                 [--rounds N] [--calls N] [--throughput-calls N]

Each CHECKOUT's hub serves the mount exactly as its own `mcp-hub import` writes it (as `default_path.py`
does), all in front of one server of `default_path.SERVERS` (`--server`, default `lowlevel`), each with
`default_path.SESSIONS` sessions of the SDK's client in `--era`. A round is, for each hub in turn (the order
reversed every other round), `--calls` sequential calls and then `--throughput-calls` at concurrency 16; each
block's hub CPU per call is read from the scheduler's own count of every thread of the hub's process
(`/proc/PID/task/*/schedstat`, nanoseconds, where `/proc/PID/stat` counts 10 ms ticks).

Printed per checkout: the median CPU per call in each kind of block, its ratio to the first checkout's in the
same round (the median of those ratios: blocks side by side share the machine's load, so the ratio holds
where the absolute figures move by half), and the median p50 of the sequential blocks (which does not hold
under load; compare it only between quiet runs). Nothing else is measured: `default_path.py` is the benchmark
of record, with direct and the byte relay; this is for telling a change's effect on the hub from noise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
import default_path


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of process `pid`, in seconds (nanosecond resolution)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except OSError:  # a thread that ended meanwhile
            pass
    return total / 1e9


async def run(
    checkouts: list[Path], era: str, server: default_path.ServerKind, rounds: int, calls: int, burst: int
) -> str:
    work = Path(tempfile.mkdtemp(prefix="hub-cpu-"))
    tool = f"up_{server.tool}"
    with open(work / "processes.log", "wb") as log:
        port = bench.free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        with server.start(port, work, log):
            await bench.wait_listening(port)
            async with AsyncExitStack() as stack:
                sides: list[tuple[str, list[Any], int]] = []
                for checkout in checkouts:
                    config = default_path.imported_config(checkout, url, work, server.name)
                    hub_port = bench.free_port()
                    command = bench.hub_command(config, "http", hub_port)
                    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=checkout)
                    stack.callback(bench.stop, process)
                    hub_url = f"http://127.0.0.1:{hub_port}/mcp"
                    clients = [await default_path.client_of(stack, hub_url, era) for _ in range(default_path.SESSIONS)]
                    await bench.wait_for_tool(clients[0], tool)
                    sides.append((str(checkout), clients, process.pid))
                for _, clients, _ in sides:  # warm every session
                    for client in clients:
                        await bench.latencies(client, tool, server.args, 50, default_path.SECONDS)
                    await bench.throughput_of(clients, tool, server.args, default_path.CONCURRENCY, 300, 60)
                bench.step("warmed up")
                sequential: dict[str, list[float]] = {label: [] for label, _, _ in sides}
                loaded: dict[str, list[float]] = {label: [] for label, _, _ in sides}
                p50: dict[str, list[float]] = {label: [] for label, _, _ in sides}
                for round_ in range(rounds):
                    order = sides if round_ % 2 == 0 else sides[::-1]
                    for label, clients, pid in order:
                        before = cpu_seconds(pid)
                        samples = await bench.latencies(clients[0], tool, server.args, calls, default_path.SECONDS)
                        sequential[label].append((cpu_seconds(pid) - before) / len(samples) * 1e6)
                        p50[label].append(bench.percentile(samples, 0.5) * 1e3)
                    for label, clients, pid in order:
                        before, started = cpu_seconds(pid), time.perf_counter()
                        rate = await bench.throughput_of(
                            clients, tool, server.args, default_path.CONCURRENCY, burst, default_path.SECONDS
                        )
                        done = max(1.0, rate * (time.perf_counter() - started))
                        loaded[label].append((cpu_seconds(pid) - before) / done * 1e6)
                    bench.step(f"round {round_ + 1}/{rounds} done")
    first = sides[0][0]
    lines = [
        bench.machine(),
        "",
        f"{server.label}, {era} client: {rounds} rounds of {calls} sequential calls and {burst} at c=16 a hub;",
        f"load average at the end {os.getloadavg()[0]:.2f}",
        "",
        "| hub | CPU/call, sequential | vs first (paired) | CPU/call, c=16 | vs first (paired) | p50 ms |",
        "|---|---|---|---|---|---|",
    ]
    for label, _, _ in sides:
        seq_ratio = statistics.median(a / b for a, b in zip(sequential[label], sequential[first], strict=True))
        c16_ratio = statistics.median(a / b for a, b in zip(loaded[label], loaded[first], strict=True))
        lines.append(
            f"| {label} | {statistics.median(sequential[label]):.0f} us | {seq_ratio:.3f}x "
            f"| {statistics.median(loaded[label]):.0f} us | {c16_ratio:.3f}x | {statistics.median(p50[label]):.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="The hub's CPU per call, checkouts in paired blocks.")
    parser.add_argument("checkouts", nargs="+", type=Path, help="trees of this repository, each a hub")
    parser.add_argument("--era", default=bench.LEGACY, choices=[bench.LEGACY, bench.MODERN])
    parser.add_argument("--server", default="lowlevel", choices=sorted(default_path.SERVERS))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--throughput-calls", type=int, default=400)
    args = parser.parse_args()
    checkouts = [path.resolve() for path in args.checkouts]
    server = default_path.SERVERS[args.server]
    print(anyio.run(run, checkouts, args.era, server, args.rounds, args.calls, args.throughput_calls))


if __name__ == "__main__":
    main()
