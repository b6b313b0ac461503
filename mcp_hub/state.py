"""Files a hub keeps of its own in the user's state folder, one set per hub.toml.

The user's state folder is platformdirs' `user_state_path` (`~/.local/state/mcp-hub` or
`$XDG_STATE_HOME/mcp-hub` on Linux, `~/Library/Application Support/mcp-hub` on macOS,
`%LOCALAPPDATA%\\mcp-hub` on Windows). A hub.toml's file of a kind is `KIND/STEM-HASH.SUFFIX` there:
the config file's name and a hash of its resolved path, so that nothing is written beside the
user's files and two configs never share a file. What lives there: the catalog snapshot
(`catalogs/`), the audit log (`audit/`) and the tool pins (`pins/`), each where hub.toml says `true`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from platformdirs import user_state_path


def state_folder() -> Path:
    """The user's state folder for mcp-hub (not created here)."""
    return user_state_path("mcp-hub", appauthor=False)


def state_file(config_file: str | os.PathLike[str], kind: str, suffix: str) -> Path:
    """The file of `kind` (a folder name: "catalogs", "audit", "pins") kept for the hub.toml at `config_file`
    (not created here)."""
    source = Path(config_file).resolve()
    digest = hashlib.sha256(os.fsencode(source)).hexdigest()[:16]
    return state_folder() / kind / f"{source.stem}-{digest}{suffix}"
