"""`RedisStore`: kept results shared by hub replicas, in the Redis of `[cluster]` (see mcp_hub/cluster.py).

Each value is one Redis string, `SET key value PX ttl`, gone when its time is up; Redis's own
`maxmemory` bounds them all. The counters the keys are built from are Redis counters: `bump` is
`INCR` (each counter lives two days past its last move, longer than any entry built from it, so one
that ages out and starts over at 0 cannot reach an entry of its earlier 0), `generations` one
`MGET`, and `clear` moves the epoch. Every method is one round trip.

While Redis is down (`Cluster.up` false) the store answers from `local`, this replica's memory;
when Redis answers again, `local` is emptied and the shared epoch moved, since what a server said
changed during the outage reached this replica only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mcp_hub.cache.store import MemoryStore, Stored
from mcp_hub.cluster import Cluster, errors

PREFIX = "mcp-hub:cache:"
EPOCH = PREFIX + "epoch"
COUNTER_TTL_MS = 2 * 86_400 * 1000
"""How long a counter outlives its last move: longer than any entry (at most a day, see chain/cache.py)."""


class RedisStore:
    def __init__(self, cluster: Cluster, local: MemoryStore) -> None:
        self._cluster = cluster
        self._redis = cluster.client
        self.local = local
        cluster.on_recovered.append(self._recovered)

    async def get(self, key: str) -> Stored | None:
        if self._cluster.up:
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    value, remaining_ms = await pipe.get(PREFIX + key).pttl(PREFIX + key).execute()
            except errors() as exc:
                self._cluster.failed(exc)
            else:
                if value is None or remaining_ms <= 0:
                    return None
                return Stored(bytes(value), remaining_ms / 1000)
        return await self.local.get(key)

    async def put(self, key: str, value: bytes, ttl: float) -> None:
        ttl_ms = int(ttl * 1000)
        if ttl_ms <= 0:
            return
        if self._cluster.up:
            try:
                await self._redis.set(PREFIX + key, value, px=ttl_ms)
                return
            except errors() as exc:
                self._cluster.failed(exc)
        await self.local.put(key, value, ttl)

    async def generations(self, scopes: Sequence[str]) -> tuple[int, ...]:
        if self._cluster.up:
            try:
                counts = await self._redis.mget([EPOCH, *(_counter(scope) for scope in scopes)])
            except errors() as exc:
                self._cluster.failed(exc)
            else:
                return tuple(int(count) if count is not None else 0 for count in counts)
        return await self.local.generations(scopes)

    async def bump(self, scopes: Iterable[str]) -> None:
        scopes = list(scopes)
        if self._cluster.up and scopes:
            try:
                async with self._redis.pipeline(transaction=True) as pipe:
                    for scope in scopes:
                        pipe.incr(_counter(scope)).pexpire(_counter(scope), COUNTER_TTL_MS)
                    await pipe.execute()
                return
            except errors() as exc:
                self._cluster.failed(exc)
        await self.local.bump(scopes)

    async def clear(self) -> None:
        if self._cluster.up:
            try:
                await self._redis.incr(EPOCH)
            except errors() as exc:
                self._cluster.failed(exc)
        await self.local.clear()

    async def _recovered(self) -> None:
        """Redis answers again: what this replica kept meanwhile is dropped, and what every replica kept in Redis
        before is forgotten (an invalidation during the outage reached this replica only). Raises if Redis fails
        again (the cluster then stays down)."""
        await self._redis.incr(EPOCH)
        await self.local.clear()


def _counter(scope: str) -> str:
    return PREFIX + "gen:" + scope
