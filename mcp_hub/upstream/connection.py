"""One live session with a mounted server, and the one way requests are sent on it.

`connect()` opens the transport (transports.py), runs the SDK client's
negotiation (either protocol era) and yields a `Connection`.
`Connection.send()` sends a request with the mount's deadline, down the
transport's channel (channel.py: stdio.py, http.py), stamped as the SDK session
stamps its own, or, where there is none (legacy SSE), through the SDK session;
it translates library and transport failures into `UpstreamError`s: this is
the I/O edge. Errors the server answers itself (`MCPError`) pass through
unchanged.

`connect(mode="legacy")` opens a handshake-era session on a mount whose
`protocol` is "auto" (the caller's own era, see era.py), and connects as
"auto" does when the server refuses the handshake.

A URL mount with no `transport` is connected as the MCP spec's backwards
compatibility section says: streamable HTTP first, and if the server answers
the handshake's POST with an HTTP 4xx (a server of the 2024-11-05 HTTP+SSE
transport answers 404 or 405), the legacy SSE transport at the same URL. The
transport that worked is kept in the mount's `TransportChoice`, so its later
connections go straight to it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client import ClientExtension, advertise
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from mcp_hub import __version__, sdk
from mcp_hub.config import ServerConfig
from mcp_hub.credentials import credential_for
from mcp_hub.errors import UpstreamTimeout, UpstreamUnavailable
from mcp_hub.observe.otel import CURRENT
from mcp_hub.scopes import cancel_scope, deadline_after
from mcp_hub.sdk.client import restamp, stamp_of
from mcp_hub.upstream.relay import InFlight, Origin, drive_input_required
from mcp_hub.upstream.stderr import StderrTail
from mcp_hub.upstream.transports import WatchedTransport, open_transport

logger = logging.getLogger("mcp_hub.upstream")

_RAW_RESULT: TypeAdapter[Any] = TypeAdapter(dict[str, Any])
"""Results stay the server's own JSON: the hub forwards, it does not re-model."""

_SAMPLING = types.SamplingCapability(context=types.SamplingContextCapability(), tools=types.SamplingToolsCapability())

UI_EXTENSION = "io.modelcontextprotocol/ui"
"""MCP Apps: tools that name an HTML page (`ui://`) the host renders, which calls tools back."""
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
"""Skills (SEP-2640): a server's Agent Skills, their files as resources (`skill://`), listed by `skills/list`,
described by `skills/get`, their folders read by `resources/directory/read` (setting `directoryRead`)."""
CARRIED_EXTENSIONS: Mapping[str, Mapping[str, Any]] = {UI_EXTENSION: {"mimeTypes": ["text/html;profile=mcp-app"]}}
"""The extensions the hub can carry between a client and a server, which it declares as its own to a shared
handshake-era session. MCP Apps: it relays a page's `ui://` resource and the page's calls (the client renders
the page). A 2026-07-28 request sent for a client declares that client's extensions instead."""

_MAX_TOOL_PAGES = 1000


class _TaskRequest(types.Request[dict[str, Any], str]):
    """A request that names a task (SEP-2663): over HTTP, its `Mcp-Name` header is the task id."""

    name_param = "taskId"


_NAMED_BY_TASK = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})

_CALLER: ContextVar[Origin | None] = ContextVar("mcp_hub_caller", default=None)
"""The client a request is sent for, while it is being sent (its capabilities are read only if stamped)."""


class TransportChoice:
    """The transport one mount is reached by: its config's, or, for a URL with no `transport`
    ("auto"), the one its first connection found, kept for the mount's later connections."""

    def __init__(self, config: ServerConfig) -> None:
        self.kind: str = config.kind
        """"stdio", "streamable-http", "sse", or "auto" until a connection has found out."""
        self.credential = credential_for(config)
        """What the mount presents to its server besides its headers; kept across its connections."""
        exchanged = config.auth.per_caller
        self.client_credential = credential_for(config, for_clients=True) if exchanged else self.credential
        """What a client's own session presents (a "token_exchange" mount: each caller's exchanged token; a
        "user" mount, or an "enterprise" one without a configured `id_token`: each person's own)."""


class Connection:
    """A negotiated session with one server."""

    def __init__(
        self,
        config: ServerConfig,
        session: ClientSession,
        inflight: InFlight,
        transport: WatchedTransport,
        on_broken: Callable[[str], None],
        kind: str,
    ) -> None:
        self.config = config
        self.transport = kind
        """The transport this connection runs on: "stdio", "streamable-http" or "sse"."""
        self.session = session
        self.inflight = inflight
        self.closed = transport.closed
        """Set when the transport's read side ends (a child exited, a stream broke)."""
        self._channel = transport.channel
        if self._channel is not None and stamp_of(session) is None:
            sdk.unavailable("sending requests past the SDK's client session", "ClientSession._stamp")
            self._channel = None
        self._on_broken = on_broken

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        on_progress: ProgressFnT | None = None,
        origin: Origin | None = None,
    ) -> dict[str, Any]:
        """Send one request on behalf of `origin` and return the server's raw result.

        A 2026-07-28 server's `input_required` result reaches a 2026-07-28 client as
        is (the client answers and calls again); for a handshake-era client the hub
        asks the client and calls again itself.
        """

        result = await self.send(method, params, on_progress=on_progress, origin=origin)
        if result.get("resultType") != "input_required" or origin is None:
            return result

        async def send(params: Mapping[str, Any] | None) -> dict[str, Any]:
            return await self.send(method, params, on_progress=on_progress, origin=origin)

        if not origin.modern:
            return await drive_input_required(send, params or {}, result, partial(self.inflight.ask_for, origin))
        if self.inflight.configured is not None:  # the configured roots answer; what else the server asks, the client
            return await drive_input_required(
                send, params or {}, result, partial(self.inflight.ask_for, origin), _only_roots
            )
        return result

    @property
    def modern(self) -> bool:
        return self.session.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def roots_changed(self) -> None:
        """Tell the server its client's roots changed (`notifications/roots/list_changed`)."""
        try:
            with anyio.fail_after(self.config.timeout):
                await self.session.send_notification(types.RootsListChangedNotification())
        except Exception as exc:  # boundary: a session on its way out misses the news, nothing else
            logger.debug("server %r: roots list_changed not delivered: %s", self.config.name, exc)

    async def learn_tools(self) -> set[str]:
        """List a 2026-07-28 server's tools through the SDK session; the names of those it keeps.

        The session records each tool's `x-mcp-header` map, which it needs to send
        the `Mcp-Param-*` headers of a call over HTTP, and drops tools whose map is
        invalid, as the protocol requires of a client.
        """
        names: set[str] = set()
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            try:
                with anyio.fail_after(self.config.timeout):
                    page = await self.session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            except TimeoutError:
                raise UpstreamTimeout(
                    self.config.name, f"did not answer tools/list within {self.config.timeout:g}s"
                ) from None
            names.update(tool.name for tool in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return names

    async def send(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        on_progress: ProgressFnT | None = None,
        origin: Origin | None = None,
    ) -> dict[str, Any]:
        """One request, one deadline.

        Raises:
            UpstreamUnavailable: the connection broke.
            UpstreamTimeout: no answer within the mount's `timeout`.
            MCPError: the server answered with a JSON-RPC error (passed through).
        """
        telemetry = CURRENT.get()
        if telemetry is not None:  # measured; traced, and its trace context sent along, within a client request
            send = partial(self._send, method, on_progress=on_progress, origin=origin)
            return await telemetry.upstream_request(self.config, self.session.protocol_version, method, params, send)
        return await self._send(method, params, on_progress=on_progress, origin=origin)

    async def _send(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        on_progress: ProgressFnT | None = None,
        origin: Origin | None = None,
    ) -> dict[str, Any]:
        name = self.config.name
        timeout = self.config.timeout
        _CALLER.set(origin)
        # A bare scope with a deadline (which the relay may move, see InFlight.track) rather than
        # `fail_after`, whose two nested generators cost more on every call.
        scope = cancel_scope(deadline=deadline_after(timeout))
        try:
            with scope, self.inflight.track(origin, scope):
                if self._channel is not None:
                    return await self._down_channel(method, params, on_progress)
                kind = _TaskRequest if method in _NAMED_BY_TASK else types.Request[dict[str, Any], str]
                request = kind(method=method, params=dict(params or {}))
                result: dict[str, Any] = await self.session.send_request(
                    request, _RAW_RESULT, progress_callback=on_progress
                )
                return result
            raise TimeoutError  # only its deadline cancels the scope
        except TimeoutError:
            raise UpstreamTimeout(name, f"did not answer {method} within {timeout:g}s") from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            self._on_broken(f"connection closed during {method}")
            raise UpstreamUnavailable(name, f"closed the connection during {method}") from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._on_broken(f"{type(exc).__name__}: {exc}")
            raise UpstreamUnavailable(name, f"connection failed during {method}: {exc}") from exc

    async def _down_channel(
        self, method: str, params: Mapping[str, Any] | None, on_progress: ProgressFnT | None
    ) -> dict[str, Any]:
        """Send a request past the SDK session (see channel.py), stamped as the session stamps its own."""
        assert self._channel is not None
        data: dict[str, Any] = {"method": method, "params": dict(params or {})}
        options: dict[str, Any] = {}
        stamp = stamp_of(self.session)  # the session's current one: negotiation replaces it
        assert stamp is not None
        stamp(data, options)
        headers = options.get("headers") or {}
        task_id = data["params"].get("taskId")
        if method in _NAMED_BY_TASK and isinstance(task_id, str):
            headers = {**headers, MCP_NAME_HEADER: encode_header_value(task_id)}
        return await self._channel.request(
            method,
            data["params"],
            headers,
            on_progress=on_progress,
            modern=self.modern,
        )


@asynccontextmanager
async def connect(
    config: ServerConfig,
    *,
    inflight: InFlight,
    message_handler: MessageHandlerFnT,
    on_broken: Callable[[str], None],
    choice: TransportChoice | None = None,
    extensions: Mapping[str, Any] | None = None,
    stderr: StderrTail | None = None,
    for_client: bool = False,
    mode: str | None = None,
) -> AsyncIterator[Connection]:
    """Open and negotiate a session. The caller bounds the time this takes.

    `choice` is the mount's transport, updated once an "auto" mount has found
    its own (None: found anew by this connection). `extensions` are those of the
    one client the session is for, declared to the server as the hub's own
    (None: a shared session, which declares what the hub can carry). `for_client`: the session is one
    client's own, and presents the mount's `client_credential`. `mode`: "legacy" for a
    handshake-era session of a mount whose `protocol` is "auto" (None: its `protocol`);
    if the server refuses the handshake, the session is negotiated as "auto" does.

    The server's log messages and URL-mode elicitation completions go to the
    client they are for (see `InFlight.log` and `InFlight.elicitation_complete`);
    every other notification goes to `message_handler`. A stdio child's stderr
    is kept in `stderr` as well (see stderr.py).
    """
    choice = choice or TransportChoice(config)
    kind = "streamable-http" if choice.kind == "auto" else choice.kind
    declared = _advertised(config, CARRIED_EXTENSIONS if extensions is None else extensions)
    open_session = partial(_negotiated, config, inflight=inflight, message_handler=message_handler, extensions=declared)
    credential = choice.client_credential if for_client else choice.credential
    if mode == "legacy" and config.protocol == "auto":
        async with AsyncExitStack() as stack:
            try:
                transport = open_transport(config, kind, stderr, credential)
                session = await stack.enter_async_context(open_session(transport, mode="legacy"))
            except Exception as exc:  # boundary: the server refused the handshake; connect as "auto" does
                logger.info("server %r: a handshake-era session failed (%s); connecting as auto", config.name, exc)
            else:
                choice.kind = kind
                yield Connection(config, session, inflight, transport, on_broken, kind)
                return
    async with AsyncExitStack() as stack:
        transport = open_transport(config, kind, stderr, credential)
        try:
            session = await stack.enter_async_context(open_session(transport))
        except Exception as exc:
            refused = transport.refused
            if choice.kind != "auto" or refused is None:
                raise
            kind, transport = "sse", open_transport(config, "sse", credential=credential)
            try:
                session = await stack.enter_async_context(open_session(transport))
            except Exception as sse_exc:
                raise UpstreamUnavailable(
                    config.name,
                    f"refused streamable HTTP (HTTP {refused}: {described(exc)}), "
                    f"and the legacy SSE transport failed too: {described(sse_exc)}",
                ) from sse_exc
            logger.warning(
                "server %r: refused streamable HTTP (HTTP %d); connected over the legacy SSE transport, "
                "which its later connections use",
                config.name,
                refused,
            )
        choice.kind = kind
        yield Connection(config, session, inflight, transport, on_broken, kind)


def described(exc: BaseException) -> str:
    """What went wrong, in words: an exception group's exceptions, each named with its type unless it is the
    server's own error."""
    if isinstance(exc, ExceptionGroup):
        return "; ".join(described(e) for e in exc.exceptions)
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, MCPError) else f"{type(exc).__name__}: {text}"


@asynccontextmanager
async def _negotiated(
    config: ServerConfig,
    transport: WatchedTransport,
    *,
    inflight: InFlight,
    message_handler: MessageHandlerFnT,
    extensions: Sequence[ClientExtension],
    mode: str | None = None,
) -> AsyncIterator[ClientSession]:
    """The SDK client's session over `transport`, negotiated (a pinned version's capabilities asked) in `mode`
    (None: the mount's `protocol`)."""
    protocol = mode or config.protocol

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.LoggingMessageNotification):
            await inflight.log(_log_params(config, message.params))
        elif isinstance(message, types.ElicitCompleteNotification):
            await inflight.elicitation_complete(message.params.elicitation_id)
        else:
            await message_handler(message)

    client = Client(
        transport,
        mode=protocol,
        client_info=types.Implementation(name="mcp-hub", version=__version__),
        message_handler=on_message,
        cache=None,
        # The hub asks its clients on the server's behalf (see relay.py), so it
        # offers what a client may offer; a client that cannot gets an error.
        sampling_callback=inflight.sampling,
        sampling_capabilities=_SAMPLING,
        elicitation_callback=inflight.elicitation,
        list_roots_callback=inflight.roots,
        extensions=extensions,
    )
    async with client:
        if protocol not in ("auto", "legacy"):
            # A pinned version skips the probe, and with it the server's capabilities: ask.
            discovered = await client.session.send_discover(protocol)
            client.session.adopt(types.DiscoverResult.model_validate(discovered))
        if client.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            _declare_callers_capabilities(client.session, config.roots is not None)
        else:
            await transport.listening()
        yield client.session


def _advertised(config: ServerConfig, extensions: Mapping[str, Any]) -> tuple[ClientExtension, ...]:
    """A client's declared extensions, to declare as they are (one whose identifier the SDK refuses is left out)."""
    advertised: list[ClientExtension] = []
    for identifier, settings in extensions.items():
        try:
            advertised.append(advertise(identifier, dict(settings) if isinstance(settings, Mapping) else None))
        except ValueError as exc:
            logger.debug("server %r: a client's extension %r is not declared: %s", config.name, identifier, exc)
    return tuple(advertised)


def _only_roots(method: str) -> bool:
    return method == "roots/list"


def _declare_callers_capabilities(session: ClientSession, configured_roots: bool) -> None:
    """Declare, on each 2026-07-28 request, what the client it is sent for can be asked.

    The server decides from these whether it may ask (sampling, elicitation,
    roots) and must refuse a request that needs what the client lacks; the
    hub's own offer would claim for every client what only some have. The SDK
    stamps its session-wide capabilities on every request and has no per-request
    setting, so its stamp is wrapped (narrowly: one key, only when a request is
    sent for a client). A mount with configured roots is answered `roots/list` by
    the hub, so `roots` is declared for every client.
    """
    stamp = stamp_of(session)
    if stamp is None:
        sdk.unavailable("declaring each client's capabilities to a 2026-07-28 server", "ClientSession._stamp")
        return

    def stamp_for_caller(data: dict[str, Any], opts: Any) -> None:
        stamp(data, opts)
        caller = _CALLER.get()
        meta = (data.get("params") or {}).get("_meta")
        if caller is None or not isinstance(meta, dict) or CLIENT_CAPABILITIES_META_KEY not in meta:
            return
        capabilities = caller.capabilities
        if capabilities is not None:
            meta[CLIENT_CAPABILITIES_META_KEY] = dict(capabilities)
            if configured_roots:
                meta[CLIENT_CAPABILITIES_META_KEY]["roots"] = {}

    restamp(session, stamp_for_caller)


def _log_params(config: ServerConfig, params: types.LoggingMessageNotificationParams) -> dict[str, Any]:
    """The message as sent, its logger named after the mount (unless the mount is unprefixed)."""
    raw = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    if config.prefix:
        raw["logger"] = f"{config.name}.{raw['logger']}" if raw.get("logger") else config.name
    return raw
