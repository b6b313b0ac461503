"""The Redis that hub replicas share (`[cluster] redis = "redis://..."`), and whether it answers.

With it, the policy's rate limits are counted in Redis (`limits`' async Redis storage, on the `redis`
client) and kept results live there (cache/shared.py), so N replicas behind a load balancer keep one
budget and one cache; the admin console keeps its sessions there and counts its login attempts there
(admin/sessions.py, admin/throttle.py). Without `[cluster]` nothing here is used and nothing needs Redis.

Each replica also has an id (`replica`), registered in Redis with the address of its MCP endpoint and a
time to live its heartbeat renews (`register`, `address_of`): the ids the hub puts in what it hands
clients (the `Mcp-Session-Id` of a handshake-era session, the `requestState` of a parked call) name the
replica that holds them, and the others forward such requests there (server/http/replicas.py). The key
parked calls' states are sealed with is shared (`sealing_key`: derived from `[cluster] secret`, or one
random key stored in Redis by the first replica, set-if-absent), and a sealed state is accepted once
(`claim`: SET NX with its expiry).

Losing Redis does not refuse calls: the first command that fails marks it down (one warning on the
`mcp_hub.cluster` logger), and from then on each replica counts rate limits and keeps results in its
own memory, without trying Redis on the call path, until `run()`'s ping gets an answer again (an
info line); then the shared state is used again. What each replica kept or counted meanwhile is
dropped, and the shared cache is cleared, since invalidations during the outage reached no other
replica. Meanwhile replicas are found at the address last read for them (a replica not looked up before
the outage is gone, for this one), and a sealed state is accepted once per replica.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable

import anyio

logger = logging.getLogger("mcp_hub.cluster")

TIMEOUT = 1.0
"""Seconds a Redis command (and a connection) may take before Redis counts as down."""

CHECK_EVERY = 1.0
"""Seconds between pings: while up, to notice a loss with no traffic; while down, to notice the return."""


def errors() -> tuple[type[BaseException], ...]:
    """What a Redis command raises when Redis is unreachable, slow or refusing (`except errors()`: a function,
    so that `redis` is imported only by a hub with a cluster, where the exception comes from; a hub without
    one never loads it, some 7 MiB)."""
    from redis.exceptions import RedisError

    return (RedisError, OSError)


REPLICA_TTL = 5.0
"""Seconds a replica's registration lives without its heartbeat (renewed every `CHECK_EVERY`)."""

KEY_PREFIX = "mcp-hub:"


class Cluster:
    def __init__(self, url: str, secret: str | None = None) -> None:
        self.url = url
        self.replica = secrets.token_hex(6)
        """This replica's id (hex, no dots), new each time the process starts."""
        self.address: str | None = None
        """The URL of this replica's MCP endpoint, as the other replicas reach it (set when HTTP is served)."""
        self._secret = secret
        self._addresses: dict[str, str] = {}
        """The address last read for each other replica: used while Redis is down."""
        self._claimed: dict[str, float] = {}
        """Claims made while Redis was down: token -> when it expires."""
        self.sealing: bytes | None = hashlib.sha256(b"mcp-hub seal\0" + secret.encode()).digest() if secret else None
        """The key every replica seals parked calls' states with; None until read from Redis."""
        self.on_sealing_key: list[Callable[[bytes], None]] = []
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self.client = redis.asyncio.Redis.from_url(
            url,
            socket_timeout=TIMEOUT,
            socket_connect_timeout=TIMEOUT,
            retry=Retry(NoBackoff(), 0),  # a failure is reported at once; run() does the retrying
        )
        self.up = True
        """Whether shared state is used (optimistic at start: the first failure or ping says otherwise)."""
        self.last_error: str | None = None
        self.on_recovered: list[Callable[[], Awaitable[None]]] = []
        """Called when Redis answers again after an outage, before shared state is used again."""

    def failed(self, exc: BaseException) -> None:
        """A Redis command failed: use per-replica state until Redis answers again."""
        self.last_error = f"{type(exc).__name__}: {exc}"
        if not self.up:
            return
        self.up = False
        logger.warning(
            "cluster: Redis is unreachable (%s); until it answers again, rate limits are counted and results kept "
            "per replica, pins and the admin console's sessions are this replica's own, a sealed state's single use "
            "is remembered here only, and other replicas are found where they last were",
            self.last_error,
        )

    def report(self) -> dict[str, object]:
        """For /healthz and /readyz (the URL is left out: it may carry a password)."""
        return {"redis": "up" if self.up else "down", "last_error": None if self.up else self.last_error}

    async def run(self) -> None:
        """Register this replica and renew it every `CHECK_EVERY` seconds (a ping when it serves no HTTP):
        notice a loss when no call does, and its return; read the shared sealing key until it is known."""
        first = True
        while True:
            if not first:
                await anyio.sleep(CHECK_EVERY)
            first = False
            try:
                with anyio.fail_after(2 * TIMEOUT):
                    if not await self._renew():
                        await self.client.ping()
                    if self.sealing is None:
                        await self._read_sealing_key()
                    if not self.up:
                        for hook in self.on_recovered:
                            await hook()
            except errors() as exc:
                self.failed(exc)
                continue
            if not self.up:
                self.up, self.last_error = True, None
                logger.info("cluster: Redis answers again; rate limits and kept results are shared again")

    async def register(self) -> None:
        """Register this replica's `address` now (then `run` renews it)."""
        if self.up:
            try:
                with anyio.fail_after(TIMEOUT):
                    await self._renew()
            except errors() as exc:
                self.failed(exc)

    async def _renew(self) -> bool:
        if self.address is None:
            return False
        await self.client.set(self._replica_key(self.replica), self.address, px=int(REPLICA_TTL * 1000))
        return True

    async def _read_sealing_key(self) -> None:
        key = KEY_PREFIX + "sealing-key"
        await self.client.set(key, secrets.token_bytes(32), nx=True)
        value = await self.client.get(key)
        if isinstance(value, bytes) and len(value) >= 32:
            self.sealing = value
            for hook in self.on_sealing_key:
                hook(value)

    def _replica_key(self, replica: str) -> str:
        return f"{KEY_PREFIX}replica:{replica}"

    async def address_of(self, replica: str) -> str | None:
        """The MCP endpoint of replica `replica`, or None if it is not registered (it stopped, or died and its
        registration expired). While Redis is down: the address last read for it."""
        if replica == self.replica:
            return self.address
        if self.up:
            try:
                with anyio.fail_after(TIMEOUT):
                    value = await self.client.get(self._replica_key(replica))
            except errors() as exc:  # a TimeoutError is an OSError
                self.failed(exc)
            else:
                if not isinstance(value, bytes):
                    self._addresses.pop(replica, None)
                    return None
                address = self._addresses[replica] = value.decode()
                return address
        return self._addresses.get(replica)

    async def claim(self, token: str, ttl: float) -> bool:
        """Whether `token` is claimed for the first time (for `ttl` seconds): in Redis (SET NX PX), or in this
        replica's memory while Redis is down."""
        if self.up:
            try:
                with anyio.fail_after(TIMEOUT):
                    return bool(await self.client.set(f"{KEY_PREFIX}claim:{token}", b"1", nx=True, px=int(ttl * 1000)))
            except errors() as exc:  # a TimeoutError is an OSError
                self.failed(exc)
        now = time.monotonic()
        for old in [key for key, until in self._claimed.items() if until < now]:
            del self._claimed[old]
        if token in self._claimed:
            return False
        self._claimed[token] = now + ttl
        return True

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(TIMEOUT):
            if self.address is not None and self.up:
                await self.client.delete(self._replica_key(self.replica))
            await self.client.aclose()


def limits_uri(url: str) -> str:
    """The `limits` storage URI of a Redis URL."""
    if url.startswith("unix://"):
        return "async+redis+unix://" + url.removeprefix("unix://")
    return "async+" + url
