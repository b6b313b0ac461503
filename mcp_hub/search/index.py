"""The catalog's tools, ranked for a request: one `Ranker` per revision of the tools view.

The ranker (the tools' words, and their embeddings when wordllama is installed) is built once per
revision of the catalog's tools (a mount joined, a server's list_changed, a pin released), in a
worker thread, and kept until the next change: a search costs one ranking, not an embedding of the
catalog. With search on, `run` (in the hub's task group) builds it ahead of the searches: once the
catalog is known (the mounts have settled, or the catalog snapshot listed them), and again after each
change (`stale`), so the first search does not pay about a second per 1,000 tools. Whoever needs the
ranker of a revision being built waits for that build: a revision is never built twice.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread

from mcp_hub.catalog.catalog import Target, View
from mcp_hub.search.ranking import Ranker

logger = logging.getLogger("mcp_hub.search")

_COALESCE = 0.25
"""Seconds a catalog change waits for others before the ranker is built again (mounts listing together)."""


class ToolIndex:
    """Ranks the tools of the current view; `method` as `Ranker`'s."""

    def __init__(self, view: Callable[[], View], method: str = "hybrid") -> None:
        self._view = view
        self._method = method
        self._built: tuple[str, Ranker] | None = None
        self._lock = anyio.Lock()
        self.builds = 0
        """How many times a ranker was built (once per catalog revision searched or built ahead)."""
        self._stale: anyio.Event | None = None

    @property
    def built(self) -> str | None:
        """The revision of the tools view whose ranker is built, if one is."""
        return None if self._built is None else self._built[0]

    def stale(self, kinds: frozenset[str] = frozenset({"tools"})) -> None:
        """The catalog changed (`Catalog.watch`): `run` builds the ranker of the tools view anew."""
        if "tools" in kinds and self._stale is not None:
            self._stale.set()

    async def run(self, wanted: Callable[[], bool], settled: Callable[[], Awaitable[object]] | None = None) -> None:
        """Build the ranker ahead of the searches, whenever `wanted()` (search is on for someone), until
        cancelled: first once `settled()` returns (the mounts' first listings) unless the catalog already
        lists tools, then after each change."""
        if settled is not None and not self._view().items:
            await settled()
        while True:
            self._stale = stale = anyio.Event()
            if wanted():
                view = self._view()
                try:
                    await self.ranker(view)
                except Exception:  # the searches build it again, and say why
                    logger.exception("tool search: could not build the index ahead of the searches")
            await stale.wait()
            await anyio.sleep(_COALESCE)

    async def ranker(self, view: View) -> Ranker:
        """The ranker of `view`, built once for its revision."""
        async with self._lock:
            if self._built is None or self._built[0] != view.revision:
                ranker = await anyio.to_thread.run_sync(Ranker, view.items, self._method)
                if ranker.method != self._method:
                    logger.warning(
                        "tool search: the %s ranking is not installed (the search extras); %s ranks",
                        self._method,
                        "BM25 alone" if ranker.method == "bm25" else ranker.method,
                    )
                self._built = (view.revision, ranker)
                self.builds += 1
            return self._built[1]

    async def search(self, request: str, limit: int, visible: Callable[[Target], bool]) -> list[dict[str, object]]:
        """The best `limit` tools for `request` among those `visible` says the caller may see, best first."""
        view = self._view()
        ranker = await self.ranker(view)
        found: list[dict[str, object]] = []
        # Ranking a big catalog takes milliseconds of CPU: off the event loop.
        for position in await anyio.to_thread.run_sync(ranker.rank, request):
            if visible(view.targets[position]):
                found.append(view.items[position])
                if len(found) == limit:
                    break
        return found
