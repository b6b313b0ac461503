"""Login attempts, rate-limited: a guessed key costs time, whatever the replica it is tried on.

Each attempt (a login form sent with its CSRF token, right key or wrong) counts against two moving
windows: `PER_ADDRESS` for the client's address, and `PER_ADDRESS_AND_KEY` for that address and the
key tried (by a fingerprint of it, never the key). Over either, the attempt is refused before the key
is looked at, with the seconds until one may be made again. A single sign-on begun counts against the address's
window too (`sign_in`). The counts are `limits`' (the hub's
`RateLimiter`, chain/guard.py): in memory, or with `[cluster] redis` in Redis, so the budget is one
for every replica (per replica while Redis is down). The client's address is the one uvicorn gives:
the peer's, or the `X-Forwarded-For` of a proxy it trusts (`FORWARDED_ALLOW_IPS`, by default loopback).
"""

from __future__ import annotations

import hashlib

from mcp_hub.chain.guard import RateLimiter
from mcp_hub.cluster import Cluster

PER_ADDRESS_AND_KEY = "5/minute"
"""Attempts one address may make with one key."""
PER_ADDRESS = "20/minute"
"""Attempts one address may make, whatever the keys."""


class LoginThrottle:
    def __init__(self, cluster: Cluster | None = None) -> None:
        self._limiter = RateLimiter(cluster)

    async def attempt(self, address: str, key: str) -> float | None:
        """Count one login attempt from `address` with `key`: None when it may go on, else the seconds until
        one may be made again."""
        wait = await self._limiter.hit(PER_ADDRESS, "admin-login", address)
        if wait is None:
            tried = hashlib.sha256(b"mcp-hub admin login\0" + key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            wait = await self._limiter.hit(PER_ADDRESS_AND_KEY, "admin-login", address, tried)
        return wait

    async def sign_in(self, address: str) -> float | None:
        """Count one single sign-on begun from `address` (sso.py), against `PER_ADDRESS`: None when it may go on,
        else the seconds until one may be begun again. What each one keeps until its answer comes is bounded so."""
        return await self._limiter.hit(PER_ADDRESS, "admin-login", address)
