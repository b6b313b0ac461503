"""Tool pinning: a server may not rewrite a tool after it was approved.

The hub records a fingerprint of every tool's definition (name, title,
description, schemas, annotations) in a JSON file the first time it sees it.
When a server later serves a different definition, the policy's
`[pinning] on_change` decides: "accept" records the new one, "flag" serves it
and reports it (as pending, and once per new definition to `on_flag`, which the
hub points at its audit log), "hold" hides the tool (unlisted, uncallable) until
an administrator accepts the change with `mcp-hub pins accept` (or the admin console). The file is
written atomically; the hub notices when the command changes it. Each entry keeps the definition it
fingerprints ("definition"), so a change can be shown as a diff; an administrator may also reject a
change (the admin console): that definition stays held, whatever `on_change` says, until the server
serves another one.

A tool whose definition looks poisoned (hidden text: an HTML comment, tag characters, zero-width or
bidi characters; or instructions to the model: "do not tell the user", `<IMPORTANT>`, `~/.ssh`... in
its name, description or schemas; `[pinning] scan`) is handled
the same way, the first time it is seen too, until that definition is accepted: its pending entry
says why ("reason"), which `mcp-hub pins` shows.

File format::

    {"version": 1,
     "pins":    {"MOUNT/TOOL": {"fingerprint": "...", "since": "2026-11-22T04:05:06Z", "definition": {...}}},
     "pending": {"MOUNT/TOOL": {"fingerprint": "...", "since": "...", "reason": "hidden text: ...",
                                "definition": {...}, "rejected": "2026-...Z", "rejected_by": "NAME"}}}
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from mcp_hub.errors import ConfigError

logger = logging.getLogger("mcp_hub.pins")

_FINGERPRINTED = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")

OnChange = Literal["accept", "flag", "hold"]

Suspect = Callable[[Mapping[str, Any]], "str | None"]
"""Why a tool's definition looks poisoned (hidden text in it), or None: given by the hub (see guardrails/tools.py)."""

OnFlag = Callable[[str, str, str, str, "str | None"], None]
"""Told `(mount, tool, pinned fingerprint, new fingerprint, why it looks poisoned or None)` when "flag" serves a
tool's new definition."""


def definition(tool: Mapping[str, Any]) -> dict[str, Any]:
    """What a model reads of a tool: what the fingerprint covers."""
    return {key: tool[key] for key in _FINGERPRINTED if tool.get(key) is not None}


def fingerprint(tool: Mapping[str, Any]) -> str:
    """A stable hash of what a model reads of a tool."""
    definition = {key: tool.get(key) for key in _FINGERPRINTED}
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class PinStore:
    def __init__(self, path: Path | None, *, on_flag: OnFlag | None = None) -> None:
        self.path = path
        self._on_flag = on_flag
        self.pins: dict[str, dict[str, str]] = {}
        self.pending: dict[str, dict[str, str]] = {}
        self._stamp: tuple[int, int] | None = None
        self.revision = 0
        """Counts the changes to `pins` and `pending` (what replicas share, see shared_pins.py)."""
        self.reload()

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def reload(self) -> bool:
        """Read the file again if it changed; True when it did."""
        if self.path is None:
            return False
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return False
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            pins, pending = data["pins"], data.get("pending", {})
            if not isinstance(pins, dict) or not isinstance(pending, dict):
                raise TypeError("pins and pending must be objects")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                str(self.path), "", f"not a pins file ({exc}); fix it, or delete it to pin anew"
            ) from None
        self.pins, self.pending, self._stamp = pins, pending, stamp
        self.revision += 1
        return True

    def replace(self, pins: dict[str, dict[str, str]], pending: dict[str, dict[str, str]]) -> None:
        """Take these pins (the replicas' shared ones), and record them in the file."""
        self.pins, self.pending = pins, pending
        self.revision += 1
        try:
            self._save()
        except OSError as exc:
            logger.error("could not write the pins file %s (%s); pins are kept in memory", self.path, exc)

    def admit(
        self,
        mount: str,
        tools: Iterable[dict[str, Any]],
        on_change: OnChange,
        suspect: Suspect | None = None,
    ) -> list[dict[str, Any]]:
        """The tools to serve from `mount`'s listing; records new pins and changes.

        A tool `suspect` finds something in (tool poisoning) is handled as a changed
        definition, the first time it is seen too, until its definition is pinned (accepted)."""
        if self.path is None:
            return list(tools)
        served: list[dict[str, Any]] = []
        dirty = False
        for tool in tools:
            key = f"{mount}/{tool.get('name')}"
            seen = fingerprint(tool)
            pinned = self.pins.get(key)
            accepted = pinned is not None and pinned["fingerprint"] == seen
            change = self.pending.get(key, {})
            rejected = not accepted and change.get("fingerprint") == seen and "rejected" in change
            reason = None if accepted or suspect is None else suspect(tool)
            if not rejected and (accepted or on_change == "accept" or (pinned is None and reason is None)):
                if pinned is None or pinned["fingerprint"] != seen:
                    if pinned is not None or reason is not None:
                        why = reason or "changed its definition"
                        logger.warning("tool %s: %s; accepted (pinning: accept)", key, why)
                    self.pins[key] = {"fingerprint": seen, "since": _now(), "definition": definition(tool)}
                    dirty = True
                elif "definition" not in pinned:  # pinned before definitions were kept: the pinned one is this one
                    pinned["definition"] = definition(tool)
                    dirty = True
                dirty |= self.pending.pop(key, None) is not None
                served.append(tool)
                continue
            why = reason or "changed its definition since it was pinned"
            new = self.pending.get(key, {}).get("fingerprint") != seen  # not seen since it was pinned
            if new:
                self.pending[key] = {
                    "fingerprint": seen,
                    "since": _now(),
                    **({"reason": reason} if reason else {}),
                    "definition": definition(tool),
                }
                dirty = True
            if "rejected" in self.pending[key]:
                logger.warning("tool %s %s; held (the change was rejected)", key, why)
            elif on_change == "flag":
                logger.warning("tool %s %s; served (pinning: flag)", key, why)
                served.append(tool)
                if new:
                    self._flagged(mount, str(tool.get("name")), pinned["fingerprint"] if pinned else "", seen, reason)
            else:
                logger.warning("tool %s %s; held until accepted", key, why)
        if dirty:
            self.revision += 1
            try:
                self._save()
            except OSError as exc:  # the listing must not fail for the record of it: keep the pins in memory
                logger.error(
                    "could not write the pins file %s (%s); pins are kept in memory until it can be", self.path, exc
                )
        return served

    def _flagged(self, mount: str, name: str, pinned: str, seen: str, reason: str | None) -> None:
        if self._on_flag is None:
            return
        try:
            self._on_flag(mount, name, pinned, seen, reason)
        except Exception:  # the listing must not fail for the report of it
            logger.exception("could not report the change of tool %s/%s", mount, name)

    def accept(self, keys: Iterable[str] | None = None) -> list[str]:
        """Accept pending changes (all of them when `keys` is None); returns those accepted."""
        self.reload()
        chosen = list(self.pending) if keys is None else [key for key in keys if key in self.pending]
        for key in chosen:
            change = self.pending.pop(key)
            self.pins[key] = {"fingerprint": change["fingerprint"], "since": _now()}
            if "definition" in change:
                self.pins[key]["definition"] = change["definition"]
        if chosen:
            self._save()
        return chosen

    def reject(self, keys: Iterable[str], by: str) -> list[str]:
        """Reject pending changes: each stays held (unlisted, uncallable) until the server serves another
        definition, which is pending anew. Returns those rejected (pending, not already rejected)."""
        self.reload()
        chosen = [key for key in keys if key in self.pending and "rejected" not in self.pending[key]]
        for key in chosen:
            self.pending[key] = {**self.pending[key], "rejected": _now(), "rejected_by": by}
        if chosen:
            self.revision += 1
            self._save()
        return chosen

    def _save(self) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": 1, "pins": self.pins, "pending": self.pending}, indent=2, sort_keys=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".pins-", suffix=".json")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text + "\n")
        os.replace(temporary, self.path)
        stat = self.path.stat()
        self._stamp = (stat.st_mtime_ns, stat.st_size)
