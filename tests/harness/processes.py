"""Looking at the processes a hub starts: whether one is alive, and which a server runs as."""

from __future__ import annotations

import os

from mcp import Client


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead but not yet reaped by its parent; the hub is that parent.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def pid_of(client: Client, tool: str) -> int:
    result = await client.call_tool(tool, {})
    return int(result.content[0].text)  # type: ignore[union-attr]
