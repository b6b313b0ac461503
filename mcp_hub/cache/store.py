"""Where kept results live: the `CacheStore` interface, and `MemoryStore`, the one-process store.

A store holds values (JSON bytes) under string keys, each for a time to live, and counters
("generations") that the keys are built from: a change a server announces (a resource updated,
a list changed, a reconnection) moves the counters it concerns, so every key built from them
before is never asked for again and its entry ages out. The same scheme fits a store shared by
several hub processes (Redis: `SET key value PX ttl`, `INCR` and `MGET` for the counters), which
is why nothing here walks or deletes entries by pattern.

`generations()` answers an epoch first: `clear()` moves it, so that no key built before a clear,
not even one a call still in flight is about to write, is reachable after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cachetools import TLRUCache

MAX_SCOPES = 100_000
"""How many counters `MemoryStore` keeps (one per mount and kind, and one per resource URI a server said
was updated); past it the store is cleared and counting starts over (see `clear`)."""


@dataclass(frozen=True, slots=True)
class Stored:
    """A kept value and how much longer it is fresh, in seconds."""

    value: bytes
    remaining: float


class CacheStore(Protocol):
    """Kept results and the counters their keys are built from. Every method may be called concurrently from
    one event loop; a store shared between processes does each one atomically."""

    async def get(self, key: str) -> Stored | None:
        """The fresh value under `key`, or None."""
        ...

    async def put(self, key: str, value: bytes, ttl: float) -> None:
        """Keep `value` under `key` for `ttl` seconds."""
        ...

    async def generations(self, scopes: Sequence[str]) -> tuple[int, ...]:
        """The epoch, then the counter of each scope (0 for one never moved)."""
        ...

    async def bump(self, scopes: Iterable[str]) -> None:
        """Move the counter of each scope."""
        ...

    async def clear(self) -> None:
        """Forget every value: move the epoch."""
        ...


ENTRY_OVERHEAD = 200
"""Bytes a kept value costs beyond its own (its key, its tuple, the cache's bookkeeping), roughly."""


class MemoryStore:
    """A `CacheStore` in this process: at most `max_entries` values taking at most `max_bytes` together, least
    recently used first out, each gone when its time is up (`cachetools.TLRUCache`, on the monotonic clock)."""

    def __init__(self, max_entries: int, max_bytes: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._max_entries = max_entries
        self._entries: TLRUCache[str, tuple[bytes, float]] = TLRUCache(
            maxsize=max_bytes, ttu=_expires, timer=self._clock, getsizeof=_size
        )
        self._scopes: dict[str, int] = {}
        self._epoch = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: str) -> Stored | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        remaining = entry[1] - self._clock()
        return Stored(entry[0], remaining) if remaining > 0 else None

    async def put(self, key: str, value: bytes, ttl: float) -> None:
        entry = (value, self._clock() + ttl)
        if ttl <= 0 or _size(entry) > self._entries.maxsize:
            return
        self._entries[key] = entry
        while len(self._entries) > self._max_entries:
            self._entries.popitem()

    @property
    def size(self) -> float:
        """The bytes the kept values take, roughly (see `ENTRY_OVERHEAD`)."""
        return self._entries.currsize

    async def generations(self, scopes: Sequence[str]) -> tuple[int, ...]:
        return (self._epoch, *(self._scopes.get(scope, 0) for scope in scopes))

    async def bump(self, scopes: Iterable[str]) -> None:
        for scope in scopes:
            self._scopes[scope] = self._scopes.get(scope, 0) + 1
        if len(self._scopes) > MAX_SCOPES:
            await self.clear()

    async def clear(self) -> None:
        self._epoch += 1
        self._scopes.clear()
        self._entries.clear()


def _expires(key: str, entry: tuple[bytes, float], now: float) -> float:
    return entry[1]


def _size(entry: tuple[bytes, float]) -> int:
    return len(entry[0]) + ENTRY_OVERHEAD
