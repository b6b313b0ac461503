"""What a budget of calls and cost costs a call: the same call with a budget and without, in memory and in Redis.

    python benchmarks/budgets.py [--calls N] [--rounds N]

Starts a `redis-server` of its own (no persistence, a free loopback port) and six `mcp-hub serve` processes
over stdio, each with its own tests/servers/counting.py (2026-07-28) and the same policy (one profile,
`default = "allow"`, no rate limit, no cache), which differ only in this:

- counts in memory (no `[cluster]`): no budget; one budget (`calls` per day); two (`calls` per day and
  `cost` per month);
- counts in Redis (`[cluster] redis = ...`): the same three.

The budgets are far too large to be reached, so every call is sent. The call is an uncached
`tools/call lookup` with new arguments each time. The sides take turns in the same rounds (the order
rotating each round), `--calls` calls per side per round; printed are the median over the rounds of each
side's p50, and its ratio to the side without a budget on the same storage. With Redis, `redis-cli MONITOR`
also counts the commands a call sends (one `EVALSHA`, `limits`' INCRBY-and-EXPIRE script, per budget).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
from cache import stdio_side
from cluster import config, lookup_new, monitored, start_redis, timed

POLICY = '[principals]\n"*" = "all"\n\n[profiles.all]\ndefault = "allow"\n'
BUDGETS = {
    "no budget": "",
    "one budget": 'budgets = [{ calls = 1000000000, per = "day" }]\n',
    "two budgets": 'budgets = [{ calls = 1000000000, per = "day" }, { cost = 1000000000, per = "month" }]\n',
}


async def run(calls: int, rounds: int, work: Path) -> None:
    process, port = start_redis(work)
    url = f"redis://127.0.0.1:{port}/0"
    info = redis.Redis(port=port)
    print(f"{calls} calls per side per round, {rounds} rounds; redis-server {info.info()['redis_version']}")
    print(f"{'counts in':10s} {'side':12s} {'p50':>10s} {'ratio':>7s}  Redis commands per call")
    try:
        with open(work / "stderr.log", "w") as errlog:
            async with AsyncExitStack() as stack:
                sides = {}
                for storage, redis_url in (("memory", None), ("Redis", url)):
                    for label, budgets in BUDGETS.items():
                        path = config(work, f"{storage}-{label.replace(' ', '-')}", budgets, redis_url, POLICY)
                        side = stdio_side(label, bench.hub_command(path), bench.MODERN, "up_", errlog)
                        sides[(storage, label)] = await stack.enter_async_context(side)
                for side in sides.values():  # warm up
                    await timed(lookup_new, side.client, 30)
                p50: dict[tuple[str, str], list[float]] = {key: [] for key in sides}
                order = list(sides)
                for turn in range(rounds):
                    for key in order[turn % len(order) :] + order[: turn % len(order)]:
                        samples = await timed(lookup_new, sides[key].client, calls)
                        p50[key].append(bench.percentile(samples, 0.5) * 1e3)
                for storage in ("memory", "Redis"):
                    base = statistics.median(p50[(storage, "no budget")])
                    for label in BUDGETS:
                        median = statistics.median(p50[(storage, label)])
                        commands = ""
                        if storage == "Redis":
                            log = work / f"monitor-{label.replace(' ', '-')}.log"
                            counted = await monitored(port, log, lookup_new, sides[(storage, label)].client, 50)
                            commands = ", ".join(f"{name} {n / 50:g}" for name, n in sorted(counted.items())) or "none"
                        print(f"{storage:10s} {label:12s} {median:7.3f} ms {median / base:6.3f}x  {commands}")
    finally:
        info.close()
        process.kill()
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description="The cost of budgets of calls and cost on a call.")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-hub-budgets-") as tmp:
        anyio.run(run, args.calls, args.rounds, Path(tmp))


if __name__ == "__main__":
    main()
