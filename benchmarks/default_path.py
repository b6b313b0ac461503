"""The default path, measured: an HTTP client, the hub as `mcp-hub import` configures it, a server over HTTP.

    python benchmarks/default_path.py CHECKOUT [CHECKOUT ...] [--rounds N] [--calls N] [--throughput-calls N]
                                      [--eras legacy,2026-07-28] [--servers fixture,lowlevel,mcpserver,everything]
                                      [--out FILE]

The configuration most users run: an `mcpServers` entry with nothing but the
server's `url`, turned into hub.toml by `mcp-hub import` (each CHECKOUT's own
`python -m mcp_hub import`, its output untouched: `protocol` and every other
key at their defaults), served by that checkout's hub over streamable HTTP
(`python -m mcp_hub serve --transport http`, run in the checkout so that its
own `mcp_hub/` is the one imported), in front of each server of `--servers`,
over streamable HTTP in a process of its own (`SERVERS`):

- `lowlevel`: an SDK 2.x low-level `Server` with a realistic catalog, 53 tools with
  rich schemas from real servers' `tools/list` answers (servers_http.py);
- `mcpserver`: the SDK's high-level `MCPServer` (servers_http.py);
- `everything`: npm's server-everything, on the TypeScript SDK, in its streamable
  HTTP mode;
- `fixture`: the tests' small fixture, an SDK low-level `Server` with a few tools
  (fixture_http.py).

Each server gets its own hubs, relay and rounds; a side calls one tool of it.

For each client era (the handshake, `legacy`; and `2026-07-28`), in the same
interleaved rounds, the same SDK client (`SESSIONS` sessions a side) reaches
the server:

- directly;
- through the byte relay (relay.py, HTTP), the floor of one Python hop;
- through each checkout's hub.

Each round is a latency block (`--calls` sequential `tools/call echo` a side,
the sides taking turns `SLICES` times, each round starting one side further
on) and a throughput block (`--throughput-calls` calls at concurrency 16 over
the sessions, the sides in the same rotated order). A client era the server does not
offer is reached directly (and through the relay) in the era the SDK's client
falls back to (`auto`), as that client would reach the server without a hub. Printed per era and side:
the p50 (the median over rounds of each round's p50) and its ratio to direct
and to the relay; calls/s at c=16 (the median over rounds) and its ratio to
direct, with what the client, the hop and the server spent together per call
in that block and how many cores the machine had busy meanwhile (on 2 cores,
c=16 is bound by that sum: 2 cores / the sum, where the cores are all busy);
and the CPU per call, in the latency blocks, of the hop (the hub or
the relay) and of the server, against the server's own CPU per call when
called directly (/proc counts in 10 ms ticks: these are sums over each
round's calls), and of the client (this process): on 2 cores the client,
the hop and the server share the machine, so a call's latency is not the sum
of their CPU, and a side's client may spend more than the direct one's.
Targets (issue 23): p50 <= 1.25x direct, or within 1.1x of
the relay where the relay measures above 1.15x; c=16 >= 0.8x direct; the
hub's CPU per call <= 1.5x the server's own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench

SESSIONS = 4
CONCURRENCY = 16
SLICES = 10
SECONDS = 60.0
"""Cap on one side's block of calls."""

_LOOPBACK_PRELOAD = r"""
// server-everything listens on every interface (express `app.listen(PORT)`): keep it on loopback.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (/^\d+$/.test(String(args[0])) && typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  return listen.apply(this, args);
};
"""


@dataclass(frozen=True)
class ServerKind:
    """A server the default path is measured against: how it is started, and the call each side makes."""

    name: str
    label: str
    tool: str
    args: dict[str, Any]

    def start(self, port: int, work: Path, log: Any) -> Any:
        """The running server (a context manager of its process), listening on `port`."""
        env = None
        if self.name == "fixture":
            command = [sys.executable, bench.FIXTURE_HTTP, "--port", str(port)]
        elif self.name == "everything":
            preload = work / "loopback.cjs"
            preload.write_text(_LOOPBACK_PRELOAD, encoding="utf-8")
            command = [str(EVERYTHING), "streamableHttp"]
            env = {**os.environ, "PORT": str(port), "NODE_OPTIONS": f'--require "{preload}"'}
        else:
            command = [sys.executable, SERVERS_HTTP, self.name, "--port", str(port)]
        return _running(command, log, env)


SERVERS: dict[str, ServerKind] = {
    kind.name: kind
    for kind in (
        ServerKind(
            "lowlevel",
            "SDK low-level Server, 53 tools (realistic catalog)",
            "search_repositories",
            {"query": "hello"},
        ),
        ServerKind("mcpserver", "SDK MCPServer (high-level)", "echo", {"text": "hello"}),
        ServerKind("everything", "npm server-everything (TypeScript SDK)", "echo", {"message": "hello"}),
        ServerKind("fixture", "the tests' fixture (SDK low-level Server, 3 tools)", "echo", dict(bench.ECHO_ARGS)),
    )
}
SERVERS_HTTP = str(Path(__file__).resolve().parent / "servers_http.py")
EVERYTHING = bench.ROOT / "tests" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"


@contextmanager
def _running(command: list[str], log: Any, env: dict[str, str] | None) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    try:
        yield process
    finally:
        bench.stop(process)


@dataclass
class Tally:
    """One side's figures over the rounds of one era."""

    p50_ms: list[float] = field(default_factory=list)
    rate: list[float] = field(default_factory=list)
    cpu_us: dict[str, list[float]] = field(default_factory=dict)
    loaded_us: list[float] = field(default_factory=list)
    """At c=16: the CPU per call of the client, the hop and the server together."""
    busy: list[float] = field(default_factory=list)
    """At c=16: how many of the machine's cores were busy (any process's work)."""


def imported_config(checkout: Path, url: str, work: Path, server: str) -> Path:
    """hub.toml as the checkout's `mcp-hub import` writes it for an `mcpServers` entry with just `url`."""
    name = f"{checkout.name or 'root'}-{server}"
    source = work / f"{name}-mcp.json"
    source.write_text(json.dumps({"mcpServers": {"up": {"url": url}}}), encoding="utf-8")
    target = work / f"{name}-hub.toml"
    command = [sys.executable, "-m", "mcp_hub", "import", str(source), "--output", str(target)]
    subprocess.run(command, cwd=checkout, check=True, capture_output=True)
    return target


async def client_of(stack: AsyncExitStack, url: str, era: str, fallback: bool = False) -> Client:
    """The SDK client over streamable HTTP (as `bench.http_client`), on an HTTP client that lets an idle
    connection go after 2 s: a session left idle while the other sides take their turn would otherwise
    reuse a connection the server (uvicorn: after 5 s) is closing, and the SDK's client does not retry."""
    port = httpx2.URL(url).port
    assert port is not None
    await bench.wait_listening(port)
    http = await stack.enter_async_context(
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=300.0), limits=httpx2.Limits(keepalive_expiry=2.0))
    )
    transport = streamable_http_client(url, http_client=http, max_sse_event_size=None)
    return await stack.enter_async_context(Client(transport, mode="auto" if fallback else era, cache=None))


async def era_offered(url: str, era: str) -> bool:
    """Whether the server at `url` takes a client of `era` (else a direct client falls back)."""
    try:
        async with AsyncExitStack() as stack:
            client = await client_of(stack, url, era)
            await client.list_tools()
    except Exception:  # boundary: any refusal means the era is not offered
        return False
    return True


async def sides_for(
    stack: AsyncExitStack,
    era: str,
    upstream: tuple[str, int],
    relay: tuple[str, int],
    hubs: list[tuple[str, str, int]],
    server: ServerKind,
) -> tuple[list[bench.Side], bool]:
    """direct, the relay and each hub, each with `SESSIONS` client sessions of `era` (direct and the relay:
    the era the client falls back to where the server does not offer `era`); whether they fell back."""
    url, upstream_pid = upstream
    fallback = not await era_offered(url, era)
    relay_url, relay_pid = relay
    sides = [
        bench.Side("direct", [], "", {"upstream": upstream_pid}),
        bench.Side("byte relay", [], "", {"hop": relay_pid, "upstream": upstream_pid}),
        *(bench.Side(label, [], "up_", {"hop": pid, "upstream": upstream_pid}) for label, _, pid in hubs),
    ]
    urls = [url, relay_url, *(hub_url for _, hub_url, _ in hubs)]
    for index, (side, side_url) in enumerate(zip(sides, urls, strict=True)):
        for _ in range(SESSIONS):
            side.clients.append(await client_of(stack, side_url, era, fallback=fallback and index < 2))
        await bench.wait_for_tool(side.client, side.tool(server.tool))
    return sides, fallback


async def measure_era(
    sides: list[bench.Side], rounds: int, calls: int, throughput_calls: int, server: ServerKind
) -> dict[str, Tally]:
    tallies = {side.label: Tally() for side in sides}
    for side in sides:  # warm every session
        for client in side.clients:
            await bench.latencies(client, side.tool(server.tool), server.args, 30, SECONDS)
        await bench.throughput_of(side.clients, side.tool(server.tool), server.args, CONCURRENCY, 200, SECONDS)
    bench.step("warmed up")
    turns, per_turn = bench.sliced(calls, SLICES)
    for round_ in range(rounds):
        start = round_ % len(sides)
        order = sides[start:] + sides[:start]
        cpu = {side.label: bench.CpuTally(side) for side in sides}
        samples: dict[str, list[float]] = {side.label: [] for side in sides}
        for _ in range(turns):
            for side in order:
                block = bench.latencies(side.client, side.tool(server.tool), server.args, per_turn, SECONDS)
                samples[side.label].extend(await cpu[side.label].measure(block))
        for side in order:
            tool = side.tool(server.tool)
            tally, meter = tallies[side.label], bench.CpuTally(side)
            used, before, started = meter.snapshot(), bench.LoadMeter.machine_jiffies(), time.perf_counter()
            rate = await bench.throughput_of(side.clients, tool, server.args, CONCURRENCY, throughput_calls, SECONDS)
            elapsed, after = time.perf_counter() - started, bench.LoadMeter.machine_jiffies()
            calls = max(1.0, rate * elapsed)
            tally.rate.append(rate)
            tally.loaded_us.append(sum(meter.snapshot().values()) - sum(used.values()))
            tally.loaded_us[-1] *= 1e6 / calls
            tally.busy.append((after[0] - before[0]) / max(1, after[1] - before[1]) * (os.cpu_count() or 1))
        for side in sides:
            tally = tallies[side.label]
            tally.p50_ms.append(bench.percentile(samples[side.label], 0.5) * 1e3)
            per_call, _ = cpu[side.label].per_call_us()
            for role, value in per_call.items():
                tally.cpu_us.setdefault(role, []).append(value)
        bench.step(f"round {round_ + 1}/{rounds} done")
    return tallies


def report(era: str, tallies: dict[str, Tally], server: ServerKind, fallback: bool) -> list[str]:
    direct, relay = tallies["direct"], tallies["byte relay"]
    d_p50, r_p50 = statistics.median(direct.p50_ms), statistics.median(relay.p50_ms)
    d_rate = statistics.median(direct.rate)
    server_own = statistics.fmean(direct.cpu_us["upstream"])
    lines = [
        f"### {server.label}: {era} client",
        "",
        f"`tools/call {server.tool}`."
        + (" The server does not offer this era: direct and the relay are the client's fallback." if fallback else ""),
        "",
        "| path | p50 ms | vs direct | vs relay | calls/s c=16 | vs direct "
        "| hop CPU/call | server CPU/call | hop / server's own | client CPU/call | c=16: all CPU/call, cores busy |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, tally in tallies.items():
        p50, rate = statistics.median(tally.p50_ms), statistics.median(tally.rate)
        hop = statistics.fmean(tally.cpu_us["hop"]) if "hop" in tally.cpu_us else None
        server = statistics.fmean(tally.cpu_us["upstream"])
        client = statistics.fmean(tally.cpu_us["client"])
        hop_text = f"{hop:.0f} us" if hop is not None else ""
        ratio_text = f"{hop / server_own:.2f}x" if hop is not None else ""
        lines.append(
            f"| {label} | {p50:.3f} | {p50 / d_p50:.2f}x | {p50 / r_p50:.2f}x | {rate:.0f} | {rate / d_rate:.2f}x "
            f"| {hop_text} | {server:.0f} us | {ratio_text} | {client:.0f} us "
            f"| {statistics.median(tally.loaded_us):.0f} us, {statistics.median(tally.busy):.2f} |"
        )
    lines.append("")
    return lines


async def run(
    checkouts: list[Path],
    eras: list[str],
    servers: list[ServerKind],
    rounds: int,
    calls: int,
    throughput_calls: int,
    work: Path,
) -> str:
    meter = bench.LoadMeter()
    out: list[str] = []
    with open(work / "processes.log", "wb") as log:
        for server in servers:
            out += [f"## {server.label}", ""]
            upstream_port, relay_port = bench.free_port(), bench.free_port()
            url = f"http://127.0.0.1:{upstream_port}/mcp"
            bench.step(f"{server.name}: starting")
            with (
                server.start(upstream_port, work, log) as upstream,
                bench.running(bench.relay_command("http", str(relay_port), url), log) as relay,
            ):
                await bench.wait_listening(upstream_port)
                async with AsyncExitStack() as stack:
                    hubs: list[tuple[str, str, int]] = []
                    for checkout in checkouts:
                        config = imported_config(checkout, url, work, server.name)
                        port = bench.free_port()
                        command = bench.hub_command(config, "http", port)
                        process = subprocess.Popen(
                            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=checkout
                        )
                        stack.callback(bench.stop, process)
                        hubs.append((f"hub {checkout}", f"http://127.0.0.1:{port}/mcp", process.pid))
                    for era in eras:
                        bench.step(f"{server.name}: {era} clients")
                        async with AsyncExitStack() as clients:
                            relay_side = (f"http://127.0.0.1:{relay_port}/mcp", relay.pid)
                            server_side = (url, upstream.pid)
                            sides, fallback = await sides_for(clients, era, server_side, relay_side, hubs, server)
                            tallies = await measure_era(sides, rounds, calls, throughput_calls, server)
                        out += report(era, tallies, server, fallback)
    config_text = (work / f"{checkouts[0].name or 'root'}-{servers[0].name}-hub.toml").read_text(encoding="utf-8")
    head = [
        bench.machine(),
        "",
        f"{rounds} interleaved rounds a server and client era: {calls} sequential calls a side (in {SLICES} turns), "
        f"then {throughput_calls} calls at c={CONCURRENCY} over {SESSIONS} sessions; each round starts one side "
        "further on.",
        f"{meter.summary()}",
        "",
        "The mount, as `mcp-hub import` writes it (its `url` the server's):",
        "",
        "```toml",
        config_text.strip(),
        "```",
        "",
    ]
    return "\n".join(head + out)


def main() -> None:
    parser = argparse.ArgumentParser(description="The default path (import-written mount, HTTP both sides).")
    parser.add_argument("checkouts", nargs="+", type=Path, help="trees of this repository, each a hub side")
    parser.add_argument("--eras", default=f"{bench.LEGACY},{bench.MODERN}")
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"some of {', '.join(SERVERS)}")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--throughput-calls", type=int, default=1000)
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args()
    for checkout in args.checkouts:
        if not (checkout / "mcp_hub" / "__init__.py").is_file():
            parser.error(f"{checkout}: not a tree of this repository (no mcp_hub/__init__.py)")
    eras = args.eras.split(",")
    unknown = [name for name in args.servers.split(",") if name not in SERVERS]
    if unknown:
        parser.error(f"unknown servers: {', '.join(unknown)}")
    servers = [SERVERS[name] for name in args.servers.split(",")]
    with tempfile.TemporaryDirectory(prefix="mcp-hub-default-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the hubs' catalog snapshots: not the user's
        checkouts = [c.resolve() for c in args.checkouts]
        started = time.perf_counter()
        text = anyio.run(run, checkouts, eras, servers, args.rounds, args.calls, args.throughput_calls, Path(tmp))
    text += f"\n(run took {time.perf_counter() - started:.0f} s)\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
