"""How long starting 20 stdio servers stalls the hub's event loop: anyio's spawn (the SDK's) against the hub's.

The hub serves on uvloop where it is installed. anyio's `open_process` asks the loop to spawn, and uvloop
forks, then waits until the child has exec'd before the loop goes on; the hub's spawn (mcp_hub/sdk/process.py)
uses `subprocess` (vfork) and watches the child's exit with a pidfd. Here, in a process that has imported
the hub (its memory, which a fork copies), on uvloop, each round starts the 20 fixture servers of
bench.py's catalog at once, as a hub's first start does, while a ticker on the same loop measures the
longest time the loop did not turn; then stops them. Rounds alternate between the two spawns.

    .venv/bin/python benchmarks/spawn_stall.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import mcp_hub.cli  # noqa: E402,F401  (the hub's memory, which a fork copies)
from mcp_hub.sdk.process import spawn  # noqa: E402
from tests.conftest import FIXTURE  # noqa: E402

SERVERS = 20


def commands() -> list[list[str]]:
    return [[sys.executable, FIXTURE, "--name", f"s{i:02d}", "--tools", "45"] for i in range(SERVERS)]


async def by_anyio(argv: list[str]) -> Any:
    return await anyio.open_process(argv, stderr=subprocess.DEVNULL, start_new_session=True)


async def by_hub(argv: list[str]) -> Any:
    return await spawn(argv, env=None, stderr=subprocess.DEVNULL, cwd=None)


async def one_round(start: Callable[[list[str]], Awaitable[Any]]) -> tuple[float, float]:
    """(seconds until all 20 are spawned, the loop's longest stall in seconds) for one round."""
    longest = 0.0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    ticker = asyncio.get_running_loop().create_task(tick())
    await asyncio.sleep(0.01)
    began = time.perf_counter()
    children = await asyncio.gather(*(start(argv) for argv in commands()))
    spawned = time.perf_counter() - began
    await asyncio.sleep(0.5)  # the children start beside the loop, as under a hub
    done.set()
    await ticker
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        await child.wait()
    return spawned, longest


async def main(rounds: int) -> None:
    results: dict[str, list[tuple[float, float]]] = {"anyio (uvloop's spawn)": [], "the hub's spawn": []}
    for _ in range(rounds):
        for name, start in zip(results, (by_anyio, by_hub), strict=True):
            results[name].append(await one_round(start))
            await asyncio.sleep(1.0)
    print(f"{SERVERS} fixture servers started at once on uvloop, {rounds} rounds each, alternating")
    print("| spawn | all spawned after, median (ms) | longest loop stall, median (ms) | each round (ms) |")
    print("|---|---:|---:|---|")
    for name, xs in results.items():
        spawned = statistics.median(x[0] for x in xs) * 1e3
        stall = statistics.median(x[1] for x in xs) * 1e3
        each = ", ".join(f"{x[1] * 1e3:.0f}" for x in xs)
        print(f"| {name} | {spawned:.0f} | {stall:.0f} | {each} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    uvloop.run(main(parser.parse_args().rounds))
