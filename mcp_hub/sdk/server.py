"""SDK internals: the serving side (dispatcher, transports, session manager, stdio server).

The doors (mcp_hub/server/) serve requests past the SDK's message loops, with the SDK's own pieces where
they decide anything. What they need of those pieces beyond the public API is here, one named function
each:

- the session dispatcher: its table of requests in flight (`in_flight`, `Cancellable`), a dispatch context
  of its own for a request served past its loop (`handshake_context`), and its ordered channel for a
  request's answer (`write_result`, `write_error`);
- the streamable HTTP session manager and its transports: a session's transport (`transport_of`), its
  owner (`session_owner`), the lifespan state (`lifespan_state`), the transport's checks
  (`content_type_accepted`, `security_refusal`), its idle countdown (`holding`) and its per-request
  streams (`request_stream_open`, `open_request_stream`, `close_request_stream`, `event_data`);
- the stdio server's claim of the standard streams (`claim_stdio`);
- a connection's exit stack (`needs_unwinding`);
- two process-wide changes: the SSE encoder's line split (`split_sse_lines_fast`, applied by `install()`)
  and the response the handshake-era transport answers a POST with (`answer_posts_with`).
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio
import mcp.server.stdio
import mcp.server.streamable_http
from mcp.server.streamable_http import REQUEST_STREAM_BUFFER_SIZE, EventMessage, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.dispatcher import CallOptions, coerce_request_id
from mcp.shared.jsonrpc_dispatcher import (
    JSONRPCDispatcher,
    _InFlight,  # pyright: ignore[reportPrivateUsage]
    _JSONRPCDispatchContext,  # pyright: ignore[reportPrivateUsage]
)
from mcp.shared.transport_context import TransportContext
from mcp_types import ErrorData, ProgressToken, RequestId
from sse_starlette import EventSourceResponse
from sse_starlette.event import ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from mcp_hub.sdk import unavailable

SURFACE: tuple[str, ...] = (
    "mcp.shared.jsonrpc_dispatcher:_InFlight",
    "mcp.shared.jsonrpc_dispatcher:_JSONRPCDispatchContext",
    "mcp.shared.jsonrpc_dispatcher:_JSONRPCDispatchContext._closed",
    "mcp.shared.jsonrpc_dispatcher:JSONRPCDispatcher._write_result",
    "mcp.shared.jsonrpc_dispatcher:JSONRPCDispatcher._write_error",
    "mcp.server.streamable_http:StreamableHTTPServerTransport._check_content_type",
    "mcp.server.streamable_http:StreamableHTTPServerTransport._create_event_data",
    "mcp.server.streamable_http:StreamableHTTPServerTransport._clean_up_memory_streams",
    "mcp.server.streamable_http:EventSourceResponse",
    "mcp.server.stdio:_claim_fd",
    "mcp.server.stdio:_open_stdin_diversion",
    "mcp.server.stdio:_open_stdout_diversion",
    "sse_starlette.event:ServerSentEvent._LINE_SEP_EXPR",
    "mcp.shared.jsonrpc_dispatcher:JSONRPCDispatcher._in_flight",
    "mcp.shared.jsonrpc_dispatcher:JSONRPCDispatcher._transport_builder",
    "mcp.shared.jsonrpc_dispatcher:_JSONRPCDispatchContext._dispatcher",
    "mcp.shared.jsonrpc_dispatcher:_JSONRPCDispatchContext._request_id",
    "mcp.shared.jsonrpc_dispatcher:_JSONRPCDispatchContext._progress_token",
    "mcp.server.streamable_http:StreamableHTTPServerTransport._security",
    "mcp.server.streamable_http:StreamableHTTPServerTransport._idle_timeout",
    "mcp.server.streamable_http:StreamableHTTPServerTransport._requests_in_flight",
    "mcp.server.streamable_http:StreamableHTTPServerTransport._request_streams",
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._server_instances",
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._session_owners",
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._lifespan_state",
    "contextlib:AsyncExitStack._exit_callbacks",
)
"""What this module names, as "module:qualified.name"."""


def install() -> None:
    """The serving side's process-wide changes: the SSE encoder's fast line split."""
    split_sse_lines_fast()


# The session dispatcher


def in_flight(dispatcher: JSONRPCDispatcher[Any], request_id: str | int) -> bool:
    """Whether the client has a request with this id in flight on the dispatcher's connection."""
    return coerce_request_id(request_id) in dispatcher._in_flight  # pyright: ignore[reportPrivateUsage]


@dataclass(eq=False)
class HandshakeContext(_JSONRPCDispatchContext[TransportContext]):
    """The session dispatcher's context for one handshake-era request served past its loop, which notes (and
    tells `on_send`) before it sends the client anything."""

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


def handshake_context(
    dispatcher: JSONRPCDispatcher[Any],
    request_id: RequestId,
    progress_token: ProgressToken | None,
    metadata: Any = None,
    on_send: Callable[[], None] | None = None,
) -> HandshakeContext:
    """A dispatch context of `dispatcher`'s own for a request served past its loop, as it builds one."""
    return HandshakeContext(
        transport=dispatcher._transport_builder(metadata),  # pyright: ignore[reportPrivateUsage]
        _dispatcher=dispatcher,
        _request_id=request_id,
        message_metadata=metadata,
        _progress_token=progress_token,
        on_send=on_send,
    )


class Cancellable:
    """The request is in the dispatcher's table from now until this exits: the client's
    `notifications/cancelled` finds it there."""

    __slots__ = ("_dctx", "_key", "_table")

    def __init__(self, dispatcher: JSONRPCDispatcher[Any], dctx: HandshakeContext, scope: anyio.CancelScope) -> None:
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


async def write_result(dispatcher: JSONRPCDispatcher[Any], request_id: RequestId, result: dict[str, Any]) -> None:
    """A request's result, through the dispatcher's ordered channel (behind what the request sent before)."""
    await dispatcher._write_result(request_id, result)  # pyright: ignore[reportPrivateUsage]


async def write_error(dispatcher: JSONRPCDispatcher[Any], request_id: RequestId, error: ErrorData) -> None:
    """A request's error, through the dispatcher's ordered channel (behind what the request sent before)."""
    await dispatcher._write_error(request_id, error)  # pyright: ignore[reportPrivateUsage]


# The streamable HTTP session manager and its transports


def transport_of(manager: StreamableHTTPSessionManager, session_id: str) -> StreamableHTTPServerTransport | None:
    """The transport of the manager's session `session_id`, if it has one."""
    return manager._server_instances.get(session_id)  # pyright: ignore[reportPrivateUsage]


def session_owner(manager: StreamableHTTPSessionManager, session_id: str) -> Any:
    """The credential that opened session `session_id`, if the manager recorded one."""
    return manager._session_owners.get(session_id)  # pyright: ignore[reportPrivateUsage]


def lifespan_state(manager: StreamableHTTPSessionManager) -> Any:
    """The state the manager's server lifespan yielded (None before it runs)."""
    return manager._lifespan_state  # pyright: ignore[reportPrivateUsage]


def content_type_accepted(transport: StreamableHTTPServerTransport, request: Request) -> bool:
    """The transport's check of a POST's content type."""
    return transport._check_content_type(request)  # pyright: ignore[reportPrivateUsage]


async def security_refusal(transport: StreamableHTTPServerTransport, request: Request) -> Response | None:
    """The transport's security check of a POST (host, origin, content type): its refusal, or None."""
    return await transport._security.validate_request(request, is_post=True)  # pyright: ignore[reportPrivateUsage]


@contextlib.contextmanager
def holding(transport: StreamableHTTPServerTransport) -> Iterator[None]:
    """Hold the session open while a request is served: its idle countdown restarts when the last one ends.

    The SDK's transport keeps the same count for the requests it serves, so a request held here and then
    handed to the SDK is counted twice, and released when both let go."""
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


def request_stream_open(transport: StreamableHTTPServerTransport, key: str) -> bool:
    """Whether the transport routes a request's messages (by its id, as text) to a POST's stream."""
    return key in transport._request_streams  # pyright: ignore[reportPrivateUsage]


def open_request_stream(transport: StreamableHTTPServerTransport, key: str) -> tuple[Any, Any]:
    """A stream of the request's messages (by its id, as text), which the transport now routes them to."""
    stream = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
    transport._request_streams[key] = stream  # pyright: ignore[reportPrivateUsage]
    return stream


async def close_request_stream(transport: StreamableHTTPServerTransport, key: str) -> None:
    """Close and forget the request's stream, as the transport does for its own."""
    await transport._clean_up_memory_streams(key)  # pyright: ignore[reportPrivateUsage]


def event_data(transport: StreamableHTTPServerTransport, event_message: EventMessage) -> dict[str, Any]:
    """A message as the transport's SSE writer sends it: the event's fields."""
    return dict(transport._create_event_data(event_message))  # pyright: ignore[reportPrivateUsage]


def answer_posts_with(factory: Callable[..., Any]) -> None:
    """Have the handshake-era transport build `factory` where it builds sse-starlette's `EventSourceResponse`
    to answer a request (process-wide). Rebound only while the name is still that class (or `factory`), so a
    later SDK that changes it is left alone, and says so."""
    found = mcp.server.streamable_http.EventSourceResponse  # pyright: ignore[reportPrivateImportUsage]
    if found is EventSourceResponse:
        mcp.server.streamable_http.EventSourceResponse = factory  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
    elif found is not factory:
        unavailable("JSON answers on the handshake-era SDK path", "mcp.server.streamable_http.EventSourceResponse")


# The stdio server


def claim_stdio(claims: contextlib.ExitStack) -> tuple[BinaryIO, BinaryIO] | None:
    """Standard input and output, claimed as `stdio_server()` claims them (input then reads the null device,
    output goes to standard error) and released when `claims` closes; None: this SDK cannot claim them."""
    claim = getattr(mcp.server.stdio, "_claim_fd", None)
    if claim is None:
        unavailable("the stdio endpoint on the event loop's pipes", "mcp.server.stdio._claim_fd")
        return None
    files = []
    for fd, stream, mode, diversion in (
        (0, sys.stdin, "rb", mcp.server.stdio._open_stdin_diversion),  # pyright: ignore[reportPrivateUsage]
        (1, sys.stdout, "wb", mcp.server.stdio._open_stdout_diversion),  # pyright: ignore[reportPrivateUsage]
    ):
        file, release = claim(fd, stream, mode, diversion)
        if release is not None:
            claims.callback(release)
        files.append(file)
    return files[0], files[1]


# Connections


def needs_unwinding(connection: Any) -> bool:
    """Whether anything is on the connection's exit stack (else unwinding it does nothing)."""
    callbacks = getattr(connection.exit_stack, "_exit_callbacks", None)
    if callbacks is None:
        unavailable("skipping the unwinding of an empty connection", "AsyncExitStack._exit_callbacks")
        return True
    return bool(callbacks)


# sse-starlette


def split_sse_lines_fast() -> None:
    """Let sse-starlette's `ServerSentEvent.encode` skip its line split for data without line breaks.

    It splits every event's data (and cleans its id and event name) with the
    class's `_LINE_SEP_EXPR`, `\\r\\n|\\r|\\n`, which takes time to scan even text
    that has no line break: about 7 ms for a 1 MB tool result, where looking for
    the two characters takes 0.03 ms. The change is process-wide, and in the
    hub's process the only SSE server is its own endpoint. The pattern is
    rebound only while it is still that one, to `_LineBreaks`, which answers
    text without line breaks at once and hands any other to the pattern, so
    every event is encoded exactly as before.
    """
    pattern = getattr(ServerSentEvent, "_LINE_SEP_EXPR", None)
    if isinstance(pattern, re.Pattern) and pattern.pattern == r"\r\n|\r|\n":
        ServerSentEvent._LINE_SEP_EXPR = _LineBreaks(pattern)  # type: ignore[assignment]  # pyright: ignore[reportAttributeAccessIssue]
    elif not isinstance(pattern, _LineBreaks):
        unavailable("the SSE encoder's fast line split", "sse_starlette's ServerSentEvent._LINE_SEP_EXPR")


class _LineBreaks:
    """`split` and `sub` of a line-break pattern, without a regular expression scan of text that has no line break."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._pattern = pattern

    def split(self, text: str, maxsplit: int = 0) -> list[str | Any]:
        if "\n" in text or "\r" in text:
            return self._pattern.split(text, maxsplit)
        return [text]

    def sub(self, repl: str, text: str, count: int = 0) -> str:
        if "\n" in text or "\r" in text:
            return self._pattern.sub(repl, text, count)
        return text

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pattern, name)
