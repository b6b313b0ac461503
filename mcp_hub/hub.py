"""The composition root: config in, a running hub out.

`Hub` wires the catalog, the router, one supervisor per mount and the
downstream endpoint, and owns the task group they all run in. Unless
`[hub] catalog_snapshot = false`, the catalog starts out as the last known one (see
snapshot.py), and the stdio mounts it lists start a few at a time. Leaving
`Hub.running()` cancels every supervisor, and with it every upstream
connection: stdio children are shut down and reaped by the SDK's transport
inside a shielded, time-bounded scope, so nothing outlives the hub. While
`mcp-hub serve` runs, edits to hub.toml add, remove and restart mounts (`remount`,
driven by live.py), each mount's supervisor running in a scope of its own.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
import anyio.abc
import anyio.to_thread
import uvicorn
from cachetools import LRUCache
from mcp.server.runner import serve_dual_era_loop
from starlette.types import ASGIApp

from mcp_hub import sdk
from mcp_hub.cache import CacheStore, MemoryStore, ResultCache
from mcp_hub.cache.shared import RedisStore
from mcp_hub.catalog.catalog import KINDS, Catalog
from mcp_hub.catalog.overrides import Overrides
from mcp_hub.catalog.pins import PinStore
from mcp_hub.catalog.shared_pins import SharedPins
from mcp_hub.catalog.snapshot import CatalogSnapshot, snapshot_path
from mcp_hub.chain.audit import AuditTrail
from mcp_hub.chain.cache import CacheLink
from mcp_hub.chain.context import Link, compose
from mcp_hub.chain.guardrails import Guardrails, configured_secrets, hub_secrets
from mcp_hub.chain.results import ResultBudget
from mcp_hub.chain.router import Router
from mcp_hub.chain.telemetry import CallRecorder, RequestObserver, access_log
from mcp_hub.cluster import Cluster
from mcp_hub.config import HubConfig, ServerConfig, unauthenticated_exposure
from mcp_hub.credentials.user import sign_in_routes
from mcp_hub.errors import ConfigError
from mcp_hub.guardrails import Detectors, expand, poisoned, redacted
from mcp_hub.live import LiveConfig, MountsChanged
from mcp_hub.observe.audit_log import AuditLog
from mcp_hub.observe.audit_sinks import sinks_of
from mcp_hub.observe.dashboard import Dashboard
from mcp_hub.observe.otel import CURRENT, MountStatus, Telemetry
from mcp_hub.policy.store import PolicyStore
from mcp_hub.results import KeptResults, tokens
from mcp_hub.search import ToolSearch
from mcp_hub.server import Endpoint
from mcp_hub.server.announcements import Announcements
from mcp_hub.server.curated import Selection, selections
from mcp_hub.server.loopback import SignInListeners, sign_in_listeners
from mcp_hub.server.origin import LOG_LEVELS, principal_of, session_of
from mcp_hub.server.stdio import stdio_endpoint
from mcp_hub.upstream import LIST_METHODS, Origin, State, Upstream
from mcp_hub.upstream.sandbox import describe as sandbox_report
from mcp_hub.upstream.sandbox import limit_refusals
from mcp_hub.upstream.stderr import collapsed

if TYPE_CHECKING:
    from mcp_hub.chain.budgets import BudgetCounter
    from mcp_hub.server.http.cards import Cards
from mcp_hub.upstream.startup import Startup

logger = logging.getLogger("mcp_hub")

_SECRETS = frozenset({"secrets"})
"""The detector that masks a server's stderr where the hub shows it."""
_MASKED_KEPT = 256
"""Lines of servers' stderr kept masked (each server shows 20 at most)."""

STARTS_AT_ONCE = os.cpu_count() or 1
"""How many stdio mounts listed from the catalog snapshot start at the same time."""

KEPT_RESULTS = 10_000
"""How many cut results this process keeps at most (the least recently used go first; see `[results] max_bytes`)."""

PACED_AFTER = 0.5
"""Seconds from when `mcp-hub serve` serves (listens) until the stdio mounts listed from the catalog snapshot begin
to start: the clients that connect as the hub starts list the catalog first, without children starting beside
them on the same cores."""


class Hub:
    def __init__(self, config: HubConfig, *, telemetry: Telemetry | None = None, endpoint: str | None = None) -> None:
        """`telemetry` replaces the one `[telemetry]` configures (to read what the hub reports in-process);
        `endpoint` names the `[endpoints.NAME]` its own endpoint (stdio, `/mcp`) serves instead of everything."""
        sdk.install()
        self.started_at = time.time()
        """When this hub was made (its serving begins at once): the console's "Up since"."""
        self.config = config
        servers = config.enabled_servers()
        self.catalog = Catalog(
            list(servers),
            unprefixed=[name for name, s in servers.items() if not s.prefix],
            overrides=Overrides.of(servers),
        )
        self.announcements = Announcements(self._announce)
        """Which lists changed, told to the clients at most once a quarter of a second."""
        self.snapshot = CatalogSnapshot(snapshot_path(config), servers, str(Path(config.path).resolve()))
        # The last known catalog, listed until each mount connects and lists its own.
        listed = self.snapshot.load()
        self.catalog.update_many(listed)
        self._paced = frozenset(
            name for name in listed if servers[name].kind == "stdio" and servers[name].isolation == "shared"
        )
        """Shared stdio mounts listed from the snapshot: no listing waits for them, so they start a few at
        a time. (A per-client mount starts at once: its clients' sessions need its supervisor running.)"""
        self.upstreams = {name: self._upstream(server) for name, server in servers.items()}
        self.startup = Startup(self.upstreams, config.hub.startup_grace, listed=listed)
        self.router = Router(self.catalog, self.upstreams, self.startup)
        self.policy = PolicyStore(config.relative(config.policy.dir) if config.policy.dir else None)
        self._served_tools: dict[str, list[dict[str, Any]]] = {}
        """Each mount's tool listing as the server sent it, before pinning held any back."""
        audit = config.audit
        self.audit = AuditLog(
            config.audit_file(), max_bytes=audit.max_bytes, backups=audit.backups, sinks=sinks_of(config)
        )
        self.pins = PinStore(config.pins_file(), on_flag=self.audit.record_tool_changed)
        self._tool_detectors = Detectors()
        self.telemetry = telemetry if telemetry is not None else Telemetry(config.telemetry)
        self.dashboard = Dashboard(self.telemetry) if config.admin.enabled and config.admin.dashboard else None
        """The console's dashboard (the hub's metrics read in-process: observe/dashboard.py), or None."""
        access = config.hub.access_log and access_log.isEnabledFor(logging.INFO)
        observer = None
        if self.telemetry.enabled or access:
            observer = RequestObserver(self.telemetry, access=access, principal=principal_of, session=session_of)
        # Only the links that have work to do: every tool call passes through them.
        links: list[Link] = []
        guardrails = None
        if observer is not None:
            links.append(CallRecorder())
        trail = AuditTrail(self.audit, self.policy) if audit.file or audit.sinks else None
        if trail is not None:
            links.append(trail)
        self.cluster = Cluster(config.cluster.redis, config.cluster.secret) if config.cluster.redis else None
        """The Redis replicas share rate limits and kept results in (`[cluster]`), or None."""
        if self.dashboard is not None:
            self.dashboard.cluster = self.cluster
        self._shared_pins = SharedPins(self.cluster, self.pins) if self.cluster and self.pins.enabled else None
        """The pins this replica shares with the others (`[cluster]` and `[policy] pins`), or None."""
        self.budgets: BudgetCounter | None = None
        """What principals used of their budgets of calls and cost (with a policy), for the console's explain."""
        if self.policy.directory is not None:
            from mcp_hub.chain.budgets import BudgetCounter  # `limits`: loaded only with a policy
            from mcp_hub.chain.guard import PolicyGuard, RateLimiter

            self.budgets = BudgetCounter(self.cluster)
            links.append(PolicyGuard(self.policy, RateLimiter(self.cluster), self.budgets))
            if self.policy().has_guards or config.policy.reload:  # a reload may bring guards
                regions = config.guardrails.phone_regions(os.environ)
                guardrails = Guardrails(self.policy, Detectors(configured_secrets(config), regions), self.audit)
        # Results over their budget are cut on the way out, after the guardrails saw them whole (chain/results.py).
        results = config.results
        kept_store: CacheStore = MemoryStore(KEPT_RESULTS, results.max_bytes)
        if self.cluster is not None:
            kept_store = RedisStore(self.cluster, MemoryStore(KEPT_RESULTS, results.max_bytes))
        self.kept = KeptResults(kept_store, results.ttl, tokens())
        """The whole of the results cut to their budget, per principal (see mcp_hub/results/)."""
        if results.max_result_tokens or self.policy.directory is not None or selections_budget(config):
            links.append(ResultBudget(results, self.kept, tokens(), self.policy))  # a budget is, or may come, on
        if guardrails is not None:
            links.append(guardrails)
        kept = config.cache
        store: CacheStore = MemoryStore(kept.max_entries, kept.max_bytes)
        if self.cluster is not None:
            store = RedisStore(self.cluster, MemoryStore(kept.max_entries, kept.max_bytes))
        self.cache = ResultCache(store, max_entry_bytes=kept.max_entry_bytes) if kept.enabled else None
        """Kept results (see mcp_hub/cache/); None with `[cache] enabled = false`."""
        links.append(CacheLink(self.cache, self.catalog, self.upstreams, self.policy))
        self.links: tuple[Link, ...] = tuple(links)
        self._guardrails = guardrails
        self._masking: tuple[HubConfig | None, Detectors, LRUCache[str, str]] = (None, Detectors(), LRUCache(1))
        """The configuration whose secrets `_masked` last read, the detectors knowing them, and the lines they
        masked last (a failing server's tail is shown again at each look of every open console page)."""
        call = compose(self.links, self.router.call)
        search = ToolSearch(config.search, lambda: self.catalog.view("tools"))
        if trail is not None:
            search.on_search = trail.searched
        self.search = search
        """The tool search (search/tools.py): its search and call tools, and its index of the catalog."""
        self.catalog.watch(search.index.stale)

        def serving(selection: Selection) -> Endpoint:
            served = Endpoint(
                config.hub.name,
                self.catalog,
                self.router,
                page_size=config.hub.page_size,
                policy=self.policy,
                call=call,
                upstreams=self.upstreams,
                on_log_level=self._log_level_changed,
                confirms=self.policy.directory is not None,
                startup=self.startup,
                on_refused=trail.refused if trail is not None else None,
                guardrails=guardrails,
                search=search,
                selection=selection,
                kept=self.kept,
                results=config.results,
            )
            if observer is not None:
                served.observe(observer)
            return served

        curated = selections(config)
        if endpoint is not None and endpoint not in curated:
            known = ", ".join(curated) or "none"
            raise ConfigError(config.path, f"endpoints.{endpoint}", f"no such endpoint (endpoints: {known})")
        self.endpoint = serving(curated[endpoint] if endpoint else Selection())
        """The hub's own endpoint: stdio, and `/mcp` over HTTP."""
        self.endpoints = {name: serving(selection) for name, selection in curated.items()}
        """The curated endpoints (`[endpoints.NAME]`, see server/curated.py), served at `/mcp/NAME`: views of
        the same catalog through the same chain, each with its own clients and `list_changed`."""
        if self.cluster is not None:  # parked calls' states: one key, single use, naming this replica
            for served in (self.endpoint, *self.endpoints.values()):
                parking = served.parking
                parking.owner, parking.claim = self.cluster.replica, self.cluster.claim
                for sealer in (parking, served.skill_cursors):  # skills/list cursors: one key on every replica
                    if self.cluster.sealing is not None:
                        sealer.use_key(self.cluster.sealing)
                    self.cluster.on_sealing_key.append(sealer.use_key)
        self._tg: anyio.abc.TaskGroup | None = None
        self._settled_once = False
        self._mount_tasks: dict[str, tuple[anyio.CancelScope, anyio.Event]] = {}
        """Each running mount's supervisor: the scope that stops it, and the event set once it has stopped."""
        self.on_mounts_changed: list[Callable[[MountsChanged], Awaitable[None]]] = []
        """Called after a configuration reload added, removed or restarted mounts (and their items joined or
        left the catalog): what keeps state per mount (a response cache) forgets the mounts named."""

    def _upstream(self, server: ServerConfig) -> Upstream:
        return Upstream(
            server,
            self._on_listing,
            on_log=self._on_log,
            on_updated=self._on_updated,
            sole_client=self._sole_client,
            on_limit=lambda upstream, ended: self.audit.record_server_limit(upstream.name, ended),
        )

    @asynccontextmanager
    async def running(self, *, live: bool = False, serving: anyio.Event | None = None) -> AsyncIterator[Hub]:
        """Start every mount concurrently (stdio mounts listed from the catalog snapshot a few at a
        time); stop (and reap) them all on exit. `live`: apply edits to hub.toml as they are saved, and
        on SIGHUP (see live.py). `serving`: set once the hub serves; the mounts listed from the snapshot
        start `PACED_AFTER` seconds later (or when a call wants one), not at once."""
        self.audit.start()
        try:
            if self.cluster is not None:  # `user` mounts' dynamic registrations: one for every replica
                from mcp_hub.credentials.registration import share_with

                share_with(self.cluster)
            self.telemetry.start(self._mount_status, lambda: self.audit.sinks)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for served in self._serving():
                    tg.start_soon(served.parking.run)
                tg.start_soon(self.announcements.run)
                pace = anyio.Semaphore(STARTS_AT_ONCE if serving is None else 0)
                if serving is not None:
                    tg.start_soon(_open_places, pace, serving)
                self.startup.begin()
                for upstream in self.upstreams.values():
                    self._start_mount(upstream, pace if upstream.name in self._paced else None)
                if live:
                    tg.start_soon(LiveConfig(self).run)
                if self.config.policy.reload and self.policy.directory is not None:
                    tg.start_soon(self.policy.watch, self._policy_changed)
                if self.pins.enabled:
                    tg.start_soon(self._watch_pins)
                if self.snapshot.enabled:
                    tg.start_soon(self.snapshot.run)
                # The search index, built ahead of the searches (search/index.py).
                tg.start_soon(self.search.index.run, self._searched, self._settled)
                if self.cluster is not None:
                    tg.start_soon(self.cluster.run)
                if self.dashboard is not None:
                    tg.start_soon(self.dashboard.run)
                try:
                    yield self
                finally:
                    tg.cancel_scope.cancel()
        finally:
            # Writing out the queued audit lines waits on the disk, and exporting the last spans and
            # metrics on the network: not on the event loop.
            with anyio.CancelScope(shield=True):
                if self.cluster is not None:
                    from mcp_hub.credentials.registration import share_with

                    share_with(None)
                    await self.cluster.aclose()
                await anyio.to_thread.run_sync(self.audit.stop)
                await anyio.to_thread.run_sync(self.telemetry.shutdown)

    def _start_mount(self, upstream: Upstream, pace: anyio.Semaphore | None = None) -> None:
        """Run the mount's supervisor in the hub's task group until `_stop_mount`."""
        assert self._tg is not None, "mounts run inside Hub.running()"
        scope, stopped = anyio.CancelScope(), anyio.Event()
        self._mount_tasks[upstream.name] = (scope, stopped)

        async def supervise() -> None:
            try:
                with scope:
                    await self._supervise(upstream, pace)
            finally:
                upstream.settled.set()  # stopped before its first attempt ended (a reload): nothing to wait for
                stopped.set()

        self._tg.start_soon(supervise)

    async def _stop_mount(self, name: str) -> None:
        """Stop the mount's supervisor and wait until its connections are closed (stdio children reaped)."""
        scope, stopped = self._mount_tasks.pop(name)
        scope.cancel()
        await stopped.wait()

    def adopt(self, config: HubConfig) -> None:
        """Serve with `config`'s settings outside `[servers]` that apply live (`live.APPLIED`: `[admin] keys` and
        `[admin.oidc]`, which the console reads as it checks a login, a sign-in or a session); the others are kept
        until a restart."""
        admin = self.config.admin.model_copy(update={"keys": config.admin.keys, "oidc": config.admin.oidc})
        self.config = self.config.model_copy(update={"admin": admin})

    async def remount(self, config: HubConfig, restart: Collection[str] = ()) -> MountsChanged:
        """Serve `config`'s servers from now on (a configuration reload; the rest of `config` is not applied):
        mounts no longer enabled stop and their items leave the catalog, new ones start, those in `restart`
        stop and start again with their new settings (their items stay listed until they list again), and
        the others go on untouched. Clients hear `list_changed` for the lists that changed."""
        servers = config.enabled_servers()
        removed = [name for name in self.upstreams if name not in servers]
        added = [name for name in servers if name not in self.upstreams]
        restarted = [name for name in restart if name in servers and name in self.upstreams]
        self.config = self.config.model_copy(update={"servers": config.servers})
        if self._guardrails is not None:
            self._guardrails.know_secrets(configured_secrets(self.config))
        unprefixed = [name for name, s in servers.items() if not s.prefix]
        changed = self.catalog.remount(list(servers), unprefixed, Overrides.of(servers))
        self.snapshot.remount(servers)
        for name in removed:
            del self.upstreams[name]
            self._served_tools.pop(name, None)
        if changed:
            await self._notify_changed(changed)
        starting = []
        for name in [*added, *restarted]:  # requests from now on wait for the new connection
            old = self.upstreams.get(name)
            upstream = self.upstreams[name] = self._upstream(servers[name])
            await upstream.set_log_level(self._log_level())
            for uri in old.subscribed if old is not None else ():
                await upstream.subscribe(uri)
            starting.append(upstream)
        for name in [*removed, *restarted]:
            await self._stop_mount(name)
        for upstream in starting:
            self._start_mount(upstream)
        change = MountsChanged(tuple(added), tuple(removed), tuple(restarted))
        for hook in self.on_mounts_changed:
            await hook(change)
        return change

    async def _supervise(self, upstream: Upstream, pace: anyio.Semaphore | None = None) -> None:
        """`upstream.run()`; with telemetry on, the requests it makes (listings, pings) are measured.

        With `pace`, the mount first waits for a place, held until its first connection attempt
        ends, unless a call wants it first: children that start a few at a time leave the CPU to
        the hub and its clients, which the catalog snapshot already serves.
        """
        if self.telemetry.upstream:
            CURRENT.set(self.telemetry)  # in this task's own context: nothing to reset
        if pace is None or not await _take_place(pace, upstream.wanted):
            await upstream.run()
            return
        async with anyio.create_task_group() as tg:

            async def release() -> None:
                await upstream.settled.wait()
                pace.release()

            tg.start_soon(release)
            await upstream.run()

    def _mount_status(self) -> list[MountStatus]:
        return [
            MountStatus(
                name, upstream.state == State.UP, upstream.restarts, upstream.client_sessions, str(upstream.state)
            )
            for name, upstream in list(self.upstreams.items())  # read by the metrics exporter's thread
        ]

    async def _sole_client(self) -> Origin | None:
        return await self.endpoint.sole_client()

    def _serving(self) -> list[Endpoint]:
        """The hub's own endpoint and the curated ones."""
        return [self.endpoint, *self.endpoints.values()]

    async def _notify_changed(self, kinds: Collection[str], *, policy: bool = False) -> None:
        """Have each endpoint's clients told which lists changed (a curated endpoint's: those its view changed in),
        at most once a quarter of a second (server/announcements.py)."""
        await self.announcements.changed(kinds, policy=policy)

    async def _announce(self, kinds: Collection[str], policy: bool) -> None:
        for served in self._serving():
            await served.notify_changed(kinds, policy=policy)

    def _log_level(self) -> str:
        """The most verbose level any client of any endpoint asked for ("info" while none asked)."""
        levels = [level for served in self._serving() if (level := served.log_level(None)) is not None]
        return min(levels, key=LOG_LEVELS.index) if levels else "info"

    async def _on_log(self, params: Mapping[str, Any]) -> None:
        for served in self._serving():
            await served.broadcast_log(params)

    async def _on_updated(self, upstream: Upstream, uri: str) -> None:
        if self.cache is not None:
            await self.cache.resource_updated(upstream.name, uri)
        for served in self._serving():
            await served.resource_updated(upstream.name, uri)

    async def invalidate_cache(self) -> None:
        """Forget every kept result: what the hub serves changed (a policy, pins, a configuration reload)."""
        if self.cache is not None:
            await self.cache.clear()

    async def _log_level_changed(self, level: str) -> None:
        """Servers send what the most verbose client asked for; each client gets its own level's share."""
        level = self._log_level()  # `level` is one endpoint's
        for upstream in list(self.upstreams.values()):
            await upstream.set_log_level(level)

    def _searched(self) -> bool:
        """Whether some caller may search the catalog: as `[search]` and the profiles say, or a curated endpoint."""
        curated = any(served.selection.search for served in self.endpoints.values())
        return curated or self.search.on_for_anyone(self.policy())

    async def _policy_changed(self) -> None:
        """What each client may see can change with the policy: tell them to list again."""
        self.search.index.stale()  # a profile may have turned tool search on
        await self.invalidate_cache()
        await self._notify_changed(KINDS, policy=True)

    async def reload_policy(self) -> None:
        """Load the policy files again if they changed (SIGHUP; they are also watched unless `reload = false`)."""
        if self.policy.reload():
            await self._policy_changed()

    async def _settled(self) -> None:
        """Until every mount has finished its first connection attempt (or the start-up grace is over)."""
        if not self.startup.over:
            await self.startup.all_settled()

    async def wait_settled(self, timeout: float | None = None) -> None:
        """Wait until every mount has finished its first connection attempt, either way, and the clients have been
        told what that changed of the lists (announcements.py: at most a quarter of a second later)."""
        with anyio.move_on_after(timeout):
            for upstream in list(self.upstreams.values()):
                await upstream.settled.wait()
            await self.announcements.told()

    async def _watch_pins(self) -> None:
        """An administrator accepted a change (`mcp-hub pins accept`), or another replica changed the shared
        pins: serve what it released, hold what it held."""
        while True:
            await anyio.sleep(1.0)
            try:
                changed = self.pins.reload()
            except ConfigError as exc:
                logger.error("pins file unreadable, keeping the pins in memory: %s", exc)
                changed = False
            if self._shared_pins is not None and await self._shared_pins.pull():
                changed = True
            if changed:
                await self.pins_changed()
            await self._share_pins()

    async def pins_changed(self) -> None:
        """The pins changed (an administrator accepted or rejected a change, here or on another replica): serve
        the tools they now admit, and tell clients what that changed."""
        await self.invalidate_cache()
        changed: set[str] = set()
        for mount, tools in list(self._served_tools.items()):
            admitted = self.pins.admit(mount, tools, self.policy().pinning.on_change, self._poisoned)
            changed |= self.catalog.update(mount, {"tools": admitted})
            self.snapshot.record(mount, self.catalog.listings(mount))
        if changed:
            await self._notify_changed(changed)

    async def _share_pins(self) -> None:
        """Write what this replica changed of the pins for the others; when another wrote first, take its pins
        and admit again (a few times at most: the watch tries again a second later)."""
        shared = self._shared_pins
        if shared is None:
            return
        for _ in range(3):
            if await shared.push():
                return
            if await shared.pull():
                await self.pins_changed()

    def _poisoned(self, tool: Mapping[str, Any]) -> str | None:
        """Why a listed tool looks poisoned, by the detectors of `[pinning] scan` (see guardrails/tools.py)."""
        return poisoned(tool, self._tool_detectors, expand(self.policy().pinning.scan))

    async def _on_listing(self, upstream: Upstream, kinds: frozenset[str]) -> None:
        # A kind the server does not offer or implement is empty, one it failed to list this time keeps
        # what it had (see `Upstream.list_all`); items that cannot be served are left out here, before
        # pinning sees them (see `Catalog.admit`).
        if self.cache is not None:  # it (re)connected, or said what changed: what was kept of it is stale
            await self.cache.listed(upstream.name, kinds, LIST_METHODS)
        listings: dict[str, list[dict[str, Any]]] = {}
        for kind in kinds:
            items = await upstream.list_all(kind)
            if items is not None:
                listings[kind] = self.catalog.admit(upstream.name, kind, items)
        if "tools" in listings:
            self._served_tools[upstream.name] = listings["tools"]
            if self._shared_pins is not None and await self._shared_pins.pull():
                await self.pins_changed()
            pinning = self.policy().pinning
            listings["tools"] = self.pins.admit(upstream.name, listings["tools"], pinning.on_change, self._poisoned)
        changed = self.catalog.update(upstream.name, listings)
        self.snapshot.record(upstream.name, self.catalog.listings(upstream.name))
        if changed:
            logger.info("catalog: %s changed by %r", ", ".join(sorted(changed)), upstream.name)
            await self._notify_changed(changed)
        if "tools" in listings:
            await self._share_pins()

    def detectors(self) -> Detectors:
        """The detectors the guards use (the hub's own secret values, its phone regions), for `explain`."""
        if self._guardrails is not None:
            return self._guardrails.detectors
        return Detectors(configured_secrets(self.config), self.config.guardrails.phone_regions(os.environ))

    def health(self, *, stderr: bool = False) -> dict[str, Any]:
        """Hub status and each mount's state, counts and last error (served at /healthz), with what it
        refused (optional requests answered with an error, which the hub goes on without) and the items
        of its listings that cannot be served; a server the loader disabled (a variable it needs is not set)
        is "disabled" with the reason, and the hub "degraded". A mount failing to come up says how many
        attempts failed in a row (`failures`) and, while it backs off, when it tries again (`next_attempt_in`,
        seconds); with `stderr`, a stdio mount that is not up adds the last lines its server wrote to stderr,
        its secrets masked (`stderr_tail`)."""
        servers: dict[str, Any] = {}
        for name, upstream in self.upstreams.items():
            retry = upstream.next_attempt_in
            servers[name] = {
                "state": str(upstream.state),
                "transport": upstream.transport.kind,
                "protocol": upstream.protocol_version,
                "sessions": upstream.sessions(),
                "restarts": upstream.restarts,
                "failures": upstream.failures,
                "next_attempt_in": round(retry, 1) if retry is not None else None,
                "last_error": upstream.last_error,
                "waiting_for": upstream.waiting_for,
                **{kind: len(self.catalog.items_of(name, kind)) for kind in KINDS},
                "refused": dict(upstream.refused),
                "skipped": self.catalog.skipped(name),
            }
            if stderr and upstream.state != State.UP and upstream.config.command is not None:  # a stdio server
                servers[name]["stderr_tail"] = self._masked(collapsed(upstream.stderr.last_attempt()))
            sandbox = sandbox_report(upstream.config)
            if sandbox is not None:
                sandbox["limit_hit"] = upstream.limit_hit or limit_refusals(name)
                servers[name]["sandbox"] = sandbox
        for name, server in self.config.servers.items():  # left out by the loader: a variable it needs is unset
            if server.unusable is not None:
                servers[name] = {
                    "state": str(State.DISABLED),
                    "transport": server.kind,
                    "protocol": None,
                    "sessions": [],
                    "restarts": 0,
                    "failures": 0,
                    "next_attempt_in": None,
                    "last_error": server.unusable,
                    "waiting_for": None,
                    **{kind: 0 for kind in KINDS},
                    "refused": {},
                    "skipped": [],
                }
        states = [State(report["state"]) for report in servers.values()]
        status = "ok" if all(s == State.UP for s in states) else "degraded"
        if states and not any(s == State.UP for s in states):
            status = "down"
        report: dict[str, Any] = {"status": status, "servers": servers}
        if self.cluster is not None:
            report["cluster"] = self.cluster.report()
        return report

    def stderr_of(self, name: str) -> list[str]:
        """The last lines mount `name`'s stdio server wrote to stderr, across its attempts, its secrets masked
        (`check --connect` shows them); none for a mount without a server process or one the loader disabled."""
        upstream = self.upstreams.get(name)
        return self._masked(upstream.stderr.lines()) if upstream is not None else []

    def _masked(self, lines: list[str]) -> list[str]:
        """`lines` (a server's stderr) with the secrets in them redacted as the guards redact them
        (`[REDACTED:github_token]`): the hub's own secret values, and every format the "secrets" detector knows."""
        if not lines:
            return lines
        config = self.config
        if self._masking[0] is not config:  # a reload: its secrets too (and those it replaced stay masked)
            self._masking = (config, self._masking[1].knowing(sorted(hub_secrets(config))), LRUCache(_MASKED_KEPT))
        _, detectors, masked = self._masking
        shown = []
        for line in lines:
            if line not in masked:
                masked[line] = redacted(line, detectors.find(line, _SECRETS))
            shown.append(masked[line])
        return shown

    def served_health(self) -> dict[str, Any]:
        """The report /healthz and /readyz serve: `health()`, with the servers' stderr where `[http]
        health_stderr` says so (off by default: anyone who reaches the hub may read it)."""
        return self.health(stderr=self.config.http.health_stderr)

    def ready(self) -> bool:
        """Whether to send the hub traffic (served at /readyz): every enabled mount has finished its
        first connection attempt, either way, and at least one is up. (A mount a reload adds later is
        not waited for: the hub already serves.)"""
        upstreams = self.upstreams.values()
        if not self._settled_once:
            self._settled_once = all(u.settled.is_set() for u in upstreams)
        return self._settled_once and any(u.state == State.UP for u in upstreams)

    # -- serving ------------------------------------------------------------------

    async def serve(
        self, transport: Literal["stdio", "http"], host: str | None = None, port: int | None = None
    ) -> None:
        """Serve until the client goes away (stdio) or a signal arrives. Over stdio, the sign-ins of `user`
        mounts come back to a loopback listener (server/loopback.py), whose port is taken first."""
        serving = anyio.Event()
        if transport == "stdio":
            self.endpoint.serve_one_client()
            async with sign_in_listeners(self.config, sign_in_routes) as listeners:
                self.on_mounts_changed.append(partial(self._listen_for_sign_ins, listeners))
                async with self.running(live=True, serving=serving):
                    await self._serve_stdio(serving)
            return
        host = host or self.config.http.host
        refusal = unauthenticated_exposure(self.config, host)
        if refusal is not None:
            raise refusal
        listening = _listen(self.config.path, host, port if port is not None else self.config.http.port)
        with listening:  # bound before any server starts: a busy port is one clear error
            async with self.running(live=True, serving=serving):
                await self._serve_http(host, listening, serving)

    async def _listen_for_sign_ins(self, listeners: SignInListeners, change: MountsChanged) -> None:
        """After a live reload: the loopback listeners the `user` mounts now configured need (server/loopback.py)."""
        try:
            listeners.apply(self.config)
        except ConfigError as exc:
            logger.error(
                "%s; that server's sign-ins cannot complete until the port is free and the hub listens there: it "
                "tries again when a reload next changes the servers, or when it restarts",
                exc,
            )

    async def _serve_stdio(self, serving: anyio.Event) -> None:
        server = self.endpoint.server
        async with anyio.create_task_group() as tg:
            tg.start_soon(_on_signal, tg.cancel_scope.cancel)
            async with (
                server.lifespan(server) as state,
                stdio_endpoint(server, state) as (read_stream, write_stream),
            ):
                serving.set()
                # As `Server.run`; no fixed options: capabilities are worked out when the client initializes.
                await serve_dual_era_loop(
                    server, read_stream, write_stream, lifespan_state=state, init_options=cast(Any, None)
                )
            tg.cancel_scope.cancel()

    def scopes_wanted(self, principal: str, method: str, kind: str, public: str) -> tuple[str, ...]:
        """The scopes a policy rule asks of `principal`'s token for the item `public` names, which it may not
        use without them (empty: none, or they would not help): the HTTP layer's step-up (403 insufficient_scope)."""
        if self.policy.directory is None:
            return ()
        target = self.catalog.resolve_uri(public) if kind == "resource" else self.catalog.resolve(f"{kind}s", public)
        if target is None:
            return ()
        return self.policy().scopes_wanted(principal, kind, target.mount, target.native)

    def http_app(self, host: str, admin: ASGIApp | None = None) -> ASGIApp:
        """The ASGI app serving the hub over streamable HTTP, bound to `host`: its own endpoint at `[http] path`,
        each curated one at `path/NAME`, `/healthz` and `/readyz`, and the admin console at `/admin`."""
        from mcp_hub.server.http import build_app  # a hub serving stdio never imports its HTTP app

        return build_app(
            self.endpoint.server,
            endpoints={name: served.server for name, served in self.endpoints.items()},
            host=host,
            path=self.config.http.path,
            health=self.served_health,
            ready=self.ready,
            api_keys=self.config.auth.api_keys,
            oauth=self.config.auth.oauth,
            admin=admin,
            max_request_body=self.config.http.max_request_mb * 1024 * 1024,
            session_idle_timeout=self.config.http.session_idle_seconds,
            cors_origins=self.config.http.cors_origins,
            cluster=self.cluster,
            parking=self.endpoint.parking,
            parkings={name: served.parking for name, served in self.endpoints.items()},
            routes=sign_in_routes(self.cluster.replica if self.cluster is not None else None),
            step_up=self.scopes_wanted,
            cards=self._cards(),
        )

    def _cards(self) -> Cards | None:
        """What the hub's server cards say (`[http] server_cards`; server/http/cards.py), or None: no cards."""
        if not self.config.http.server_cards:
            return None
        from mcp_hub.server.http.cards import Cards

        return Cards(
            name=self.config.hub.name,
            description=self.config.hub.description,
            path=self.config.http.path,
            endpoints={name: settings.description for name, settings in self.config.endpoints.items()},
            api_keys=bool(self.config.auth.api_keys),
            oauth=self.config.auth.oauth is not None,
        )

    async def _serve_http(self, host: str, listening: socket.socket, serving: anyio.Event) -> None:
        port = listening.getsockname()[1]
        admin = None
        if self.config.admin.enabled:  # the console (and what only it uses) loads only when `[admin]` enables it
            from mcp_hub.admin import console

            admin = console(self, host)
        app = self.http_app(host, admin)
        if self.cluster is not None:
            self.cluster.address = self.config.cluster.advertise or _address(host, port, self.config.http.path)
            await self.cluster.register()
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=self.config.hub.log_level,
            access_log=False,  # the hub's own, with the principal and the method: `[hub] access_log`
            lifespan="on",
            ws="none",  # the hub serves no WebSocket: uvicorn need not load a WebSocket library
            timeout_keep_alive=self.config.http.keep_alive,
            forwarded_allow_ips=_forwarded(self.config.http.forwarded_allow_ips),
        )
        server = _HttpServer(config, serving)

        def stop() -> None:
            server.should_exit = True
            if admin is not None:
                admin.close()  # its live streams end: uvicorn waits for every open response

        async with anyio.create_task_group() as tg:
            tg.start_soon(_on_signal, stop)
            tg.start_soon(self._say_ready, _address(host, port, self.config.http.path), serving)
            await server.serve(sockets=[listening])
            tg.cancel_scope.cancel()

    async def _say_ready(self, address: str, serving: anyio.Event) -> None:
        """Once the hub listens and its servers have settled (or the start-up grace is over), one line saying
        where it serves and what: `serving http://127.0.0.1:8765/mcp: 2/2 servers up, 5 tools`."""
        await serving.wait()
        await self._settled()
        servers = self.health()["servers"]
        up = sum(report["state"] == State.UP for report in servers.values())
        tools = len(list(self.endpoint.selection.selected("tools", self.catalog.view("tools"))))
        logger.info("serving %s: %d/%d servers up, %d tools", address, up, len(servers), tools)


def selections_budget(config: HubConfig) -> bool:
    """Whether a curated endpoint sets a result budget of its own."""
    return any(endpoint.max_result_tokens for endpoint in config.endpoints.values())


def _listen(file: str, host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port` (as uvicorn binds one); a port in use is a `ConfigError` naming the fix."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        what = "is in use by another program" if exc.errno == errno.EADDRINUSE else f"cannot be listened on ({exc})"
        raise ConfigError(
            file,
            "http.port",
            f"{host}:{port} {what}; stop that program, or serve on another port with `--port PORT` or [http] port",
        ) from None
    sock.set_inheritable(True)
    return sock


class _HttpServer(uvicorn.Server):
    """Uvicorn, minus its signal handling: it re-raises the signal after shutdown,
    which would end the process before the hub has reaped its children. `serving` is set once it listens."""

    def __init__(self, config: uvicorn.Config, serving: anyio.Event) -> None:
        super().__init__(config)
        self._serving = serving

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._serving.set()

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _address(host: str, port: int, path: str) -> str:
    """The URL of an HTTP endpoint served on `host` (a wildcard host: this machine's name)."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{path}"


async def _open_places(pace: anyio.Semaphore, serving: anyio.Event) -> None:
    """Open `pace`'s places `PACED_AFTER` seconds after `serving` is set."""
    await serving.wait()
    await anyio.sleep(PACED_AFTER)
    for _ in range(STARTS_AT_ONCE):
        pace.release()


async def _take_place(pace: anyio.Semaphore, wanted: anyio.Event) -> bool:
    """Wait for a place in `pace` (True) or for `wanted` (False, no place taken), whichever comes first."""
    took = False
    async with anyio.create_task_group() as tg:

        async def take() -> None:
            nonlocal took
            await pace.acquire()
            took = True
            tg.cancel_scope.cancel()

        async def until_wanted() -> None:
            await wanted.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(take)
        tg.start_soon(until_wanted)
    return took


async def _on_signal(stop: Callable[[], None]) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:  # SIGHUP: reload (live.py)
        async for signum in signals:
            logger.info("received %s; shutting down", signal.Signals(signum).name)
            stop()
            return


def _forwarded(proxies: tuple[str, ...] | None) -> list[str] | None:
    """`[http] forwarded_allow_ips` as uvicorn takes it: None (its default) when unset; [] trusts none."""
    return None if proxies is None else list(proxies)
