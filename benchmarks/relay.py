"""A byte relay: one Python hop that passes MCP traffic through untouched, the floor of any hop.

    python benchmarks/relay.py stdio COMMAND [ARG ...]   # a stdio child, its lines passed both ways
    python benchmarks/relay.py http PORT URL             # HTTP on PORT, each request passed to URL

It reads nothing of what it passes: no parsing, no routing, no policy. It runs on
the hub's own stack (uvloop; uvicorn with httptools and an aiohttp client for
HTTP), so what a call costs through it, against the same call made directly, is
what one Python process in the path costs on this machine before it does any
work. `bench.py` measures it beside the hub.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import aiohttp
import uvicorn
import uvloop

_LIMIT = 1 << 27
"""Longest line passed over stdio (128 MiB)."""

_HOP_BY_HOP = frozenset({"host", "content-length", "connection", "transfer-encoding", "keep-alive", "date", "server"})


async def stdio(command: list[str]) -> None:
    loop = asyncio.get_running_loop()
    child = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=_LIMIT
    )
    assert child.stdin is not None and child.stdout is not None
    reader = asyncio.StreamReader(limit=_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout.buffer)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def up() -> None:
        assert child.stdin is not None
        while line := await reader.readline():
            child.stdin.write(line)
            await child.stdin.drain()
        child.stdin.close()

    async def down() -> None:
        assert child.stdout is not None
        while line := await child.stdout.readline():
            writer.write(line)
            await writer.drain()

    await asyncio.gather(up(), down())
    await child.wait()


class HttpRelay:
    """An ASGI app passing every request to `url` and streaming its response back."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._client: aiohttp.ClientSession | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            if self._client is not None:
                await self._client.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if self._client is None:
            self._client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False)
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"] if k.decode() not in _HOP_BY_HOP}
        async with self._client.request(scope["method"], self._url, data=bytes(body) or None, headers=headers) as r:
            passed = [(k.encode(), v.encode()) for k, v in r.headers.items() if k.lower() not in _HOP_BY_HOP]
            await send({"type": "http.response.start", "status": r.status, "headers": passed})
            async for chunk in r.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[0] == "stdio":
        uvloop.run(stdio(argv[1:]))
    elif len(argv) == 3 and argv[0] == "http":
        uvicorn.run(
            HttpRelay(argv[2]),
            host="127.0.0.1",
            port=int(argv[1]),
            loop="uvloop",
            http="httptools",
            log_level="warning",
            access_log=False,
        )
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
