"""What a hub's start costs before it does anything: the interpreter, the SDK's imports, the hub's own.

    python benchmarks/import_time.py [--rounds N]

In the same interleaved rounds (each round runs every side once, one side further
on each round), the wall time of a fresh `python` (this one, from bytecode) that:

- `interpreter`: does nothing (`-c pass`);
- `SDK`: imports the parts of the `mcp` SDK a hub serving streamable HTTP in
  front of stdio and HTTP servers uses (`SDK_MODULES`), with their dependencies
  (pydantic, starlette, httpx2, anyio);
- `hub`: imports `mcp_hub.cli` and `mcp_hub.hub`, what `mcp-hub serve` has loaded
  before it reads its configuration (the rest is imported as the config asks);
- `serve --help`: runs `python -m mcp_hub serve --help` to its end.

Printed: the median of each over the rounds, and what each adds to the one before.
The second start target of issue 42 compares `bench.py`'s second start (from the
catalog snapshot) with the SDK's import time measured here.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDK_MODULES = (
    "mcp",
    "mcp.client.session",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.server.lowlevel.server",
    "mcp.server.streamable_http_manager",
    "mcp.server.stdio",
)
SIDES: dict[str, list[str]] = {
    "interpreter": ["-c", "pass"],
    "SDK": ["-c", "import " + ", ".join(SDK_MODULES)],
    "hub": ["-c", "import mcp_hub.cli, mcp_hub.hub"],
    "serve --help": ["-m", "mcp_hub", "serve", "--help"],
}


def once(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    opts = parser.parse_args()
    names = list(SIDES)
    for args in SIDES.values():  # compiled and in the page cache before the rounds
        once(args)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(opts.rounds):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            times[name].append(once(SIDES[name]))
    previous = 0.0
    print(f"{'side':<14} {'median s':>9} {'min s':>7} {'adds s':>7}   ({opts.rounds} rounds)")
    for name in names:
        median = statistics.median(times[name])
        print(f"{name:<14} {median:9.3f} {min(times[name]):7.3f} {median - previous:7.3f}")
        previous = median


if __name__ == "__main__":
    main()
