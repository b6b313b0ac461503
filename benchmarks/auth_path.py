"""What a client's authentication costs the hub per call: an API key, against an OAuth access token (a JWT).

    python benchmarks/auth_path.py [--rounds N] [--calls N] [--out FILE]

One hub (`mcp-hub serve --transport http`, this checkout) in front of the
benchmark's fixture server over streamable HTTP (fixture_http.py) takes API
keys and the access tokens of an authorization server served by this process
(tests/servers/authorization.py: RFC 8414 metadata and a key set with an RSA
and an EC key). Three 2026-07-28 SDK clients call `echo` through it in the same
interleaved rounds: one with an API key, one with an RS256 JWT, one with an
ES256 JWT, each sending its one token with every request, as a client does
until the token expires. Printed per client: the p50 and the hub's CPU per call
(/proc, summed over the rounds), each against the API key's.

A hub checks a JWT's signature once and keeps the token until it expires
(mcp_hub/auth/jwt.py); before, it checked it on every request, about 130 us of
CPU for RS256 and 250 us for ES256 on this benchmark's 2-core VM.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench

from tests.servers.authorization import AuthorizationServer

API_KEY = "k" * 32


def hub_config(path: Path, upstream: str, issuer: str, resource: str) -> Path:
    path.write_text(
        f'[servers.up]\nurl = "{upstream}"\n\n[auth]\napi_keys = {{ bench = "{API_KEY}" }}\n\n'
        f'[auth.oauth]\nissuer = "{issuer}"\nresource = "{resource}"\n',
        encoding="utf-8",
    )
    return path


async def client_with(stack: AsyncExitStack, url: str, bearer: str) -> Client:
    http = await stack.enter_async_context(
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=httpx2.Timeout(30.0, read=300.0))
    )
    transport = streamable_http_client(url, http_client=http)
    return await stack.enter_async_context(Client(transport, mode=bench.MODERN, cache=None))


async def run(rounds: int, calls: int, work: Path) -> str:
    meter = bench.LoadMeter()
    issuer_port, upstream_port, hub_port = bench.free_port(), bench.free_port(), bench.free_port()
    issuer = AuthorizationServer(f"http://127.0.0.1:{issuer_port}")
    resource = f"http://127.0.0.1:{hub_port}/mcp"
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    config = hub_config(work / "hub.toml", upstream, issuer.issuer, resource)
    issuer_server = uvicorn.Server(uvicorn.Config(issuer.app(), port=issuer_port, log_level="warning"))
    tokens = {
        "API key": API_KEY,
        "JWT, RS256": issuer.mint(resource, exp=int(time.time()) + 3600),
        "JWT, ES256": issuer.mint(resource, key=issuer.ec, alg="ES256", exp=int(time.time()) + 3600),
    }
    with (
        open(work / "processes.log", "wb") as log,
        bench.running([sys.executable, bench.FIXTURE_HTTP, "--port", str(upstream_port)], log),
    ):
        async with anyio.create_task_group() as tg:
            tg.start_soon(issuer_server.serve)
            await bench.wait_listening(issuer_port)
            await bench.wait_listening(upstream_port)
            with bench.running(bench.hub_command(config, "http", hub_port), log) as hub:
                await bench.wait_listening(hub_port)
                async with AsyncExitStack() as stack:
                    sides = [
                        bench.Side(label, [await client_with(stack, resource, token)], "up_", {"hub": hub.pid})
                        for label, token in tokens.items()
                    ]
                    for side in sides:
                        await bench.wait_for_tool(side.client, side.tool("echo"))
                        await bench.latencies(side.client, side.tool("echo"), bench.ECHO_ARGS, 50, 60.0)
                    bench.step("warmed up")
                    p50s: dict[str, list[float]] = {side.label: [] for side in sides}
                    cpu = {side.label: bench.CpuTally(side) for side in sides}
                    for round_ in range(rounds):
                        start = round_ % len(sides)
                        for side in sides[start:] + sides[:start]:
                            block = bench.latencies(side.client, side.tool("echo"), bench.ECHO_ARGS, calls, 60.0)
                            p50s[side.label].append(bench.percentile(await cpu[side.label].measure(block), 0.5))
                        bench.step(f"round {round_ + 1}/{rounds} done")
            issuer_server.should_exit = True
    key_p50 = statistics.median(p50s["API key"])
    key_cpu = cpu["API key"].per_call_us()[0]["hub"]
    lines = [
        bench.machine(),
        "",
        f"{rounds} interleaved rounds of {calls} sequential `tools/call echo` a client (2026-07-28), one hub.",
        meter.summary(),
        "",
        "| client's credential | p50 ms | vs API key | hub CPU/call | vs API key |",
        "|---|---:|---:|---:|---:|",
    ]
    for label in tokens:
        p50 = statistics.median(p50s[label])
        hub_cpu = cpu[label].per_call_us()[0]["hub"]
        lines.append(
            f"| {label} | {p50 * 1e3:.3f} | {p50 / key_p50:.2f}x | {hub_cpu:.0f} us | {hub_cpu - key_cpu:+.0f} us |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the hub's catalog snapshot: not the user's
        report = anyio.run(run, args.rounds, args.calls, Path(tmp))
    print(report)
    if args.out is not None:
        args.out.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
