"""Handshake-era requests on an established HTTP session, served from the POST that carries them.

The SDK's streamable HTTP transport hands every POSTed request to the session's
message loop: the request crosses a stream to the session's dispatcher, which
runs it in a task of its own and writes the response to another stream; a router
task takes it from there to the POST's own stream, a writer task turns it into an
SSE event, and the response (`deferred.DeferredEventSource`) finally reads it.
Each hop costs a task switch, and together they cost more CPU than the rest of a
tool call through the hub.

`DirectRequests` serves a request on an established session in the POST's own
task instead: the session's `ServerRunner` runs it (the same validation,
middleware, handlers and result shaping as ever; a call goes through the hub's
lane, `lane.CallLane`, which does what the runner does for it), under a dispatch
context of the session's own dispatcher, so that what the request sends the
client on its way (progress, log messages, questions) and the client's
cancellation travel exactly as before. A request that sent nothing is answered as plain JSON, as the
deferred event source answers it. The first message it sends, or
`deferred.WINDOW` passing, starts the SSE stream instead, and from then on its
messages and its response go through the session's ordered channel, as the
SDK's own path sends them.

Everything else goes to the SDK as before: `initialize`, notifications and
responses, batches, other sessions' requests or those of a session not yet
initialized, and any request whose headers or body the SDK would refuse (it then
refuses them itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import pydantic_core
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import (
    REQUEST_CANCELLED,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.dispatcher import CallOptions, OnRequest, coerce_request_id
from mcp.shared.jsonrpc_dispatcher import (
    JSONRPCDispatcher,
    _InFlight,  # pyright: ignore[reportPrivateUsage]
    _JSONRPCDispatchContext,  # pyright: ignore[reportPrivateUsage]
    handler_exception_to_error_data,
    progress_token_from_params,
)
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import INVALID_REQUEST, PROTOCOL_VERSION_META_KEY, ErrorData, JSONRPCError, JSONRPCResponse
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_hub import wire
from mcp_hub.scopes import cancel_scope
from mcp_hub.server import deferred
from mcp_hub.server.lane import lane_of, serving

logger = logging.getLogger("mcp_hub.server")

_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"


class DirectRequests:
    """Pure ASGI middleware: requests on an established handshake-era session, served in the POST's task.

    `connections` maps a session id to the session's connection once its client
    has initialized; `max_body` is the largest body served here (a larger one goes
    to the SDK, which refuses it).
    """

    def __init__(
        self,
        app: ASGIApp,
        manager: StreamableHTTPSessionManager,
        connections: Mapping[str | None, Connection],
        max_body: int,
    ) -> None:
        self._app = app
        self._manager = manager
        self._connections = connections
        self._max_body = max_body
        self._runners: WeakKeyDictionary[Connection, ServerRunner[Any]] = WeakKeyDictionary()
        self._lane = lane_of(manager.app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = self._session(scope)
        if session is None:
            await self._app(scope, receive, send)
            return
        transport, connection = session
        # Held from here, as the SDK holds a session from the moment a request reaches its transport: the
        # session was found live just now, and its idle countdown must not run out while the body arrives.
        with _holding(transport):
            await self._serve(transport, connection, scope, receive, send)

    async def _serve(
        self,
        transport: StreamableHTTPServerTransport,
        connection: Connection,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        request = Request(scope, receive)
        if not self._acceptable(transport, request) or await transport._security.validate_request(  # pyright: ignore[reportPrivateUsage]
            request, is_post=True
        ):
            await self._app(scope, receive, send)
            return
        chunks, complete = await read_body(receive, self._max_body)
        message = request_of(b"".join(chunks)) if complete else None
        if message is None:
            if complete and _has_unusable_id(b"".join(chunks)):
                await _refuse(None, "a request id must be a string or an integer", transport, send)
                return
            await self._app(scope, replaying(chunks, receive), send)
            return
        if not self._free(transport, connection, message["id"]):
            reused = f"request id {message['id']!r} is in use by a request in flight on this session"
            await _refuse(message["id"], f"{reused}; ids must not be reused", transport, send)
            return
        exchange = _Exchange(transport, connection, self._on_request(connection, message["method"]), request, message)
        await exchange.serve(scope, receive, send)

    def _session(self, scope: Scope) -> tuple[StreamableHTTPServerTransport, Connection] | None:
        """The transport and connection of the initialized session a POST is for; None: not for one."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        session_id = version = None
        for key, value in scope["headers"]:
            if key == _SESSION_HEADER:
                session_id = value.decode("latin-1")
            elif key == _VERSION_HEADER:
                version = value.decode("latin-1")
        if session_id is None or (version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS):
            return None
        transport = self._manager._server_instances.get(session_id)  # pyright: ignore[reportPrivateUsage]
        connection = self._connections.get(session_id)
        if (
            transport is None
            or connection is None
            or transport.is_terminated
            or (transport.idle_scope is not None and transport.idle_scope.cancel_called)
            or transport.is_json_response_enabled
            or not isinstance(connection.outbound, JSONRPCDispatcher)
            or not connection.initialize_accepted
        ):
            return None
        user = scope.get("user")
        owner = self._manager._session_owners.get(session_id)  # pyright: ignore[reportPrivateUsage]
        if owner is not None or isinstance(user, AuthenticatedUser):
            return None  # the SDK matches a session to the credential that opened it
        return transport, connection

    @staticmethod
    def _acceptable(transport: StreamableHTTPServerTransport, request: Request) -> bool:
        has_json, has_sse = check_accept_headers(request)
        return has_json and has_sse and transport._check_content_type(request)  # pyright: ignore[reportPrivateUsage]

    @staticmethod
    def _free(transport: StreamableHTTPServerTransport, connection: Connection, request_id: str | int) -> bool:
        """Whether no request with this id is in flight on the session.

        One that reuses an id in flight is refused (`_refuse`). The SDK would let the newer
        request take the id over: its transport routes the id's messages to the newer POST, so an earlier
        request that streams would lose the rest of its messages and its answer, and its POST would never
        be answered."""
        dispatcher: JSONRPCDispatcher[Any] = connection.outbound  # type: ignore[assignment]
        return (
            str(request_id) not in transport._request_streams  # pyright: ignore[reportPrivateUsage]
            and not in_flight(dispatcher, request_id)
        )

    def _on_request(self, connection: Connection, method: str) -> OnRequest:
        """What serves a request for `method` on the session: the hub's lane for calls, else its runner."""
        lifespan = self._manager._lifespan_state  # pyright: ignore[reportPrivateUsage]
        return serving(self._lane, runner_for(self._runners, self._manager.app, connection, lifespan), method)


async def _refuse(
    request_id: str | int | None, message: str, transport: StreamableHTTPServerTransport, send: Send
) -> None:
    """Answer a POST that is no request the session may take with INVALID_REQUEST, 400, on that POST alone.

    Two are refused here rather than handed to the SDK: a request that reuses the id of one in flight on
    its session (MCP forbids it; the SDK would give the newer request the id's stream, and a streaming
    call in flight would lose its answer), and one whose id is neither a string nor an integer (which
    the SDK reads as a notification and never answers)."""
    error = {"code": INVALID_REQUEST, "message": message}
    body = wire.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if transport.mcp_session_id is not None:
        headers.append((_SESSION_HEADER, transport.mcp_session_id.encode()))
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _has_unusable_id(body: bytes) -> bool:
    """Whether `body` is a request but for its id: one that is neither a string nor an integer."""
    try:
        message = pydantic_core.from_json(body)
    except ValueError:
        return False
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return False
    request_id = message.get("id", "")
    return "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, str | int))


@contextlib.contextmanager
def _holding(transport: StreamableHTTPServerTransport) -> Iterator[None]:
    """Hold the session open while a request is served: its idle countdown restarts when the last one ends.

    The SDK's transport keeps the same count (`_requests_in_flight`) for the requests it serves, so a
    request held here and then handed to the SDK is counted twice, and released when both let go."""
    idle, timeout = transport.idle_scope, transport._idle_timeout  # pyright: ignore[reportPrivateUsage]
    if idle is None or timeout is None:
        yield
        return
    transport._requests_in_flight += 1  # pyright: ignore[reportPrivateUsage]
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1  # pyright: ignore[reportPrivateUsage]
        if not transport._requests_in_flight:  # pyright: ignore[reportPrivateUsage]
            idle.deadline = anyio.current_time() + timeout


def request_of(body: bytes | str) -> dict[str, Any] | None:
    """The JSON-RPC request `body` holds, if it is one served past the message loop (not `initialize`)."""
    try:
        message = pydantic_core.from_json(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or set(message) - _ENVELOPE:
        return None
    method, request_id, params = message.get("method"), message.get("id"), message.get("params")
    if not isinstance(method, str) or method == "initialize":
        return None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if params is not None and not isinstance(params, dict):
        return None
    return message


_ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})


async def read_body(receive: Receive, max_body: int) -> tuple[list[bytes], bool]:
    """A request's body chunks, and whether that is all of it (False: it ended early or is over `max_body`)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return chunks, False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > max_body:
            return chunks, False
        if not message.get("more_body", False):
            return chunks, True


def replaying(chunks: list[bytes], receive: Receive) -> Receive:
    """`receive`, first giving back the body chunks already read from it."""
    pending = list(chunks)

    async def replay() -> Message:
        if pending:
            body = b"".join(pending)
            pending.clear()
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    if not chunks:
        return receive
    return replay


async def run_request(
    on_request: OnRequest,
    dctx: _JSONRPCDispatchContext[Any],
    scope: anyio.CancelScope,
    method: str,
    params: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, ErrorData | None]:
    """Run one request through `on_request` (the session's runner's, say), as the session's dispatcher would:
    its result or error (neither: cancelled, by the client or through `scope`). Errors are shaped as the
    dispatcher shapes them."""
    result: dict[str, Any] | None = None
    error: ErrorData | None = None
    with scope:
        try:
            result = await on_request(dctx, method, params)
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                logger.exception("handler for %r raised", method)
                error = ErrorData(code=0, message=str(exc))  # as the SDK's dispatcher answers it
        finally:
            dctx.close()
    return result, error


async def until_disconnect(receive: Receive) -> bool:
    """Wait for the client to go away (True), reading past the rest of its request; False: the server's
    `receive` failed, and the request goes on (its answer will fail)."""
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:
        logger.debug("watching for a disconnect failed", exc_info=True)
        return False
    return True


def runner_for(
    runners: WeakKeyDictionary[Connection, ServerRunner[Any]], server: Any, connection: Connection, lifespan: Any
) -> ServerRunner[Any]:
    """The connection's own `ServerRunner` for requests served past its message loop (made on first use)."""
    runner = runners.get(connection)
    if runner is None:
        runner = runners[connection] = ServerRunner(server, connection, lifespan)
    return runner


def in_flight(dispatcher: JSONRPCDispatcher[Any], request_id: str | int) -> bool:
    """Whether the client has a request with this id in flight on the dispatcher's connection."""
    return coerce_request_id(request_id) in dispatcher._in_flight  # pyright: ignore[reportPrivateUsage]


class Cancellable:
    """The request is in the dispatcher's table from now until this exits: the client's
    `notifications/cancelled` finds it there."""

    __slots__ = ("_dctx", "_key", "_table")

    def __init__(
        self, dispatcher: JSONRPCDispatcher[Any], dctx: _JSONRPCDispatchContext[Any], scope: anyio.CancelScope
    ) -> None:
        self._key = coerce_request_id(dctx.request_id)  # type: ignore[arg-type]
        self._table = dispatcher._in_flight  # pyright: ignore[reportPrivateUsage]
        self._dctx = dctx
        self._table[self._key] = _InFlight(scope=scope, dctx=dctx)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        entry = self._table.get(self._key)
        if entry is not None and entry.dctx is self._dctx:
            del self._table[self._key]


def has_modern_envelope(params: Mapping[str, Any] | None) -> bool:
    """Whether a request carries the 2026-07-28 per-request envelope (which a handshake-era connection refuses)."""
    meta = params.get("_meta") if params is not None else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def encode_answer(
    request_id: str | int, result: dict[str, Any] | None, error: ErrorData | None, *, line: bool = False
) -> bytes:
    """The JSON-RPC response or error, as the SDK's transports serialize it (`line`: with its newline)."""
    if error is not None:
        answer = JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        text = answer.model_dump_json(by_alias=True, exclude_unset=True).encode()
        return text + b"\n" if line else text
    message = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return wire.dumps_line(message) if line else wire.dumps(message)


@dataclass(eq=False)
class Watched(_JSONRPCDispatchContext[TransportContext]):
    """The session dispatcher's context for one request, which notes (and tells `on_send`) before it sends the
    client anything."""

    on_send: Callable[[], None] | None = None
    sent: bool = False
    """Whether the request sent the client anything on its way (its answer must then follow it in order)."""

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        if not self._closed:
            self._sending()
        await super().notify(method, params, opts)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        if self.can_send_request:
            self._sending()
        return await super().send_raw_request(method, params, opts)

    def _sending(self) -> None:
        self.sent = True
        if self.on_send is not None:
            self.on_send()


class _Exchange:
    """One request and its answer: JSON when the request sent nothing on its way, else an SSE stream."""

    def __init__(
        self,
        transport: StreamableHTTPServerTransport,
        connection: Connection,
        on_request: OnRequest,
        request: Request,
        message: dict[str, Any],
    ) -> None:
        self._transport = transport
        self._dispatcher: JSONRPCDispatcher[Any] = connection.outbound  # type: ignore[assignment]
        self._on_request = on_request
        self._session_id = transport.mcp_session_id or ""
        self._method: str = message["method"]
        self._params: dict[str, Any] | None = message.get("params")
        self._id: str | int = message["id"]
        self._key = str(self._id)
        metadata = ServerMessageMetadata(request_context=request)
        self._dctx = Watched(
            transport=self._dispatcher._transport_builder(metadata),  # pyright: ignore[reportPrivateUsage]
            _dispatcher=self._dispatcher,
            _request_id=self._id,
            message_metadata=metadata,
            _progress_token=progress_token_from_params(self._params),
            on_send=self._opening,
        )
        self._scope = cancel_scope()
        self._stream: tuple[Any, Any] | None = None
        self._streamer: asyncio.Task[None] | None = None
        """Set once the answer is an SSE stream (sent by this task): the response then goes through the
        session's channel."""
        self._start_streamer: Callable[[], asyncio.Task[None]] | None = None
        self._gone = False

    def _opening(self) -> None:
        """The request is about to send the client something, or the window passed: its answer becomes a
        stream, which a task of its own sends while the request runs on."""
        if self._streamer is None and self._start_streamer is not None:
            if self._stream is None:
                self._stream = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
                self._transport._request_streams[self._key] = self._stream  # pyright: ignore[reportPrivateUsage]
            self._streamer = self._start_streamer()

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            with Cancellable(self._dispatcher, self._dctx, self._scope):
                await self._exchange(scope, receive, send)
        finally:
            if self._stream is not None:
                with anyio.CancelScope(shield=True):
                    await self._transport._clean_up_memory_streams(self._key)  # pyright: ignore[reportPrivateUsage]

    async def _exchange(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request in this task; answer it as JSON, or wait for its stream to send its answer.

        The disconnect watcher and the stream are bare asyncio tasks (uvicorn serves on asyncio): a task
        group would cost each request a task for the handler, and cancelling an anyio scope formats the
        current task's repr for its reason."""
        loop = asyncio.get_running_loop()
        self._start_streamer = lambda: loop.create_task(self._stream_answer(scope, receive, send))
        watcher = loop.create_task(self._watch_disconnect(receive))
        timer = loop.call_later(deferred.WINDOW, self._opening)
        try:
            answer = await self._run()
            timer.cancel()
            if self._streamer is None:
                if answer is not None:
                    await self._send_json(answer, send)
                return
            await asyncio.wait((self._streamer,))  # its stream ends with the answer, or the client left
            if not self._streamer.cancelled() and (failure := self._streamer.exception()) is not None:
                raise failure
        finally:
            timer.cancel()
            watcher.cancel()
            if self._streamer is not None:
                self._streamer.cancel()

    async def _run(self) -> bytes | None:
        """Run the request through the session's runner (or the hub's lane for calls). Its JSON answer; None:
        it was answered on its stream, or its client is gone."""
        result, error = await run_request(self._on_request, self._dctx, self._scope, self._method, self._params)
        if self._gone:
            return None
        if self._dctx.cancel_requested.is_set() or (result is None and error is None):
            # Cancelled by the client: the handshake era still ends the request, with REQUEST_CANCELLED.
            error = ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
        if self._streamer is not None:
            # Through the session's ordered channel, behind whatever the request sent before.
            if error is not None:
                await self._dispatcher._write_error(self._id, error)  # pyright: ignore[reportPrivateUsage]
            else:
                assert result is not None
                await self._dispatcher._write_result(self._id, result)  # pyright: ignore[reportPrivateUsage]
            return None
        return encode_answer(self._id, result, error)

    async def _watch_disconnect(self, receive: Receive) -> None:
        """A client gone before its answer cancels the request (the answer could never reach it)."""
        if not await until_disconnect(receive):
            return
        self._gone = True
        self._dctx.cancel_requested.set()
        self._scope.cancel()
        if self._streamer is not None:
            self._streamer.cancel()

    async def _send_json(self, body: bytes, send: Send) -> None:
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (_SESSION_HEADER, self._session_id.encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _stream_answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._stream is not None
        headers = {
            "Cache-Control": "no-cache, no-transform",
            "Connection": "keep-alive",
            "Content-Type": "text/event-stream",
            "mcp-session-id": self._session_id,
        }
        response = EventSourceResponse(content=self._events(self._stream[1]), headers=headers)
        await response(scope, receive, send)

    async def _events(self, reader: Any) -> AsyncIterator[dict[str, Any]]:
        """The request's messages as SSE events, up to its response (as the SDK's SSE writer sends them)."""
        async for event_message in reader:
            yield dict(self._transport._create_event_data(event_message))  # pyright: ignore[reportPrivateUsage]
            if isinstance(event_message.message, JSONRPCResponse | JSONRPCError):
                return
