"""The catalog's tools, ranked for a request: one `Ranker` per revision of the tools view.

The ranker (the tools' words, and their embeddings when wordllama is installed) is built the first
time a search follows a change of the catalog (a mount joined, a server's list_changed, a pin
released), in a worker thread, and kept until the next change: a search costs one ranking, not an
embedding of the catalog.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import anyio.to_thread

from mcp_hub.catalog.catalog import Target, View
from mcp_hub.search.ranking import Ranker

logger = logging.getLogger("mcp_hub.search")


class ToolIndex:
    """Ranks the tools of the current view; `method` as `Ranker`'s."""

    def __init__(self, view: Callable[[], View], method: str = "hybrid") -> None:
        self._view = view
        self._method = method
        self._built: tuple[str, Ranker] | None = None
        self._lock = anyio.Lock()
        self.builds = 0
        """How many times a ranker was built (once per catalog revision searched)."""

    async def ranker(self, view: View) -> Ranker:
        """The ranker of `view`, built once for its revision."""
        async with self._lock:
            if self._built is None or self._built[0] != view.revision:
                ranker = await anyio.to_thread.run_sync(Ranker, view.items, self._method)
                if ranker.method != self._method:
                    logger.warning("tool search: wordllama is not installed (the search extra); BM25 alone ranks")
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
