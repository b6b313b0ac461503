"""What a new configuration starts from: the shipped policy folder (`policies/` of the source tree, packaged
here), which `mcp-hub import` writes beside a hub.toml it creates.

The policies give the local user (stdio) and HTTP clients without a key on a loopback address every tool, with
a confirmation before destructive ones and secrets redacted from results; tool pinning and the audit log are
turned on by the hub.toml that names them (see `NEW_CONFIG` in mcp_hub/importer.py).
"""

from __future__ import annotations

import shutil
from importlib.resources import files
from pathlib import Path


def policy_files() -> dict[str, str]:
    """The shipped policy files, by name."""
    folder = files(__name__) / "policies"
    return {item.name: item.read_text(encoding="utf-8") for item in folder.iterdir() if item.name.endswith(".toml")}


def write_policies(folder: Path) -> bool:
    """Write the shipped policy files into `folder` unless it exists already (True: written)."""
    if folder.exists():
        return False
    temporary = folder.with_name(f".{folder.name}.new")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    for name, text in sorted(policy_files().items()):
        (temporary / name).write_text(text, encoding="utf-8")
    temporary.rename(folder)
    return True
