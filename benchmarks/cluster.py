"""Redis round trips per call with `[cluster]`, and what they cost, against the same hub without it.

    python benchmarks/cluster.py [--calls N] [--rounds N]
    python benchmarks/cluster.py --scaling [--seconds S] [--concurrency N]

Starts a `redis-server` of its own (no persistence, a free loopback port) and, per case, two `mcp-hub serve`
processes over stdio, each with its own tests/servers/counting.py (2026-07-28): one with
`[cluster] redis = ...`, one without. The cases:

- uncached call, no rate limit: `tools/call lookup`, no policy rule caches or limits it;
- uncached call, one rate limit: the same, under a rule with `rate = "1000000/minute"`;
- cached call, hit: `tools/call lookup` with the same arguments under a rule with `cache = "60s"`;
- cached call, miss: the same rule, new arguments each call;
- resources/read, hit: `count://a`, which the server says to keep 60 s.

`redis-cli MONITOR` records every command Redis runs during each case's calls: printed are the commands
per call that clients sent (the commands a Lua script runs inside Redis, as `limits`' moving window does,
and the hub's background `PING`, once a second, left out), the round trips per call (a cache lookup's
`GET` and `PTTL` go in one pipeline: one round trip), then the p50 with and without `[cluster]` (the sides
take turns in the same rounds).

With `--scaling`: calls/s of an uncached `tools/call lookup` (no rate limit) through 1, 2 and 3
`mcp-hub serve --transport http` replicas sharing the Redis, each with its own counting server over
stdio, `--concurrency` 2026-07-28 clients spread evenly over the replicas (the client picks the replica:
a round-robin balancer that costs no CPU of its own). On a 2-core machine the CPU caps calls/s well
before three replicas; printed is the CPU per call too (the replicas', their servers', Redis's), which is
what scales with cores.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import redis
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
from cache import COUNTING, stdio_side

POLICY = '[principals]\n"*" = "all"\n\n[profiles.all]\ndefault = "allow"\n'
RULE = '\n[[profiles.all.rules]]\nid = "r"\neffect = "allow"\ntools = ["up/lookup"]\n'
PIPELINED = {"pttl"}
"""Commands sent in one pipeline with another (a cache lookup's GET and PTTL)."""

Call = Callable[[Client, int], Awaitable[Any]]


async def lookup_same(client: Client, n: int) -> Any:
    return await client.call_tool("up_lookup", {"q": "same"})


async def lookup_new(client: Client, n: int) -> Any:
    return await client.call_tool("up_lookup", {"q": f"new-{n}-{time.perf_counter_ns()}"})


async def read(client: Client, n: int) -> Any:
    return await client.read_resource("up+count://a")


CASES: list[tuple[str, str, Call]] = [
    ("uncached call, no rate limit", "", lookup_new),
    ("uncached call, one rate limit", RULE + 'rate = "1000000/minute"\n', lookup_new),
    ("cached call, hit", RULE + 'cache = "60s"\n', lookup_same),
    ("cached call, miss", RULE + 'cache = "60s"\n', lookup_new),
    ("resources/read, hit", "", read),
]


def start_redis(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    port = bench.free_port()
    options = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(work)]
    process = subprocess.Popen([binary, *options], stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return process, port
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def monitored(port: int, log: Path, call: Call, client: Client, calls: int) -> Counter[str]:
    """The commands clients sent Redis (not those a script ran inside it, nor PING) while `call` ran `calls` times."""
    marker = f"mcp-hub-benchmark-{time.time_ns()}"
    with log.open("wb") as out:
        monitor = subprocess.Popen(["redis-cli", "-p", str(port), "monitor"], stdout=out)
        try:
            probe = redis.Redis(port=port)
            with anyio.fail_after(10):  # until MONITOR sees commands
                while marker.encode() not in log.read_bytes():
                    probe.echo(marker)
                    await anyio.sleep(0.05)
            await timed(call, client, calls)
            probe.echo(marker + "-end")
            with anyio.fail_after(10):
                while (marker + "-end").encode() not in log.read_bytes():
                    await anyio.sleep(0.05)
            probe.close()
        finally:
            monitor.kill()
            monitor.wait(10)
    commands: Counter[str] = Counter()
    counting = False
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if marker in line:
            counting = not line.rstrip().endswith('-end"')
            continue
        match = re.match(r'^[\d.]+ \[\d+ ([^\]]+)\] "([^"]+)"', line)
        if counting and match and match[1] != "lua" and match[2].lower() != "ping":
            commands[match[2].lower()] += 1
    return commands


def config(work: Path, name: str, rules: str, redis_url: str | None, policy: str | None = None) -> Path:
    """A hub.toml mounting the counting server over stdio, with `policy` (this benchmark's) and `rules` after it,
    and `[cluster]` on `redis_url` if given."""
    policies = work / f"{name}-policies"
    policies.mkdir()
    (policies / "policy.toml").write_text((POLICY if policy is None else policy) + rules, encoding="utf-8")
    upstream = {"command": sys.executable, "args": [COUNTING], "protocol": bench.MODERN}
    path = bench.hub_config(work / f"{name}.toml", {"up": upstream})
    with path.open("a", encoding="utf-8") as file:
        file.write(f'\n[policy]\ndir = "{policies}"\nreload = false\n')
        if redis_url:
            file.write(f'\n[cluster]\nredis = "{redis_url}"\n')
    return path


async def timed(call: Call, client: Client, calls: int) -> list[float]:
    samples = []
    for n in range(calls):
        start = time.perf_counter()
        with anyio.fail_after(bench.CALL_TIMEOUT):
            await call(client, n)
        samples.append(time.perf_counter() - start)
    return samples


async def run(calls: int, rounds: int, work: Path) -> None:
    process, port = start_redis(work)
    stats = redis.Redis(port=port)
    url = f"redis://127.0.0.1:{port}/0"
    print(f"{calls} calls per side per round, {rounds} rounds; redis-server {stats.info()['redis_version']}")
    print(f"{'case':32s} {'commands/call':>14s} {'round trips/call':>17s} {'p50 cluster':>12s} {'p50 without':>12s}")
    try:
        with open(work / "stderr.log", "w") as errlog:
            for index, (label, rules, call) in enumerate(CASES):
                async with AsyncExitStack() as stack:
                    sides = {}
                    for side, redis_url in (("cluster", url), ("without", None)):
                        path = config(work, f"case{index}-{side}", rules, redis_url)
                        command = bench.hub_command(path)
                        sides[side] = await stack.enter_async_context(
                            stdio_side(side, command, bench.MODERN, "up_", errlog)
                        )
                    for side in sides.values():  # warm up (and fill the cache)
                        await timed(call, side.client, 20)
                    commands = await monitored(port, work / f"monitor{index}.log", call, sides["cluster"].client, calls)
                    total = sum(commands.values())
                    trips = total - sum(commands.get(name, 0) for name in PIPELINED)
                    p50: dict[str, list[float]] = {"cluster": [], "without": []}
                    for turn in range(rounds):
                        order = ["cluster", "without"] if turn % 2 == 0 else ["without", "cluster"]
                        for side in order:
                            samples = await timed(call, sides[side].client, calls)
                            p50[side].append(bench.percentile(samples, 0.5) * 1e3)
                    shown = ", ".join(f"{name} {count / calls:g}" for name, count in sorted(commands.items()))
                    print(
                        f"{label:32s} {total / calls:14.2f} {trips / calls:17.2f} "
                        f"{statistics.median(p50['cluster']):9.3f} ms {statistics.median(p50['without']):9.3f} ms"
                        f"   ({shown or 'none'})"
                    )
    finally:
        stats.close()
        process.kill()
        process.wait(10)


async def scaling(seconds: float, concurrency: int, work: Path) -> None:
    process, port = start_redis(work)
    url = f"redis://127.0.0.1:{port}/0"
    print(f"uncached tools/call, {concurrency} clients spread over the replicas, {seconds:g} s per count")
    print(f"{'replicas':>8s} {'calls/s':>9s} {'hub CPU/call':>13s} {'server CPU/call':>16s} {'redis CPU/call':>15s}")
    try:
        with open(work / "stderr.log", "wb") as errlog:
            for count in (1, 2, 3):
                async with AsyncExitStack() as stack:
                    hubs = []
                    for index in range(count):
                        path = config(work, f"scale{count}-{index}", "", url)
                        hub_port = bench.free_port()
                        hub = stack.enter_context(bench.running(bench.hub_command(path, "http", hub_port), errlog))
                        hubs.append((hub, f"http://127.0.0.1:{hub_port}/mcp"))
                    clients = [await bench.enter_http(stack, address, bench.MODERN, 120) for _, address in hubs]
                    for client in clients:
                        await bench.wait_for_tool(client, "up_lookup", 120)
                        await timed(lookup_new, client, 20)  # warm up
                    pids = [hub.pid for hub, _ in hubs]
                    servers = [pid for hub in pids for pid in bench.children_of(hub)]
                    before = [bench.cpu_seconds(pid) for pid in (*pids, *servers, process.pid)]
                    done = 0
                    start = time.perf_counter()
                    deadline = start + seconds

                    async def caller(client: Client, deadline: float) -> None:
                        nonlocal done
                        while time.perf_counter() < deadline:
                            await lookup_new(client, done)
                            done += 1

                    async with anyio.create_task_group() as tg:
                        for index in range(concurrency):
                            tg.start_soon(caller, clients[index % len(clients)], deadline)
                    elapsed = time.perf_counter() - start
                    after = [bench.cpu_seconds(pid) for pid in (*pids, *servers, process.pid)]
                    used = [b - a for a, b in zip(before, after, strict=True)]
                    hub_cpu, server_cpu, redis_cpu = sum(used[:count]), sum(used[count:-1]), used[-1]
                    print(
                        f"{count:8d} {done / elapsed:9.1f} {hub_cpu / done * 1e3:10.3f} ms "
                        f"{server_cpu / done * 1e3:13.3f} ms {redis_cpu / done * 1e3:12.3f} ms"
                    )
    finally:
        process.kill()
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description="Redis round trips per call with [cluster].")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--scaling", action="store_true", help="calls/s and CPU per call with 1, 2, 3 replicas")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-hub-cluster-") as tmp:
        if args.scaling:
            anyio.run(scaling, args.seconds, args.concurrency, Path(tmp))
        else:
            anyio.run(run, args.calls, args.rounds, Path(tmp))


if __name__ == "__main__":
    main()
