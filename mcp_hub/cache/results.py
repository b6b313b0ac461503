"""The kept results of calls: looked up, filled by one call at a time per key, and invalidated.

`ResultCache.serve(lookup, call)` answers a `Lookup` from the store when it can, and otherwise
by `call()`, keeping what `call` says may be kept. While one call fills a key, other calls for
the same key wait for it (single flight) and are then answered from the store; when the first
call kept nothing (an error, a question for its client, a result too large) or did not finish,
each waiting call goes on to make its own.

What invalidates, and the counters it moves (see store.py):

- a policy or pin change, a configuration reload: everything (`clear`);
- a mount's reconnection: the mount (`listed(mount, every kind)`);
- a server's `list_changed`: the mount's tools, or its resources (`listed`);
- a server's `notifications/resources/updated`: that resource (`resource_updated`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import pydantic_core

from mcp_hub import wire
from mcp_hub.cache.keys import cache_key
from mcp_hub.cache.store import CacheStore

logger = logging.getLogger("mcp_hub.cache")

Scope = Literal["public", "private"]

_RESOURCE_KINDS = frozenset({"resources", "resource_templates"})


def mount_scope(mount: str) -> str:
    return f"mount\x00{mount}"


def kind_scope(mount: str, kind: Literal["tools", "resources"]) -> str:
    return f"{kind}\x00{mount}"


def resource_scope(mount: str, uri: str) -> str:
    return f"uri\x00{mount}\x00{uri}"


@dataclass(frozen=True, slots=True)
class Lookup:
    """What a call's result is kept under: `parts` of the key (see keys.py) with `who` (the principal, or
    None for a result its server said anyone may share) in front, and the store's counters it depends on."""

    who: str
    parts: tuple[str, ...]
    scopes: tuple[str, ...]
    shareable: bool = False
    """A result kept for anyone may answer it (resources: a server's "public" result)."""


@dataclass(slots=True)
class Keep:
    """What a call says about keeping its result: for how long (None or 0: not kept), and for whom."""

    ttl: float | None
    scope: Scope = "private"


@dataclass(frozen=True, slots=True)
class Served:
    """A call's answer: the result (the caller's own copy), whether it came from the store, and how much
    longer it is fresh (seconds; None when it is not kept)."""

    result: dict[str, Any]
    cached: bool
    remaining: float | None
    scope: Scope = "private"


@dataclass(slots=True)
class _Flight:
    done: anyio.Event = field(default_factory=anyio.Event)


class ResultCache:
    def __init__(self, store: CacheStore, *, max_entry_bytes: int) -> None:
        self.store = store
        self._max_entry_bytes = max_entry_bytes
        self._flights: dict[str, _Flight] = {}
        self.waiting = 0
        """How many calls wait for another call to fill their key."""

    async def serve(self, lookup: Lookup, call: Callable[[], Awaitable[tuple[dict[str, Any], Keep]]]) -> Served:
        """The kept result for `lookup`, or `call()`'s (kept as it says)."""
        generations = await self.store.generations(lookup.scopes)
        own = cache_key((lookup.who, *lookup.parts), generations)
        anyone = cache_key(("", *lookup.parts), generations) if lookup.shareable else None
        flight_key = anyone or own
        while True:
            found = await self._find(own, anyone)
            if found is not None:
                return found
            flight = self._flights.get(flight_key)
            if flight is None:
                break
            self.waiting += 1
            try:
                await flight.done.wait()
            finally:
                self.waiting -= 1
        flight = self._flights[flight_key] = _Flight()
        try:
            result, keep = await call()
            return await self._keep(result, keep, own, anyone)
        finally:
            del self._flights[flight_key]
            flight.done.set()

    async def _find(self, own: str, anyone: str | None) -> Served | None:
        stored = await self.store.get(own)
        scope: Scope = "private"
        if stored is None and anyone is not None:
            stored, scope = await self.store.get(anyone), "public"
        if stored is None:
            return None
        return Served(pydantic_core.from_json(stored.value), True, stored.remaining, scope)

    async def _keep(self, result: dict[str, Any], keep: Keep, own: str, anyone: str | None) -> Served:
        if not keep.ttl or keep.ttl <= 0:
            return Served(result, False, None)
        value = wire.dumps(result)
        if len(value) > self._max_entry_bytes:
            logger.debug("cache: a result of %d bytes is larger than max_entry_bytes; not kept", len(value))
            return Served(result, False, None)
        scope: Scope = "public" if keep.scope == "public" and anyone is not None else "private"
        await self.store.put(anyone if scope == "public" and anyone is not None else own, value, keep.ttl)
        return Served(result, False, keep.ttl, scope)

    # -- invalidation ---------------------------------------------------------------

    async def clear(self) -> None:
        """Forget everything (the policy, the pins or the configuration changed)."""
        await self.store.clear()

    async def listed(self, mount: str, kinds: Collection[str], every: Collection[str]) -> None:
        """A mount lists `kinds` again: all of `every` kind when it (re)connected, else what it said changed."""
        scopes: list[str] = []
        if set(every) <= set(kinds):
            scopes.append(mount_scope(mount))
        else:
            if "tools" in kinds:
                scopes.append(kind_scope(mount, "tools"))
            if not _RESOURCE_KINDS.isdisjoint(kinds):
                scopes.append(kind_scope(mount, "resources"))
        if scopes:
            await self.store.bump(scopes)

    async def resource_updated(self, mount: str, uri: str) -> None:
        await self.store.bump([resource_scope(mount, uri)])


def scopes_of(mount: str, kind: Literal["tools", "resources"], uri: str | None = None) -> tuple[str, ...]:
    """The counters a result of `kind` on `mount` (of the resource `uri`) depends on."""
    scopes: Sequence[str] = (mount_scope(mount), kind_scope(mount, kind))
    return (*scopes, resource_scope(mount, uri)) if uri is not None else tuple(scopes)
