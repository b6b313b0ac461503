"""Where a stdio server's command is found, and what to say when it is found nowhere.

A bare command (`uvx`, `mcp-server-time`) is looked for beside the hub's own interpreter first, then on
PATH: servers installed into the hub's virtualenv (console scripts) are found even when that virtualenv
is not activated, as when Claude Desktop launches the hub by absolute path. A command with a `/` is a path
(relative ones: from the server's `cwd`, else the hub's working folder).

A command found nowhere is `CommandNotFound`, whose message says where it was looked for and, for the
well-known launchers, what installs them. The supervisor does not retry it in a loop (see supervisor.py),
and `mcp-hub check` reports it without connecting.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

_INSTALLED_WITH = {
    "uvx": "uv (https://docs.astral.sh/uv/)",
    "uv": "uv (https://docs.astral.sh/uv/)",
    "npx": "Node.js (https://nodejs.org/)",
    "node": "Node.js (https://nodejs.org/)",
    "npm": "Node.js (https://nodejs.org/)",
    "bunx": "Bun (https://bun.sh/)",
    "bun": "Bun (https://bun.sh/)",
    "deno": "Deno (https://deno.com/)",
    "docker": "Docker (https://docs.docker.com/get-docker/)",
}
"""Launchers that MCP client configs commonly name -> what installs them."""


class CommandNotFound(FileNotFoundError):
    """A stdio server's command is neither beside the hub's Python nor on PATH (or, a path, is not there)."""

    def __init__(self, command: str, cwd: str | None = None) -> None:
        self.command = command
        super().__init__(command_not_found(command, cwd))

    def __str__(self) -> str:
        return str(self.args[0])


def find_command(command: str, cwd: str | None = None) -> str | None:
    """The executable `command` names (beside the hub's interpreter, then on PATH), or None if there is none."""
    if "/" in command:
        path = Path(cwd or ".") / command
        return command if path.is_file() and os.access(path, os.X_OK) else None
    beside = Path(sys.executable).parent / command
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(command)


def command_not_found(command: str, cwd: str | None = None) -> str:
    """Why `command` cannot start, with where it was looked for and what installs it when that is known."""
    if "/" in command:
        where = f" (from {cwd})" if cwd and not command.startswith("/") else ""
        return f"command not found: {command}{where} is not an executable file; fix the command's path"
    beside = Path(sys.executable).parent
    path = os.environ.get("PATH", "")
    looked = f"on PATH ({path})" if path else "on PATH (which is empty)"
    text = f"command not found: {command} is neither beside the hub's Python ({beside}) nor {looked}"
    installer = _INSTALLED_WITH.get(Path(command).name)
    if installer is not None:
        return f"{text}; {command} comes with {installer}: install it, or write the command's full path"
    return f"{text}; install it, or write the command's full path"
