"""The hub's first moments: what arrives while the mounts make their first connection.

A client that connects as the hub starts (Claude Desktop launching it over stdio, a client resuming
after a restart) lists at once, and many clients list only once. So a list request that arrives
while mounts are starting waits until every one of them has settled (up, failed or timed out), and a
call to a tool or prompt of a mount that has not listed yet waits for that mount. Both waits are
bounded by one grace that runs from the moment the hub starts its mounts: past it, the hub answers
with what it has, and mounts that come up later arrive by `list_changed`, as they would at any time.

Mounts the catalog already lists from the last known catalog (`[hub] catalog_snapshot`) are not
waited for: their items are there, and a call to one waits for its first connection in
`Upstream.request`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import anyio

from mcp_hub.upstream.supervisor import Upstream


class Startup:
    """Waits for mounts still making their first connection, until `grace` seconds after `begin()`."""

    def __init__(self, upstreams: Mapping[str, Upstream], grace: float, listed: Collection[str] = ()) -> None:
        """`listed`: mounts whose items the catalog already has (from the snapshot); not waited for."""
        self._upstreams = upstreams
        self._awaited = tuple(u for name, u in upstreams.items() if u.config.enabled and name not in listed)
        self._grace = grace
        self._deadline: float | None = None
        self._over = grace <= 0 or not self._awaited
        """Set once the grace has passed or every awaited mount has settled: from then on, nothing waits."""

    @property
    def over(self) -> bool:
        return self._over

    def begin(self) -> None:
        """The mounts start now: the grace runs from here."""
        self._deadline = anyio.current_time() + self._grace

    def _until(self) -> float:
        if self._deadline is None:  # served without `begin()`: the grace runs from the first wait
            self.begin()
        assert self._deadline is not None
        return self._deadline

    async def all_settled(self) -> None:
        """Wait until every awaited mount has settled, or the grace is over."""
        if self._over:
            return
        with anyio.move_on_at(self._until()):
            for upstream in self._awaited:
                await upstream.settled.wait()
        self._over = True

    async def mount_settled(self, mount: str) -> bool:
        """Wait until `mount` has settled, or the grace is over; whether there was anything to wait for."""
        upstream = self._upstreams.get(mount)
        if self._over or upstream is None or upstream.settled.is_set() or upstream not in self._awaited:
            return False
        upstream.wanted.set()
        with anyio.move_on_at(self._until()):
            await upstream.settled.wait()
        return True
