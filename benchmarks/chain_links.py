"""The middle of a tool call alone: the hub's chain links as `mcp-hub import` configures them, each link's CPU.

    python benchmarks/chain_links.py [CHECKOUT ...] [--calls N] [--rounds N]

For each CHECKOUT (default: this one), in a process of its own run with that checkout's `mcp_hub` first on the
path: `mcp-hub import` writes hub.toml for an `mcpServers` entry with just a `url` (the shipped policies with their
`secrets-in-results` guard, pins, the audit file, in a temporary state folder), a `Hub` is built from it (not
started: no server is connected), its audit log is started, and its chain links (`Hub.links`: audit, policy,
result budget, guardrails, cache) are composed over a terminal that answers the tests' fixture's `echo` result at
once, as the router would hand it back. `--calls` calls of `up_echo` by the anonymous local HTTP principal go
through each link alone and through all of them, and the main thread's CPU per call (`time.thread_time`) is
printed, the terminal's own cost included in each figure (printed first). The checkouts take turns `--rounds`
times.

What this leaves out: the HTTP doors, the SDK's dispatch and the upstream leg (`profile_hub.py` profiles the
whole hub), and the audit writer thread's CPU. CPU per call is robust to other load; a busy machine still
moves it by some percent, so compare checkouts in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def echo_result() -> dict[str, Any]:
    """What the fixture's `echo` answers `{"text": "hello"}` on a mount named `up` (tests/servers/fixture.py), made
    anew as each upstream answer is."""
    return {
        "content": [{"type": "text", "text": "up: hello", "annotations": {"priority": 0.5}}],
        "structuredContent": {"text": "hello", "server": "up"},
        "_meta": {"example.com/served-by": "up"},
    }


def measure(work: Path, calls: int) -> list[tuple[str, float]]:
    """In this process (its `mcp_hub` the checkout's): (links, main-thread CPU us per call) for the terminal alone,
    each link alone, and the whole chain."""
    import anyio

    os.environ["XDG_STATE_HOME"] = str(work / "state")
    source = work / "mcp.json"
    source.write_text(json.dumps({"mcpServers": {"up": {"url": "http://127.0.0.1:9/mcp"}}}), encoding="utf-8")
    command = [sys.executable, "-m", "mcp_hub", "import", str(source), "--output", str(work / "hub.toml")]
    subprocess.run(command, check=True, capture_output=True)

    from mcp_hub.chain.context import CallContext, compose
    from mcp_hub.config import load_config
    from mcp_hub.hub import Hub

    hub = Hub(load_config(work / "hub.toml"))
    hub.audit.start()

    async def terminal(ctx: CallContext) -> dict[str, Any]:
        return echo_result()

    def context() -> CallContext:
        return CallContext(
            method="tools/call",
            kind="tool",
            mount="up",
            native="echo",
            public="up_echo",
            params={"name": "echo", "arguments": {"text": "hello"}},
            principal="anonymous",
            session="bench",
            origin=object(),  # type: ignore[arg-type]  # (no call here asks the client anything)
            address="127.0.0.1:40000",
        )

    async def run() -> list[tuple[str, float]]:
        out = []
        for links in [(), *[(link,) for link in hub.links], hub.links]:
            call = compose(links, terminal)
            for _ in range(min(calls, 2000)):  # warm: the policy's and the detectors' memories filled
                await call(context())
            started = time.thread_time()
            for _ in range(calls):
                await call(context())
            spent = time.thread_time() - started
            out.append(("+".join(type(link).__name__ for link in links) or "terminal", spent / calls * 1e6))
        return out

    try:
        return anyio.run(run)
    finally:
        hub.audit.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="The hub's chain links as `mcp-hub import` configures them.")
    parser.add_argument("checkouts", nargs="*", type=Path, default=[ROOT])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # (the child process's own run)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.calls)))
        return
    print(f"load average at the start: {os.getloadavg()}")
    for round_ in range(1, args.rounds + 1):
        for checkout in args.checkouts:
            checkout = checkout.resolve()
            with tempfile.TemporaryDirectory(prefix="mcp-hub-chain-") as work:
                env = {**os.environ, "PYTHONPATH": str(checkout)}
                command = [sys.executable, __file__, "--calls", str(args.calls), "--measure", work]
                done = subprocess.run(command, cwd=checkout, env=env, check=True, capture_output=True, text=True)
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            shown = "; ".join(f"{name} {us:.1f}" for name, us in figures)
            print(f"round {round_}, {checkout}: main-thread CPU us per call: {shown}")
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
