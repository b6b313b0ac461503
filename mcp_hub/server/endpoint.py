"""The downstream MCP server: the merged catalog and the router behind one SDK `Server`.

The SDK's low-level `Server` owns the wire (both protocol eras, the handshake,
params and result validation per version); the handlers here only page the
catalog's views and hand requests to the router. Hub errors become JSON-RPC
errors in exactly one place, `_translate_errors`.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, cast, get_args

import anyio
import mcp_types as types
import pydantic_core
from cachetools import LRUCache
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, RequestHandler, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import ServerMessageMetadata
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, RootModel

from mcp_hub import __version__, wire
from mcp_hub.catalog import naming
from mcp_hub.catalog.catalog import Catalog, View, page
from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.chain.router import Router
from mcp_hub.errors import HubError, InvalidCursor, UnknownName
from mcp_hub.policy import PolicySet
from mcp_hub.sdk import runner as sdk_runner
from mcp_hub.server.lane import CallLane, Observer
from mcp_hub.server.parking import ParkingLot, StateRefused, sealed_by_hub
from mcp_hub.server.subscriptions import Subscriptions
from mcp_hub.server.tasks import TASK_METHODS, TASKS_EXTENSION, TaskGuard, Tasks
from mcp_hub.upstream import CARRIED_EXTENSIONS, ClientCannotAnswer, Upstream
from mcp_hub.upstream.startup import Startup

logger = logging.getLogger("mcp_hub.server")

PRINCIPAL_KEY = "mcp_hub.principal"
"""Where the HTTP layer puts the authenticated principal, in the ASGI scope's state."""
ANONYMOUS = "anonymous"
"""The principal of an HTTP client when the hub has no API keys configured."""
HTTP_PRINCIPAL: ContextVar[str] = ContextVar("mcp_hub_http_principal", default=ANONYMOUS)
"""The principal of the HTTP request being handled, as in the scope's state (`PRINCIPAL_KEY`), for code
that runs without the request at hand (`Endpoint._input_schema`). Set by the HTTP layer's `ApiKeys`."""

_NOTIFY_TIMEOUT = 5.0

SOLE_CLIENT_WAIT = 10.0
"""How long a server's `roots/list` outside any call waits for the client of a hub serving stdio to arrive
(a server may ask as soon as it starts, while the client that launched the hub is still initializing)."""

_NO_CACHING: dict[CacheableMethod, CacheHint] = {
    method: CacheHint(ttl_ms=0, scope="private")
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")
}
"""What the hub tells 2026-07-28 clients about caching its answers, unless a server said otherwise:
always revalidate, never share across callers (what a caller sees will depend on who it is)."""

_LOG_LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)
"""Severity-ascending."""


def _at_least(level: Any, threshold: str | None) -> bool:
    if threshold is None:
        return True
    return level in _LOG_LEVELS and _LOG_LEVELS.index(level) >= _LOG_LEVELS.index(threshold)


@dataclass(eq=False)
class _Client:
    """A handshake-era client's connection to the hub, while it lasts."""

    session: ServerSession
    """A session on the connection; without a related request id it sends on the standalone channel."""
    log_level: str | None = None
    """From `logging/setLevel`; None: every message."""
    subscriptions: set[str] = field(default_factory=set)
    """Public URIs of the resources the client subscribed to."""


_LIST_RESULT_KEY = {
    "tools": "tools",
    "prompts": "prompts",
    "resources": "resources",
    "resource_templates": "resourceTemplates",
}


@dataclass(eq=False)
class _SoleClient:
    """The one client of a hub serving stdio: asked a server's `roots/list` that no call explains."""

    arrived: anyio.Event = field(default_factory=anyio.Event)
    """Set once the client is known: a handshake-era client initialized, or a 2026-07-28 client's first request."""
    origin: ClientOrigin | None = None
    """A handshake-era client, outside its requests (a 2026-07-28 client can be asked only during a call)."""


class _HubServer(Server[Any]):
    """The SDK server, advertising what the mounted servers offer, and that the hub's lists
    change as mounts come and go."""

    def __init__(self, name: str, upstreams: Mapping[str, Upstream], **options: Any) -> None:
        super().__init__(name, **options)
        self._upstreams = upstreams
        self.connections: dict[str | None, Connection] = {}
        """The handshake-era connections whose clients have initialized: HTTP sessions by session id,
        and under None the latest without one (in a hub serving stdio, its one client's)."""
        self.lane: CallLane | None = None
        """Where clients' calls are served past the SDK runner's generic steps (see lane.py)."""
        self.sole: _SoleClient | None = None
        """Set while the hub serves stdio, which has one client (see `Endpoint.serve_one_client`)."""

    @property
    def server_info_stamp(self) -> dict[str, Any]:
        """A fresh copy of the hub's `serverInfo` stamp for each 2026-07-28 result, as the SDK's; parsed from
        its JSON, which takes a fraction of the SDK's `deepcopy`."""
        stamp = self.__dict__.get("_stamp_json")
        if stamp is None:
            stamp = self.__dict__["_stamp_json"] = wire.dumps(super().server_info_stamp)
        return pydantic_core.from_json(stamp)

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        """The hub's handlers, less what no mount offers (tools, prompts, resources, completions,
        resource subscriptions), and the extensions its connected mounts declared (`merged_extensions`).

        A mount that has not connected yet might offer anything, so it counts
        as offering everything: capabilities cannot grow after a client
        connects, while lists can. Of extensions, it counts as declaring those
        the hub can carry (`CARRIED_EXTENSIONS`: MCP Apps).
        """
        known = [u.known_capabilities for u in self._upstreams.values() if u.config.enabled]
        if not extensions:
            extensions = self.declared_extensions() or None
        caps = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if any(c is None for c in known):
            return caps
        offered = [c for c in known if c is not None]
        update: dict[str, Any] = {}
        for capability in ("tools", "prompts", "resources", "completions"):
            if not any(getattr(c, capability) for c in offered):
                update[capability] = None
        if (
            caps.resources is not None
            and "resources" not in update
            and protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            subscribe = any(c.resources and c.resources.subscribe for c in offered)
            update["resources"] = caps.resources.model_copy(update={"subscribe": subscribe})
        return caps.model_copy(update=update)

    def declared_extensions(self) -> dict[str, dict[str, Any]]:
        """The extensions the enabled mounts declared; one not connected yet counts as declaring those the
        hub can carry (`CARRIED_EXTENSIONS`)."""
        known = [u.known_capabilities for u in self._upstreams.values() if u.config.enabled]
        return merged_extensions(c.extensions if c is not None else CARRIED_EXTENSIONS for c in known)

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options
            or NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
            experimental_capabilities,
            extensions,
        )


async def _translate_errors(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    try:
        return await call_next(ctx)
    except HubError as exc:
        raise exc.to_mcp() from None


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
    """One list request on its way through `Endpoint._answer_lists` to the list handler and back."""

    page: tuple[str, str, str, int, str] | None = None
    """Set by the handler: (kind, listing revision, principal, offset, protocol version)."""
    answer: dict[str, Any] | None = None
    """Set by the handler: the page's answer as sent before, if it was."""


_LIST_REQUEST: ContextVar[_ListRequest | None] = ContextVar("mcp_hub_list_request", default=None)
"""The list request being answered in this task, while `Endpoint._answer_lists` runs."""


_POLICY_KIND = {
    "tools": "tool",
    "prompts": "prompt",
    "resources": "resource",
    "resource_templates": "resource_template",
}


class Endpoint:
    """The hub as an MCP server, plus the connected clients it notifies.

    Lists are the catalog's views filtered by the policy's `visible()`; calls go
    through `call` (the chain: audit, policy, router) with a `CallContext` that
    names the caller. Completion is answered for visible prompts and templates only.
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
        guard_task: TaskGuard | None = None,
    ) -> None:
        self._catalog = catalog
        self._startup = startup
        self._router = router
        self._page_size = page_size
        self._policy = policy
        self._call = call
        self._visible: LRUCache[tuple[str, str, str], tuple[dict[str, Any], ...]] = LRUCache(maxsize=256)
        self._answers: LRUCache[tuple[str, str, str, int, str], dict[str, Any]] = LRUCache(
            maxsize=_ANSWERED_ITEMS, getsizeof=_answer_weight
        )
        """Wire answers of pages of the current listings already sent, by page (see `_answer_lists`)."""
        self._answered: dict[str, str] = {}
        """The listing revision of each kind whose answers `_answers` keeps."""
        self._on_log_level = on_log_level
        self._clients: dict[Connection, _Client] = {}
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
        self.server = _HubServer(name, upstreams, version=__version__, cache_hints=_NO_CACHING)
        self.server.get_tool_input_schema = self._input_schema
        self._schemas: tuple[str, dict[str, Any]] = ("", {})
        """The tools' input schemas by public name, and the tools view revision they are from."""
        handlers: list[tuple[str, type[BaseModel], RequestHandler[Any, Any]]] = [
            ("tools/list", types.PaginatedRequestParams, self._lister("tools")),
            ("prompts/list", types.PaginatedRequestParams, self._lister("prompts")),
            ("resources/list", types.PaginatedRequestParams, self._lister("resources")),
            ("resources/templates/list", types.PaginatedRequestParams, self._lister("resource_templates")),
            ("tools/call", types.CallToolRequestParams, self._caller("tools/call")),
            ("prompts/get", types.GetPromptRequestParams, self._caller("prompts/get")),
            ("resources/read", types.ReadResourceRequestParams, self._caller("resources/read")),
            ("completion/complete", types.CompleteRequestParams, self._complete),
            ("logging/setLevel", types.SetLevelRequestParams, self._set_level),
            ("resources/subscribe", types.SubscribeRequestParams, self._subscribe),
            ("resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe),
            ("subscriptions/listen", types.SubscriptionsListenRequestParams, self._listen),
        ]
        self._tasks = Tasks(router, guard_task)
        handlers += [(method, types.RequestParams, self._follow_task) for method in TASK_METHODS]
        for method, params_type, handler in handlers:
            self.server.add_request_handler(method, params_type, handler)
        # The SDK's own span per message gives way to the hub's observer (`observe`), or to nothing.
        sdk_runner.drop_sdk_spans(self.server)
        self.server.middleware.append(_translate_errors)
        self.server.middleware.append(self._answer_lists)
        self.server.middleware.append(self._declare_extensions)
        self.server.lane = CallLane(self.server, self.serve_call)
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._client_initialized
        )
        self.server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self._roots_changed
        )

    def observe(self, observer: Observer) -> None:
        """Let `observer` (a span, a measurement, an access line: chain/telemetry.py) see every client
        request, outermost: lists and the rest as the server's first middleware, calls in the lane."""
        self.server.middleware.insert(0, observer)
        self.server.lane.observe(observer)

    # -- handlers -------------------------------------------------------------

    def _lister(self, kind: str) -> RequestHandler[Any, Any]:
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
                earlier = self._visible.get((kind, issued, principal))
                if earlier is None:
                    raise InvalidCursor(params.cursor)
                items, revision = earlier, issued
            start = naming.decode_cursor(params.cursor, revision) if params.cursor else 0
            request = _LIST_REQUEST.get()
            if request is not None and revision == current:  # answers are kept for the current listing only
                request.page = (kind, revision, principal, start, ctx.protocol_version)
                request.answer = self._answers.get(request.page)
                if request.answer is not None:
                    return {key: [], "resultType": "complete"}  # a stand-in: `_answer_lists` sends the answer
            listing, next_cursor = page(items, start, self._page_size, revision)
            result: dict[str, Any] = {key: listing, "resultType": "complete"}
            if next_cursor is not None:
                result["nextCursor"] = next_cursor
            return result

        return handler

    async def _declare_extensions(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: the `initialize` answer declares the mounts' extensions (`capabilities.extensions`),
        as a server speaking the handshake era directly does (MCP Apps hosts look for it there); the SDK's
        shaping of that era's answer leaves the field out, so it is put back here."""
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            capabilities = result.get("capabilities")
            if isinstance(capabilities, dict) and "extensions" not in capabilities:
                extensions = self.server.declared_extensions()
                if extensions:
                    capabilities["extensions"] = extensions
        return result

    async def _answer_lists(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
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

    def _keep_answer(self, page: tuple[str, str, str, int, str], answer: dict[str, Any]) -> None:
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
        key = (kind, f"{view.revision}.{policy.revision}", principal)
        items = self._visible.get(key)
        if items is None:
            policy_kind = _POLICY_KIND[kind]
            items = tuple(
                item
                for item, target in zip(view.items, view.targets, strict=True)
                if policy.visible(principal, policy_kind, target.mount, target.native)
            )
            self._visible[key] = items
        return items

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The `inputSchema` of the tool `name` as the calling HTTP client was shown it (None: it was not).

        The SDK checks a 2026-07-28 call's `Mcp-Param-*` headers against it before dispatch.
        Without this lookup it would list every tool, through the whole request pipeline
        (middleware, telemetry, access log), on each such call, to find one schema.
        """
        view = self._catalog.view("tools")
        target = view.index.get(name)
        if target is None or not self._policy().visible(HTTP_PRINCIPAL.get(), "tool", target.mount, target.native):
            return None
        if self._schemas[0] != view.revision:
            self._schemas = (view.revision, {item["name"]: item.get("inputSchema") for item in view.items})
        return self._schemas[1].get(name)

    def _caller(self, method: str) -> RequestHandler[Any, Any]:
        async def handler(ctx: ServerRequestContext[Any, Any], params: BaseModel) -> Any:
            return await self.serve_call(ctx)

        return handler

    async def serve_call(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        """Serve a call (`tools/call`, `prompts/get` or `resources/read`, its params as the client sent them):
        the chain, then the router. Raises `HubError`."""
        method = ctx.method
        route = await self._router.route_arriving(method, ctx.params or {})
        client = self._client_of(ctx)
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
            on_progress=_progress_relay(ctx),
            via=route.via,
        )
        if origin.modern and self.parking.open:
            state = sealed_by_hub(ctx.params or {})
            if state is not None:
                # Asked of the policy first, as the chain would: a state presented for a hidden
                # name is answered like an unknown name, not as a state that does not fit.
                if not self._policy().visible(call.principal, route.kind, route.mount, route.native):
                    raise UnknownName(route.kind, route.public)
                answers = (ctx.params or {}).get("inputResponses")
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

    def _may_ask(self, mount: str) -> bool:
        """Whether a call may put a question to its client: a confirmation, or a handshake-era server's."""
        upstream = self._upstreams.get(mount)
        return self._confirms or upstream is None or not upstream.modern

    async def _complete(self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams) -> Any:
        route = await self._router.route_arriving("completion/complete", ctx.params or {})
        if not self._policy().visible(principal_of(ctx), route.kind, route.mount, route.native):
            raise UnknownName(route.kind, route.public)
        return _complete_result(await self._router.forward("completion/complete", route.mount, route.params))

    async def _set_level(self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> Any:
        client = self._client_of(ctx) or self._register(ctx.session)
        client.log_level = params.level
        if self._on_log_level is not None:
            await self._on_log_level(self.log_level())
        return {}

    # -- resource subscriptions -------------------------------------------------------

    def _visible_resource(self, ctx: ServerRequestContext[Any, Any], uri: Any) -> tuple[str, str, str]:
        """(public URI, mount, server URI) of a resource the caller may read. Raises `UnknownName`."""
        route = self._router.route("resources/read", {"uri": uri})
        if not self._policy().visible(principal_of(ctx), route.kind, route.mount, route.native):
            raise UnknownName(route.kind, route.public)
        return route.public, route.mount, route.native

    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> Any:
        public, mount, native = self._visible_resource(ctx, (ctx.params or {}).get("uri"))
        client = self._client_of(ctx) or self._register(ctx.session)
        client.subscriptions.add(public)
        await self._subscriptions.add(sdk_runner.connection_of(ctx.session), mount, native)
        return {}

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams) -> Any:
        public, mount, native = self._visible_resource(ctx, (ctx.params or {}).get("uri"))
        client = self._client_of(ctx)
        if client is not None:
            client.subscriptions.discard(public)
        await self._subscriptions.remove(sdk_runner.connection_of(ctx.session), mount, native)
        return {}

    async def _listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """A 2026-07-28 client's event stream; the resources it names are subscribed while it lasts.

        URIs of resources the caller may not see, or that no mount has, are left
        out of the acknowledged filter.
        """
        wanted = params.notifications
        held: list[tuple[str, str]] = []
        kept: list[str] = []
        for uri in wanted.resource_subscriptions or ():
            try:
                public, mount, native = self._visible_resource(ctx, uri)
            except UnknownName:
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
        notification = types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=public))
        for client in list(self._clients.values()):
            if public in client.subscriptions:
                await _deliver(client.session, notification)

    def log_level(self) -> str:
        """The most verbose level any connected client asked for (what servers are asked to send)."""
        levels = [c.log_level for c in self._clients.values() if c.log_level is not None]
        return min(levels, key=_LOG_LEVELS.index) if levels else "info"

    # -- clients and their notifications ------------------------------------------

    async def _client_initialized(self, ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
        client = self._register(ctx.session)
        sole = self._sole
        if sole is not None and sole.origin is None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            sole.origin = ClientOrigin(ctx, client, scoped=False)
            sole.arrived.set()

    async def _roots_changed(self, ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
        key = sdk_runner.connection_of(ctx.session)
        sole = self._sole is not None and self._sole.origin is not None and self._sole.origin.client_key is key
        for upstream in self._upstreams.values():
            await upstream.roots_changed(key, sole=sole)

    # -- the one client of a hub serving stdio --------------------------------------

    @property
    def _sole(self) -> _SoleClient | None:
        return self.server.sole if isinstance(self.server, _HubServer) else None

    def serve_one_client(self) -> None:
        """The hub serves stdio, to one client: servers' `roots/list` that no call explains go to it
        (shared sessions' questions, on its behalf), and its `notifications/roots/list_changed` reaches
        the shared sessions too. Call before the mounts start."""
        if isinstance(self.server, _HubServer) and self.server.sole is None:
            self.server.sole = _SoleClient()

    async def sole_client(self) -> ClientOrigin | None:
        """The client of a hub serving stdio, waiting (up to `SOLE_CLIENT_WAIT`) for it to arrive; None: not
        serving stdio, no client yet, or a 2026-07-28 client (which can be asked only during its calls)."""
        sole = self._sole
        if sole is None:
            return None
        with anyio.move_on_after(SOLE_CLIENT_WAIT):
            await sole.arrived.wait()
        return sole.origin

    def _register(self, session: ServerSession) -> _Client:
        connection = sdk_runner.connection_of(session)
        client = self._clients.get(connection)
        if client is None:
            client = self._clients[connection] = _Client(session)
            # Forget the client, and what it subscribed to, when its connection closes.
            connection.exit_stack.callback(self._clients.pop, connection, None)
            if isinstance(self.server, _HubServer):
                connections = self.server.connections
                connections[connection.session_id] = connection
                connection.exit_stack.callback(_forget, connections, connection)
            connection.exit_stack.push_async_callback(self._subscriptions.drop, connection)
        return client

    def _client_of(self, ctx: ServerRequestContext[Any, Any]) -> _Client | None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None
        return self._clients.get(sdk_runner.connection_of(ctx.session))

    async def broadcast_log(self, params: Mapping[str, Any]) -> None:
        """A server's log message that belongs to no one request: to every client at its level."""
        notification = _log_notification(params)
        for client in list(self._clients.values()):
            if _at_least(params.get("level"), client.log_level):
                await _deliver(client.session, notification)

    async def notify_changed(self, kinds: Iterable[str]) -> None:
        """Tell every connected client which of the hub's lists changed."""
        kinds = set(kinds)
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
        senders = []
        for kind in set(kinds):
            if kind == "tools":
                senders.append(ServerSession.send_tool_list_changed)
            elif kind == "prompts":
                senders.append(ServerSession.send_prompt_list_changed)
            elif kind == "resources" or (
                kind == "resource_templates" and ServerSession.send_resource_list_changed not in senders
            ):
                senders.append(ServerSession.send_resource_list_changed)
        for connection, client in list(self._clients.items()):
            for send in senders:
                try:
                    with anyio.fail_after(_NOTIFY_TIMEOUT):
                        await send(client.session)
                except Exception:  # boundary: one gone client must not stop the others' notifications
                    logger.debug("dropping a client that could not be notified", exc_info=True)
                    self._clients.pop(connection, None)
                    break


class _RawResult(RootModel[dict[str, Any]]):
    """A client's answer, kept as the client's own JSON."""


_NEEDS = {
    "sampling/createMessage": ("sampling", types.ClientCapabilities(sampling=types.SamplingCapability())),
    "elicitation/create": ("elicitation", types.ClientCapabilities(elicitation=types.ElicitationCapability())),
    "roots/list": ("roots", types.ClientCapabilities(roots=types.RootsCapability())),
}


class ClientOrigin:
    """The downstream client behind one request: where a server's questions about it go.

    Its `client_key` picks the per-client session that serves it on an
    `isolation = "per-client"` mount: a handshake-era client's connection, which
    lasts across its requests; for a 2026-07-28 request, which stands alone, the
    principal the HTTP layer authenticated (an API key's name), so that each
    principal's requests share a session of their own. An anonymous 2026-07-28
    request has none, and is served by the shared session: nothing tells two
    anonymous callers apart.
    """

    def __init__(self, ctx: ServerRequestContext[Any, Any], client: _Client | None, *, scoped: bool = True) -> None:
        self._ctx = ctx
        self._client = client
        self._session = ctx.session
        self._request_id = ctx.request_id if scoped else None
        self.modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        # The SDK exposes a handshake-era client's connection only here.
        self._connection = None if self.modern else sdk_runner.connection_of(self._session)
        self._key: Hashable | None = self._connection if not self.modern else self._authenticated(ctx)

    @staticmethod
    def _authenticated(ctx: ServerRequestContext[Any, Any]) -> Hashable | None:
        """The principal the HTTP layer authenticated the request as; None when it authenticated none."""
        principal = ctx.request.scope.get("state", {}).get(PRINCIPAL_KEY) if ctx.request is not None else None
        return ("principal", str(principal)) if principal is not None else None

    @property
    def client_key(self) -> Hashable | None:
        return self._key

    def for_client(self) -> ClientOrigin:
        return ClientOrigin(self._ctx, self._client, scoped=False)

    def on_close(self, callback: Callable[[], None]) -> None:
        if self._connection is not None:
            self._connection.exit_stack.callback(callback)

    async def log(self, params: Mapping[str, Any]) -> None:
        level = params.get("level")
        if self.modern and self._request_id is None:
            return  # a 2026-07-28 client hears log messages only in answer to a request
        if self.modern:
            meta = (self._ctx.params or {}).get("_meta")
            if level not in allowed_log_levels(self._ctx.protocol_version, meta if isinstance(meta, dict) else None):
                return
        elif self._client is not None and not _at_least(level, self._client.log_level):
            return
        await _deliver(self._session, _log_notification(params), related_request_id=self._request_id)

    @property
    def capabilities(self) -> Mapping[str, Any] | None:
        declared = self._session.client_capabilities
        if declared is None:
            return {}
        relayed = relayed_capabilities(declared)
        extensions = relayed.get("extensions")
        if not self.modern and isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions:
            # A handshake-era client cannot be sent a task handle: its calls are not to be answered with one.
            others = {name: value for name, value in extensions.items() if name != TASKS_EXTENSION}
            return {**relayed, "extensions": others}
        return relayed

    def check_can_ask(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Raise `ClientCannotAnswer` unless the client declared the capability `method` needs.

        A URL-mode elicitation (`params` with `mode: "url"`) needs `elicitation.url`; a client
        declaring `elicitation` alone takes forms only.
        """
        feature, capability = _NEEDS.get(method, (method, None))
        if capability is None or not self._session.check_client_capability(capability):
            raise ClientCannotAnswer(f"mcp-hub: the client connected to the hub does not support {feature}")
        if method == "elicitation/create" and params is not None and params.get("mode") == "url":
            declared = self._session.client_capabilities
            if declared is None or declared.elicitation is None or declared.elicitation.url is None:
                raise ClientCannotAnswer(
                    "mcp-hub: the client connected to the hub does not support URL-mode elicitation"
                )

    async def elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the client that a URL-mode elicitation it accepted is complete (2026-07-28 has no such notice)."""
        if self.modern:
            return
        params = types.ElicitCompleteNotificationParams(elicitation_id=elicitation_id)
        notification = types.ElicitCompleteNotification(params=params)
        await _deliver(self._session, notification, related_request_id=self._request_id)

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        if self.modern:
            # Asked through `ParkingLot` when the call may ask; otherwise nothing can carry it.
            when = "mid-call" if self._request_id is not None else "outside a call"
            raise ClientCannotAnswer(f"mcp-hub: {method} cannot be sent {when} to a 2026-07-28 client")
        self.check_can_ask(method, params)
        request = cast(Any, types.Request[dict[str, Any], str](method=method, params=dict(params)))
        metadata = ServerMessageMetadata(related_request_id=self._request_id) if self._request_id is not None else None
        answer = await self._session.send_request(request, _RawResult, metadata=metadata)
        return answer.root


def _log_notification(params: Mapping[str, Any]) -> types.LoggingMessageNotification:
    return types.LoggingMessageNotification(params=types.LoggingMessageNotificationParams.model_validate(params))


async def _deliver(
    session: ServerSession, notification: types.ServerNotification, related_request_id: Any = None
) -> None:
    """Send a notification a client may no longer be there to receive."""
    try:
        with anyio.fail_after(_NOTIFY_TIMEOUT):
            await session.send_notification(notification, related_request_id=related_request_id)
    except Exception:  # boundary: a gone or stuck client loses its notification, nothing else
        logger.debug("could not deliver %s to a client", notification.method, exc_info=True)


_RELAYED_CAPABILITIES = frozenset({"sampling", "elicitation", "roots", "extensions"})
"""The client capabilities a server's questions need, and the extensions the client declared (each as
declared, known to the hub or not), which the hub relays."""
_RELAYED: LRUCache[int, tuple[weakref.ref[Any], Mapping[str, Any]]] = LRUCache(256)
"""`relayed_capabilities` of the models seen last, by `id`, each with a weak reference to its model."""


def relayed_capabilities(declared: Any) -> Mapping[str, Any]:
    """What a client's declared capabilities model (`ClientCapabilities`) lets it be asked: its `sampling`,
    `elicitation` and `roots`, and its `extensions`, as sent on to a 2026-07-28 server. Read only.

    Kept while the model lives, by its identity: a handshake-era connection's model stands for the
    connection's life, and the 2026-07-28 requests of one client share theirs (`Envelopes`). The entry
    goes with the model, so neither outlives the other, and an `id` reused by a later model finds no entry.
    """
    key = id(declared)
    kept = _RELAYED.get(key)
    if kept is not None and kept[0]() is declared:
        return kept[1]
    dumped = declared.model_dump(by_alias=True, mode="json", exclude_none=True)
    relayed = {name: value for name, value in dumped.items() if name in _RELAYED_CAPABILITIES}

    def forget(ref: weakref.ref[Any]) -> None:
        entry = _RELAYED.get(key)
        if entry is not None and entry[0] is ref:
            del _RELAYED[key]

    _RELAYED[key] = (weakref.ref(declared, forget), relayed)
    return relayed


def merged_extensions(declared: Iterable[Mapping[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """The extensions several servers declared (identifier -> settings), as one declaration.

    Every identifier any of them declared, unknown ones included. Settings of the same
    identifier are merged key by key: lists are joined (each value once, in order of
    first mention, e.g. MCP Apps' `mimeTypes`), objects merged alike, and for anything
    else the first server's value stands.
    """
    merged: dict[str, dict[str, Any]] = {}
    for extensions in declared:
        for identifier, settings in (extensions or {}).items():
            if isinstance(settings, Mapping):
                merged[identifier] = _merged_settings(merged.get(identifier, {}), settings)
    return merged


def _merged_settings(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(first)
    for key, value in second.items():
        kept = merged.get(key)
        if key not in merged:
            merged[key] = value
        elif isinstance(kept, list) and isinstance(value, list):
            merged[key] = kept + [v for v in value if v not in kept]
        elif isinstance(kept, Mapping) and isinstance(value, Mapping):
            merged[key] = _merged_settings(kept, value)
    return merged


def session_connections(server: Server[Any]) -> Mapping[str | None, Connection]:
    """The hub's initialized handshake-era connections, by session id (see `_HubServer.connections`);
    none for another server."""
    return server.connections if isinstance(server, _HubServer) else {}


def client_opened(server: Server[Any], modern: bool) -> None:
    """The client of a hub serving stdio sent its first request (`modern`: a 2026-07-28 one, which is all
    there is to know of it; a handshake-era client is known once it has initialized)."""
    sole = server.sole if isinstance(server, _HubServer) else None
    if sole is not None and modern:
        sole.arrived.set()


def _forget(connections: dict[str | None, Connection], connection: Connection) -> None:
    if connections.get(connection.session_id) is connection:
        del connections[connection.session_id]


def principal_of(ctx: ServerRequestContext[Any, Any]) -> str:
    """Who is calling: the HTTP layer's authenticated principal, or "stdio" for the local user."""
    request = ctx.request
    if request is None:
        return "stdio"
    return str(request.scope.get("state", {}).get(PRINCIPAL_KEY, ANONYMOUS))


def session_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    request = ctx.request
    return request.headers.get("mcp-session-id") if request is not None else None


def _complete_result(result: dict[str, Any]) -> dict[str, Any]:
    """Mark a result from a pre-2026 server final, as the 2026-07-28 wire requires (older wires drop the key)."""
    result.setdefault("resultType", "complete")
    return result


def _progress_relay(ctx: ServerRequestContext[Any, Any]) -> ProgressFnT | None:
    """Relay a server's progress to the client, if the client asked for progress: with a `progressToken` in
    the request's `_meta`, or, in process (the SDK's direct dispatcher, which sends no token), with a
    progress callback on the request."""
    meta = (ctx.params or {}).get("_meta")
    if (not isinstance(meta, dict) or meta.get("progressToken") is None) and not sdk_runner.has_progress_callback(
        ctx.session
    ):
        return None
    session = ctx.session

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await session.report_progress(progress, total, message)

    return relay
