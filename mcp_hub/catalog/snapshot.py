"""The last known catalog, kept in a file, so the hub lists it at start-up.

A mount is listed only once its server has started and answered, which for a
stdio server can take seconds. Unless `[hub] catalog_snapshot = false`, the hub keeps
every mount's listings (tools, prompts, resources, resource templates, as the
catalog admitted them, i.e. after pinning) in a JSON file, and at start-up puts
them into the catalog before any mount connects: clients see the whole catalog
at once. A mount's real listing replaces its snapshot when it connects, and
clients hear `list_changed` if the two differ.

Each entry carries a fingerprint of what identifies its server (command, args,
env, cwd, url, transport, headers, protocol): a mount whose server is configured
differently now is not served from the file, nor is a mount no longer
configured. The fingerprint is a hash, so the file holds no secret from
hub.toml. A file that cannot be read or parsed is logged and ignored.

The file is written when a mount's listings change, never on a call: changes
that arrive together (mounts connecting at start-up) make one write, made off
the event loop, atomically (a temporary file, then `os.replace`), and once more
for anything still pending when the hub stops. A failed write is logged; the
hub serves on.

Where the file is: `catalog_snapshot = "PATH"` names it (relative to hub.toml's
folder). By default (`true`), it is a file of the hub.toml's own in the user's
state folder (see mcp_hub/state.py), `catalogs/STEM-HASH.json`. A config that did not come
from a file has no default snapshot. A state folder that cannot be made or
written to is one warning; the hub starts without a snapshot.

File format (`config`: the hub.toml the file was written for, for a person to recognise)::

    {"version": 1, "config": "/path/to/hub.toml",
     "mounts": {"MOUNT": {"fingerprint": "...", "tools": [...], "prompts": [...],
                          "resources": [...], "resource_templates": [...]}}}
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import to_json

from mcp_hub.config import HubConfig, ServerConfig
from mcp_hub.state import state_file

logger = logging.getLogger("mcp_hub.snapshot")

Listings = dict[str, list[dict[str, Any]]]
"""One mount's listings: catalog kind -> the items as the catalog holds them."""

_IDENTIFYING = ("command", "args", "env", "cwd", "url", "transport", "headers", "protocol")
"""What makes a server the same server: what it is started or reached with, and how it is spoken to."""

_COALESCE = 0.25
"""Seconds a change waits for others before the file is written."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fingerprint: str
    tools: list[dict[str, Any]] = Field(default_factory=list)
    prompts: list[dict[str, Any]] = Field(default_factory=list)
    resources: list[dict[str, Any]] = Field(default_factory=list)
    resource_templates: list[dict[str, Any]] = Field(default_factory=list)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1]
    config: str | None = None
    mounts: dict[str, _Entry]


def snapshot_path(config: HubConfig) -> Path | None:
    """The snapshot file `config` asks for: its own path, the default one in the user's state folder, or None
    (`false`, a config that did not come from a file, or a state folder that cannot be written to)."""
    setting = config.hub.catalog_snapshot
    if isinstance(setting, str):
        return config.relative(setting)
    if not setting:
        return None
    source = Path(config.path)
    if "path" not in config.model_fields_set or not source.is_file():
        logger.info("no catalog snapshot: the config did not come from a file")
        return None
    file = state_file(source, "catalogs", ".json")
    folder = file.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise PermissionError(errno.EACCES, "not writable")
    except OSError as exc:
        logger.warning(
            "cannot keep the catalog snapshot in %s (%s); starting without it. Set [hub] catalog_snapshot to a "
            "file you can write, or to false",
            folder,
            exc.strerror or exc,
        )
        return None
    return file


def fingerprint(server: ServerConfig) -> str:
    """A stable hash of what identifies a mount's server (its variables already expanded)."""
    identity = server.model_dump(include=set(_IDENTIFYING), mode="json")
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class CatalogSnapshot:
    """The snapshot file of one hub: read once at start-up, written as listings change."""

    def __init__(self, path: Path | None, servers: Mapping[str, ServerConfig], config: str | None = None) -> None:
        """`path` None: no snapshot (nothing is read or written). `servers`: the enabled mounts. `config`: the
        hub.toml, named in the file."""
        self.path = path
        self._config = config
        self._fingerprints = {name: fingerprint(server) for name, server in servers.items()}
        self._entries: dict[str, dict[str, Any]] = {}
        """What the file holds, or is about to: mount -> {"fingerprint": ..., kind: items, ...}."""
        self._pending = False
        self._changed: anyio.Event | None = None

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def load(self) -> dict[str, Listings]:
        """The listings the file holds for mounts still configured as they were, by mount.

        A missing file is a first start; an unreadable or corrupt one is logged and ignored.
        """
        if self.path is None:
            return {}
        try:
            data = _File.model_validate_json(self.path.read_bytes())
        except FileNotFoundError:
            logger.info("no catalog snapshot at %s yet; mounts are listed as they connect", self.path)
            return {}
        except (OSError, ValidationError) as exc:
            logger.warning(
                "catalog snapshot %s is unusable, starting without it (it is rewritten once mounts list): %s",
                self.path,
                _reason(exc),
            )
            return {}
        loaded: dict[str, Listings] = {}
        for mount, entry in data.mounts.items():
            expected = self._fingerprints.get(mount)
            if expected is None:
                continue
            if entry.fingerprint != expected:
                logger.info("server %r is configured differently since the catalog snapshot; not served from it", mount)
                continue
            loaded[mount] = entry.model_dump(exclude={"fingerprint"})
            self._entries[mount] = {"fingerprint": expected, **loaded[mount]}
        if loaded:
            logger.info(
                "catalog snapshot: %d of %d mounts listed from %s", len(loaded), len(self._fingerprints), self.path
            )
        return loaded

    def remount(self, servers: Mapping[str, ServerConfig]) -> None:
        """The enabled mounts are these now (a configuration reload): the file forgets the mounts no longer
        configured, and those configured differently, until they list again."""
        self._fingerprints = {name: fingerprint(server) for name, server in servers.items()}
        kept = {
            mount: entry
            for mount, entry in self._entries.items()
            if entry["fingerprint"] == self._fingerprints.get(mount)
        }
        if kept != self._entries:
            self._entries = kept
            self._pending = self.path is not None
            if self._changed is not None:
                self._changed.set()

    def record(self, mount: str, listings: Mapping[str, list[dict[str, Any]]]) -> None:
        """A mount's listings in the catalog now; the file is written soon if they changed."""
        expected = self._fingerprints.get(mount)
        if self.path is None or expected is None:
            return
        entry = {"fingerprint": expected, **listings}
        if self._entries.get(mount) == entry:
            return
        self._entries[mount] = entry
        self._pending = True
        if self._changed is not None:
            self._changed.set()

    async def run(self) -> None:
        """Write the file whenever recorded listings changed; until cancelled, then write what is pending."""
        try:
            while True:
                self._changed = anyio.Event()
                if not self._pending:
                    await self._changed.wait()
                await anyio.sleep(_COALESCE)
                await self._write()
        finally:
            with anyio.CancelScope(shield=True):
                await self._write()

    async def _write(self) -> None:
        if not self._pending or self.path is None:
            return
        self._pending = False
        document = {"version": 1, "config": self._config, "mounts": dict(self._entries)}
        try:
            await anyio.to_thread.run_sync(_replace, self.path, document)
        except (OSError, ValueError) as exc:  # the hub serves on; the next change tries again
            logger.error("could not write the catalog snapshot %s: %s", self.path, exc)


def _replace(path: Path, document: dict[str, Any]) -> None:
    """Write `document` to `path` atomically: readers see the old file or the new one, whole."""
    data = to_json(document)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _reason(exc: OSError | ValidationError) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"{where}: {error['msg']}" if where else error["msg"]
    return exc.strerror or str(exc)
