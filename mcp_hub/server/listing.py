"""The hub's lists: the catalog's views as each principal may see them, paged, and the answers already
sent kept to be sent again (`Listings.answer_lists`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from cachetools import LRUCache
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import RequestHandler

from mcp_hub.catalog import naming
from mcp_hub.catalog.catalog import Catalog, View, page
from mcp_hub.errors import InvalidCursor
from mcp_hub.policy import PolicySet
from mcp_hub.policy.principal import seen_as
from mcp_hub.results.listing import ListBudget
from mcp_hub.search import ToolSearch
from mcp_hub.server.curated import Selection
from mcp_hub.server.origin import HTTP_PRINCIPAL, principal_of
from mcp_hub.server.reading import Reader
from mcp_hub.upstream import Upstream
from mcp_hub.upstream.startup import Startup

_LIST_RESULT_KEY = {
    "tools": "tools",
    "prompts": "prompts",
    "resources": "resources",
    "resource_templates": "resourceTemplates",
}


_LIST_METHODS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})

_ANSWERED_ITEMS = 5_000
"""How many listed items the kept answers of list pages may hold together (a page weighs its item count).

A kept answer takes about four times its JSON size (0.6 MiB for 1,000 small tools, 150 KB of
JSON), so this bounds the answers at a few MiB for small tools and a few tens of MiB for tools
with large schemas: a handful of full listings (one per principal and protocol version that
lists). Only answers for the current listing of each kind are kept."""


def _answer_weight(answer: Mapping[str, Any]) -> int:
    """A kept list answer's share of `_ANSWERED_ITEMS`: its items, plus one for the page itself."""
    return 1 + sum(len(value) for value in answer.values() if isinstance(value, list))


@dataclass(slots=True)
class _ListRequest:
    """One list request on its way through `Listings.answer_lists` to the list handler and back."""

    page: tuple[str, str, Hashable, int, str, int] | None = None
    """Set by the handler: (kind, listing revision, principal, offset, protocol version, ttlMs)."""
    answer: dict[str, Any] | None = None
    """Set by the handler: the page's answer as sent before, if it was."""


_LIST_REQUEST: ContextVar[_ListRequest | None] = ContextVar("mcp_hub_list_request", default=None)
"""The list request being answered in this task, while `Listings.answer_lists` runs."""


_POLICY_KIND = {
    "tools": "tool",
    "prompts": "prompt",
    "resources": "resource",
    "resource_templates": "resource_template",
}


class Listings:
    """The list handlers (`lister`), the middleware that sends a page's kept answer again (`answer_lists`), and
    the tools' input schemas as a caller was shown them (`input_schema`).

    A list is the catalog's view filtered by the policy's `visible()`, for the principal asking. To
    2026-07-28 clients it says so (`cacheScope: "private"`), and how long it stays fresh (`ttlMs`): the
    shortest time the mounts said of their own listings of the kind (`listing_ttl`).
    """

    def __init__(
        self,
        catalog: Catalog,
        *,
        page_size: int,
        policy: Callable[[], PolicySet],
        startup: Startup | None,
        ttl: Callable[[str], int] | None = None,
        search: ToolSearch | None = None,
        selection: Selection | None = None,
        reader: Reader | None = None,
        budget: ListBudget | None = None,
    ) -> None:
        self._catalog = catalog
        self._selection = selection if selection is not None else Selection()
        """What the endpoint serves of the catalog (curated.py): a list is its view, through the policy."""
        self._ttl = ttl
        self._search = search
        """With tool search on, a tools list is its search and call tools and the pinned tools (search/tools.py)."""
        self._reader = reader
        """Lists the `read_result` tool while a result budget is on (reading.py)."""
        self._budget = budget
        """Shortens a tools list over the endpoint's `max_list_tokens` (results/listing.py)."""
        self._startup = startup
        self._page_size = page_size
        self._policy = policy
        self._visible: LRUCache[tuple[str, str, Hashable], tuple[dict[str, Any], ...]] = LRUCache(maxsize=256)
        self._answers: LRUCache[tuple[str, str, Hashable, int, str, int], dict[str, Any]] = LRUCache(
            maxsize=_ANSWERED_ITEMS, getsizeof=_answer_weight
        )
        """Wire answers of pages of the current listings already sent, by page (see `answer_lists`)."""
        self._answered: dict[str, str] = {}
        """The listing revision of each kind whose answers `_answers` keeps."""
        self._schemas: tuple[str, dict[str, Any]] = ("", {})
        """The tools' input schemas by public name, and the tools view revision they are from."""

    def lister(self, kind: str) -> RequestHandler[Any, Any]:
        key = _LIST_RESULT_KEY[kind]

        async def handler(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams) -> dict[str, Any]:
            if self._startup is not None and not self._startup.over:
                await self._startup.all_settled()  # the first list holds every mount that is going to answer
            view = self._catalog.view(kind)
            policy = self._policy()
            principal = principal_of(ctx)
            items = self._visible_items(kind, view, principal, policy)
            revision = current = f"{view.revision}.{policy.revision}"
            if params.cursor is not None and (issued := naming.cursor_revision(params.cursor)) != revision:
                # The list changed since the client began paging (a mount joined, a policy
                # changed): it pages on through the listing it began, then hears list_changed.
                earlier = self._visible.get((kind, issued, seen_as(principal)))
                if earlier is None:
                    raise InvalidCursor(params.cursor)
                items, revision = earlier, issued
            start = naming.decode_cursor(params.cursor, revision) if params.cursor else 0
            ttl = self._ttl(kind) if self._ttl is not None else 0
            request = _LIST_REQUEST.get()
            if request is not None and revision == current:  # answers are kept for the current listing only
                request.page = (kind, revision, seen_as(principal), start, ctx.protocol_version, ttl)
                request.answer = self._answers.get(request.page)
                if request.answer is not None:
                    return {key: [], "resultType": "complete"}  # a stand-in: `answer_lists` sends the answer
            listing, next_cursor = page(items, start, self._page_size, revision)
            result: dict[str, Any] = {key: listing, "resultType": "complete", "ttlMs": ttl, "cacheScope": "private"}
            if next_cursor is not None:
                result["nextCursor"] = next_cursor
            return result

        return handler

    async def answer_lists(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: answer a list request for a page that was sent before with the answer sent then.

        The SDK validates every item of a list result against the protocol version's schema
        and dumps it again, which costs far more than the rest of the request. A page's answer
        depends only on the page (kind, listing revision, principal, offset) and the protocol
        version, so the answer the SDK produced the first time is kept and sent again, for
        pages of the current listings (a changed catalog or policy is a new listing; pages of
        an earlier one are answered as before, uncached). The request still goes through the
        SDK (params, handshake state) and the list handler (cursor, visibility); the handler
        names the page and, when its answer is known, returns an empty stand-in, which is
        replaced here.
        """
        if ctx.method not in _LIST_METHODS:
            return await call_next(ctx)
        request = _ListRequest()
        token = _LIST_REQUEST.set(request)
        try:
            answer = await call_next(ctx)
        finally:
            _LIST_REQUEST.reset(token)
        if request.answer is not None:
            return dict(request.answer)
        if request.page is not None and isinstance(answer, dict):
            self._keep_answer(request.page, answer)
            return dict(answer)
        return answer

    def _keep_answer(self, page: tuple[str, str, Hashable, int, str, int], answer: dict[str, Any]) -> None:
        """Keep a page's answer, first dropping the answers kept for earlier listings of its kind."""
        kind, revision = page[0], page[1]
        if self._answered.get(kind) != revision:
            for kept in [kept for kept in self._answers if kept[0] == kind]:
                del self._answers[kept]
            self._answered[kind] = revision
        if _answer_weight(answer) <= self._answers.maxsize:
            self._answers[page] = answer

    def _visible_items(self, kind: str, view: View, principal: str, policy: PolicySet) -> tuple[dict[str, Any], ...]:
        """The items of `view` that `principal` may see; computed once per catalog and policy revision
        (and kept a while: clients paging through an earlier listing finish it)."""
        key = (kind, f"{view.revision}.{policy.revision}", seen_as(principal))
        items = self._visible.get(key)
        if items is None:
            policy_kind = _POLICY_KIND[kind]
            items = tuple(
                item
                for item, target in zip(view.items, view.targets, strict=True)
                if self._selection.visible(policy, principal, policy_kind, target.mount, target.native)
            )
            if (
                kind == "tools"
                and self._search is not None
                and self._selection.searching(self._search, principal, policy)
            ):
                items = self._search.listed(items)
            if kind == "tools" and self._reader is not None and self._reader.listed(principal, policy):
                items = (*items, self._reader.tool)
            if kind == "tools" and self._budget is not None:
                items = self._budget.fit(key[1], items)
            self._visible[key] = items
        return items

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The `inputSchema` of the tool `name` as the calling HTTP client was shown it (None: it was not).

        The SDK checks a 2026-07-28 call's `Mcp-Param-*` headers against it before dispatch.
        Without this lookup it would list every tool, through the whole request pipeline
        (middleware, telemetry, access log), on each such call, to find one schema.
        """
        principal, policy = HTTP_PRINCIPAL.get(), self._policy()
        if self._reader is not None and name == self._reader.tool["name"] and self._reader.listed(principal, policy):
            return self._reader.tool["inputSchema"]
        if self._search is not None and self._selection.searching(self._search, principal, policy):
            searching = self._search.input_schema(name)
            if searching is not None:
                return searching
        view = self._catalog.view("tools")
        target = view.index.get(name)
        if target is None or not self._selection.visible(policy, principal, "tool", target.mount, target.native):
            return None
        if self._schemas[0] != view.revision:
            self._schemas = (view.revision, {item["name"]: item.get("inputSchema") for item in view.items})
        return self._schemas[1].get(name)


def listing_ttl(upstreams: Mapping[str, Upstream], kind: str) -> int:
    """How long (ms) the hub's listing of `kind` stays fresh: the shortest time any mount that may list it
    said of its own listing; 0 while one of them said nothing (a handshake-era server, one not connected)."""
    ttls = [
        u.list_ttl.get(kind, 0)
        for u in upstreams.values()
        if u.config.enabled and (u.capabilities is None or u.offers(kind))
    ]
    return min(ttls, default=0)
