"""Guardrails' cost per call: the hub with guards on against the same hub with guards off, in the same rounds.

    python benchmarks/guardrails.py [--era legacy|2026-07-28] [--rounds N] [--calls N]

Two hubs over stdio (`python -m mcp_hub serve`), each in front of its own tests/servers/leaky.py: one with
a policy and no guards, one whose policy redacts everything every detector finds in arguments and results
(`detect = ["all"]`, `action = "redact"`, `on = "both"`). The sides take turns, `--calls` sequential
`tools/call log` each per round, for a 1 KB and a 1 MB result of ordinary log lines (nothing to find:
the cost of looking). Printed per size and side: the median over rounds of the p50, and the hub's CPU per
call (from /proc, the mean over rounds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench

LEAKY = str(bench.ROOT / "tests" / "servers" / "leaky.py")
POLICY = '[principals]\n"*" = "all"\n\n[profiles.all]\ndefault = "allow"\n'
GUARDS = '\n[[profiles.all.guards]]\ndetect = ["all"]\naction = "redact"\non = "both"\n'
SIZES = {"1 KB": 1_000, "1 MB": 1_000_000}


def hub_config(work: Path, name: str, guards: bool, mode: str) -> Path:
    policies = work / f"{name}-policies"
    policies.mkdir()
    (policies / "policy.toml").write_text(POLICY + (GUARDS if guards else ""), encoding="utf-8")
    leaky = {"command": sys.executable, "args": [LEAKY], "protocol": mode}
    config = bench.hub_config(work / f"{name}.toml", {"leaky": leaky})
    with config.open("a", encoding="utf-8") as file:
        file.write(f'\n[policy]\ndir = "{policies}"\nreload = false\n')
    return config


async def run(mode: str, rounds: int, calls: int, work: Path) -> None:
    with open(work / "stderr.log", "w") as errlog:
        async with AsyncExitStack() as stack:
            sides = []
            for label, guards in (("guards off", False), ("guards on", True)):
                command = bench.hub_command(hub_config(work, label.replace(" ", "-"), guards, mode))
                side = bench.stdio_side(label, command, mode, 1, "leaky_", errlog)
                sides.append(await stack.enter_async_context(side))
            print(f"{rounds} rounds per size, {mode} client and upstream; tools/call log (ordinary log lines)")
            await bench.by_size(sides, "log", SIZES, rounds, calls, "guards off")


def main() -> None:
    parser = argparse.ArgumentParser(description="Guardrails on against off, per call, for 1 KB and 1 MB results.")
    parser.add_argument("--era", default=bench.LEGACY, choices=[bench.LEGACY, bench.MODERN])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-hub-guardrails-") as tmp:
        anyio.run(run, args.era, args.rounds, args.calls, Path(tmp))


if __name__ == "__main__":
    main()
