"""Telling clients which of the hub's lists changed, at most once a `WINDOW`.

A client told `notifications/tools/list_changed` lists the tools again, and most do so at once. As a hub of
twenty servers starts, or as servers restart together, the catalog changes once per server within a second or
two: told each time, a client would list everything twenty times over. Changes are announced as they come when
none was announced in the last `WINDOW`; those that come sooner are gathered and announced together when the
window ends (so the last of a burst is never left untold). Within one announcement each endpoint's clients hear
of each kind once, in order.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection

import anyio

logger = logging.getLogger("mcp_hub.server")

WINDOW = 0.25
"""Seconds after an announcement during which changes are gathered rather than announced."""


class Announcements:
    """Changes to announce (`changed`), announced by `run` (for the hub's life, in its task group) through `send`.
    While `run` is not running (before the hub serves, or after), a change is announced by `changed` at once."""

    def __init__(self, send: Callable[[Collection[str], bool], Awaitable[None]], window: float = WINDOW) -> None:
        self._send = send
        self._window = window
        self._kinds: set[str] = set()
        self._policy = False
        self._wake = anyio.Event()
        self._quiet = anyio.Event()
        self._quiet.set()
        self._running = False

    async def changed(self, kinds: Collection[str], *, policy: bool = False) -> None:
        """These kinds' lists changed (`policy`: the policy did, which may change what any caller sees)."""
        if not self._running:
            await self._send(kinds, policy)
            return
        self._kinds.update(kinds)
        self._policy = self._policy or policy
        if self._quiet.is_set():
            self._quiet = anyio.Event()
        self._wake.set()

    async def told(self) -> None:
        """Return once every change so far has been told."""
        await self._quiet.wait()

    async def run(self) -> None:
        self._running = True
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                kinds, policy = self._kinds, self._policy
                self._kinds, self._policy = set(), False
                try:
                    await self._send(kinds, policy)
                except Exception:  # boundary: the next change is told all the same
                    logger.exception("telling clients that %s changed failed", ", ".join(sorted(kinds)))
                if not self._kinds and not self._policy:
                    self._quiet.set()
                await anyio.sleep(self._window)
        finally:
            self._running = False
            self._quiet.set()
