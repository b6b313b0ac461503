"""The catalog's cost as mounts arrive one by one, as a hub of many servers starts: in-process, no I/O.

    python benchmarks/catalog_build.py [--mounts 20,50,100] [--tools 50,100] [--rounds 3]

Each of M mounts lists T tools (the real tool definitions of `tests/data/tool_corpus.json`, cycled, under
distinct names), two prompts and two resources, and their listings reach `Catalog.update` one mount at a
time, as the servers of a starting hub answer. Printed per (M, T): the CPU of all M arrivals together, and
of the last one (the arrival that finds the catalog fullest; it runs on the hub's event loop, so it is also
how long every other request waits behind it). The median of `--rounds` rounds.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_hub.catalog.catalog import Catalog  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "tool_corpus.json"


def corpus_tools() -> list[dict[str, Any]]:
    servers = json.loads(CORPUS.read_text(encoding="utf-8"))["servers"]
    return [tool for server in servers.values() for tool in server["tools"]]


def listings(mount: int, tools: int, corpus: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """One server's listings: `tools` corpus tools under names of their own, and a few prompts and resources."""
    listed = []
    for position in range(tools):
        tool = copy.deepcopy(corpus[(mount * tools + position) % len(corpus)])
        tool["name"] = f"{tool['name']}_{position}"
        listed.append(tool)
    return {
        "tools": listed,
        "prompts": [{"name": f"prompt_{n}", "description": "a prompt"} for n in range(2)],
        "resources": [{"uri": f"file:///srv/{mount}/{n}.txt", "name": f"file {n}"} for n in range(2)],
    }


def arrivals(mounts: int, tools: int, corpus: list[dict[str, Any]]) -> tuple[float, float]:
    """CPU seconds of every mount's arrival together, and of the last one."""
    names = [f"server-{m}" for m in range(mounts)]
    listed = [listings(m, tools, corpus) for m in range(mounts)]
    catalog = Catalog(names)
    started = time.process_time()
    last = 0.0
    for name, listing in zip(names, listed, strict=True):
        before = time.process_time()
        catalog.update(name, listing)
        last = time.process_time() - before
    assert len(catalog.view("tools").items) == mounts * tools
    return time.process_time() - started, last


def main() -> None:
    parser = argparse.ArgumentParser(description="The catalog's cost as mounts arrive one by one.")
    parser.add_argument("--mounts", default="20,50,100")
    parser.add_argument("--tools", default="50,100")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    corpus = corpus_tools()
    print("| mounts x tools | every arrival, CPU | the last arrival, CPU |")
    print("|---|---|---|")
    for tools in (int(t) for t in args.tools.split(",")):
        for mounts in (int(m) for m in args.mounts.split(",")):
            runs = [arrivals(mounts, tools, corpus) for _ in range(args.rounds)]
            total = statistics.median(run[0] for run in runs)
            last = statistics.median(run[1] for run in runs)
            print(f"| {mounts} x {tools} | {total * 1e3:,.0f} ms | {last * 1e3:,.1f} ms |")


if __name__ == "__main__":
    main()
