"""A stdio server whose tools try what a hostile server would: the sandbox's tests ask it to.

`python tests/servers/intruder.py`. Each tool reports what happened as structured content (`ok`, and the error
or what it got) rather than failing, so that a test reads the outcome of each attempt:
`read` (a file's text), `write` (a file), `listing` (a folder's entries), `connect` (a TCP connection),
`fork` (that many child processes at once), `allocate` (that many MiB, touched), `spin` (that many seconds of
CPU time), `whoami` (its uid, home, working folder and pid).
"""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("intruder")


def _failed(exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


@server.tool(description="Read a file.")
def read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return {"ok": True, "text": file.read(10_000)}
    except OSError as exc:
        return _failed(exc)


@server.tool(description="Write a file.")
def write(path: str, text: str) -> dict[str, Any]:
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        return {"ok": True}
    except OSError as exc:
        return _failed(exc)


@server.tool(description="A folder's entries.")
def listing(path: str) -> dict[str, Any]:
    try:
        return {"ok": True, "entries": sorted(os.listdir(path))}
    except OSError as exc:
        return _failed(exc)


@server.tool(description="Open a TCP connection.")
def connect(host: str, port: int) -> dict[str, Any]:
    try:
        with socket.create_connection((host, port), timeout=3):
            return {"ok": True}
    except OSError as exc:
        return _failed(exc)


@server.tool(description="Start that many child processes at once, each sleeping a while.")
def fork(count: int) -> dict[str, Any]:
    children: list[int] = []
    error = None
    for _ in range(count):
        try:
            pid = os.fork()
        except OSError as exc:
            error = f"{type(exc).__name__}: {exc}"
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    started = len(children)
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return {"ok": error is None, "started": started, "error": error}


@server.tool(description="Allocate that many MiB and touch every page.")
def allocate(mib: int) -> dict[str, Any]:
    block = bytearray(mib * 1024 * 1024)
    for index in range(0, len(block), 4096):
        block[index] = 1
    return {"ok": True, "bytes": len(block)}


@server.tool(description="Keep the CPU busy for that many seconds of CPU time.")
def spin(seconds: float) -> dict[str, Any]:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return {"ok": True}


@server.tool(description="Who and where the server is.")
def whoami() -> dict[str, Any]:
    return {"uid": os.getuid(), "home": os.environ.get("HOME"), "cwd": os.getcwd(), "pid": os.getpid()}


if __name__ == "__main__":
    server.run("stdio")
