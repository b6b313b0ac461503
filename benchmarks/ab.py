"""A/B of hub revisions: each checkout's hub against the same server reached directly, in one run.

    python benchmarks/ab.py CHECKOUT [CHECKOUT ...] [--era legacy|2026-07-28] [--transport stdio|http]
                            [--rounds N] [--calls N]

Each CHECKOUT is a tree of this repository (the working copy, or a `git worktree add` of
another revision). Its hub (`python -m mcp_hub serve`, run in that tree, so its own
`mcp_hub/` is the one imported) serves the fixture server as a stdio child, to one client
speaking stdio (`--transport stdio`, as in `bench.py`'s stdio rows) or streamable HTTP
(`--transport http`: the hub listens on a port of its own, and its client reaches it
through the hub's HTTP doors); the same fixture is also reached directly over stdio,
the reference either way. The sides take turns, each round starting one side further
on, `--calls` sequential `tools/call echo` each, for `--rounds` rounds. Printed per
side: the median over rounds of the p50, its ratio against direct, and the hub's CPU
per call (from /proc in 10 ms ticks, so the mean over rounds).

For changes to the per-call path whose effect is smaller than the VM's drift between
two separate runs of `bench.py`: the revisions share every round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench


async def http_side(stack: AsyncExitStack, checkout: Path, config: Path, mode: str, log: IO[bytes]) -> bench.Side:
    """The checkout's hub serving streamable HTTP on a port of its own, and one client of it; `stack` stops both."""
    port = bench.free_port()
    # `python -m mcp_hub`, run in the checkout: it imports that checkout's hub.
    command = bench.hub_command(config, "http", port)
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=checkout)
    stack.callback(bench.stop, process)
    client = await bench.enter_http(stack, f"http://127.0.0.1:{port}/mcp", mode)
    await bench.wait_for_tool(client, "up_echo")
    return bench.Side(str(checkout), [client], "up_", {"hub": process.pid})


async def run(checkouts: list[Path], mode: str, transport: str, rounds: int, calls: int, work: Path) -> None:
    with open(work / "stderr.log", "w") as errlog, open(work / "hubs.log", "wb") as log:
        async with AsyncExitStack() as stack:
            sides = [
                await stack.enter_async_context(
                    bench.stdio_side("direct", bench.fixture_command("up"), mode, 1, "", errlog)
                )
            ]
            config = bench.hub_config(work / "hub.toml", {"up": bench.fixture_server("up", protocol=mode)})
            for checkout in checkouts:
                if transport == "http":
                    sides.append(await http_side(stack, checkout, config, mode, log))
                else:
                    # `python -m mcp_hub`: run in a checkout, it imports that checkout's hub
                    side = bench.stdio_side(
                        str(checkout), bench.hub_command(config), mode, 1, "up_", errlog, cwd=checkout
                    )
                    sides.append(await stack.enter_async_context(side))
            for side in sides:
                await bench.latencies(side.client, side.tool("echo"), bench.ECHO_ARGS, 200, 60)
            p50: dict[str, list[float]] = {side.label: [] for side in sides}
            cpu: dict[str, list[float]] = {side.label: [] for side in sides}
            for round_ in range(rounds):
                # Each round starts one side further on: no side always goes first or last (over HTTP,
                # a side's place in the round shows in its latency).
                turn = round_ % len(sides)
                for side in sides[turn:] + sides[:turn]:
                    pid = side.pids.get("hub")
                    used = bench.cpu_seconds(pid) if pid else 0.0
                    samples = await bench.latencies(side.client, side.tool("echo"), bench.ECHO_ARGS, calls, 60)
                    if pid:
                        cpu[side.label].append((bench.cpu_seconds(pid) - used) / len(samples) * 1e6)
                    p50[side.label].append(bench.percentile(samples, 0.5) * 1e3)
    direct = statistics.median(p50["direct"])
    print(f"{rounds} rounds of {calls} calls per side, {mode} client and upstream, hub served over {transport}")
    for label, values in p50.items():
        spent = f"; hub CPU per call {statistics.fmean(cpu[label]):.0f} us" if cpu[label] else ""
        print(f"  {statistics.median(values):.3f} ms  {statistics.median(values) / direct:.2f}x  {label}{spent}")


def main() -> None:
    parser = argparse.ArgumentParser(description="A/B of hub revisions over stdio or HTTP, against direct.")
    parser.add_argument("checkouts", nargs="+", type=Path, help="trees of this repository, each a side")
    parser.add_argument("--era", default=bench.LEGACY, choices=[bench.LEGACY, bench.MODERN])
    parser.add_argument("--transport", default="stdio", choices=["stdio", "http"], help="how clients reach each hub")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    for checkout in args.checkouts:
        if not (checkout / "mcp_hub" / "__init__.py").is_file():
            parser.error(f"{checkout}: not a tree of this repository (no mcp_hub/__init__.py)")
    with tempfile.TemporaryDirectory(prefix="mcp-hub-ab-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the hubs' catalog snapshots: not the user's
        checkouts = [c.resolve() for c in args.checkouts]
        anyio.run(run, checkouts, args.era, args.transport, args.rounds, args.calls, Path(tmp))


if __name__ == "__main__":
    main()
