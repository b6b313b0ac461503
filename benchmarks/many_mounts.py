"""A hub of many servers mounted over HTTP, as it starts: how long until it serves them all, its CPU and memory.

    python benchmarks/many_mounts.py CHECKOUT [CHECKOUT ...] [--mounts 20] [--tools 50] [--rounds 2]

One HTTP fixture server (`fixture_http.py --tools T`: its own tools and T generated ones) is mounted M times
(`[servers.s0]` ... with its `url`, nothing else), and each CHECKOUT's hub is started over HTTP in turn (the
order reversed every other round), each time a first start: a state folder of its own (`XDG_STATE_HOME`), so no
catalog snapshot from an earlier start. Measured from the start of `mcp-hub serve` until the hub logs that it serves
(`serving http://...: N/M servers up, K tools`, once every server has settled or the start-up grace ended):
the seconds, the hub's CPU (every thread, /proc schedstat) and its resident memory then, and what the line says.
The medians over `--rounds` are printed per checkout. Not needed by `bench.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
from hub_cpu import cpu_seconds


def resident_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


async def start(checkout: Path, config: Path, work: Path) -> tuple[float, float, float, str]:
    """Seconds until the hub of `checkout` says it serves, its CPU seconds and MiB then, and what it said."""
    port = bench.free_port()
    log = work / "hub.log"
    environment = {**os.environ, "XDG_STATE_HOME": str(work / "state")}
    command = bench.hub_command(config, "http", port)
    started = time.perf_counter()
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, cwd=checkout, env=environment
        )
    try:
        with anyio.fail_after(120):
            while "serving http" not in (said := log.read_text(encoding="utf-8", errors="replace")):
                await anyio.sleep(0.02)
        seconds = time.perf_counter() - started
        line = next(line for line in said.splitlines() if "serving http" in line)
        return seconds, cpu_seconds(process.pid), resident_mib(process.pid), line.split(": ", 2)[-1]
    finally:
        bench.stop(process)


async def run(checkouts: list[Path], mounts: int, tools: int, rounds: int) -> str:
    work = Path(tempfile.mkdtemp(prefix="many-mounts-"))
    port = bench.free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    config = work / "hub.toml"
    config.write_text(
        '[hub]\nlog_level = "info"\n' + "".join(f'[servers.s{n}]\nurl = "{url}"\n' for n in range(mounts)),
        encoding="utf-8",
    )
    results: dict[Path, list[tuple[float, float, float, str]]] = {checkout: [] for checkout in checkouts}
    with open(work / "server.log", "wb") as server_log:
        server = subprocess.Popen(
            [sys.executable, bench.FIXTURE_HTTP, "--port", str(port), "--tools", str(tools)],
            stdout=server_log,
            stderr=server_log,
        )
        try:
            await bench.wait_listening(port)
            for round_ in range(rounds):
                for checkout in checkouts if round_ % 2 == 0 else checkouts[::-1]:
                    turn = work / f"{round_}-{len(results[checkout])}-{checkout.name}"
                    turn.mkdir()
                    results[checkout].append(await start(checkout, config, turn))
        finally:
            bench.stop(server)
    lines = [
        bench.machine(),
        "",
        f"{mounts} servers over HTTP (one fixture server with {tools} generated tools, mounted {mounts} times), "
        f"{rounds} rounds:",
        "",
        "| hub | serving after | hub CPU | resident memory | it said |",
        "|---|---|---|---|---|",
    ]
    for checkout, runs in results.items():
        seconds, cpu, memory = (statistics.median(run[n] for run in runs) for n in range(3))
        lines.append(f"| {checkout} | {seconds:.2f} s | {cpu:.2f} s | {memory:.0f} MiB | {runs[-1][3]} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="A hub of many servers mounted over HTTP, as it starts.")
    parser.add_argument("checkouts", nargs="+", type=Path, help="trees of this repository, each a hub")
    parser.add_argument("--mounts", type=int, default=20)
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(anyio.run(run, [path.resolve() for path in args.checkouts], args.mounts, args.tools, args.rounds))


if __name__ == "__main__":
    main()
