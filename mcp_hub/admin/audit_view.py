"""Reading the audit log back: its lines newest first, over the rotated files, filtered and paged.

The log is the file of `[audit] file` and its rotations (`.1`, the newest of them, to `.N`). A page is
found by walking the lines newest first; a line that is not a JSON object (a torn last line, a file
edited by hand) is skipped. The live tail follows the current file from its end (`Tail`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAGE = 50
"""Lines a page shows."""


@dataclass(frozen=True)
class Filters:
    principal: str = ""
    mount: str = ""
    tool: str = ""
    outcome: str = ""
    since: str = ""
    """RFC 3339 (or its leading part, as a browser's datetime-local field gives): lines at or after it."""
    until: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Filters:
        return cls(**{name: query.get(name, "").strip() for name in cls.__dataclass_fields__})

    def admit(self, event: Mapping[str, Any]) -> bool:
        for field, value in (("principal", self.principal), ("mount", self.mount), ("name", self.tool)):
            if value and str(event.get(field) or "") != value:
                return False
        if self.outcome and str(event.get("outcome") or "") != self.outcome:
            return False
        when = str(event.get("time") or "")
        if self.since and when < self.since:
            return False
        return not (self.until and when[: len(self.until)] > self.until)

    def query(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if getattr(self, name)}


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
