"""The hub's overhead, measured: the same upstream directly and through the hub, in one run.

    python benchmarks/bench.py [--quick] [--out FILE] [--wait-quiet S] [--fastmcp PYTHON]
                               [--only {http,stdio,bridge,catalog}] [--startups N] [--from-source]

Every comparison talks to the same fixture server (`tests/servers/fixture.py`)
once directly and once through `mcp-hub serve` (a separate process, as in
production), with the SDK's own `mcp.Client(cache=None)` on both sides, and
prints hub / direct ratios next to the project's targets:

1. tools/call latency (p50, p99) at concurrency 1, for both protocol eras, in two
   like-for-like pairs:
   HTTP:  client -HTTP-> upstream            vs  client -HTTP-> hub -HTTP-> upstream
   stdio: client -stdio-> upstream           vs  client -stdio-> hub -stdio-> upstream
2. throughput (calls/s) at concurrency 16 and 64, spread over 4 client sessions;
3. a 1 MB tools/call result (p50);
4. tools/list of 1,000 tools: a hub over 20 upstreams x 50 tools vs one server with 1,000;
5. hub start-up until that catalog is served, on the default config: a first start
   (nothing known yet) and a second one (from the last known catalog, `catalog_snapshot`),
   and the hub process's RSS;
plus the CPU time each process spends per call, which says where latency goes.

Latency and throughput are the median of 3 interleaved rounds (direct, hub,
direct, hub, ...); within a latency round the two sides take turns 10 times.
Every loop is bounded in count and time, and every process started here is
stopped in a `finally`. The hubs keep their last known catalogs in the run's temporary
folder (`XDG_STATE_HOME`), not in the user's state folder. `--out FILE` also writes the report. `--fastmcp PYTHON` (a
Python with `benchmarks/fastmcp-requirements.txt` installed) adds FastMCP's proxy to the
latency, throughput and 1 MB rounds, as a third path beside direct and the hub, and times its
start-up and tools/list over the 20-server catalog. `--only PART` (repeatable) runs only
those parts (`--only catalog`: items 4 and 5), `--startups N` times N start-ups of each kind.
The processes run from bytecode, as an installed hub does: the checkout is compiled first, in place
(`--from-source`: not, which with PYTHONDONTWRITEBYTECODE set means a compile at each launch).
Needs only what `pip install -e '.[test]'` installs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any, TextIO

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import INVALID_PARAMS, ToolListChangedNotification

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import FIXTURE, fixture_server, free_port, write_config  # noqa: E402

FIXTURE_HTTP = str(ROOT / "benchmarks" / "fixture_http.py")
RELAY = str(ROOT / "benchmarks" / "relay.py")
FASTMCP_PROXY = str(ROOT / "benchmarks" / "fastmcp_proxy.py")
FASTMCP_SESSIONS = {"fresh": "FastMCP proxy, session per request", "shared": "FastMCP proxy, one shared session"}
"""How FastMCP's proxy holds its upstream sessions (see fastmcp_proxy.py) -> the label of its rows."""
LEGACY, MODERN = "legacy", "2026-07-28"
ECHO_ARGS = {"text": "hello"}
BIG_SIZE = 1_000_000
CATALOG_MOUNTS, CATALOG_TOOLS = 20, 50
CATALOG_POLL = 1.0
"""Seconds between two listings of a client waiting for the hub's catalog, when the hub says nothing: it
lists again on `list_changed`, which the hub sends as each server joins."""
SESSIONS = 4
"""Client sessions that share the load in the throughput runs."""
PHASE_TIMEOUT = 240.0
"""No single measurement phase may run longer than this (seconds)."""
CALL_TIMEOUT = 30.0


# -- plan ----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """How much to measure; `QUICK` trades precision for a 1-2 minute run."""

    rounds: int = 3
    warmup: int = 50
    calls: int = 500
    """tools/call per round, concurrency 1."""
    throughput_calls: int = 1500
    """Calls per throughput round (all sessions together)."""
    throughput_seconds: float = 6.0
    """Cap on one throughput round."""
    big_calls: int = 20
    list_calls: int = 30
    startups: int = 3
    round_seconds: float = 30.0
    """Cap on one latency round."""
    slices: int = 10
    """Within a latency round, the two sides take turns this many times (a slice of the round's calls each)."""
    fastmcp: str | None = None
    """A Python with FastMCP installed (`--fastmcp`): its proxy is measured in the same rounds too."""


FULL = Plan()
QUICK = Plan(warmup=20, calls=150, throughput_calls=200, throughput_seconds=1.5, big_calls=6, list_calls=8, startups=1)


# -- results -------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A goal for the hub/direct ratio (or, without a direct number, for the hub's own value)."""

    text: str
    met: Callable[[float], bool]


def at_most(limit: float, unit: str = "x") -> Target:
    return Target(f"<= {limit:g}{unit}", lambda v: v <= limit)


def at_least(limit: float, unit: str = "x") -> Target:
    return Target(f">= {limit:g}{unit}", lambda v: v >= limit)


def below(limit: float, unit: str) -> Target:
    return Target(f"< {limit:g} {unit}", lambda v: v < limit)


@dataclass(frozen=True)
class Row:
    metric: str
    unit: str
    direct: float | None
    hub: float
    target: Target | None = None
    absolute: bool = False
    """The target applies to the hub's value, not to the ratio."""

    @property
    def ratio(self) -> float | None:
        return self.hub / self.direct if self.direct else None

    def verdict(self) -> str:
        if self.target is None:
            return ""
        value = self.hub if self.absolute else self.ratio
        return "" if value is None else ("met" if self.target.met(value) else "MISSED")


@dataclass
class CpuRow:
    """CPU time per call of each process on one path (microseconds)."""

    path: str
    per_process: dict[str, float]
    wall_us: float


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    cpu: list[CpuRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


_T0 = time.perf_counter()


def step(message: str) -> None:
    """Progress on stderr, so stdout stays the report."""
    print(f"[{time.perf_counter() - _T0:6.1f}s] {message}", file=sys.stderr, flush=True)


# -- processes -----------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise LookupError(f"{key} of pid {pid}")


def children_of(pid: int) -> set[int]:
    """Direct children of a process (scanning /proc, which needs no extra package)."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def spawn(args: Sequence[str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(list(args), stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=ROOT)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the hub reaps its children on it), then SIGKILL after 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def running(args: Sequence[str], log: IO[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    process = spawn(args, log)
    try:
        yield process
    finally:
        stop(process)


def hub_command(config: Path, transport: str = "stdio", port: int | None = None) -> list[str]:
    """`mcp-hub serve`, as `python -m mcp_hub` run in ROOT: the checkout's hub, whatever is installed."""
    command = [sys.executable, "-m", "mcp_hub", "serve", "--config", str(config), "--transport", transport]
    return command + (["--port", str(port)] if port is not None else [])


def hub_config(path: Path, servers: dict[str, dict[str, Any]], page_size: int | None = None) -> Path:
    """A hub.toml; log level `warning` as the upstream's uvicorn uses (no per-request access log);
    the hub's default `page_size` unless one is given."""
    options: dict[str, Any] = {} if page_size is None else {"page_size": page_size}
    return write_config(path, servers, log_level="warning", **options)


def relay_command(*args: str) -> list[str]:
    """relay.py: a byte relay, the floor of one Python hop."""
    return [sys.executable, RELAY, *args]


def fixture_command(name: str, tools: int = 0) -> list[str]:
    return [sys.executable, FIXTURE, "--name", name] + (["--tools", str(tools)] if tools else [])


def fastmcp_command(
    plan: Plan, sessions: str, mode: str, servers: dict[str, dict[str, Any]], port: int | None = None
) -> list[str]:
    """fastmcp_proxy.py under `plan.fastmcp`: FastMCP's proxy for `servers` (`mcpServers` entries),
    over stdio, or over streamable HTTP on `port`."""
    assert plan.fastmcp is not None
    transport = ["stdio"] if port is None else ["http", str(port)]
    return [plan.fastmcp, FASTMCP_PROXY, sessions, mode, *transport, json.dumps(servers)]


def fastmcp_stdio_server(name: str, tools: int = 0) -> dict[str, Any]:
    """The fixture as an `mcpServers` entry FastMCP launches over stdio."""
    command, *args = fixture_command(name, tools)
    return {"command": command, "args": args, "cwd": str(ROOT)}


# -- clients -------------------------------------------------------------------


def http_client(url: str, mode: str = LEGACY, message_handler: Any = None) -> Client:
    """The SDK client over streamable HTTP, without the 1 MiB SSE event cap; `message_handler` hears what the
    server sends on its own (notifications)."""
    streams = streamable_http_client(url, max_sse_event_size=None)
    return Client(streams, mode=mode, cache=None, message_handler=message_handler)


def stdio_client_for(command: Sequence[str], errlog: TextIO, mode: str = LEGACY, cwd: Path = ROOT) -> Client:
    """The SDK client over stdio to a child it launches in `cwd`; the child's stderr goes to `errlog`."""
    # A hub launched here keeps its catalog snapshot where the benchmark's own hubs do (see main()).
    state = {"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]} if "XDG_STATE_HOME" in os.environ else {}
    env = {**get_default_environment(), **state}
    params = StdioServerParameters(command=command[0], args=list(command[1:]), cwd=cwd, env=env)
    return Client(stdio_client(params, errlog=errlog), mode=mode, cache=None)


async def list_all_tools(client: Client, max_pages: int = 100) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def wait_for_tool(client: Client, name: str, timeout: float = 30.0) -> None:
    """Poll tools/list until `name` is served (the hub serves before its upstreams are up)."""
    with anyio.fail_after(timeout):
        while not any(t.name == name for t in await list_all_tools(client)):
            await anyio.sleep(0.05)


async def wait_listening(port: int, timeout: float = 30.0) -> None:
    """Until something accepts TCP connections on the loopback port (bounded by `timeout`)."""
    with anyio.fail_after(timeout):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.02)
                continue
            await stream.aclose()
            return


async def enter_http(
    stack: AsyncExitStack, url: str, mode: str, timeout: float = 30.0, message_handler: Any = None
) -> Client:
    """Connect once the server listens; `stack` closes the client.

    A 2026-07-28 client sends nothing when it connects, so a server that is not
    up yet would only show as a failed background request later: wait first.
    """
    port = httpx2.URL(url).port
    assert port is not None
    await wait_listening(port, timeout)
    return await stack.enter_async_context(http_client(url, mode, message_handler))


# -- measurements --------------------------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


async def by_size(sides: Sequence[Any], tool: str, sizes: dict[str, int], rounds: int, calls: int, base: str) -> None:
    """Per result size, `tool {"size": N}` called through each side (each with a `client`, `tool(name)`, `pids` and
    `label`) in the same rounds; printed: the p50 and its ratio to the side labelled `base`, and the hub's CPU per call.
    Sizes of 100 KB and more take a twentieth of the calls (at least 3). Each side is warmed up first."""
    for size_label, size in sizes.items():
        args = {"size": size}
        count = calls if size < 100_000 else max(3, calls // 20)
        for side in sides:  # warm up (a tokenizer, a detector's tables: whatever loads on the first call)
            await latencies(side.client, side.tool(tool), args, min(count, 20), 60)
        p50: dict[str, list[float]] = {side.label: [] for side in sides}
        cpu: dict[str, list[float]] = {side.label: [] for side in sides}
        for _ in range(rounds):
            for side in sides:
                pid = side.pids["hub"]
                used = cpu_seconds(pid)
                samples = await latencies(side.client, side.tool(tool), args, count, 120)
                cpu[side.label].append((cpu_seconds(pid) - used) / len(samples) * 1e3)
                p50[side.label].append(percentile(samples, 0.5) * 1e3)
        off = statistics.median(p50[base])
        print(f"  {size_label} result, {count} calls per side per round:")
        for label, values in p50.items():
            median = statistics.median(values)
            print(
                f"    p50 {median:9.3f} ms  {median / off:5.2f}x  hub CPU per call "
                f"{statistics.fmean(cpu[label]):8.3f} ms  {label}"
            )


async def latencies(client: Client, tool: str, args: dict[str, Any], calls: int, seconds: float) -> list[float]:
    """Seconds per call, one call at a time; stops at `calls` or after `seconds`."""
    samples: list[float] = []
    deadline = time.perf_counter() + seconds
    for _ in range(calls):
        start = time.perf_counter()
        with anyio.fail_after(CALL_TIMEOUT):
            result = await client.call_tool(tool, args)
        samples.append(time.perf_counter() - start)
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content}")
        if time.perf_counter() > deadline:
            break
    return samples


async def throughput(clients: Sequence[Client], tool: str, concurrency: int, calls: int, seconds: float) -> float:
    """Calls per second with `concurrency` callers spread evenly over `clients`."""
    return await throughput_of(clients, tool, ECHO_ARGS, concurrency, calls, seconds)


async def throughput_of(
    clients: Sequence[Client], tool: str, args: dict[str, Any], concurrency: int, calls: int, seconds: float
) -> float:
    """Calls of `tool` with `args` per second with `concurrency` callers spread evenly over `clients`."""
    remaining = calls
    done = 0
    deadline = time.perf_counter() + seconds

    async def caller(client: Client) -> None:
        nonlocal remaining, done
        while remaining > 0 and time.perf_counter() < deadline:
            remaining -= 1
            with anyio.fail_after(CALL_TIMEOUT):
                await client.call_tool(tool, args)
            done += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(concurrency):
            tg.start_soon(caller, clients[i % len(clients)])
    return done / (time.perf_counter() - start)


async def list_latencies(client: Client, calls: int, expected: int) -> list[float]:
    samples: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        with anyio.fail_after(CALL_TIMEOUT):
            tools = await list_all_tools(client)
        samples.append(time.perf_counter() - start)
        if len(tools) != expected:
            raise RuntimeError(f"listed {len(tools)} tools, expected {expected}")
    return samples


def sliced(calls: int, slices: int) -> tuple[int, int]:
    """(turns, calls per turn) for `calls` calls a side in about `slices` turns."""
    per_turn = max(1, calls // max(1, slices))
    return max(1, calls // per_turn), per_turn


async def alternating(
    plan: Plan, calls: int, sides: Sequence[Side], block: Callable[[Side, int], Awaitable[list[float]]]
) -> tuple[list[list[list[float]]], dict[str, list[tuple[dict[str, float], float]]]]:
    """Latency rounds in which the sides take turns (`Plan.slices` per round), so that a change in the
    machine's speed, which on a shared VM comes and goes within seconds, falls on all alike. Returns each
    side's samples per round, and each side's CPU per call (and wall time per call) per round."""
    turns, per_turn = sliced(calls, plan.slices)
    samples: list[list[list[float]]] = [[] for _ in sides]
    cpu: dict[str, list[tuple[dict[str, float], float]]] = {side.label: [] for side in sides}
    for _ in range(plan.rounds):
        tallies = [CpuTally(side) for side in sides]
        taken: list[list[float]] = [[] for _ in sides]
        deadline = time.perf_counter() + plan.round_seconds
        for _ in range(turns):
            for i, side in enumerate(sides):
                taken[i].extend(await tallies[i].measure(block(side, per_turn)))
            if time.perf_counter() > deadline:
                break
        for i, side in enumerate(sides):
            samples[i].append(taken[i])
            cpu[side.label].append(tallies[i].per_call_us())
    return samples, cpu


async def interleaved(rounds: int, *sides: Callable[[], Awaitable[Any]]) -> tuple[list[Any], ...]:
    """Run each side in turn (direct, hub, ...), `rounds` times, and return each side's per-round results."""
    results: tuple[list[Any], ...] = tuple([] for _ in sides)
    for _ in range(rounds):
        for side, taken in zip(sides, results, strict=True):
            taken.append(await side())
    return results


def median_of(rounds: list[list[float]], q: float) -> float:
    return statistics.median(percentile(samples, q) for samples in rounds)


@dataclass
class Side:
    """One path under test: its client(s), the tool names it calls, and the processes behind it."""

    label: str
    clients: list[Client]
    prefix: str
    pids: dict[str, int]
    """Role ("hub", "upstream") -> pid, for CPU accounting."""

    @property
    def client(self) -> Client:
        return self.clients[0]

    def tool(self, name: str) -> str:
        return self.prefix + name


class CpuTally:
    """CPU time the client (this process) and the path's processes spend over blocks of calls, summed."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.used: dict[str, float] = dict.fromkeys(["client", *side.pids], 0.0)
        self.calls = 0
        self.wall = 0.0

    def snapshot(self) -> dict[str, float]:
        usage = {"client": time.process_time()}
        for role, pid in self.side.pids.items():
            usage[role] = cpu_seconds(pid)
        return usage

    async def measure(self, block: Awaitable[list[float]]) -> list[float]:
        """Run one block of calls (its samples: one per call) and add what it used."""
        start, wall = self.snapshot(), time.perf_counter()
        samples = await block
        end = self.snapshot()
        self.wall += time.perf_counter() - wall
        self.calls += len(samples)
        for role in self.used:
            self.used[role] += end[role] - start[role]
        return samples

    def per_call_us(self) -> tuple[dict[str, float], float]:
        calls = max(1, self.calls)
        return {role: used / calls * 1e6 for role, used in self.used.items()}, self.wall / calls * 1e6


async def measure_call_latency(
    plan: Plan,
    report: Report,
    label: str,
    direct: Side,
    hub: Side,
    *,
    p99_rows: bool = True,
    others: Sequence[Side] = (),
) -> None:
    """tools/call echo at concurrency 1: p50 and p99 rows, and CPU per call of every process.

    `others` (a byte relay in the hub's place, see relay.py; FastMCP's proxy) take their turns
    too, and each one's p50 gets a row of its own, named after it."""

    def block(side: Side, calls: int) -> Awaitable[list[float]]:
        return latencies(side.client, side.tool("echo"), ECHO_ARGS, calls, plan.round_seconds)

    sides = [direct, hub, *others]
    for side in sides:
        await latencies(side.client, side.tool("echo"), ECHO_ARGS, plan.warmup, plan.round_seconds)
    samples, cpu = await alternating(plan, plan.calls, sides, block)
    d, h = samples[0], samples[1]
    report.rows.append(
        Row(f"tools/call p50, {label}", "ms", median_of(d, 0.5) * 1e3, median_of(h, 0.5) * 1e3, at_most(1.25))
    )
    for side, o in zip(others, samples[2:], strict=True):
        report.rows.append(
            Row(f"tools/call p50, {label}, {side.label}", "ms", median_of(d, 0.5) * 1e3, median_of(o, 0.5) * 1e3)
        )
    if p99_rows:
        report.rows.append(Row(f"tools/call p99, {label}", "ms", median_of(d, 0.99) * 1e3, median_of(h, 0.99) * 1e3))
    for side in sides:
        per_round = cpu[side.label]
        roles = per_round[0][0]
        report.cpu.append(
            CpuRow(
                f"{label}: {side.label}",
                {role: statistics.median(r[0][role] for r in per_round) for role in roles},
                statistics.median(r[1] for r in per_round),
            )
        )


async def measure_throughput(
    plan: Plan,
    report: Report,
    label: str,
    direct: Side,
    hub: Side,
    targets: dict[int, Target],
    *,
    others: Sequence[Side] = (),
) -> None:
    """Calls per second over every session at concurrency 16 and 64; `others` (a byte relay in the hub's
    place; FastMCP's proxy) take their turns in the same rounds, with a row of their own per concurrency."""
    sides = [direct, hub, *others]
    for concurrency in (16, 64):

        def run(side: Side, c: int = concurrency) -> Callable[[], Awaitable[float]]:
            return lambda: throughput(
                side.clients, side.tool("echo"), c, plan.throughput_calls, plan.throughput_seconds
            )

        for side in sides:  # warm every session
            await throughput(side.clients, side.tool("echo"), concurrency, plan.warmup * 2, plan.throughput_seconds)
        d, h, *o = await interleaved(plan.rounds, *(run(side) for side in sides))
        name = f"throughput c={concurrency} ({SESSIONS} sessions), {label}"
        report.rows.append(Row(name, "calls/s", statistics.median(d), statistics.median(h), targets.get(concurrency)))
        for side, taken in zip(others, o, strict=True):
            report.rows.append(Row(f"{name}, {side.label}", "calls/s", statistics.median(d), statistics.median(taken)))


async def measure_big(
    plan: Plan, report: Report, label: str, direct: Side, hub: Side, others: Sequence[Side] = ()
) -> None:
    """A 1 MB tools/call result, p50; `others` (FastMCP's proxy) take their turns too, each with a row."""
    args = {"size": BIG_SIZE}

    def block(side: Side, calls: int) -> Awaitable[list[float]]:
        return latencies(side.client, side.tool("big"), args, calls, plan.round_seconds)

    sides = [direct, hub, *others]
    for side in sides:
        result = await side.client.call_tool(side.tool("big"), args)
        text = getattr(result.content[0], "text", "")
        if len(text) != BIG_SIZE:
            raise RuntimeError(f"{side.label}: big returned {len(text)} characters, expected {BIG_SIZE}")
        await latencies(side.client, side.tool("big"), args, 2, plan.round_seconds)
    (d, h, *o), _ = await alternating(plan, plan.big_calls, sides, block)
    report.rows.append(
        Row(f"1 MB result p50, {label}", "ms", median_of(d, 0.5) * 1e3, median_of(h, 0.5) * 1e3, at_most(1.2))
    )
    for side, taken in zip(others, o, strict=True):
        report.rows.append(
            Row(f"1 MB result p50, {label}, {side.label}", "ms", median_of(d, 0.5) * 1e3, median_of(taken, 0.5) * 1e3)
        )


# -- scenario: one HTTP upstream -------------------------------------------------


HTTP_CASES = ((LEGACY, LEGACY), (MODERN, MODERN), (LEGACY, "auto"))
"""(client era, era the hub speaks to the upstream). Matching eras compare like with like;
the last case is the hub's default config (`protocol = "auto"` picks 2026-07-28 here)."""


async def http_comparison(plan: Plan, report: Report, work: Path, log: IO[bytes]) -> None:
    """client -HTTP-> upstream  vs  client -HTTP-> hub -HTTP-> upstream, same upstream process."""
    upstream_port = free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    with running([sys.executable, FIXTURE_HTTP, "--port", str(upstream_port)], log) as upstream:
        for mode, hub_protocol in HTTP_CASES:
            servers = {"up": {"url": upstream_url, "protocol": hub_protocol}}
            config = hub_config(work / f"http-{hub_protocol}.toml", servers)
            hub_port, relay_port = free_port(), free_port()
            with (
                running(hub_command(config, "http", hub_port), log) as hub_process,
                running(relay_command("http", str(relay_port), upstream_url), log) as relay_process,
            ):
                async with AsyncExitStack() as stack:
                    direct = Side("direct", [], "", {"upstream": upstream.pid})
                    hub = Side("hub", [], "up_", {"hub": hub_process.pid, "upstream": upstream.pid})
                    full = mode == hub_protocol == LEGACY
                    for _ in range(SESSIONS if full else 1):
                        direct.clients.append(await enter_http(stack, upstream_url, mode))
                        hub.clients.append(await enter_http(stack, f"http://127.0.0.1:{hub_port}/mcp", mode))
                    floor: Side | None = None
                    fastmcp: list[Side] = []
                    if hub_protocol == mode:
                        pids = {"hub": relay_process.pid, "upstream": upstream.pid}
                        relay_url = f"http://127.0.0.1:{relay_port}/mcp"
                        floor = Side("byte relay (floor)", [await enter_http(stack, relay_url, mode)], "", pids)
                        if plan.fastmcp is not None:
                            sessions = len(direct.clients)
                            fastmcp = await fastmcp_http_sides(
                                stack, plan, mode, upstream_url, upstream.pid, sessions, log
                            )
                    await wait_for_tool(hub.client, "up_echo")
                    await http_case(plan, report, direct, hub, mode, hub_protocol, full, floor, fastmcp)


async def fastmcp_http_sides(
    stack: AsyncExitStack, plan: Plan, mode: str, upstream_url: str, upstream_pid: int, sessions: int, log: IO[bytes]
) -> list[Side]:
    """FastMCP's proxy over streamable HTTP in front of `upstream_url`, one process per way of holding
    upstream sessions, each with `sessions` client sessions; `stack` stops them."""
    sides = []
    for how, label in FASTMCP_SESSIONS.items():
        port = free_port()
        process = stack.enter_context(
            running(fastmcp_command(plan, how, mode, {"up": {"url": upstream_url}}, port), log)
        )
        side = Side(label, [], "", {"hub": process.pid, "upstream": upstream_pid})
        for _ in range(sessions):
            side.clients.append(await enter_http(stack, f"http://127.0.0.1:{port}/mcp", mode))
        await wait_for_tool(side.client, "echo")
        sides.append(side)
    return sides


async def http_case(
    plan: Plan,
    report: Report,
    direct: Side,
    hub: Side,
    mode: str,
    hub_protocol: str,
    full: bool,
    floor: Side | None = None,
    fastmcp: Sequence[Side] = (),
) -> None:
    """One HTTP pairing; `floor` takes part in the latency rounds, `fastmcp` (FastMCP's proxies) in all."""
    label = f"HTTP upstream, {mode}"
    if hub_protocol != mode:
        label = f"HTTP upstream, {mode} client, hub->upstream {hub_protocol} (default)"
    others = [*([floor] if floor is not None else []), *fastmcp]
    step(f"{label}: tools/call latency")
    with anyio.fail_after(PHASE_TIMEOUT):
        await measure_call_latency(plan, report, label, direct, hub, p99_rows=hub_protocol == mode, others=others)
    if full:
        step(f"{label}: throughput")
        with anyio.fail_after(PHASE_TIMEOUT):
            await measure_throughput(
                plan, report, "HTTP upstream, legacy", direct, hub, {16: at_least(0.8)}, others=fastmcp
            )
        step(f"{label}: 1 MB results")
        with anyio.fail_after(PHASE_TIMEOUT):
            await measure_big(plan, report, "HTTP upstream, legacy", direct, hub, fastmcp)


# -- scenario: one stdio upstream ------------------------------------------------


@asynccontextmanager
async def stdio_side(
    label: str,
    args: Sequence[str],
    mode: str,
    count: int,
    prefix: str,
    errlog: TextIO,
    *,
    hop: bool | None = None,
    cwd: Path = ROOT,
) -> AsyncIterator[Side]:
    """`count` stdio sessions, each its own process (launched in `cwd`); pids of the first session's process tree.

    `hop`: the process is a hop in front of the upstream (its child); by default, when tools are `prefix`ed."""
    hop = bool(prefix) if hop is None else hop
    me = os.getpid()
    async with AsyncExitStack() as stack:
        side = Side(label, [], prefix, {})
        for i in range(count):
            before = children_of(me)
            client = await stack.enter_async_context(stdio_client_for(args, errlog, mode, cwd))
            side.clients.append(client)
            if i == 0:
                (pid,) = children_of(me) - before
                side.pids = {"hub": pid} if hop else {"upstream": pid}
        if hop:  # once its tools are listed, the hop has started the upstream
            for client in side.clients:
                await wait_for_tool(client, prefix + "echo")
            upstreams = children_of(side.pids["hub"])
            if len(upstreams) == 1:  # a hop not holding exactly one child gets no upstream CPU figures
                (side.pids["upstream"],) = upstreams
        yield side


async def stdio_comparison(plan: Plan, report: Report, work: Path, errlog: TextIO) -> None:
    """client -stdio-> upstream  vs  client -stdio-> hub -stdio-> upstream."""
    for mode in (LEGACY, MODERN):
        config = hub_config(work / f"stdio-{mode}.toml", {"up": fixture_server("up", protocol=mode)})
        sessions = SESSIONS if mode == LEGACY else 1
        async with AsyncExitStack() as stack:
            direct = await stack.enter_async_context(
                stdio_side("direct", fixture_command("up"), mode, sessions, "", errlog)
            )
            hub = await stack.enter_async_context(stdio_side("hub", hub_command(config), mode, sessions, "up_", errlog))
            relay = relay_command("stdio", *fixture_command("up"))
            floor = await stack.enter_async_context(
                stdio_side("byte relay (floor)", relay, mode, sessions, "", errlog, hop=True)
            )
            fastmcp: list[Side] = []
            if plan.fastmcp is not None:
                servers = {"up": fastmcp_stdio_server("up")}
                for how, name in FASTMCP_SESSIONS.items():
                    proxy = stdio_side(
                        name, fastmcp_command(plan, how, mode, servers), mode, sessions, "", errlog, hop=True
                    )
                    fastmcp.append(await stack.enter_async_context(proxy))
            label = f"stdio upstream, {mode}"
            step(f"{label}: tools/call latency")
            with anyio.fail_after(PHASE_TIMEOUT):
                await measure_call_latency(plan, report, label, direct, hub, others=[floor, *fastmcp])
            if mode == LEGACY:
                step(f"{label}: throughput")
                with anyio.fail_after(PHASE_TIMEOUT):
                    await measure_throughput(
                        plan, report, label, direct, hub, {16: at_least(1.05)}, others=[floor, *fastmcp]
                    )
                step(f"{label}: 1 MB results")
                with anyio.fail_after(PHASE_TIMEOUT):
                    await measure_big(plan, report, label, direct, hub, fastmcp)


# -- scenario: a stdio server behind the hub's HTTP, against its own HTTP --------


async def bridge_comparison(plan: Plan, report: Report, work: Path, log: IO[bytes]) -> None:
    """client -HTTP-> the server's own streamable HTTP  vs  client -HTTP-> hub -stdio-> the same server.

    The hub's everyday use: HTTP clients in front of servers it runs as stdio children. The
    direct side serves the same fixture server through the SDK's `streamable_http_app()`, as
    its author would publish it over HTTP; the hub reaches it over stdio instead."""
    upstream_port, hub_port = free_port(), free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    config = hub_config(work / "bridge.toml", {"up": fixture_server("up", protocol=LEGACY)})
    with (
        running([sys.executable, FIXTURE_HTTP, "--port", str(upstream_port)], log) as upstream,
        running(hub_command(config, "http", hub_port), log) as hub_process,
    ):
        async with AsyncExitStack() as stack:
            direct = Side("direct", [], "", {"upstream": upstream.pid})
            hub = Side("hub", [], "up_", {"hub": hub_process.pid})
            for _ in range(SESSIONS):
                direct.clients.append(await enter_http(stack, upstream_url, LEGACY))
                hub.clients.append(await enter_http(stack, f"http://127.0.0.1:{hub_port}/mcp", LEGACY))
            await wait_for_tool(hub.client, "up_echo")
            (hub.pids["upstream"],) = children_of(hub_process.pid)
            label = "HTTP client, stdio upstream behind the hub vs its own HTTP, legacy"
            step(f"{label}: tools/call latency")
            with anyio.fail_after(PHASE_TIMEOUT):
                await measure_call_latency(plan, report, label, direct, hub, p99_rows=False)
            step(f"{label}: throughput")
            with anyio.fail_after(PHASE_TIMEOUT):
                await measure_throughput(plan, report, label, direct, hub, {16: at_least(1.05)})


# -- scenario: a 20 x 50 catalog -------------------------------------------------


def fixture_base_tools() -> int:
    """How many tools the fixture has before `--tools N` adds generated ones."""
    spec = importlib.util.spec_from_file_location("_bench_fixture", FIXTURE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return len(module.BASE_TOOLS)


def catalog_servers(extra_tools: int) -> dict[str, dict[str, Any]]:
    return {f"s{i:02d}": fixture_server(f"s{i:02d}", "--tools", str(extra_tools)) for i in range(CATALOG_MOUNTS)}


@asynccontextmanager
async def catalog_client(url: str, expected: int, timeout: float = 60.0, poll: float = 0.05) -> AsyncIterator[Client]:
    """A client connected to `url` once tools/list serves `expected` tools (bounded by `timeout`).

    It lists again when the server says its tools changed (`notifications/tools/list_changed`, as a client
    such as Claude Desktop does), and otherwise every `poll` seconds."""
    deadline = time.monotonic() + timeout
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    async with AsyncExitStack() as stack:
        client = await enter_http(stack, url, LEGACY, timeout, on_message)
        while True:
            changed = anyio.Event()  # armed before the listing: a change while it runs lists again
            if await count_tools(client) >= expected:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not serve {expected} tools within {timeout:g} s")
            with anyio.move_on_after(min(poll, max(0.0, deadline - time.monotonic()))):
                await changed.wait()
        yield client


async def count_tools(client: Client) -> int:
    """Tools listed right now; 0 when the catalog changed between two pages (the hub then
    refuses the stale cursor, as it does while its servers are still joining)."""
    try:
        return len(await list_all_tools(client))
    except MCPError as exc:
        if exc.code != INVALID_PARAMS:
            raise
        return 0


async def direct_catalog_startup(extra_tools: int, errlog: TextIO) -> float:
    """Baseline for the hub's start-up: this process starts the same 20 fixture children
    itself (concurrently, over stdio) and lists each of them once."""
    counts: list[int] = []
    all_listed, release = anyio.Event(), anyio.Event()

    async def one(name: str) -> None:
        async with stdio_client_for(fixture_command(name, extra_tools), errlog) as client:
            counts.append(len(await list_all_tools(client)))
            if len(counts) == CATALOG_MOUNTS:
                all_listed.set()
            await release.wait()  # every child stays up until all are listed, as under the hub

    start, elapsed = time.perf_counter(), math.inf
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(CATALOG_MOUNTS):
                tg.start_soon(one, f"s{i:02d}")
            await all_listed.wait()
            elapsed = time.perf_counter() - start
            release.set()
    if sum(counts) != CATALOG_MOUNTS * CATALOG_TOOLS:
        raise RuntimeError(f"listed {sum(counts)} tools, expected {CATALOG_MOUNTS * CATALOG_TOOLS}")
    return elapsed


@dataclass
class HubLaunch:
    startup: float
    """Seconds from launching `mcp-hub serve` until tools/list serves the whole catalog."""
    rss_ready: float
    rss_after: float | None = None
    peak: float | None = None


async def compare_lists(plan: Plan, report: Report, direct: Client, hub: Client, how: str) -> None:
    total = CATALOG_MOUNTS * CATALOG_TOOLS
    for client in (direct, hub):
        await list_latencies(client, 3, total)
    d, h = await interleaved(
        plan.rounds,
        lambda: list_latencies(direct, plan.list_calls, total),
        lambda: list_latencies(hub, plan.list_calls, total),
    )
    report.rows.append(
        Row(
            f"tools/list all {total} tools p50 ({how})",
            "ms",
            median_of(d, 0.5) * 1e3,
            median_of(h, 0.5) * 1e3,
            at_most(1.2),
        )
    )


async def compare_calls_behind_catalog(plan: Plan, report: Report, direct: Client, hub: Client) -> None:
    """tools/call p50 with the 1,000 tools listed: the hub (an HTTP client, 20 stdio servers behind it) against
    the one fixture server with the same 1,000 tools over its own streamable HTTP, in interleaved rounds."""
    total = CATALOG_MOUNTS * CATALOG_TOOLS
    tool = "s00_echo"
    for client, name in ((direct, "echo"), (hub, tool)):
        await latencies(client, name, ECHO_ARGS, plan.warmup, plan.round_seconds)
    d, h = await interleaved(
        plan.rounds,
        lambda: latencies(direct, "echo", ECHO_ARGS, plan.calls, plan.round_seconds),
        lambda: latencies(hub, tool, ECHO_ARGS, plan.calls, plan.round_seconds),
    )
    name = f"tools/call p50 behind the {total}-tool catalog, HTTP client (hub: 20 stdio servers; direct: its own HTTP)"
    report.rows.append(Row(name, "ms", median_of(d, 0.5) * 1e3, median_of(h, 0.5) * 1e3, at_most(1.25)))


async def launch_catalog_hub(
    plan: Plan,
    report: Report,
    config: Path,
    log: IO[bytes],
    direct: Client | None,
    how: str,
    page_size: int | None = None,
) -> HubLaunch:
    """Start the hub over the 20 stdio children and time it until the catalog is served;
    with `direct`, also compare tools/list with it and take the hub's RSS afterwards."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    start = time.perf_counter()
    with running(hub_command(config, "http", port), log) as hub_process:
        async with catalog_client(url, CATALOG_MOUNTS * CATALOG_TOOLS, poll=CATALOG_POLL) as hub:
            launch = HubLaunch(time.perf_counter() - start, rss_mib(hub_process.pid))
            if direct is not None:
                await compare_lists(plan, report, direct, hub, how)
                if page_size is None:
                    await compare_calls_behind_catalog(plan, report, direct, hub)
                launch.rss_after = rss_mib(hub_process.pid)
                launch.peak = rss_mib(hub_process.pid, "VmHWM")
    return launch


async def catalog_comparison(plan: Plan, report: Report, work: Path, log: IO[bytes], errlog: TextIO) -> None:
    """tools/list of 1,000 tools (hub over 20 x 50 vs one server with 1,000), hub start-up and RSS.

    Launch 1 serves the hub's default (the whole list in one page), launch 2 pages
    of 100 (the cost of paging: 10 round trips against the direct server's 1);
    further launches only time start-up. Each is a first start: a config of its own, of
    which nothing is known yet. Then one config is launched again, `plan.startups` times:
    start-up from its last known catalog (the default `catalog_snapshot`).
    The direct start-up baseline runs before each of the first `plan.startups` launches.
    """
    total = CATALOG_MOUNTS * CATALOG_TOOLS
    extra = CATALOG_TOOLS - fixture_base_tools()
    direct_port = free_port()
    launches: list[HubLaunch] = []
    direct_startups: list[float] = []
    direct_tools = str(total - CATALOG_TOOLS + extra)
    direct_server = [sys.executable, FIXTURE_HTTP, "--port", str(direct_port), "--tools", direct_tools]
    with running(direct_server, log):
        async with catalog_client(f"http://127.0.0.1:{direct_port}/mcp", total) as direct:
            for i in range(max(2, plan.startups)):
                page_size, how = (100, "hub: 10 pages of 100") if i == 1 else (None, "hub: default, 1 page")
                step(f"catalog: start-up {i + 1} (hub page size {page_size or 'default'})")
                if i < plan.startups:
                    direct_startups.append(await direct_catalog_startup(extra, errlog))
                path = work / f"catalog-{i}.toml"  # a first start each
                config = hub_config(path, catalog_servers(extra), page_size=page_size)
                launch = launch_catalog_hub(plan, report, config, log, direct if i < 2 else None, how, page_size)
                launches.append(await launch)
            if plan.fastmcp is not None:
                for sessions, label in FASTMCP_SESSIONS.items():
                    step(f"catalog: {label}")
                    await fastmcp_catalog(
                        plan, report, direct, extra, statistics.median(direct_startups), sessions, log
                    )
    from_snapshot, over_stdio = await snapshot_startups(plan, report, work, extra, log, errlog)
    report.rows += catalog_rows(launches, direct_startups, from_snapshot, over_stdio)
    report.notes.append(
        f"start-up 'direct' = this process launching the same {CATALOG_MOUNTS} fixture children itself over stdio "
        f"and listing each once; hub start-ups: {', '.join(f'{x.startup:.2f}' for x in launches)} s; "
        f"from the last catalog: {', '.join(f'{x.startup:.2f}' for x in from_snapshot)} s over HTTP, "
        f"{', '.join(f'{x:.2f}' for x in over_stdio)} s over stdio. A client waiting for the catalog lists "
        f"again on list_changed, else every {CATALOG_POLL:g} s."
    )


FASTMCP_LIST_SECONDS = 12.0
"""About how long FastMCP's tools/list calls may take per round (one call over 20 fresh sessions takes
seconds): its calls per round are fewer when one call is slow, at least one."""


async def fastmcp_catalog(
    plan: Plan, report: Report, direct: Client, extra: int, direct_startup: float, sessions: str, log: IO[bytes]
) -> None:
    """FastMCP's proxy over the same 20 stdio servers: start-up until it lists the whole catalog (one launch),
    and tools/list p50 against the direct server with 1,000 tools, in interleaved rounds."""
    total, label = CATALOG_MOUNTS * CATALOG_TOOLS, FASTMCP_SESSIONS[sessions]
    servers = {f"s{i:02d}": fastmcp_stdio_server(f"s{i:02d}", extra) for i in range(CATALOG_MOUNTS)}
    port = free_port()
    start = time.perf_counter()
    with running(fastmcp_command(plan, sessions, LEGACY, servers, port), log):
        async with catalog_client(f"http://127.0.0.1:{port}/mcp", total, timeout=180) as proxy:
            startup = time.perf_counter() - start
            with anyio.fail_after(PHASE_TIMEOUT):
                (one,) = await list_latencies(proxy, 1, total)
                calls = max(1, min(plan.list_calls, int(FASTMCP_LIST_SECONDS / one)))
                d, f = await interleaved(
                    plan.rounds,
                    lambda: list_latencies(direct, calls, total),
                    lambda: list_latencies(proxy, calls, total),
                )
    name = f"start-up, {CATALOG_MOUNTS} stdio upstreams, until {total} tools listed, {label}"
    report.rows.append(Row(name, "s", direct_startup, startup))
    name = f"tools/list all {total} tools p50, {label} ({calls} per round)"
    report.rows.append(Row(name, "ms", median_of(d, 0.5) * 1e3, median_of(f, 0.5) * 1e3))


async def snapshot_startups(
    plan: Plan, report: Report, work: Path, extra: int, log: IO[bytes], errlog: TextIO
) -> tuple[list[HubLaunch], list[float]]:
    """Start-up from the last catalog: a first launch writes the snapshot (when it stops), then
    `plan.startups` launches over HTTP, and as many over stdio (as Claude Desktop launches it), time
    start-up until the catalog is served, before the children are up."""
    config = hub_config(work / "catalog-snapshot.toml", catalog_servers(extra))
    step("catalog: start-up that writes the catalog snapshot")
    await launch_catalog_hub(plan, report, config, log, None, "")
    kept = Path(os.environ["XDG_STATE_HOME"]).glob("mcp-hub/catalogs/catalog-snapshot-*.json")
    snapshots = [json.loads(path.read_text(encoding="utf-8")) for path in kept]
    (snapshot,) = [found for found in snapshots if found.get("config") == str(config.resolve())]
    mounts = snapshot["mounts"]
    if len(mounts) != CATALOG_MOUNTS:
        raise RuntimeError(f"the catalog snapshot holds {len(mounts)} mounts, expected {CATALOG_MOUNTS}")
    launches: list[HubLaunch] = []
    over_stdio: list[float] = []
    for i in range(plan.startups):
        step(f"catalog: start-up {i + 1} from the catalog snapshot, over HTTP and over stdio")
        launches.append(await launch_catalog_hub(plan, report, config, log, None, ""))
        over_stdio.append(await stdio_catalog_startup(config, errlog))
    return launches, over_stdio


async def stdio_catalog_startup(config: Path, errlog: TextIO) -> float:
    """Seconds from launching `mcp-hub serve` over stdio until its tools/list serves the whole catalog."""
    total = CATALOG_MOUNTS * CATALOG_TOOLS
    start = time.perf_counter()
    with anyio.fail_after(60):
        async with stdio_client_for(hub_command(config, "stdio"), errlog) as client:
            while await count_tools(client) < total:
                await anyio.sleep(0.05)
            return time.perf_counter() - start


def catalog_rows(
    launches: list[HubLaunch], direct_startups: list[float], from_snapshot: list[HubLaunch], over_stdio: list[float]
) -> list[Row]:
    first = launches[0]
    total = CATALOG_MOUNTS * CATALOG_TOOLS
    rows = [
        Row(
            f"start-up, {CATALOG_MOUNTS} stdio upstreams, until {total} tools listed, first start",
            "s",
            statistics.median(direct_startups),
            statistics.median(x.startup for x in launches),
            at_most(1.15),  # the servers' own start, plus the hub's own imports before it starts them
        ),
        Row(
            f"start-up, {CATALOG_MOUNTS} stdio upstreams, until {total} tools listed, "
            "second start, from the last known catalog",
            "s",
            statistics.median(direct_startups),
            statistics.median(x.startup for x in from_snapshot),
            at_most(1.5, " s"),
            absolute=True,
        ),
        Row(
            f"start-up, {CATALOG_MOUNTS} stdio upstreams, until {total} tools listed, "
            "second start, from the last known catalog, the hub over stdio",
            "s",
            statistics.median(direct_startups),
            statistics.median(over_stdio),
            at_most(1.5, " s"),
            absolute=True,
        ),
        Row(
            f"hub RSS, {CATALOG_MOUNTS} upstreams, catalog just served",
            "MiB",
            None,
            first.rss_ready,
            below(100, "MiB"),
            absolute=True,
        ),
    ]
    if first.rss_after is not None:
        rows.append(
            Row(
                f"hub RSS after the tools/list runs (peak {first.peak:.1f})",
                "MiB",
                None,
                first.rss_after,
                below(100, "MiB"),
                absolute=True,
            )
        )
    return rows


# -- report --------------------------------------------------------------------


class LoadMeter:
    """How busy the machine was during the run, and how much of that was not this benchmark.

    Other processes on the machine (a test run, a build) slow every side of
    every comparison; interleaved rounds protect the ratios from some of that,
    nothing protects the absolute numbers. The report says how much there was.
    """

    def __init__(self) -> None:
        self.busy, self.total = self.machine_jiffies()
        self.ours = self.own_cpu()
        self.wall = time.perf_counter()

    @staticmethod
    def machine_jiffies() -> tuple[int, int]:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        return sum(values) - idle, sum(values)

    @staticmethod
    def own_cpu() -> float:
        """CPU seconds of this process and of every child it has reaped (a hub counts its own children)."""
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def summary(self) -> str:
        busy, total = self.machine_jiffies()
        cores = os.cpu_count() or 1
        wall = time.perf_counter() - self.wall
        busy_cores = (busy - self.busy) / max(1, total - self.total) * cores
        ours = (self.own_cpu() - self.ours) / wall
        return (
            f"machine busy {busy_cores:.2f} of {cores} cores on average over {wall:.0f} s: this benchmark "
            f"{ours:.2f}, other processes {max(0.0, busy_cores - ours):.2f}; load average at the end "
            f"{os.getloadavg()[0]:.2f}"
        )


def wait_until_quiet(limit: float, busy_cores: float = 0.3, window: float = 3.0) -> str:
    """Before starting: wait (at most `limit` seconds) until other processes use under `busy_cores`."""
    deadline = time.monotonic() + limit
    while True:
        busy, total = LoadMeter.machine_jiffies()
        time.sleep(window)
        busy2, total2 = LoadMeter.machine_jiffies()
        used = (busy2 - busy) / max(1, total2 - total) * (os.cpu_count() or 1)
        if used < busy_cores:
            return f"started when other processes used {used:.2f} cores"
        if time.monotonic() > deadline:
            return f"started after waiting {limit:g} s, with other processes still using {used:.2f} cores"
        step(f"waiting for a quiet machine: other processes use {used:.2f} cores")


def git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else ""


def machine(fastmcp: str | None = None) -> str:
    """The machine line; with `fastmcp`, the FastMCP and `mcp` versions that Python runs."""
    commit = git("rev-parse", "--short", "HEAD") or "?"
    if git("status", "--porcelain", "--", "mcp_hub"):
        commit += " + uncommitted changes in mcp_hub/"
    line = (
        f"machine: nproc={os.cpu_count()} ({platform.machine()}, {platform.system()} {platform.release()}), "
        f"python {platform.python_version()}, mcp {version('mcp')}, commit {commit}"
    )
    return line + (f", {fastmcp_versions(fastmcp)}" if fastmcp is not None else "")


def compiled() -> str:
    """Run the processes started here from bytecode, as an installed hub runs (pip compiles at install): the
    checkout's modules are compiled beside their sources, where every process reads them, as it reads its
    libraries' (a cache prefix would hide those). Without this, where PYTHONDONTWRITEBYTECODE is set, every
    hub launched would compile its modules again."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "mcp_hub"), str(ROOT / "tests")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return "bytecode: the checkout compiled in place (its __pycache__ folders)"


def fastmcp_versions(python: str) -> str:
    """What `--fastmcp PYTHON` runs ("fastmcp X, its mcp Y"); exits with the reason if it cannot run FastMCP."""
    probe = "from importlib.metadata import version as v; print(f\"fastmcp {v('fastmcp')}, its mcp {v('mcp')}\")"
    try:
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SystemExit(f"--fastmcp {python}: cannot run it ({exc})") from None
    if found.returncode != 0:
        reason = (found.stderr.strip().splitlines() or ["no output"])[-1]
        fix = "pip install -r benchmarks/fastmcp-requirements.txt"
        raise SystemExit(f"--fastmcp {python}: FastMCP is not importable there ({reason}); install it with `{fix}`")
    return found.stdout.strip()


def render(report: Report, plan: str, load: str) -> str:
    """The report as Markdown: the results table, CPU per call, notes."""
    lines = [plan, "", "| metric | unit | direct | hub | hub/direct | target | |", "|---|---|---:|---:|---:|---|---|"]
    for row in report.rows:
        direct = f"{row.direct:.2f}" if row.direct is not None else "-"
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "-"
        target = row.target.text if row.target else ""
        lines.append(f"| {row.metric} | {row.unit} | {direct} | {row.hub:.2f} | {ratio} | {target} | {row.verdict()} |")
    lines += ["", "CPU per tools/call at concurrency 1 (microseconds of CPU per call; wall = latency mean):", ""]
    lines += ["| path | client | hub | upstream | wall |", "|---|---:|---:|---:|---:|"]
    for cpu in report.cpu:
        cells = [f"{cpu.per_process[r]:.0f}" if r in cpu.per_process else "-" for r in ("client", "hub", "upstream")]
        lines.append(f"| {cpu.path} | {' | '.join(cells)} | {cpu.wall_us:.0f} |")
    lines += [""] + [f"- {note}" for note in report.notes]
    lines.append(f"- {load}")
    return "\n".join(lines) + "\n"


# -- main ----------------------------------------------------------------------


PARTS = ("http", "stdio", "bridge", "catalog")
"""The plan's parts, in the order they run (`--only` picks some)."""


async def run(plan: Plan, work: Path, parts: Sequence[str] = PARTS) -> Report:
    report = Report()
    with open(work / "processes.log", "wb") as log, open(work / "stdio-stderr.log", "w") as errlog:
        if "http" in parts:
            await http_comparison(plan, report, work, log)
        if "stdio" in parts:
            await stdio_comparison(plan, report, work, errlog)
        if "bridge" in parts:
            await bridge_comparison(plan, report, work, log)
        if "catalog" in parts:
            await catalog_comparison(plan, report, work, log, errlog)
    return report


def dump_logs(work: Path, lines: int = 40) -> None:
    """On failure, show the end of what the processes under test wrote."""
    for log in sorted(work.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        print(f"--- {log.name} (last {len(tail)} lines) ---", *tail, sep="\n", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Measure the hub against direct connections to the same upstream.")
    parser.add_argument("--quick", action="store_true", help="fewer calls and one start-up (about 1-2 minutes)")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    parser.add_argument(
        "--fastmcp",
        metavar="PYTHON",
        help="a Python with FastMCP (benchmarks/fastmcp-requirements.txt): measure its proxy in the same rounds",
    )
    parser.add_argument(
        "--wait-quiet", type=float, default=0, metavar="S", help="first wait up to S seconds for an idle machine"
    )
    parser.add_argument(
        "--only",
        choices=PARTS,
        action="append",
        help="run only this part of the plan (repeatable); catalog: tools/list of 1,000 tools, start-up and RSS",
    )
    parser.add_argument("--startups", type=int, metavar="N", help="time N start-ups of each kind (plan's default: 3)")
    parser.add_argument(
        "--from-source",
        action="store_true",
        help="do not compile the checkout first: with PYTHONDONTWRITEBYTECODE set, each hub launch compiles it",
    )
    args = parser.parse_args(argv)
    plan = dataclasses.replace(QUICK if args.quick else FULL, fastmcp=args.fastmcp)
    if args.startups is not None:
        plan = dataclasses.replace(plan, startups=max(1, args.startups))
    header = machine(args.fastmcp)
    print(header, flush=True)
    if args.wait_quiet:
        quiet = wait_until_quiet(args.wait_quiet)
        print(quiet, flush=True)
        header += f"; {quiet}"
    load = LoadMeter()
    with tempfile.TemporaryDirectory(prefix="mcp-hub-bench-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the hubs' catalog snapshots: not the user's
        if args.from_source:
            header += f"\nbytecode: none made ahead (PYTHONDONTWRITEBYTECODE={os.getenv('PYTHONDONTWRITEBYTECODE')})"
        else:
            header += "\n" + compiled()
        print(header.splitlines()[-1], flush=True)
        try:
            report = anyio.run(run, plan, Path(tmp), args.only or PARTS)
        except BaseException:
            dump_logs(Path(tmp))
            raise
    parts = f", only {', '.join(args.only)}" if args.only else ""
    body = render(report, f"plan: {'quick' if args.quick else 'full'} {plan}{parts}", load.summary())
    print(body)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(f"{header}\n\n{body}", encoding="utf-8")


if __name__ == "__main__":
    main()
