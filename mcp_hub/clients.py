"""Where MCP clients keep the MCP servers they run, per platform: the files `mcp-hub init --from` imports."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

CLIENTS = {
    "claude": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "vscode": "VS Code",
    "windsurf": "Windsurf",
}
"""The MCP clients whose config files `client_config_files` knows, by the name `mcp-hub init --from` takes."""


def client_config_files(
    client: str,
    *,
    home: Path,
    cwd: Path,
    platform: str = sys.platform,
    environ: Mapping[str, str] = os.environ,
) -> list[Path]:
    """Where `client` (a key of `CLIENTS`) keeps its MCP servers on `platform` (`sys.platform`), for the user
    whose home folder is `home`, working in `cwd`; the project's own file first, as the clients let it win a
    name over the user's. The files may not exist.

    - Claude Desktop: `claude_desktop_config.json` in its folder of the platform's application data
      (`~/Library/Application Support/Claude` on macOS, `%APPDATA%\\Claude` on Windows, `~/.config/Claude`
      on Linux, where the unofficial builds keep it);
    - Claude Code: `.mcp.json` in `cwd` (project scope), then `~/.claude.json` (user scope: its top-level
      `mcpServers`; the local scope, under `projects`, is not read);
    - Cursor: `.cursor/mcp.json` in `cwd`, then `~/.cursor/mcp.json`;
    - VS Code: `.vscode/mcp.json` in `cwd`, then the user's `mcp.json`, then the user's `settings.json`
      (`"mcp": {"servers": ...}`, before VS Code 1.102), in `Code/User` of the application data;
    - Windsurf: `~/.codeium/windsurf/mcp_config.json`.
    """
    if platform == "darwin":
        app_data = home / "Library" / "Application Support"
    elif platform == "win32":
        app_data = Path(environ.get("APPDATA") or home / "AppData" / "Roaming")
    else:  # Linux and the other Unixes: the XDG config folder, as Electron apps use it
        app_data = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    if client == "claude":
        return [app_data / "Claude" / "claude_desktop_config.json"]
    if client == "claude-code":
        return [cwd / ".mcp.json", Path(environ.get("CLAUDE_CONFIG_DIR") or home) / ".claude.json"]
    if client == "cursor":
        return [cwd / ".cursor" / "mcp.json", home / ".cursor" / "mcp.json"]
    if client == "vscode":
        user = app_data / "Code" / "User"
        return [cwd / ".vscode" / "mcp.json", user / "mcp.json", user / "settings.json"]
    if client == "windsurf":
        return [home / ".codeium" / "windsurf" / "mcp_config.json"]
    raise ValueError(f"unknown MCP client {client!r}; one of {', '.join(CLIENTS)}")
