"""The cache's effect per call: cached and uncached through the hub, against the server directly, in the same rounds.

    python benchmarks/cache.py [--era 2026-07-28|legacy] [--rounds N] [--calls N] [--work-ms MS]

Three sides over stdio, each with its own tests/servers/counting.py (its `resources/read` results say
`ttlMs` 60000; `--work-ms` makes each call and read it serves take that long):

- direct: the client speaks to the server itself;
- hub, cache off: `mcp-hub serve` with `[cache] enabled = false` and a policy without `cache`;
- hub, cache on: the default `[cache]`, and a policy rule `cache = "60s"` for the read-only `lookup`.

The sides take turns, `--calls` sequential calls each per round, of `resources/read count://a` and of
`tools/call lookup` with the same arguments (after the first, the cached side answers from its cache).
Printed per operation and side: the median over rounds of the p50, its ratio to direct, and the hub's CPU
per call (from /proc, the mean over rounds). A handshake-era upstream gives no cache hints, so with
`--era legacy` only the tool is cached.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench

COUNTING = str(bench.ROOT / "tests" / "servers" / "counting.py")
POLICY = '[principals]\n"*" = "all"\n\n[profiles.all]\ndefault = "allow"\n'
CACHED = '\n[[profiles.all.rules]]\nid = "lookups"\neffect = "allow"\ntools = ["up/lookup"]\ncache = "60s"\n'
ARGS = {"query": "weather", "city": "Lisbon", "days": 3}


def upstream_command(work_ms: float) -> list[str]:
    return [sys.executable, COUNTING, "--work-ms", str(work_ms)]


def hub_config(work: Path, name: str, cached: bool, mode: str, work_ms: float) -> Path:
    policies = work / f"{name}-policies"
    policies.mkdir()
    (policies / "policy.toml").write_text(POLICY + (CACHED if cached else ""), encoding="utf-8")
    command = upstream_command(work_ms)
    upstream = {"command": command[0], "args": command[1:], "protocol": mode}
    config = bench.hub_config(work / f"{name}.toml", {"up": upstream})
    with config.open("a", encoding="utf-8") as file:
        file.write(f'\n[policy]\ndir = "{policies}"\nreload = false\n')
        if not cached:
            file.write("\n[cache]\nenabled = false\n")
    return config


Operation = Callable[[Client, str], Awaitable[Any]]


@asynccontextmanager
async def stdio_side(
    label: str, command: list[str], mode: str, prefix: str, errlog: TextIO
) -> AsyncIterator[bench.Side]:
    """One stdio session to `command` (a hub when `prefix` is given, with the upstream as its child)."""
    before = bench.children_of(os.getpid())
    async with bench.stdio_client_for(command, errlog, mode) as client:
        (pid,) = bench.children_of(os.getpid()) - before
        if prefix:
            await bench.wait_for_tool(client, prefix + "lookup")
        yield bench.Side(label, [client], prefix, {"hub": pid} if prefix else {"upstream": pid})


async def read(client: Client, prefix: str) -> Any:
    uri = "count://a" if not prefix else f"{prefix.rstrip('_')}+count://a"
    return await client.read_resource(uri)


async def call(client: Client, prefix: str) -> Any:
    result = await client.call_tool(prefix + "lookup", ARGS)
    if result.is_error:
        raise RuntimeError(f"lookup failed: {result.content}")
    return result


async def timed(operation: Operation, client: Client, prefix: str, calls: int) -> list[float]:
    samples: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        with anyio.fail_after(bench.CALL_TIMEOUT):
            await operation(client, prefix)
        samples.append(time.perf_counter() - start)
    return samples


async def run(mode: str, rounds: int, calls: int, work_ms: float, work: Path) -> None:
    with open(work / "stderr.log", "w") as errlog:
        async with AsyncExitStack() as stack:
            sides = [await stack.enter_async_context(stdio_side("direct", upstream_command(work_ms), mode, "", errlog))]
            for label, cached in (("hub, cache off", False), ("hub, cache on", True)):
                config = hub_config(work, "cache-on" if cached else "cache-off", cached, mode, work_ms)
                side = stdio_side(label, bench.hub_command(config), mode, "up_", errlog)
                sides.append(await stack.enter_async_context(side))
            print(f"{rounds} rounds, {calls} calls per side per round; {mode} client and upstream; work {work_ms:g} ms")
            for name, operation in (("resources/read", read), ("tools/call (read-only)", call)):
                for side in sides:  # warm up (and fill the cache)
                    await timed(operation, side.client, side.prefix, min(calls, 20))
                p50: dict[str, list[float]] = {side.label: [] for side in sides}
                cpu: dict[str, list[float]] = {side.label: [] for side in sides}
                for index in range(rounds):
                    turn = sides[index % len(sides) :] + sides[: index % len(sides)]
                    for side in turn:
                        pid = side.pids.get("hub")
                        used = bench.cpu_seconds(pid) if pid else 0.0
                        samples = await timed(operation, side.client, side.prefix, calls)
                        if pid:
                            cpu[side.label].append((bench.cpu_seconds(pid) - used) / len(samples) * 1e3)
                        p50[side.label].append(bench.percentile(samples, 0.5) * 1e3)
                baseline = statistics.median(p50["direct"])
                print(f"  {name}:")
                for label, values in p50.items():
                    median = statistics.median(values)
                    hub_cpu = f"hub CPU per call {statistics.fmean(cpu[label]):7.3f} ms" if cpu[label] else ""
                    print(f"    p50 {median:8.3f} ms  {median / baseline:5.2f}x direct  {hub_cpu:28s} {label}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Cached and uncached resources/read and tools/call against direct.")
    parser.add_argument("--era", default=bench.MODERN, choices=[bench.LEGACY, bench.MODERN])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--work-ms", type=float, default=0.0, help="how long the upstream takes per call it serves")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-hub-cache-") as tmp:
        anyio.run(run, args.era, args.rounds, args.calls, args.work_ms, Path(tmp))


if __name__ == "__main__":
    main()
