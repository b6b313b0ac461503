"""Processes in tests: a server started until the line it logs once listening, whether a process the hub
started is alive, and which a server runs as."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import Client

from tests.conftest import wait_for


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


@asynccontextmanager
async def logging_until(
    command: list[str], log: Path, pattern: str, what: str, *, cwd: Path, env: dict[str, str] | None = None
) -> AsyncIterator[re.Match[str]]:
    """Run `command` with its stderr in `log` until a line of it matches `pattern` (within 20 s); yield the match,
    then stop the process (SIGTERM, SIGKILL after 5 s). `what` names the process when it exits first."""
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr
        )
    try:
        found: list[re.Match[str]] = []

        async def listening() -> bool:
            text = log.read_text(encoding="utf-8", errors="replace")
            assert process.poll() is None, f"{what} exited with {process.returncode}:\n{text}"
            found.extend(list(re.finditer(pattern, text, re.MULTILINE))[:1])
            return bool(found)

        await wait_for(listening, timeout=20)
        yield found[0]
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
