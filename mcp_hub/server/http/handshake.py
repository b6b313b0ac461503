"""Handshake-era requests on an established HTTP session, served from the POST that carries them.

The SDK's streamable HTTP transport hands every POSTed request to the session's
message loop: the request crosses a stream to the session's dispatcher, which
runs it in a task of its own and writes the response to another stream; a router
task takes it from there to the POST's own stream, a writer task turns it into an
SSE event, and the response (`sdk_path.DeferredEventSource`) finally reads it.
Each hop costs a task switch, and together they cost more CPU than the rest of a
tool call through the hub.

`HandshakeRequests` serves a request on an established session in the POST's own
task instead: the session's `ServerRunner` runs it (the same validation,
middleware, handlers and result shaping as ever; a call goes through the hub's
lane, `lane.CallLane`, which does what the runner does for it), under a dispatch
context of the session's own dispatcher, so that what the request sends the
client on its way (progress, log messages, questions) and the client's
cancellation travel exactly as before. A request that sent nothing is answered as
plain JSON, as the SDK's path answers it. The first message it sends, or
`exchange.WINDOW` passing, starts the SSE stream instead, and from then on its
messages and its response go through the session's ordered channel, as the
SDK's own path sends them.

Everything else goes to the SDK as before: `initialize`, notifications and
responses, batches, other sessions' requests or those of a session not yet
initialized, and any request whose headers or body the SDK would refuse (it then
refuses them itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from weakref import WeakKeyDictionary

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import REQUEST_CANCELLED, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.dispatcher import OnRequest
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher, progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError, JSONRPCResponse
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from mcp_hub import wire
from mcp_hub.scopes import cancel_scope
from mcp_hub.sdk import server as sdk_server
from mcp_hub.server.http.acceptance import Acceptance
from mcp_hub.server.http.exchange import (
    Exchange,
    Outcome,
    content_length,
    read_body,
    replaying,
    send_response,
)
from mcp_hub.server.lane import CallLane, serving
from mcp_hub.server.serving import encode_answer, has_unusable_id, request_of, run_request, runner_for

_SESSION_HEADER = b"mcp-session-id"

ASGIFallback = Callable[[Scope, Receive, Send], Any]


class HandshakeRequests:
    """Requests on an established handshake-era session, served in the POST's task (`serve`).

    `connections` maps a session id to the session's connection once its client
    has initialized; `max_body` is the largest body served here (a larger one goes
    to `sdk`, the SDK's path, which refuses it).
    """

    def __init__(
        self,
        manager: StreamableHTTPSessionManager,
        connections: Mapping[str | None, Connection],
        lane: CallLane | None,
        max_body: int,
        sdk: ASGIFallback,
        acceptance: Acceptance | None = None,
    ) -> None:
        self._manager = manager
        self._connections = connections
        self._lane = lane
        self._max_body = max_body
        self._sdk = sdk
        self._acceptance = acceptance if acceptance is not None else Acceptance(manager.security_settings)
        self._runners: WeakKeyDictionary[Connection, ServerRunner[Any]] = WeakKeyDictionary()

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, session_id: str, headers: Mapping[str, str]
    ) -> None:
        """Serve a POST for session `session_id` (of a handshake-era version, or none), with `headers` (the
        first of each name)."""
        session = self._session(scope, session_id)
        if session is None:
            await self._sdk(scope, receive, send)
            return
        transport, connection = session
        # Held from here, as the SDK holds a session from the moment a request reaches its transport: the
        # session was found live just now, and its idle countdown must not run out while the body arrives.
        with sdk_server.holding(transport):
            await self._serve(transport, connection, scope, receive, send, headers)

    async def _serve(
        self,
        transport: StreamableHTTPServerTransport,
        connection: Connection,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: Mapping[str, str],
    ) -> None:
        if not await self._acceptance.handshake(headers, transport):
            await self._sdk(scope, receive, send)
            return
        request = Request(scope, receive)
        chunks, complete = await read_body(receive, self._max_body)
        message = request_of(b"".join(chunks)) if complete else None
        if message is None:
            if complete and has_unusable_id(b"".join(chunks)):
                await _refuse(None, "a request id must be a string or an integer", transport, send)
                return
            await self._sdk(scope, replaying(chunks, receive), send)
            return
        if not self._free(transport, connection, message["id"]):
            reused = f"request id {message['id']!r} is in use by a request in flight on this session"
            await _refuse(message["id"], f"{reused}; ids must not be reused", transport, send)
            return
        exchange = HandshakeExchange(
            transport, connection, self._on_request(connection, message["method"]), request, message
        )
        await exchange.handle(scope, receive, send)

    def _session(self, scope: Scope, session_id: str) -> tuple[StreamableHTTPServerTransport, Connection] | None:
        """The transport and connection of the initialized session a POST is for; None: not for one."""
        transport = sdk_server.transport_of(self._manager, session_id)
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
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        if requestor != sdk_server.session_owner(self._manager, session_id):
            return None  # another credential's session: the SDK answers as if it did not exist
        return transport, connection

    @staticmethod
    def _free(transport: StreamableHTTPServerTransport, connection: Connection, request_id: str | int) -> bool:
        """Whether no request with this id is in flight on the session.

        One that reuses an id in flight is refused (`_refuse`). The SDK would let the newer
        request take the id over: its transport routes the id's messages to the newer POST, so an earlier
        request that streams would lose the rest of its messages and its answer, and its POST would never
        be answered."""
        dispatcher: JSONRPCDispatcher[Any] = connection.outbound  # type: ignore[assignment]
        return not sdk_server.request_stream_open(transport, str(request_id)) and not sdk_server.in_flight(
            dispatcher, request_id
        )

    def _on_request(self, connection: Connection, method: str) -> OnRequest:
        """What serves a request for `method` on the session: the hub's lane for calls, else its runner."""
        lifespan = sdk_server.lifespan_state(self._manager)
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
    headers = [(b"content-type", b"application/json"), content_length(body)]
    if transport.mcp_session_id is not None:
        headers.append((_SESSION_HEADER, transport.mcp_session_id.encode()))
    await send_response(send, 400, headers, body)


class HandshakeExchange(Exchange):
    """One handshake-era request and its answer: JSON when the request sent nothing on its way, else an SSE
    stream of the session's ordered channel."""

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
        self._dctx = sdk_server.handshake_context(
            self._dispatcher,
            self._id,
            progress_token_from_params(self._params),
            ServerMessageMetadata(request_context=request),
            on_send=self._opening,
        )
        self._scope = cancel_scope()
        self._stream: tuple[Any, Any] | None = None
        self._streamer: asyncio.Task[None] | None = None
        """Set once the answer is an SSE stream (sent by this task): the response then goes through the
        session's channel."""
        self._start_streamer: Callable[[], asyncio.Task[None]] | None = None
        self._send: Send | None = None

    def _opening(self) -> None:
        """The request is about to send the client something, or the window passed: its answer becomes a
        stream, which a task of its own sends while the request runs on."""
        if self._streamer is None and self._start_streamer is not None:
            if self._stream is None:
                self._stream = sdk_server.open_request_stream(self._transport, self._key)
            self._streamer = self._start_streamer()

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request in this task; answer it as JSON, or wait for its stream to send its answer."""
        loop = asyncio.get_running_loop()
        self._start_streamer = lambda: loop.create_task(self._stream_answer(scope, receive, send))
        self._send = send
        try:
            with sdk_server.Cancellable(self._dispatcher, self._dctx, self._scope):
                await self.serve(
                    receive, run_request(self._on_request, self._dctx, self._scope, self._method, self._params)
                )
        finally:
            if self._stream is not None:
                with anyio.CancelScope(shield=True):
                    await sdk_server.close_request_stream(self._transport, self._key)

    def _window(self) -> None:
        self._opening()

    def _cancel(self) -> None:
        """A client gone before its answer cancels the request (the answer could never reach it)."""
        self._dctx.cancel_requested.set()
        self._scope.cancel()
        if self._streamer is not None:
            self._streamer.cancel()

    def _finish(self) -> None:
        if self._streamer is not None:
            self._streamer.cancel()

    async def _answer(self, outcome: Outcome) -> None:
        """The request ran (through the session's runner, or the hub's lane for calls): answer it as JSON, or
        through the session's channel and wait for its stream to send it; nothing if its client is gone."""
        result, error = outcome
        if self.gone:
            body = None
        else:
            if self._dctx.cancel_requested.is_set() or (result is None and error is None):
                # Cancelled by the client: the handshake era still ends the request, with REQUEST_CANCELLED.
                error = ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
            if self._streamer is not None:
                # Through the session's ordered channel, behind whatever the request sent before.
                if error is not None:
                    await sdk_server.write_error(self._dispatcher, self._id, error)
                else:
                    assert result is not None
                    await sdk_server.write_result(self._dispatcher, self._id, result)
                body = None
            else:
                body = encode_answer(self._id, result, error)
        if self._streamer is None:
            if body is not None:
                headers = [(b"content-type", b"application/json"), content_length(body)]
                headers.append((_SESSION_HEADER, self._session_id.encode()))
                assert self._send is not None
                await send_response(self._send, 200, headers, body)
            return
        self._watch_client()  # until its stream has sent the answer
        await asyncio.wait((self._streamer,))  # its stream ends with the answer, or the client left
        if not self._streamer.cancelled() and (failure := self._streamer.exception()) is not None:
            raise failure

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
            yield sdk_server.event_data(self._transport, event_message)
            if isinstance(event_message.message, JSONRPCResponse | JSONRPCError):
                return
