"""Serve the tests' fixture MCP server over streamable HTTP in its own process.

    python benchmarks/fixture_http.py --port 9001 [--name up] [--tools N]

The benchmark's HTTP upstream: the same `tests/servers/fixture.py` server the
stdio comparisons launch, behind the SDK's own `streamable_http_app()` (the
same session manager defaults the hub's endpoint uses) and uvicorn at log
level `warning`, exactly as the hub is configured in the benchmark.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import uvicorn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers.fixture import build_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the fixture MCP server over streamable HTTP.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="up")
    parser.add_argument("--tools", type=int, default=0, help="extra generated tools")
    opts = parser.parse_args()
    app = build_server(opts.name, opts.tools).streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=opts.port, log_level="warning")


if __name__ == "__main__":
    main()
