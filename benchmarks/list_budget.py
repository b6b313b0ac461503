"""Tool lists within a budget on the real corpus: sizes, the cost of shortening, and of a repeated tools/list.

    python benchmarks/list_budget.py [--repeats 50]

The 112 tools of tests/data/tool_corpus.json, served by an SDK low-level server over streamable HTTP and mounted
in a hub (tests/test_list_budget.py's `corpus_hub`): its curated endpoints `roomy` (max_list_tokens 20,000),
`small` (14,000), `tiny` (10,000) and `whole` (none) are listed by SDK clients in-process. Prints a Markdown table
of the list's size in tokens at each cap (counted as the hub counts, results/listing.py), how long `fit` takes
(median of `--repeats`), and the time of an endpoint's first tools/list (where the shortening happens) and of a
repeated one (median).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_hub.results.listing import fit, list_size  # noqa: E402
from mcp_hub.results.tokens import tokens  # noqa: E402
from tests.test_list_budget import ENDPOINTS, corpus_hub  # noqa: E402

CAPS = (None, 20_000, 16_000, 14_000, 10_000)


async def main(repeats: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        async with corpus_hub(Path(folder), {"max_result_tokens": 0}) as hub:
            items = hub.catalog.view("tools").items
            print(f"counter: {tokens().name}; {len(items)} tools\n")
            print("| cap | size (tokens) | fits | tools with the marker | fit() median |")
            print("|---|---:|---|---:|---:|")
            for cap in CAPS:
                if cap is None:
                    print(f"| none | {list_size(items)} | yes | 0 | - |")
                    continue
                times = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    fitted = fit(items, cap)
                    times.append(time.perf_counter() - started)
                marked = sum("[shortened by mcp-hub]" in tool.get("description", "") for tool in fitted.items)
                fits = "yes" if fitted.fits else "no (smallest)"
                print(f"| {cap:,} | {fitted.after} | {fits} | {marked} | {statistics.median(times) * 1000:.1f} ms |")
            print("\n| endpoint | cap | first tools/list | repeated tools/list (median) |")
            print("|---|---|---:|---:|")
            for name, cap in ENDPOINTS.items():
                async with Client(hub.endpoints[name].server, mode="2026-07-28", cache=None) as client:
                    started = time.perf_counter()
                    await client.list_tools()
                    first = time.perf_counter() - started
                    again = []
                    for _ in range(repeats):
                        started = time.perf_counter()
                        await client.list_tools()
                        again.append(time.perf_counter() - started)
                shown = "none" if cap is None else f"{cap:,}"
                print(f"| {name} | {shown} | {first * 1000:.1f} ms | {statistics.median(again) * 1000:.2f} ms |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    anyio.run(main, parser.parse_args().repeats)
