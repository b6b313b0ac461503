"""The `mcp-hub` command as a user runs it, this checkout's, forked from a preloaded process (`hub_command`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import ROOT, hub_command


def mcp_hub(*args: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(hub_command(*args), cwd=cwd, capture_output=True, text=True, timeout=timeout)
