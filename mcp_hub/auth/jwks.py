"""The issuer's signing keys (its JWKS), cached: no network round trip per token once they are known.

The key set is fetched when first needed and kept `max_age` seconds (a TTL cache). A token signed
with a key id the set does not have makes the set be fetched again (the issuer rotated its keys),
but never sooner than `refetch_interval` seconds after the last fetch, whatever the tokens say:
made-up key ids cannot make the hub hammer the issuer, and an issuer that cannot be reached is not
asked again sooner either. One fetch at a time; callers arriving during a fetch wait for it rather
than start their own. Keys fetched once are kept past `max_age` while the issuer cannot be reached.

Only public keys for signatures are kept: a symmetric (`oct`) key, a key whose `use` is not `sig`,
or one joserfc cannot read is left out (the others still serve).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from cachetools import TTLCache
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, Key, OKPKey, RSAKey, import_key

from mcp_hub.auth.discovery import fetch_json
from mcp_hub.auth.refusal import Refusal, Unavailable

logger = logging.getLogger("mcp_hub.auth")

_PUBLIC_KEY_TYPES = ("RSA", "EC", "OKP")


class KeySet:
    """The issuer's signing keys by key id, fetched from `jwks_uri()` (which may discover it)."""

    def __init__(
        self,
        client: httpx2.AsyncClient,
        jwks_uri: Callable[[], Awaitable[str]],
        *,
        refetch_interval: float,
        max_age: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._jwks_uri = jwks_uri
        self._refetch_interval = refetch_interval
        self._clock = clock
        self._cache: TTLCache[str, dict[str | None, Key]] = TTLCache(maxsize=1, ttl=max_age, timer=clock)
        self._lock = anyio.Lock()
        self._fetched_at: float | None = None
        self._last: dict[str | None, Key] | None = None
        """The keys last fetched, kept past `max_age` while the issuer cannot be reached."""
        self._failure: str | None = None
        self.fetches = 0
        """How many times the key set was fetched (for `check --connect` and the tests)."""

    async def key(self, kid: str | None) -> Key:
        """The public key with this id (no id: the set's only key); `Refusal` when the issuer has none."""
        keys = self._cache.get("keys")
        if keys is None or kid not in keys:
            keys = await self._refresh()
        found = keys.get(kid)
        if found is None:
            named = f"key id {kid!r}" if kid is not None else "no key id (and the issuer has more than one key)"
            raise Refusal(f"the token is signed with {named}, which is not among the issuer's keys")
        return found

    async def load(self) -> int:
        """Fetch the key set now; the number of usable keys in it."""
        async with self._lock:
            return len(await self._fetch())

    async def _refresh(self) -> dict[str | None, Key]:
        """The keys, fetched again unless that was done too recently (or while this caller waited)."""
        seen = self.fetches
        async with self._lock:
            if self._last is not None and (self.fetches != seen or not self._may_fetch()):
                return self._last
            if self._last is None and self._failure is not None and not self._may_fetch():
                raise Unavailable(self._failure)  # an unreachable issuer is not asked again for each request
            try:
                keys = await self._fetch()
            except Unavailable as exc:
                self._failure = str(exc)
                if self._last is None:
                    raise
                logger.warning("the issuer's key set could not be fetched again; the keys known are kept")
                return self._last
            self._failure = None
            return keys

    def _may_fetch(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= self._refetch_interval

    async def _fetch(self) -> dict[str | None, Key]:
        self._fetched_at = self._clock()
        self.fetches += 1
        url = await self._jwks_uri()
        document = await fetch_json(self._client, "GET", url, headers={"Accept": "application/json"})
        found = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(found, list):
            raise Unavailable(f'{url} is not a JSON Web Key Set (no "keys" array)')
        keys: dict[str | None, Key] = {}
        for entry in found:
            key = _public_signing_key(entry)
            if key is not None:
                keys[key.kid] = key
        if len(keys) == 1:
            keys[None] = next(iter(keys.values()))  # a token without a key id takes the only key
        self._cache["keys"] = self._last = keys
        return keys


def _public_signing_key(entry: Any) -> Key | None:
    if not isinstance(entry, dict) or entry.get("kty") not in _PUBLIC_KEY_TYPES or entry.get("use", "sig") != "sig":
        return None
    public = {name: value for name, value in entry.items() if name not in ("d", "p", "q", "dp", "dq", "qi")}
    try:
        key = import_key(public)
    except (JoseError, ValueError, TypeError):
        logger.warning("a key of the issuer's key set could not be read; it is left out")
        return None
    return key if isinstance(key, RSAKey | ECKey | OKPKey) else None
