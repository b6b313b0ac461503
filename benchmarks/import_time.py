"""What a hub's start costs before it does anything, and its second start: beside the SDK's imports.

    python benchmarks/import_time.py [--rounds N] [--mounts N]

In the same interleaved rounds (each round runs every side once, one side further
on each round), a fresh `python` (this one, from bytecode: the checkout is compiled
in place first, as pip compiles an installed hub) that, timed until its imports are
done (it then leaves with `os._exit`, skipping the interpreter's teardown):

- `interpreter`: does nothing (`-c pass`);
- `SDK`: imports the parts of the `mcp` SDK a hub serving streamable HTTP in
  front of stdio and HTTP servers uses (`SDK_MODULES`), with their dependencies
  (pydantic, starlette, httpx2, anyio);
- `hub`: imports `mcp_hub.cli` and `mcp_hub.hub` as the `mcp-hub` command does (with the
  garbage collector paused: mcp_hub/entry.py), what `mcp-hub serve` has loaded before it
  reads its configuration (the rest is imported as the config asks);
- `serve --help`: runs `python -m mcp_hub serve --help` to its end (with the interpreter's exit);
- `second start`: runs `python -m mcp_hub serve --transport stdio` with a config of
  `--mounts` stdio fixture servers (50 tools each) whose catalog snapshot an
  earlier start wrote, as bench.py's second start does, until the SDK's client,
  connected to it over stdio, has listed every tool (`tools/list`); its servers
  start meanwhile, as they do for a user.

Printed: the median and fastest wall time of each over the rounds, what each adds
to the SDK side (the second start's target of issue 42: at most 0.3 s beyond the
SDK's import time), and the CPU time the side's own process spent (the import
sides: the whole child; the second start: the hub process alone, read when the
listing came back, without its servers'): on a shared machine, where other work
stretches wall times, the CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from bench import (
    CATALOG_TOOLS,
    children_of,
    compiled,
    count_tools,
    cpu_seconds,
    fixture_base_tools,
    fixture_server,
    hub_command,
    hub_config,
    stdio_client_for,
)

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
_STARTED = "; import os; os._exit(0)"
"""Ends an import side once its imports are done: the interpreter's exit (tearing down every module, about
0.2 s after the SDK's imports, 0.3 s after the hub's) is not part of a start."""
IMPORTS: dict[str, list[str]] = {
    "interpreter": ["-c", "pass" + _STARTED],
    "SDK": ["-c", "import " + ", ".join(SDK_MODULES) + _STARTED],
    "hub": ["-c", "import gc; gc.disable(); import mcp_hub.cli, mcp_hub.hub; gc.freeze()" + _STARTED],
    "serve --help": ["-m", "mcp_hub", "serve", "--help"],
}
SECOND = "second start"
SECOND_TIMEOUT = 60.0


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one `python ARGS` run to its end."""
    cpu, started = children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, children_cpu() - cpu


async def second_start(config: Path, tools: int, errlog: Path) -> tuple[float, float]:
    """Wall seconds from launching the hub over stdio until a listing holds all `tools`, and the CPU
    seconds of the hub process by then."""
    before = children_of(os.getpid())
    with errlog.open("a", encoding="utf-8") as log:
        started = time.perf_counter()
        with anyio.fail_after(SECOND_TIMEOUT):
            async with stdio_client_for(hub_command(config, "stdio"), log) as client:
                while await count_tools(client) < tools:
                    await anyio.sleep(0.05)
                wall = time.perf_counter() - started
                (hub,) = children_of(os.getpid()) - before
                return wall, cpu_seconds(hub)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--mounts", type=int, default=5, help="stdio servers behind the second start (5)")
    opts = parser.parse_args()
    print(compiled(), file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="mcp-hub-import-time-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the catalog snapshot: not the user's
        extra = CATALOG_TOOLS - fixture_base_tools()
        servers = {f"s{i:02d}": fixture_server(f"s{i:02d}", "--tools", str(extra)) for i in range(opts.mounts)}
        config = hub_config(Path(tmp) / "second-start.toml", servers)
        errlog = Path(tmp) / "hub-stderr.log"
        tools = opts.mounts * CATALOG_TOOLS

        def second() -> tuple[float, float]:
            return anyio.run(second_start, config, tools, errlog)

        sides = {name: (lambda args=args: once(args)) for name, args in IMPORTS.items()} | {SECOND: second}
        for side in sides.values():  # in the page cache before the rounds; the first start writes the snapshot
            side()
        if not list(Path(tmp, "state").glob("mcp-hub/catalogs/*.json")):
            raise SystemExit(f"no catalog snapshot was written; the hub's stderr: {errlog.read_text()[-2000:]}")
        names = list(sides)
        wall: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(opts.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                spent, used = sides[name]()
                wall[name].append(spent)
                cpu[name].append(used)
    sdk_wall, sdk_cpu = statistics.median(wall["SDK"]), statistics.median(cpu["SDK"])
    print(f"{opts.rounds} rounds; second start: {opts.mounts} stdio servers, {tools} tools, from the catalog snapshot")
    print(f"{'side':<14} {'median s':>9} {'min s':>7} {'+SDK s':>7}   {'CPU s':>6} {'min':>6} {'+SDK':>6}")
    for name in names:
        median, used = statistics.median(wall[name]), statistics.median(cpu[name])
        print(
            f"{name:<14} {median:9.3f} {min(wall[name]):7.3f} {median - sdk_wall:+7.3f}   "
            f"{used:6.3f} {min(cpu[name]):6.3f} {used - sdk_cpu:+6.3f}"
        )
    beyond = statistics.median(wall[SECOND]) - sdk_wall
    print(f"second start: {beyond:+.3f} s beyond the SDK's imports (median wall; issue 42's target: at most 0.3 s)")


if __name__ == "__main__":
    main()
