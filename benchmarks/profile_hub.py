"""Profile the hub process on the tools/call path: concurrency 1, client -HTTP-> hub -HTTP-> upstream.

    python benchmarks/profile_hub.py [--profiler cprofile|py-spy] [--calls N] [--big] [--stdio [--client-stdio]]
                                     [--list TOOLS [--page-size N]]
                                     [--mode M] [--hub-protocol P] [--imported] [--out DIR]

Starts the HTTP fixture upstream and `mcp-hub serve --transport http` as
`bench.py` does, warms up, then runs `--calls` sequential `tools/call echo` (or `big` with 1 MB, `--big`)
while the hub is profiled, and prints the hub's CPU per call (user and system,
from /proc) and where it goes. With `--list TOOLS` the upstream serves that many tools and each
"call" is instead a whole tools/list through the hub, following its cursors (hub `page_size`
from `--page-size`, else the hub's default): the tools/list path. With `--stdio` the hub mounts
the fixture as a stdio child instead (client -HTTP-> hub -stdio-> upstream); with `--client-stdio`
too, the client launches the hub and speaks to it over stdio, as the benchmark's stdio rows do
(client -stdio-> hub -stdio-> upstream).

- `cprofile` (default, stdlib only): the hub runs under `cProfile` with the
  thread's CPU clock, switched on and off around the measured calls by
  SIGUSR1/SIGUSR2. Deterministic, so it also counts Python function calls per
  tools/call; its overhead inflates call-heavy code, so read shares, not times.
  Writes DIR/hub.pstats (open with `python -m pstats` or snakeviz).
- `py-spy` (`pip install py-spy`): sampling at 250 Hz; writes DIR/hub.folded
  (collapsed stacks, for speedscope.app or flamegraph.pl) and charges each
  sample to the innermost frame of a known layer. On this VM it over-charges
  frames that make syscalls (socket writes, connect, select): compare with
  the user/system split printed first.

`--mode` is the client's protocol era, `--hub-protocol` the era the hub
speaks to the upstream (default: the same; "auto" is the hub's default).
Nothing here is needed by `bench.py`.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "upstream leg: the hub's direct requests, aiohttp, SDK client (httpx2, httpcore2)",
        (
            "mcp_hub/upstream/http",
            "mcp_hub/upstream/stdio",
            "mcp_hub/upstream/channel",
            "aiohttp/",
            "mcp/client/",
            "httpx2/",
            "httpcore2/",
            "mcp/shared/_httpx_utils",
        ),
    ),
    ("hub code (mcp_hub/*)", ("mcp_hub/",)),
    (
        "downstream leg: uvicorn, starlette, sse-starlette, SDK server transport",
        ("uvicorn/", "starlette/", "sse_starlette/", "mcp/server/streamable_http", "mcp/server/transport_security"),
    ),
    ("SDK server dispatch (runner, lowlevel Server, session, context)", ("mcp/server/",)),
    ("SDK shared (JSON-RPC dispatcher, message models)", ("mcp/shared/", "mcp_types/")),
]
"""Who a sample is charged to: the innermost frame from one of these paths (generic
libraries such as asyncio, anyio, pydantic and h11 are charged to their caller)."""

PACKAGES = (
    "mcp_hub/",
    "aiohttp/",
    "mcp/client/",
    "mcp/server/",
    "mcp/shared/",
    "mcp_types/",
    "httpx2/",
    "httpcore2/",
    "h11/",
    "uvicorn/",
    "sse_starlette/",
    "starlette/",
    "anyio/",
    "pydantic_core/",
    "pydantic/",
    "asyncio/",
    "json/",
    "opentelemetry/",
    "email/",
    "urllib/",
    "contextlib.py",
    "socket.py",
    "selectors.py",
    "weakref.py",
)
"""Where a function lives, for the cProfile breakdown by package."""


# -- the hub under cProfile ------------------------------------------------------


def serve_profiled(out: Path, hub_args: list[str]) -> None:
    """Run `mcp-hub` with cProfile (thread CPU clock) toggled by SIGUSR1 (on) and SIGUSR2 (off, dump)."""
    from mcp_hub.cli import main as hub_main

    profile = cProfile.Profile(time.thread_time)

    def start(signum: int, frame: Any) -> None:
        profile.enable()

    def stop(signum: int, frame: Any) -> None:
        profile.disable()
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    hub_main(hub_args)


def package_of(filename: str) -> str:
    if filename == "~":
        return "C builtins"
    for package in PACKAGES:
        if package in filename:
            return package.rstrip("/")
    return "other: " + filename.rsplit("/", 1)[-1]


def summarize_pstats(path: Path, calls: int, top: int = 25, what: str = "tools/call") -> str:
    stats = pstats.Stats(str(path))
    entries: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in entries.values())
    function_calls = sum(nc for (_, nc, _, _, _) in entries.values())
    by_package: collections.Counter[str] = collections.Counter()
    for (filename, _, _), (_, _, tottime, _, _) in entries.items():
        by_package[package_of(filename)] += tottime
    lines = [
        f"{function_calls / calls:,.0f} Python/C function calls per {what} in the hub "
        f"(profiled CPU {total / calls * 1e6:,.0f} us per call, inflated by cProfile)",
        "",
        "self CPU by package:",
    ]
    lines += [f"  {t / total:6.1%}  {name}" for name, t in by_package.most_common(16)]
    lines += ["", f"top functions by self CPU (calls per {what}):"]
    ranked = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:top]
    for (filename, line, name), (_, nc, tottime, _, _) in ranked:
        where = filename.split("site-packages/")[-1] if filename != "~" else ""
        lines.append(f"  {tottime / total:6.1%}  {nc / calls:6.1f}x  {name}  {where}:{line}")
    lines += ["", "inclusive CPU of key entry points (share of hub CPU):"]
    for (filename, _, name), (_, _, _, cumtime, _) in entries.items():
        key = f"{filename.split('site-packages/')[-1]}:{name}"
        if any(k in key for k in KEY_FUNCTIONS):
            lines.append(f"  {cumtime / total:6.1%}  {key}")
    return "\n".join(lines)


KEY_FUNCTIONS = (
    "mcp_hub/upstream/http.py:request",
    "mcp_hub/upstream/stdio.py:request",
    "mcp/client/streamable_http.py:_handle_post_request",
    "mcp/client/streamable_http.py:_handle_sse_response",
    "mcp/shared/_httpx_utils.py:stream_within_origin",
    "httpcore2/_async/connection.py:_connect",
    "uvicorn/protocols/http/h11_impl.py:run_asgi",
    "uvicorn/protocols/http/h11_impl.py:data_received",
    "mcp/server/streamable_http.py:_handle_post_request",
    "sse_starlette/sse.py:__call__",
    "mcp/server/runner.py:_on_request",
    "mcp_hub/server/endpoint.py:serve_call",
    "mcp_hub/server/lane.py:serve",
    "mcp_hub/chain/router.py:call",
    "mcp_hub/upstream/supervisor.py:request",
    "mcp/client/session.py:send_request",
    "mcp/shared/jsonrpc_dispatcher.py:_dispatch",
    "asyncio/base_events.py:_run_once",
)


# -- py-spy ----------------------------------------------------------------------


def py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen(
        [exe, "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "--output", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def frame_path(frame: str) -> str:
    return frame.rpartition(" (")[2].rstrip(")").rsplit(":", 1)[0]


def short(frame: str) -> str:
    name, _, where = frame.rpartition(" (")
    return f"{name} ({where.rstrip(')').rsplit(':', 1)[0].split('site-packages/')[-1]})"


def layer_of(frames: list[str]) -> str:
    handles = [i for i, f in enumerate(frames) if f.startswith("Handle._run ")]
    if not handles and any(f.startswith("BaseEventLoop._run_once ") for f in frames):
        return "event loop: select() and scheduling"
    for frame in reversed(frames[handles[-1] + 1 :] if handles else frames):
        path = frame_path(frame)
        for layer, markers in LAYERS:
            if any(marker in path for marker in markers):
                return layer
    return "asyncio/anyio: I/O callbacks, task steps, sockets"


def summarize_folded(folded: Path, top: int = 20) -> str:
    """The hub's on-CPU samples by layer (with each layer's top leaf functions), and the top self functions."""
    by_layer: collections.Counter[str] = collections.Counter()
    leaves: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in folded.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        count, frames = int(count_text), stack.split(";")
        total += count
        layer = layer_of(frames)
        by_layer[layer] += count
        leaves[layer][short(frames[-1])] += count
        own[short(frames[-1])] += count
    lines = [f"{total} on-CPU samples of the hub", "", "by layer (share of hub samples):"]
    for layer, n in by_layer.most_common():
        lines.append(f"  {n / total:6.1%}  {layer}")
        lines += [f"            {m / total:5.1%}  {leaf}" for leaf, m in leaves[layer].most_common(4)]
    lines += ["", "top self functions:"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in own.most_common(top)]
    return "\n".join(lines)


def stop_py_spy(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


# -- the run ---------------------------------------------------------------------


class LaunchedProcess:
    """A process the client launched (`--client-stdio`), by pid: what `run` needs of a `Popen`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)


def user_sys(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


async def run(
    profiler: str,
    calls: int,
    mode: str,
    hub_protocol: str,
    out: Path,
    args: dict[str, Any],
    listing: Listing | None = None,
    stdio: bool = False,
    client_stdio: bool = False,
    imported: bool = False,
) -> None:
    work = out  # the hub's config and the processes' log stay beside the profile
    upstream_port, hub_port = bench.free_port(), bench.free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    servers = {"up": {"url": upstream_url, "protocol": hub_protocol}}
    if stdio:  # the hub's child instead (the HTTP fixture then runs idle)
        servers = {"up": bench.fixture_server("up", protocol=hub_protocol)}
    if imported:  # the mount as `mcp-hub import` writes it: policy, guardrails, pins and the audit file on
        import default_path

        fresh = work / "imported"  # (the last run's hub.toml would be imported into: it names `up` already)
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir()
        config = default_path.imported_config(bench.ROOT, upstream_url, fresh, "fixture")
    elif listing is None:
        config = bench.hub_config(work / "hub.toml", servers)
    else:
        config = bench.write_config(work / "hub.toml", servers, log_level="warning", **listing.hub_settings())
    upstream = [sys.executable, bench.FIXTURE_HTTP, "--port", str(upstream_port)]
    if listing is not None:
        upstream += ["--tools", str(listing.tools - bench.fixture_base_tools())]
    transport = ["--transport", "stdio"] if client_stdio else ["--transport", "http", "--port", str(hub_port)]
    hub_args = ["serve", "--config", str(config), *transport]
    hub_command = bench.hub_command(config, "stdio") if client_stdio else bench.hub_command(config, "http", hub_port)
    if profiler == "cprofile":
        hub_command = [sys.executable, __file__, "--serve-profiled", str(out / "hub.pstats"), *hub_args]
    with (
        open(work / "processes.log", "wb") as log,
        open(work / "hub-stderr.log", "w") as errlog,
        bench.running(upstream, log),
        contextlib.nullcontext() if client_stdio else bench.running(hub_command, log) as launched,
    ):
        async with AsyncExitStack() as stack:
            if client_stdio:
                side = await stack.enter_async_context(bench.stdio_side("hub", hub_command, mode, 1, "up_", errlog))
                client, hub = side.clients[0], LaunchedProcess(side.pids["hub"])
            else:
                assert launched is not None
                client, hub = await bench.enter_http(stack, f"http://127.0.0.1:{hub_port}/mcp", mode), launched
            await bench.wait_for_tool(client, "up_echo")
            tool = "up_big" if args else "up_echo"
            if listing is not None:
                await bench.list_latencies(client, 10, listing.tools)
            else:
                await bench.latencies(client, tool, args or bench.ECHO_ARGS, 20 if args else 200, 60)
            plain = await measure_cpu(client, hub.pid, tool, args, calls, listing)
            what = "tools/list" if listing is not None else "calls"
            print(f"{calls} {what}, client {mode}, hub->upstream {hub_protocol}, unprofiled: {plain}")
            spy = py_spy(hub.pid, out / "hub.folded") if profiler == "py-spy" else None
            if profiler == "cprofile":
                hub.send_signal(signal.SIGUSR1)
            await anyio.sleep(1.0)
            try:
                print(f"profiled: {await measure_cpu(client, hub.pid, tool, args, calls, listing)}")
            finally:
                if spy is not None:
                    stop_py_spy(spy)
                if profiler == "cprofile":
                    hub.send_signal(signal.SIGUSR2)
                    await anyio.sleep(2.0)  # the hub writes the stats file
    print()
    if profiler == "cprofile":
        print(summarize_pstats(out / "hub.pstats", calls, what="tools/list" if listing is not None else "tools/call"))
    else:
        print(summarize_folded(out / "hub.folded"))


@dataclass(frozen=True)
class Listing:
    """`--list`: profile whole tools/list runs over an upstream serving `tools` tools."""

    tools: int
    page_size: int | None
    """The hub's `page_size`; None: the hub's default."""

    def hub_settings(self) -> dict[str, Any]:
        return {} if self.page_size is None else {"page_size": self.page_size}


async def measure_cpu(
    client: Any, pid: int, tool: str, args: dict[str, Any], calls: int, listing: Listing | None = None
) -> str:
    user, system = user_sys(pid)
    if listing is not None:
        samples = await bench.list_latencies(client, calls, listing.tools)
    else:
        samples = await bench.latencies(client, tool, args or bench.ECHO_ARGS, calls, 600)
    user2, system2 = user_sys(pid)
    n = len(samples)
    return (
        f"p50 {bench.percentile(samples, 0.5) * 1e3:.2f} ms; hub CPU per call {(user2 - user) / n * 1e6:,.0f} us user "
        f"+ {(system2 - system) / n * 1e6:,.0f} us system"
    )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve-profiled":
        serve_profiled(Path(sys.argv[2]), sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description="Profile the hub on the tools/call path (concurrency 1, HTTP).")
    parser.add_argument("--profiler", choices=["cprofile", "py-spy"], default="cprofile")
    parser.add_argument("--calls", type=int, help="calls (tools/list runs with --list) to profile: 2000 (200)")
    parser.add_argument("--mode", default=bench.LEGACY, choices=[bench.LEGACY, bench.MODERN])
    parser.add_argument("--hub-protocol", choices=[bench.LEGACY, bench.MODERN, "auto"])
    parser.add_argument("--big", action="store_true", help="call `big` (1 MB result) instead of `echo`")
    parser.add_argument("--stdio", action="store_true", help="mount the fixture as the hub's stdio child, not HTTP")
    parser.add_argument(
        "--client-stdio", action="store_true", help="with --stdio: the client launches the hub and speaks stdio to it"
    )
    parser.add_argument(
        "--list", type=int, metavar="TOOLS", help="profile whole tools/list runs of an upstream with TOOLS tools"
    )
    parser.add_argument("--page-size", type=int, help="with --list: the hub's page_size (default: the hub's default)")
    parser.add_argument(
        "--imported",
        action="store_true",
        help="the hub.toml `mcp-hub import` writes for the upstream's url (every default protection on)",
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "mcp-hub-profile")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    big = {"size": bench.BIG_SIZE} if args.big else {}
    listing = Listing(args.list, args.page_size) if args.list is not None else None
    calls = args.calls or (2000 if listing is None else 200)
    protocol = args.hub_protocol or args.mode
    if args.client_stdio and not args.stdio:
        parser.error("--client-stdio needs --stdio")
    if args.imported and (args.stdio or listing is not None):
        parser.error("--imported profiles tools/call over HTTP: not with --stdio or --list")
    where = (args.stdio, args.client_stdio, args.imported)
    anyio.run(run, args.profiler, calls, args.mode, protocol, args.out, big, listing, *where)


if __name__ == "__main__":
    main()
