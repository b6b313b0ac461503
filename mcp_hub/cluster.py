"""The Redis that hub replicas share (`[cluster] redis = "redis://..."`), and whether it answers.

With it, the policy's rate limits are counted in Redis (`limits`' async Redis storage, on the `redis`
client) and kept results live there (cache/shared.py), so N replicas behind a load balancer keep one
budget and one cache. Without `[cluster]` nothing here is used and nothing needs Redis.

Losing Redis does not refuse calls: the first command that fails marks it down (one warning on the
`mcp_hub.cluster` logger), and from then on each replica counts rate limits and keeps results in its
own memory, without trying Redis on the call path, until `run()`'s ping gets an answer again (an
info line); then the shared state is used again. What each replica kept or counted meanwhile is
dropped, and the shared cache is cleared, since invalidations during the outage reached no other
replica.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

logger = logging.getLogger("mcp_hub.cluster")

TIMEOUT = 1.0
"""Seconds a Redis command (and a connection) may take before Redis counts as down."""

CHECK_EVERY = 1.0
"""Seconds between pings: while up, to notice a loss with no traffic; while down, to notice the return."""

ERRORS: tuple[type[BaseException], ...] = (RedisError, OSError)
"""What a Redis command raises when Redis is unreachable, slow or refusing."""


class Cluster:
    def __init__(self, url: str) -> None:
        self.url = url
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
            "cluster: Redis is unreachable (%s); rate limits are counted per replica and results kept per "
            "replica until it answers again",
            self.last_error,
        )

    def report(self) -> dict[str, object]:
        """For /healthz and /readyz (the URL is left out: it may carry a password)."""
        return {"redis": "up" if self.up else "down", "last_error": None if self.up else self.last_error}

    async def run(self) -> None:
        """Ping Redis every `CHECK_EVERY` seconds: notice a loss when no call does, and its return."""
        while True:
            await anyio.sleep(CHECK_EVERY)
            try:
                with anyio.fail_after(2 * TIMEOUT):
                    await self.client.ping()
                    if not self.up:
                        for hook in self.on_recovered:
                            await hook()
            except ERRORS as exc:
                self.failed(exc)
                continue
            if not self.up:
                self.up, self.last_error = True, None
                logger.info("cluster: Redis answers again; rate limits and kept results are shared again")

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(TIMEOUT):
            await self.client.aclose()


def limits_uri(url: str) -> str:
    """The `limits` storage URI of a Redis URL."""
    if url.startswith("unix://"):
        return "async+redis+unix://" + url.removeprefix("unix://")
    return "async+" + url
