"""FastMCP's proxy in the hub's place, for `bench.py --fastmcp PYTHON` (run with a Python that has fastmcp).

    python benchmarks/fastmcp_proxy.py SESSIONS MODE stdio SERVERS_JSON
    python benchmarks/fastmcp_proxy.py SESSIONS MODE http PORT SERVERS_JSON

SERVERS_JSON is an `mcpServers` object (`{"up": {"url": ...}}` or `{"up": {"command": ..., "args": [...]}}`),
served as FastMCP serves it, over stdio or streamable HTTP at `/mcp` on PORT. SESSIONS is how the
proxy holds its upstream sessions, the two ways FastMCP offers, and MODE the era it speaks to the
upstream (`legacy` or `2026-07-28`, as the hub's `protocol` in the same run):

- `fresh`: `create_proxy(config)`, FastMCP's recommended way; a new upstream session per request;
- `shared`: `create_proxy(client)` with a connected client, one upstream session for all requests.

FastMCP's version is pinned in `fastmcp-requirements.txt`; its own logging is set to warnings.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("FASTMCP_LOG_LEVEL", "WARNING")

import anyio
from fastmcp import Client  # pyright: ignore[reportMissingImports]
from fastmcp.server import create_proxy  # pyright: ignore[reportMissingImports]


async def serve(sessions: str, mode: str, transport: str, port: int | None, servers: dict[str, object]) -> None:
    config = {"mcpServers": servers}
    run = {"transport": "stdio"} if transport == "stdio" else {"transport": "http", "host": "127.0.0.1", "port": port}
    if sessions == "fresh":
        await create_proxy(config, mode=mode).run_async(show_banner=False, **run)
        return
    async with Client(config, mode=mode) as client:
        await create_proxy(client).run_async(show_banner=False, **run)


def main(argv: list[str]) -> None:
    sessions, mode, transport, *rest = argv
    if sessions not in ("fresh", "shared") or transport not in ("stdio", "http"):
        raise SystemExit(__doc__)
    port = int(rest.pop(0)) if transport == "http" else None
    (servers,) = rest
    anyio.run(serve, sessions, mode, transport, port, json.loads(servers))


if __name__ == "__main__":
    main(sys.argv[1:])
