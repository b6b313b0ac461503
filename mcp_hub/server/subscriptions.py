"""Resource subscriptions: which clients want to hear about which resource, and the servers asked for them.

A handshake-era client subscribes with `resources/subscribe`; a 2026-07-28
client names URIs in its `subscriptions/listen` filter, for as long as that
stream stays open. Either way the owning server is asked once per resource (its
own `resources/subscribe`, or its listen filter; see `Upstream.subscribe`),
however many clients want it, and is told to stop when the last one leaves.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from mcp_hub.upstream import Upstream


class Subscriptions:
    """Who holds a subscription to each (mount, server URI)."""

    def __init__(self, upstreams: Mapping[str, Upstream]) -> None:
        self._upstreams = upstreams
        self._holders: dict[tuple[str, str], set[Hashable]] = {}

    async def add(self, holder: Hashable, mount: str, uri: str) -> None:
        holders = self._holders.setdefault((mount, uri), set())
        first = not holders
        holders.add(holder)
        if first:
            await self._upstreams[mount].subscribe(uri)

    async def remove(self, holder: Hashable, mount: str, uri: str) -> None:
        holders = self._holders.get((mount, uri))
        if holders is None or holder not in holders:
            return
        holders.discard(holder)
        if not holders:
            del self._holders[(mount, uri)]
            upstream = self._upstreams.get(mount)
            if upstream is not None:  # None: the mount was removed by a configuration reload
                await upstream.unsubscribe(uri)

    async def drop(self, holder: Hashable) -> None:
        """The holder went away: release everything it held."""
        for mount, uri in [key for key, holders in self._holders.items() if holder in holders]:
            await self.remove(holder, mount, uri)

    def held(self, mount: str, uri: str) -> bool:
        return (mount, uri) in self._holders
