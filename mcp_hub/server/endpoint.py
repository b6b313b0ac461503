"""The downstream MCP server: the merged catalog and the router behind one SDK `Server`.

The SDK's low-level `Server` owns the wire (both protocol eras, the handshake,
params and result validation per version); `Endpoint` wires the hub's handlers
into it: lists (listing.py), calls through the chain, completion, log levels,
resource subscriptions, and the connected clients it notifies (clients.py). The
server itself, with what it declares, is hub_server.py; who sent a request and
the client behind it, origin.py. Hub errors become JSON-RPC errors in exactly
one place, `_translate_errors`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import RequestHandler
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types import LOG_LEVEL_META_KEY
from pydantic import BaseModel

from mcp_hub import __version__
from mcp_hub.catalog.catalog import KINDS, Catalog
from mcp_hub.catalog.overrides import FixedArgumentSent
from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.chain.guardrails import Guardrails
from mcp_hub.chain.router import Router
from mcp_hub.config import ResultSettings
from mcp_hub.errors import HubError, Refused, UnknownName
from mcp_hub.policy import PolicySet
from mcp_hub.results import KeptResults
from mcp_hub.results.listing import ListBudget
from mcp_hub.results.shaping import SCHEME
from mcp_hub.sdk import runner as sdk_runner
from mcp_hub.search import ToolSearch
from mcp_hub.server.clients import Clients
from mcp_hub.server.curated import Selection
from mcp_hub.server.hub_server import NO_CACHING, HubServer
from mcp_hub.server.lane import CallLane, Observer
from mcp_hub.server.listing import Listings, listing_ttl
from mcp_hub.server.origin import (
    ClientOrigin,
    address_of,
    principal_of,
    progress_relay,
    session_of,
)
from mcp_hub.server.parking import ParkingLot, StateRefused, sealed_by_hub
from mcp_hub.server.reading import Reader
from mcp_hub.server.skills import SKILL_CALLS, SkillListing
from mcp_hub.server.subscriptions import Subscriptions
from mcp_hub.server.tasks import TASK_METHODS, Tasks
from mcp_hub.upstream import Upstream
from mcp_hub.upstream.startup import Startup

logger = logging.getLogger("mcp_hub.server")


async def _translate_errors(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    try:
        return await call_next(ctx)
    except HubError as exc:
        raise exc.to_mcp() from None


class Endpoint:
    """The hub as an MCP server, plus the connected clients it notifies.

    Lists are the catalog's views filtered by the policy's `visible()`; calls go
    through `call` (the chain: audit, policy, router) with a `CallContext` that
    names the caller. Completion is answered for visible prompts and templates only, its
    arguments through the guards on arguments (`guardrails`), as are a task's `tasks/update`s.
    """

    def __init__(
        self,
        name: str,
        catalog: Catalog,
        router: Router,
        *,
        page_size: int,
        policy: Callable[[], PolicySet],
        call: Handler,
        upstreams: Mapping[str, Upstream],
        on_log_level: Callable[[str], Awaitable[None]] | None = None,
        confirms: bool = False,
        startup: Startup | None = None,
        on_refused: Callable[[CallContext, str], None] | None = None,
        guardrails: Guardrails | None = None,
        search: ToolSearch | None = None,
        selection: Selection | None = None,
        kept: KeptResults | None = None,
        results: ResultSettings | None = None,
    ) -> None:
        self._catalog = catalog
        self.selection = selection if selection is not None else Selection()
        """What this endpoint serves of the catalog (curated.py); the hub's own endpoint: everything."""
        self._selected = {kind: self.selection.selected(kind, catalog.view(kind)) for kind in KINDS}
        """The catalog's items this endpoint selected when its clients last heard of its lists."""
        self._router = router
        self._policy = policy
        self._call = call
        self._search = search
        self._reader = Reader(kept, results, self.selection, policy) if kept is not None and results else None
        """The kept results' reads: `hub://results/ID` and the `read_result` tool (reading.py)."""
        self._listings = Listings(
            catalog,
            page_size=page_size,
            policy=policy,
            startup=startup,
            ttl=lambda kind: listing_ttl(upstreams, kind),
            search=search,
            selection=self.selection,
            reader=self._reader,
            budget=_list_budget(self.selection, results),
        )
        self._on_log_level = on_log_level
        self._upstreams = upstreams
        self._confirms = confirms
        self._on_refused = on_refused
        """Records a request refused outside the chain (a retry whose requestState is for another call)."""
        self.parking = ParkingLot()
        """Where 2026-07-28 clients' calls wait for answers (its `run()` belongs in the hub's task group)."""
        self._subscriptions = Subscriptions(upstreams)
        self._events = InMemorySubscriptionBus()
        """What 2026-07-28 clients' `subscriptions/listen` streams carry."""
        self._listener = ListenHandler(self._events)
        self.server = HubServer(
            name, upstreams, version=__version__, cache_hints=NO_CACHING, instructions=self.selection.instructions
        )
        self._clients = Clients(self.server, self._subscriptions, upstreams)
        self.server.get_tool_input_schema = self._listings.input_schema
        handlers: list[tuple[str, type[BaseModel], RequestHandler[Any, Any]]] = [
            ("tools/list", types.PaginatedRequestParams, self._listings.lister("tools")),
            ("prompts/list", types.PaginatedRequestParams, self._listings.lister("prompts")),
            ("resources/list", types.PaginatedRequestParams, self._listings.lister("resources")),
            ("resources/templates/list", types.PaginatedRequestParams, self._listings.lister("resource_templates")),
            ("tools/call", types.CallToolRequestParams, self._caller("tools/call")),
            ("prompts/get", types.GetPromptRequestParams, self._caller("prompts/get")),
            ("resources/read", types.ReadResourceRequestParams, self._caller("resources/read")),
            ("completion/complete", types.CompleteRequestParams, self._complete),
            ("logging/setLevel", types.SetLevelRequestParams, self._set_level),
            ("resources/subscribe", types.SubscribeRequestParams, self._subscribe),
            ("resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe),
            ("subscriptions/listen", types.SubscriptionsListenRequestParams, self._listen),
        ]
        self._guardrails = guardrails
        self._tasks = Tasks(router, guardrails)
        handlers += [(method, types.RequestParams, self._follow_task) for method in TASK_METHODS]
        # Skills (SEP-2640, skills.py): the listing merged here, a skill's entry and a folder read as calls.
        self._skills = SkillListing(router, lambda: tuple(upstreams), self.selection)
        self.skill_cursors = self._skills.cursors
        """What seals this endpoint's `skills/list` cursors (the replicas' shared key, as `parking`'s)."""
        handlers.append(("skills/list", types.PaginatedRequestParams, self._list_skills))
        handlers += [(method, _UriParams, self._caller(method)) for method in SKILL_CALLS]
        for method, params_type, handler in handlers:
            self.server.add_request_handler(method, params_type, handler)
        # The SDK's own span per message gives way to the hub's observer (`observe`), or to nothing.
        sdk_runner.drop_sdk_spans(self.server)
        self.server.middleware.append(_translate_errors)
        self.server.middleware.append(self._listings.answer_lists)
        self.server.middleware.append(self.server.declare_extensions)
        self.server.lane = CallLane(self.server, self.serve_call)
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._clients.initialized
        )
        self.server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self._clients.roots_changed
        )

    def observe(self, observer: Observer) -> None:
        """Let `observer` (a span, a measurement, an access line: chain/telemetry.py) see every client
        request, outermost: lists and the rest as the server's first middleware, calls in the lane."""
        self.server.middleware.insert(0, observer)
        self.server.lane.observe(observer)

    # -- handlers -------------------------------------------------------------

    def _caller(self, method: str) -> RequestHandler[Any, Any]:
        async def handler(ctx: ServerRequestContext[Any, Any], params: BaseModel) -> Any:
            return await self.serve_call(ctx)

        return handler

    async def serve_call(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        """Serve a call (`tools/call`, `prompts/get` or `resources/read`, its params as the client sent them):
        the chain, then the router. Raises `HubError`."""
        method = ctx.method
        params = ctx.params or {}
        if self._reader is not None:  # a kept result (results/kept.py): the hub's own, read outside the chain
            if method == "resources/read" and str(params.get("uri", "")).startswith(SCHEME):
                return _complete_result(await self._reader.read_resource(principal_of(ctx), str(params["uri"])))
            if method == "tools/call" and self._reader.is_read_tool(params, principal_of(ctx)):
                return _complete_result(await self._reader.read_tool(principal_of(ctx), params.get("arguments")))
        if self._search is not None and method == "tools/call":
            principal, policy = principal_of(ctx), self._policy()
            if self.selection.searching(self._search, principal, policy):
                # Tool search (search/tools.py): the search tool is answered here; a call of the call tool is
                # served from here on as a call of the tool it names.
                if self._search.is_search(params):
                    found = await self._search.search(
                        params,
                        lambda target: self.selection.visible(policy, principal, "tool", target.mount, target.native),
                        principal=principal,
                        session=session_of(ctx),
                    )
                    return _complete_result(found)
                params = self._search.unwrap(params)
        try:
            route = await self._router.route_arriving(method, params)
        except FixedArgumentSent as exc:  # said only of a tool the caller may see here: another one is unknown
            if not self.selection.visible(self._policy(), principal_of(ctx), "tool", exc.mount, exc.native):
                raise UnknownName("tool", exc.tool) from None
            raise
        if not self.selection.admits(route.kind, route.mount, route.native):
            raise UnknownName(route.kind, route.public)  # outside this endpoint's view: as if there were none
        client = self._clients.of(ctx)
        forwarded = route.params
        if client is not None:
            # A 2026-07-28 server sends log messages only to requests that ask, at the
            # level they ask; a handshake-era client gets what it set, or everything.
            meta = forwarded.get("_meta")
            meta = meta if isinstance(meta, dict) else {}
            forwarded = {**forwarded, "_meta": {**meta, LOG_LEVEL_META_KEY: client.log_level or "debug"}}
        origin = ClientOrigin(ctx, client)
        call = CallContext(
            method=method,
            kind=route.kind,
            mount=route.mount,
            native=route.native,
            public=route.public,
            params=forwarded,
            principal=principal_of(ctx),
            session=session_of(ctx),
            origin=origin,
            on_progress=progress_relay(ctx),
            via=route.via,
            endpoint_budget=self.selection.max_result_tokens,
            address=address_of(ctx),
        )
        if origin.modern and self.parking.open:
            state = sealed_by_hub(params)
            if state is not None:
                # Asked of the policy first, as the chain would: a state presented for a hidden
                # name is answered like an unknown name, not as a state that does not fit.
                if not self._visible(call.principal, route.kind, route.mount, route.native):
                    raise UnknownName(route.kind, route.public)
                answers = params.get("inputResponses")
                try:
                    return self._finish(call, await self.parking.resume(call, state, answers))
                except StateRefused as refusal:
                    if self._on_refused is not None:
                        self._on_refused(call, refusal.message)
                    raise
            if self._may_ask(route.mount):
                return self._finish(call, await self.parking.call(call, self._call, origin.check_can_ask))
        return self._finish(call, await self._call(call))

    def _finish(self, call: CallContext, result: dict[str, Any]) -> dict[str, Any]:
        """A call's result as the client gets it: a task handle with the hub's task id (see tasks.py)."""
        return _complete_result(self._tasks.adopt(call, result))

    async def _follow_task(self, ctx: ServerRequestContext[Any, Any], params: types.RequestParams) -> Any:
        """`tasks/get`, `tasks/update`, `tasks/cancel`: to the server whose task it is, for its caller only."""
        named = ctx.request.headers.get("mcp-name") if ctx.request is not None else None
        origin = ClientOrigin(ctx, None)
        return await self._tasks.follow(ctx.method, principal_of(ctx), ctx.params or {}, origin, named)

    async def _list_skills(self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams) -> Any:
        """`skills/list`: the skills of every mount serving them, as the caller may see them (skills.py)."""
        origin = ClientOrigin(ctx, self._clients.of(ctx))
        listed = await self._skills.list(
            ctx.params or {}, principal_of(ctx), self._policy(), origin, modern=origin.modern
        )
        return _complete_result(listed)

    def _visible(self, principal: str, kind: str, mount: str, native: str) -> bool:
        return self.selection.visible(self._policy(), principal, kind, mount, native)

    def _may_ask(self, mount: str) -> bool:
        """Whether a call may put a question to its client: a confirmation, a handshake-era server's, or the
        sign-in a `mode = "user"` mount asks of a person who has not signed in there."""
        upstream = self._upstreams.get(mount)
        return self._confirms or upstream is None or not upstream.modern or upstream.config.auth.mode == "user"

    async def _complete(self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams) -> Any:
        route = await self._router.route_arriving("completion/complete", ctx.params or {})
        if not self._visible(principal_of(ctx), route.kind, route.mount, route.native):
            raise UnknownName(route.kind, route.public)
        origin = ClientOrigin(ctx, self._clients.of(ctx))  # a client's own session, where it has one

        async def send(params: Mapping[str, Any]) -> dict[str, Any]:
            return await self._router.forward("completion/complete", route.mount, params, origin=origin)

        if self._guardrails is None:
            return _complete_result(await send(route.params))
        completing = CallContext(
            method="completion/complete",
            kind=route.kind,
            mount=route.mount,
            native=route.native,
            public=route.public,
            params=route.params,
            principal=principal_of(ctx),
            session=session_of(ctx),
            origin=origin,
            address=address_of(ctx),
        )
        # The value completed and the context's arguments as a call's arguments, the values suggested as a result.
        return _complete_result(await self._guardrails.guard_completion(completing, send))

    async def _set_level(self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> Any:
        client = self._clients.of(ctx) or self._clients.register(ctx.session)
        client.log_level = params.level
        if self._on_log_level is not None:
            await self._on_log_level(self.log_level() or "info")
        return {}

    # -- resource subscriptions -------------------------------------------------------

    def _visible_resource(self, ctx: ServerRequestContext[Any, Any], uri: Any) -> tuple[str, str, str]:
        """(public URI, mount, server URI) of a resource the caller may read. Raises `UnknownName`."""
        route = self._router.route("resources/read", {"uri": uri})
        if not self._visible(principal_of(ctx), route.kind, route.mount, route.native):
            raise UnknownName(route.kind, route.public)
        return route.public, route.mount, route.native

    def _guard_uri(self, ctx: ServerRequestContext[Any, Any], public: str, mount: str, native: str) -> None:
        """A URI on its way to its server in a subscription, through the guards on arguments, as a read's.
        Raises `Refused`."""
        if self._guardrails is not None:
            self._guardrails.guard_uri(
                CallContext(
                    method=ctx.method,
                    kind="resource",
                    mount=mount,
                    native=native,
                    public=public,
                    params={"uri": native},
                    principal=principal_of(ctx),
                    session=session_of(ctx),
                    origin=ClientOrigin(ctx, None),
                )
            )

    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> Any:
        public, mount, native = self._visible_resource(ctx, (ctx.params or {}).get("uri"))
        self._guard_uri(ctx, public, mount, native)
        client = self._clients.of(ctx) or self._clients.register(ctx.session)
        client.subscriptions.add(public)
        await self._subscriptions.add(sdk_runner.connection_of(ctx.session), mount, native)
        return {}

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams) -> Any:
        public, mount, native = self._visible_resource(ctx, (ctx.params or {}).get("uri"))
        client = self._clients.of(ctx)
        if client is not None:
            client.subscriptions.discard(public)
        await self._subscriptions.remove(sdk_runner.connection_of(ctx.session), mount, native)
        return {}

    async def _listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """A 2026-07-28 client's event stream; the resources it names are subscribed while it lasts.

        URIs of resources the caller may not see, or that no mount has, or that a guard
        refuses (see `_guard_uri`), are left out of the acknowledged filter.
        """
        wanted = params.notifications
        held: list[tuple[str, str]] = []
        kept: list[str] = []
        for uri in wanted.resource_subscriptions or ():
            try:
                public, mount, native = self._visible_resource(ctx, uri)
                self._guard_uri(ctx, public, mount, native)
            except (UnknownName, Refused):
                continue
            kept.append(public)
            held.append((mount, native))
        honored = wanted.model_copy(update={"resource_subscriptions": kept or None})
        holder = object()
        try:
            for mount, native in held:
                await self._subscriptions.add(holder, mount, native)
            return await self._listener(ctx, params.model_copy(update={"notifications": honored}))
        finally:
            with anyio.CancelScope(shield=True):
                await self._subscriptions.drop(holder)

    async def resource_updated(self, mount: str, uri: str) -> None:
        """A server says one of its resources changed: tell the clients that subscribed to it."""
        public = self._catalog.public_uri(mount, uri)
        await self._events.publish(ResourceUpdated(uri=public))
        await self._clients.resource_updated(public)

    # -- clients and their notifications (clients.py) ---------------------------------

    def log_level(self, default: str | None = "info") -> str | None:
        """The most verbose level any connected client asked for (what servers are asked to send); `default`
        while none asked."""
        return self._clients.log_level(default)

    def serve_one_client(self) -> None:
        """The hub serves stdio, to one client (see `Clients.serve_one_client`). Call before the mounts start."""
        self._clients.serve_one_client()

    async def sole_client(self) -> ClientOrigin | None:
        """The client of a hub serving stdio, once it arrived (see `Clients.sole_client`)."""
        return await self._clients.sole_client()

    async def broadcast_log(self, params: Mapping[str, Any]) -> None:
        """A server's log message that belongs to no one request: to every client at its level."""
        await self._clients.broadcast_log(params)

    async def notify_changed(self, kinds: Iterable[str], *, policy: bool = False) -> None:
        """Tell every connected client which of the hub's lists changed: of a curated endpoint, those whose
        selection of the catalog changed (all of `kinds` when the `policy` changed, which may change what
        each caller sees of any selection)."""
        kinds = set(kinds)
        if not self.selection.everything:
            selected = {kind: self.selection.selected(kind, self._catalog.view(kind)) for kind in kinds}
            if not policy:
                kinds = {kind for kind in kinds if selected[kind] != self._selected.get(kind)}
            self._selected.update(selected)
            if not kinds:
                return
        events: dict[type[ServerEvent], ServerEvent] = {}
        for kind in kinds:
            if kind == "tools":
                events[ToolsListChanged] = ToolsListChanged()
            elif kind == "prompts":
                events[PromptsListChanged] = PromptsListChanged()
            else:
                events[ResourcesListChanged] = ResourcesListChanged()
        for event in events.values():
            await self._events.publish(event)
        await self._clients.notify_changed(kinds)


class _UriParams(types.RequestParams):
    """The params of `skills/get` and `resources/directory/read`: a URI (and, for a folder, a cursor)."""

    uri: str
    cursor: str | None = None


def _list_budget(selection: Selection, results: ResultSettings | None) -> ListBudget | None:
    """The endpoint's tools list budget: its own `max_list_tokens`, else `[results]`'s; None when 0."""
    own = selection.max_list_tokens
    budget = own if own is not None else (results.max_list_tokens if results is not None else 0)
    if not budget:
        return None
    return ListBudget("the hub's endpoint" if selection.name is None else f"endpoint {selection.name}", budget)


def _complete_result(result: dict[str, Any]) -> dict[str, Any]:
    """Mark a result from a pre-2026 server final, as the 2026-07-28 wire requires (older wires drop the key)."""
    result.setdefault("resultType", "complete")
    return result
