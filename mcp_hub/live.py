"""Live configuration: edits to hub.toml apply while the hub serves.

`LiveConfig(hub).run()` (started by `Hub.running(live=True)`, which `mcp-hub serve` uses) reads the
file again when it changes, and at once on SIGHUP, then applies what changed (`diff`):

- a server added (or enabled) starts, and its items join the catalog as it lists them;
- a server removed (or disabled) stops, and its items leave the catalog;
- a server whose `[servers.NAME]` table changed in any key restarts with its new settings, except its
  tool overrides (`[servers.NAME.tools.TOOL]`), which apply to the catalog without a restart;
- every other server goes on untouched: its sessions, calls in flight and clients notice nothing;
- `[admin] keys` and `[admin.oidc]` apply at once (`Hub.adopt`): a key added may log in to the console, and
  the console's sessions signed in with a key removed or changed end (admin/sessions.py); so do the sessions of
  the people single sign-on admitted when its issuer, client or administrators' claim or values change (or it
  goes), and new sign-ins follow the new settings (admin/sso.py).

The `[skills]` folder is watched too (`folder_signature`, every `SKILLS_POLL_INTERVAL`): a skill added, edited
or removed there restarts its mount (`mcp-hub-skills` reads the folder when it starts), and clients hear
`resources/list_changed` as its files are listed again.

Clients hear `list_changed` for the lists that changed. An edit the loader rejects (bad TOML, an
unknown key, a failed rule, an unset variable) is logged with the file, key and reason, and the
configuration in force stays. The other settings outside `[servers]` are read once, at start-up (where
the hub listens, its name, its policy and audit settings, API keys, telemetry): a change to one is a
warning naming the key, and takes effect at the next restart. The policy files themselves are
reloaded by `PolicyStore` (policy/store.py) as they change; SIGHUP reloads them too.

How the file is watched: its `stat` (modification time, size, inode) every `POLL_INTERVAL`
seconds, as `PolicyStore` watches the policy folder. One `stat` per half second costs nothing
measurable, needs no thread and no dependency, and sees every way a file is replaced: written in
place, written to a temporary file and renamed over it (what most editors and config tools do), a
symlink swapped (a Kubernetes ConfigMap), a network or container-mounted filesystem where inotify
events do not arrive. A change is read once the file has stayed the same for `QUIET` seconds, so
a burst of writes (an editor saving in steps) is one reload, and a half-written file is not read.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import anyio
import anyio.to_thread
from pydantic import BaseModel

from mcp_hub.config import HubConfig, ServerConfig, load_config
from mcp_hub.errors import ConfigError

logger = logging.getLogger("mcp_hub.live")

POLL_INTERVAL = 0.5
"""Seconds between looks at the file."""
QUIET = 0.2
"""Seconds a changed file must stay unchanged before it is read."""
SKILLS_POLL_INTERVAL = 2.0
"""Seconds between two looks at the `[skills]` folder: a `stat` of each of its entries, about 20 ms of CPU for
1,100 files on a busy 2-core machine (1% of a core at this pace)."""

_READ_ONCE = tuple(table for table in HubConfig.model_fields if table not in ("servers", "path"))
"""The tables read at start-up only ([hub], [http], [policy], ...): a change to one of their keys needs a restart."""

APPLIED = ("admin.keys", "admin.oidc")
"""The keys outside [servers] that apply as they change (`Hub.adopt`), without a restart."""

_SERVER_KEYS = tuple(key for key in ServerConfig.model_fields if key not in ("name", "tools"))
"""The keys of a server's table whose change restarts it (its tool overrides apply without a restart)."""


@dataclass(frozen=True, slots=True)
class MountsChanged:
    """What a reload did to the mounts (see `Hub.on_mounts_changed`)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    restarted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigDiff:
    """How a newly read hub.toml differs from the configuration in force."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Enabled servers whose table changed: name -> the keys that changed."""
    read_once: tuple[str, ...] = ()
    """Dotted keys outside [servers] that changed, which only a restart applies."""
    overridden: tuple[str, ...] = ()
    """Enabled servers whose tool overrides changed (applied to the catalog, without a restart)."""
    applied: tuple[str, ...] = ()
    """Dotted keys of `APPLIED` that changed (applied without a restart)."""

    @property
    def mounts(self) -> bool:
        """Whether any mount starts, stops or restarts."""
        return bool(self.added or self.removed or self.changed)


def diff(old: HubConfig, new: HubConfig) -> ConfigDiff:
    """What changed from `old` to `new` (values are never part of it: they may be secrets)."""
    before, after = old.enabled_servers(), new.enabled_servers()
    changed: dict[str, tuple[str, ...]] = {}
    for name in after.keys() & before.keys():
        keys = tuple(key for key in _SERVER_KEYS if getattr(before[name], key) != getattr(after[name], key))
        if keys:
            changed[name] = keys
    keys: list[str] = []
    for table in _READ_ONCE:
        was, now = getattr(old, table), getattr(new, table)
        if isinstance(was, BaseModel):
            keys += [f"{table}.{key}" for key in type(was).model_fields if getattr(was, key) != getattr(now, key)]
        elif was != now:
            keys.append(table)
    return ConfigDiff(
        added=tuple(name for name in after if name not in before),
        removed=tuple(name for name in before if name not in after),
        changed={name: changed[name] for name in after if name in changed},  # in file order
        read_once=tuple(key for key in keys if key not in APPLIED),
        overridden=tuple(name for name in after if name in before and before[name].tools != after[name].tools),
        applied=tuple(key for key in keys if key in APPLIED),
    )


class Reloadable(Protocol):
    """What a reload needs of the hub (`Hub`)."""

    @property
    def config(self) -> HubConfig: ...

    async def remount(self, config: HubConfig, restart: Collection[str] = ()) -> MountsChanged: ...

    def adopt(self, config: HubConfig) -> None: ...

    async def reload_policy(self) -> None: ...


def _signature(path: Path) -> tuple[int, int, int, int] | None:
    """What changes when the file is written or replaced (None: it is not there)."""
    try:
        st = os.stat(path)  # follows a symlink: a swapped link target is a change
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev


def folder_signature(folder: str) -> int | None:
    """What changes when a file under `folder` is added, removed, written or renamed: a hash of each entry's path,
    modification time, size and inode (None: the folder is not there). A `stat` per entry, no file read."""
    if not os.path.isdir(folder):
        return None
    entries: list[tuple[str, int, int, int]] = []
    for top, folders, files in os.walk(folder):
        folders.sort()
        for name in (*folders, *sorted(files)):
            try:
                st = os.stat(os.path.join(top, name))  # a link: its target's
            except OSError:
                continue
            entries.append((os.path.join(top, name), st.st_mtime_ns, st.st_size, st.st_ino))
    return hash(tuple(entries))


class LiveConfig:
    """Watches the hub's hub.toml and applies its edits to the running hub."""

    def __init__(self, hub: Reloadable, *, interval: float | None = None) -> None:
        self._hub = hub
        self.path = Path(hub.config.path)
        self._interval = POLL_INTERVAL if interval is None else interval
        self._signature = _signature(self.path)
        self._hup = anyio.Event()
        self._skills: tuple[str, int | None] | None = None
        """The `[skills]` folder watched, and its `folder_signature` when last looked at."""
        self._skills_looked = time.monotonic()
        skills = hub.config.servers.get(hub.config.skills.mount) if hub.config.skills.folder is not None else None
        if skills is not None:
            self._skills = (skills.args[-1], folder_signature(skills.args[-1]))
        self.last_error: str | None = None
        """Why the last edit was rejected, while the file still holds it."""

    async def run(self) -> None:
        """Apply the file's edits, and reload on SIGHUP; until cancelled."""
        if "path" not in self._hub.config.model_fields_set:
            logger.info("the configuration did not come from a file: edits cannot apply live")
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._on_sighup)
            await self._watch()

    def request_reload(self) -> None:
        """Read the file now, changed or not (what SIGHUP does)."""
        self._hup.set()

    async def _on_sighup(self) -> None:
        hangup = getattr(signal, "SIGHUP", None)
        if hangup is None:  # Windows: no SIGHUP; edits are still watched
            return
        try:
            with anyio.open_signal_receiver(hangup) as signals:
                async for _ in signals:
                    logger.info("received SIGHUP; reloading %s", self.path)
                    self.request_reload()
        except (NotImplementedError, RuntimeError, ValueError) as exc:  # not the main thread, or no signal support
            logger.info("SIGHUP does not reload here (%s); edits to %s are still watched", exc, self.path)

    async def _watch(self) -> None:
        while True:
            with anyio.move_on_after(self._interval):
                await self._hup.wait()
            forced = self._hup.is_set()
            if forced:
                self._hup = anyio.Event()
            signature = _signature(self.path)
            if not forced:
                if signature == self._signature:
                    await self._watch_skills()
                    continue
                while True:  # until the writes stop
                    await anyio.sleep(QUIET)
                    settled = _signature(self.path)
                    if settled == signature:
                        break
                    signature = settled
            self._signature = signature
            try:
                await self.reload(policy=forced)
            except Exception:  # boundary: a reload that fails leaves the hub serving, and watching
                logger.exception("%s: the edit could not be applied in full", self.path)

    async def _watch_skills(self) -> None:
        """Restart the `[skills]` folder's mount once the files under the folder have changed and stayed the same for
        `QUIET` seconds."""
        config = self._hub.config
        server = config.servers.get(config.skills.mount) if config.skills.folder is not None else None
        if server is None or not server.enabled:
            self._skills = None
            return
        folder = server.args[-1]
        watched = self._skills is not None and self._skills[0] == folder
        if watched and time.monotonic() - self._skills_looked < SKILLS_POLL_INTERVAL:
            return
        self._skills_looked = time.monotonic()
        signature = await anyio.to_thread.run_sync(folder_signature, folder)
        if self._skills is None or self._skills[0] != folder:  # first seen (at start, or named anew): as it started
            self._skills = (folder, signature)
            return
        if signature == self._skills[1]:
            return
        while True:  # until the writes stop
            await anyio.sleep(QUIET)
            settled = await anyio.to_thread.run_sync(folder_signature, folder)
            if settled == signature:
                break
            signature = settled
        self._skills = (folder, signature)
        logger.info("%s: the skills folder %s changed; its mount %r restarts", self.path, folder, server.name)
        await self._hub.remount(config, restart=(server.name,))

    async def reload(self, *, policy: bool = False) -> ConfigDiff | None:
        """Read the file and apply what changed; None if the file was rejected. `policy`: reload the policy
        files too (SIGHUP)."""
        if policy:
            await self._hub.reload_policy()
        try:
            new = await anyio.to_thread.run_sync(load_config, self._hub.config.path)  # named as at start-up
        except ConfigError as exc:
            logger.error("%s; the configuration in force stays until the file is fixed", exc)
            self.last_error = str(exc)
            return None
        if self.last_error is not None:
            logger.info("%s: valid again", self.path)
        self.last_error = None
        change = diff(self._hub.config, new)
        _log(self.path, change)
        if change.applied:
            self._hub.adopt(new)
        if change.mounts or change.overridden:
            await self._hub.remount(new, restart=tuple(change.changed))
        return change


def _log(path: Path, change: ConfigDiff) -> None:
    for name in change.added:
        logger.info("%s: server %r added", path, name)
    for name in change.removed:
        logger.info("%s: server %r removed", path, name)
    for name, keys in change.changed.items():
        logger.info("%s: server %r restarted: %s changed", path, name, _listed(keys))
    for name in change.overridden:
        logger.info("%s: server %r: tool overrides changed (applied without a restart)", path, name)
    for key in change.applied:
        logger.info("%s: %s changed (applied without a restart)", path, key)
    for key in change.read_once:
        logger.warning(
            "%s: %s changed, which applies only when the hub starts; restart the hub to apply it "
            "(until then it serves with the setting it started with)",
            path,
            key,
        )


def _listed(keys: tuple[str, ...]) -> str:
    return ", ".join(keys[:-1]) + f" and {keys[-1]}" if len(keys) > 1 else str(keys[0])
