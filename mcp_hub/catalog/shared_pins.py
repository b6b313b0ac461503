"""Pins shared by hub replicas (`[cluster]`): one pins document in Redis.

The document (`{"pins": ..., "pending": ...}`, as in the pins file) is the JSON string at `mcp-hub:pins`,
beside a counter, `mcp-hub:pins:version`, that each write increments in the same transaction, and only
if no other write came first (WATCH). Each replica reads the two (`pull`, one round trip) before it
admits a server's tools and once a second; when the counter moved it takes the document as its pins
(and writes it to its own pins file). What a replica changes (a tool pinned the first time it is seen,
a change held, flagged or accepted by `on_change`, its pins file edited) it writes back (`push`), unless
another replica wrote first: it then pulls and admits again. So a tool is pinned by the first replica
that sees it, a change held on one is held on all, and `mcp-hub pins accept` with `[cluster]` accepts
in Redis (`accept_shared`): every replica releases the tool within a second.

While Redis is down each replica keeps to its own pins (its file), as without `[cluster]`; once it is
back, a replica whose pins changed meanwhile writes them unless another wrote first, whose pins then
win. The counter moves by a random step (`_step`), not by one: a Redis that lost its data (restarted
without persistence, its keys evicted) counts again from zero, and a write there must not land on the
very version a replica last pulled, which that replica would take for nothing new (and write over).
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

import anyio

from mcp_hub.catalog.pins import PinStore, _now
from mcp_hub.cluster import TIMEOUT, Cluster, errors

logger = logging.getLogger("mcp_hub.pins")

DOCUMENT = "mcp-hub:pins"
VERSION = "mcp-hub:pins:version"


class SharedPins:
    def __init__(self, cluster: Cluster, store: PinStore) -> None:
        self._cluster = cluster
        self._store = store
        self._seen: int | None = None
        """The version last pulled (None: none yet)."""
        self._pushed = -1
        """The store's revision last pushed or pulled."""

    @property
    def unpushed(self) -> bool:
        return self._store.revision != self._pushed

    async def pull(self) -> bool:
        """Take the shared pins if another replica changed them since the last pull; True when they changed."""
        if not self._cluster.up:
            return False
        try:
            with anyio.fail_after(TIMEOUT):
                version, text = await self._cluster.client.mget(VERSION, DOCUMENT)
        except errors() as exc:
            self._cluster.failed(exc)
            return False
        number = int(version or 0)
        if number == self._seen:
            return False
        self._seen = number
        document = _parsed(text)
        if document is None:  # none yet (or not readable): this replica's own pins start it
            return False
        self._store.replace(*document)
        self._pushed = self._store.revision
        return True

    async def push(self) -> bool:
        """Write this replica's pins if they changed since the last pull or push; False: another replica wrote
        first (pull, admit again, push again)."""
        if not self._cluster.up or not self.unpushed or self._seen is None:
            return True
        revision = self._store.revision
        text = json.dumps({"version": 1, "pins": self._store.pins, "pending": self._store.pending})
        try:
            with anyio.fail_after(TIMEOUT):
                async with self._cluster.client.pipeline(transaction=True) as pipe:
                    await pipe.watch(VERSION)
                    if int(await pipe.get(VERSION) or 0) != self._seen:
                        return False
                    pipe.multi()
                    pipe.set(DOCUMENT, text)
                    pipe.incrby(VERSION, _step())
                    _, version = await pipe.execute()
        except _watch_error():
            return False
        except errors() as exc:
            self._cluster.failed(exc)
            return True
        self._seen, self._pushed = int(version), revision
        return True


def _parsed(text: Any) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]] | None:
    if text is None:
        return None
    try:
        document = json.loads(text)
        pins, pending = document["pins"], document.get("pending", {})
    except (ValueError, KeyError, TypeError):
        logger.error("the shared pins in Redis (%s) are not a pins document; this replica keeps its own", DOCUMENT)
        return None
    if not isinstance(pins, dict) or not isinstance(pending, dict):
        return None
    return pins, pending


def _step() -> int:
    """How far a write moves the version: a random step, so that versions counted again after Redis lost its data
    do not repeat the ones replicas saw before (one in 2**32 may)."""
    return secrets.randbelow(1 << 32) + 1


def _watch_error() -> type[Exception]:
    """Redis's "another client wrote first" (imported where a cluster has loaded `redis`: see cluster.errors)."""
    from redis.exceptions import WatchError

    return WatchError


def _client(url: str) -> Any:
    """A blocking Redis client, for the CLI."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT)


def read_shared(url: str) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """The replicas' pins and pending changes, read from Redis (for `mcp-hub pins`)."""
    client = _client(url)
    try:
        return _parsed(client.get(DOCUMENT)) or ({}, {})
    finally:
        client.close()


def accept_shared(url: str, keys: list[str] | None) -> list[str]:
    """Accept pending changes (all when `keys` is None) in the replicas' shared pins; returns those accepted."""
    client = _client(url)
    try:
        while True:
            with client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(VERSION, DOCUMENT)
                    pins, pending = _parsed(pipe.get(DOCUMENT)) or ({}, {})
                    chosen = list(pending) if keys is None else [key for key in keys if key in pending]
                    if not chosen:
                        return []
                    for key in chosen:
                        pins[key] = {"fingerprint": pending.pop(key)["fingerprint"], "since": _now()}
                    pipe.multi()
                    pipe.set(DOCUMENT, json.dumps({"version": 1, "pins": pins, "pending": pending}))
                    pipe.incrby(VERSION, _step())
                    pipe.execute()
                    return chosen
                except _watch_error():
                    continue
    finally:
        client.close()
