"""Reading the audit log back: its lines newest first, over the rotated files, filtered and paged.

A tool filter takes the tool's public name (`github_create_issue`), as every other page shows it and clients
call it, and finds the lines of that tool on its mount; a name that is no public name is taken as the server's
own name of a tool (`create_issue`), on any mount, as the lines record it.

The log is the file of `[audit] file` and its rotations (`.1`, the newest of them, to `.N`). A page is
found by walking the lines newest first; a line that is not a JSON object (a torn last line, a file
edited by hand) is skipped. The live tail follows the current file from its end (`Tail`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_hub.catalog.catalog import Catalog
from mcp_hub.catalog.naming import split_prefixed

PAGE = 50
"""Lines a page shows."""


Resolve = Callable[[str], tuple[str, str] | None]
"""The mount and the server's own name behind a public tool or prompt name (None: it names none)."""

_FIELDS = ("principal", "mount", "tool", "outcome", "since", "until")
"""The filters a page's query carries."""


@dataclass(frozen=True)
class Filters:
    principal: str = ""
    mount: str = ""
    tool: str = ""
    """A tool's (or prompt's) public name, as the other pages and the clients name it; or, when it is no public
    name, the server's own name of it, on any mount (as the lines record it)."""
    outcome: str = ""
    since: str = ""
    """RFC 3339 (or its leading part, as a browser's datetime-local field gives): lines at or after it."""
    until: str = ""
    target: tuple[str, str] | None = field(default=None, compare=False)
    """What `tool` names when it is a public name: (mount, the server's own name)."""

    @classmethod
    def of(cls, query: Mapping[str, str], resolve: Resolve | None = None) -> Filters:
        values = {name: query.get(name, "").strip() for name in _FIELDS}
        target = resolve(values["tool"]) if resolve is not None and values["tool"] else None
        return cls(**values, target=target)

    def admit(self, event: Mapping[str, Any]) -> bool:
        for key, value in (("principal", self.principal), ("mount", self.mount)):
            if value and str(event.get(key) or "") != value:
                return False
        if self.target is not None:
            if (event.get("mount"), event.get("name")) != self.target:
                return False
        elif self.tool and str(event.get("name") or "") != self.tool:
            return False
        if self.outcome and str(event.get("outcome") or "") != self.outcome:
            return False
        when = str(event.get("time") or "")
        if self.since and when < self.since:
            return False
        return not (self.until and when[: len(self.until)] > self.until)

    def query(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in _FIELDS if getattr(self, name)}


def public_names(catalog: Catalog, mounts: Collection[str]) -> Resolve:
    """How the audit page reads a tool filter: a public name the catalog lists (a tool, else a prompt), or one
    of the shape `MOUNT_NAME` for a mount of the configuration (a tool no longer listed: held, or gone)."""

    def resolve(public: str) -> tuple[str, str] | None:
        for kind in ("tools", "prompts"):
            target = catalog.resolve(kind, public)
            if target is not None:
                return target.mount, target.native
        split = split_prefixed(public)
        return split if split is not None and split[0] in mounts and split[1] else None

    return resolve


def files(path: Path, backups: int) -> list[Path]:
    """The log's files, newest first, those that exist."""
    candidates = [path, *(path.with_name(f"{path.name}.{n}") for n in range(1, backups + 1))]
    return [candidate for candidate in candidates if candidate.exists()]


def _parse(line: str) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def newest_first(path: Path, backups: int) -> Iterator[dict[str, Any]]:
    for file in files(path, backups):
        try:
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in reversed(lines):
            event = _parse(line)
            if event is not None:
                yield event


def page(path: Path, backups: int, filters: Filters, offset: int = 0) -> tuple[list[dict[str, Any]], bool]:
    """The lines `filters` admit from the `offset`-th on (newest first), and whether there are older ones."""
    found: list[dict[str, Any]] = []
    skipped = 0
    for event in newest_first(path, backups):
        if not filters.admit(event):
            continue
        if skipped < offset:
            skipped += 1
            continue
        if len(found) == PAGE:
            return found, True
        found.append(event)
    return found, False


def find(path: Path, backups: int, decision_id: str) -> dict[str, Any] | None:
    for event in newest_first(path, backups):
        if event.get("decision_id") == decision_id:
            return event
    return None


class Tail:
    """The lines appended to the current file since the last `read()` (from its end when made)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._position = self._size()
        self._partial = b""

    def _size(self) -> int:
        try:
            return os.stat(self._path).st_size
        except OSError:
            return 0

    def read(self) -> list[dict[str, Any]]:
        size = self._size()
        if size < self._position:  # rotated: the new file from its start
            self._position, self._partial = 0, b""
        if size == self._position:
            return []
        try:
            with open(self._path, "rb") as file:
                file.seek(self._position)
                data = self._partial + file.read(size - self._position)
        except OSError:
            return []
        self._position = size
        *lines, self._partial = data.split(b"\n")
        return [event for line in lines if (event := _parse(line.decode("utf-8", "replace"))) is not None]
