"""What the sandbox costs a stdio server's start: the same server started plain and in the "standard" profile.

Each round starts each server both ways, alternating which goes first, and times from the spawn until the
server has answered `initialize` and `tools/list` (the SDK's client, as the hub's first connection does), then
stops it. The CPU of the server's processes (bubblewrap, and the shell that joins the cgroups, included) is
read from a cgroup v1 `cpuacct` group each start runs in (both ways, through the same one-line shell), which
counts the processes a pid namespace hides from the children's resource usage. Servers: the SDK's low-level `Server`
(tests/servers/tools_only.py), PyPI's mcp-server-time, and npm's server-everything (TypeScript SDK).

    .venv/bin/python benchmarks/sandbox_startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_hub.config import parse_config  # noqa: E402
from mcp_hub.upstream.sandbox import Cgroups, confine, unavailable  # noqa: E402

EVERYTHING = ROOT / "tests" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
SERVERS = {
    "SDK low-level Server (Python)": [sys.executable, str(ROOT / "tests" / "servers" / "tools_only.py")],
    "mcp-server-time (PyPI)": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
    "server-everything (npm, TypeScript SDK)": [str(EVERYTHING), "stdio"],
}


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def accounted(argv: list[str], group: Path) -> list[str]:
    """`argv` run in the cpuacct group `group`."""
    return ["/bin/sh", "-c", f'echo 0 > {group}/cgroup.procs && exec "$@"', "sh", *argv]


async def start(argv: list[str], sandboxed: bool) -> tuple[float, float]:
    """(seconds until initialized and listed, CPU seconds of its processes) for one start."""
    command, *args = argv
    confinement = None
    if sandboxed:
        server = parse_config(f'[servers.s]\ncommand = "{command}"\nsandbox = "standard"\n').servers["s"]
        confinement = confine(server, command, args, None)
        assert confinement is not None
        command, *args = confinement.argv
    group = CPUACCT / f"sandbox-bench-{os.getpid()}"
    group.mkdir()
    command, *args = accounted([command, *args], group)
    began = time.perf_counter()
    try:
        async with Client(StdioServerParameters(command=command, args=args), mode="legacy", cache=None) as client:
            await client.list_tools()
            elapsed = time.perf_counter() - began
    finally:
        if confinement is not None:
            confinement.release()
    for _ in range(100):  # the processes may take a moment to leave it
        try:
            cpu = int((group / "cpuacct.usage").read_text()) / 1e9
            group.rmdir()
            break
        except OSError:
            await anyio.sleep(0.01)
    return elapsed, cpu


async def main(rounds: int) -> None:
    why = unavailable()
    if why is not None:
        sys.exit(f"no sandbox here: {why}")
    if not os.access(CPUACCT, os.W_OK):
        sys.exit(f"{CPUACCT} is not writable: the CPU is counted in a cgroup v1 cpuacct group (as root)")
    print(
        f"nproc {os.cpu_count()}, Python {sys.version.split()[0]}, cgroups: {Cgroups.here() is not None}, "
        f"{rounds} rounds\n"
    )
    print("| server | plain p50 | sandboxed p50 | ratio | plain CPU | sandboxed CPU | CPU added |")
    print("|---|---|---|---|---|---|---|")
    for name, argv in SERVERS.items():
        times: dict[bool, list[float]] = {False: [], True: []}
        cpus: dict[bool, list[float]] = {False: [], True: []}
        await start(argv, False)  # warm the page cache
        await start(argv, True)
        for index in range(rounds):
            for sandboxed in (False, True) if index % 2 == 0 else (True, False):
                elapsed, cpu = await start(argv, sandboxed)
                times[sandboxed].append(elapsed)
                cpus[sandboxed].append(cpu)
        plain, boxed = statistics.median(times[False]), statistics.median(times[True])
        plain_cpu, boxed_cpu = statistics.median(cpus[False]), statistics.median(cpus[True])
        print(
            f"| {name} | {plain * 1000:.0f} ms | {boxed * 1000:.0f} ms | {boxed / plain:.2f}x | "
            f"{plain_cpu * 1000:.0f} ms | {boxed_cpu * 1000:.0f} ms | {(boxed_cpu - plain_cpu) * 1000:+.0f} ms |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    anyio.run(main, parser.parse_args().rounds)
