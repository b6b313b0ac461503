"""The result budget's cost per call: the hub with `[results]` as shipped against the same hub with budgets off.

    python benchmarks/result_budget.py [--era legacy|2026-07-28] [--rounds N] [--calls N]

Two hubs over stdio (`python -m mcp_hub serve`), each in front of its own tests/servers/fixture.py: one with
`[results] max_result_tokens = 0` (off), one as shipped (20,000 tokens). The sides take turns, `--calls`
sequential `tools/call big` each per round (a text of that many bytes), in the same rounds:

- 1 KB: the default path, a result far within the budget (what nearly every call is);
- 60 KB: over the budget in bytes, within it in tokens (counted, then passed as it is);
- 1 MB: over the budget: counted, cut, its whole kept; the client gets ~80 KB instead of 1 MB.

Printed per size and side: the median over rounds of the p50 latency, its ratio to the "off" side, and the
hub's CPU per call (from /proc, the mean over rounds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench

SIZES = {"1 KB": 1_000, "60 KB": 60_000, "1 MB": 1_000_000}
SIDES: dict[str, dict[str, int] | None] = {"budget off": {"max_result_tokens": 0}, "budget on (default)": None}
"""Each side's `[results]` table (None: none, the defaults)."""


def hub_config(work: Path, name: str, results: dict[str, int] | None, mode: str) -> Path:
    fixture = {"command": sys.executable, "args": [bench.FIXTURE, "--name", "up"], "protocol": mode}
    return bench.write_config(work / f"{name}.toml", {"up": fixture}, results=results, log_level="warning")


async def run(mode: str, rounds: int, calls: int, work: Path) -> None:
    with open(work / "stderr.log", "w") as errlog:
        async with AsyncExitStack() as stack:
            sides = []
            for label, results in SIDES.items():
                name = label.split(" (")[0].replace(" ", "-")
                command = bench.hub_command(hub_config(work, name, results, mode))
                side = bench.stdio_side(label, command, mode, 1, "up_", errlog)
                sides.append(await stack.enter_async_context(side))
            print(f"{rounds} rounds per size, {mode} client and upstream; tools/call big (a text of that size)")
            await bench.by_size(sides, "big", SIZES, rounds, calls, "budget off")


def main() -> None:
    parser = argparse.ArgumentParser(description="The result budget on against off, per call, by result size.")
    parser.add_argument("--era", default=bench.LEGACY, choices=[bench.LEGACY, bench.MODERN])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-hub-results-") as tmp:
        anyio.run(run, args.era, args.rounds, args.calls, Path(tmp))


if __name__ == "__main__":
    main()
