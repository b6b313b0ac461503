"""The SDK's own path: the requests the doors leave to the SDK, answered as JSON when they can be, and
cancelled when their client goes away.

The SDK's transport serves what handshake.py and modern.py do not take: `initialize`, notifications and
responses, batches, the standalone GET stream, DELETE, and every request it refuses. Two things are
changed on the way.

Handshake-era POSTs are answered as plain JSON when the answer is all there is to
send. The SDK answers a handshake-era request POST with an SSE stream, opened before
the handler runs, so that progress, log messages and questions to the client
can travel on it. Most calls send none of those, and for them the stream costs
a task group of four tasks, a ping timer and SSE framing on both ends. The
SDK's own 2026-07-28 path defers the choice instead: it waits for the first
message, up to its ping interval (`exchange.WINDOW`), and answers `application/json` when that
message is the response. `DeferredEventSource` does the same for the
handshake-era path, where the SDK looks up `EventSourceResponse` by name when
it answers a POST; `defer_sse_for_posts()` rebinds that name. Both content
types are ones every client must take (the spec: the server returns either).

What goes on the wire is otherwise unchanged: a notification or a request to
the client, or the window passing, starts the stream (headers, the held
message, then the rest as before), and the standalone GET stream and replays
are left to `EventSourceResponse` as they were.

A dropped connection cancels its call: `SdkPath` (see its docstring).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any

import anyio
import pydantic_core
from anyio.abc import ObjectReceiveStream
from sse_starlette import EventSourceResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_hub.sdk import server as sdk_server
from mcp_hub.server.http import exchange
from mcp_hub.server.http.exchange import content_length, send_response, watch_disconnect
from mcp_hub.server.serving import request_id_of

_PREFIX = 512
"""How much of an event's data is read to tell a response from a notification or a request."""

_STREAM_ONLY = {"content-type", "cache-control", "connection"}


def defer_sse_for_posts() -> None:
    """Have the SDK's handshake-era transport build `DeferredEventSource` where it builds `EventSourceResponse`."""
    sdk_server.answer_posts_with(DeferredEventSource)


class DeferredEventSource:
    """`EventSourceResponse(content=..., data_sender_callable=..., headers=...)`, deciding its content type late.

    For a POST it runs the sender itself and waits up to `WINDOW` for the first
    event: a JSON-RPC response that ends the stream is sent as `application/json`;
    anything else starts the SSE stream with that event first. Other requests get
    the `EventSourceResponse` they always had.
    """

    def __init__(
        self,
        content: ObjectReceiveStream[dict[str, Any]],
        *,
        data_sender_callable: Callable[[], Coroutine[None, None, None]] | None = None,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        self._content = content
        self._sender = data_sender_callable
        self._headers = dict(headers or {})
        self._options = options

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST" or self._sender is None:
            await self._stream(self._content, self._sender)(scope, receive, send)
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._sender)
            # While the answer is awaited, a client that goes away ends the wait (and, with it, the sender).
            watcher = watch_disconnect(receive, tg.cancel_scope.cancel)
            first: dict[str, Any] | None = None
            try:
                with anyio.move_on_after(exchange.WINDOW):
                    with contextlib.suppress(anyio.EndOfStream):
                        first = await self._content.receive()
            finally:
                watcher.cancel()
            if first is not None and _is_response(first):
                await self._json(first["data"], send)  # the response ended the sender's stream: it ends too
            else:
                await self._stream(_after(first, self._content), None)(scope, receive, send)
                tg.cancel_scope.cancel()  # ended by a disconnect, the stream leaves the sender no reader

    def _stream(self, content: Any, sender: Callable[[], Coroutine[None, None, None]] | None) -> EventSourceResponse:
        return EventSourceResponse(content=content, data_sender_callable=sender, headers=self._headers, **self._options)

    async def _json(self, data: str, send: Send) -> None:
        body = data.encode()
        headers = [(k.lower().encode(), v.encode()) for k, v in self._headers.items() if k.lower() not in _STREAM_ONLY]
        headers += [(b"content-type", b"application/json"), content_length(body)]
        await send_response(send, 200, headers, body)


def _is_response(event: Mapping[str, Any]) -> bool:
    """Whether an SSE event carries a JSON-RPC response or error (which ends a POST's stream), without an event id.

    Read from the start of its data: the SDK serializes `jsonrpc` and `id` before
    `result` or `error` (or `method`, for a request to the client). An id too long
    to fit the prefix reads as neither, and the stream is kept.
    """
    data = event.get("data")
    if event.get("event") != "message" or "id" in event or not isinstance(data, str):
        return False
    try:
        head = pydantic_core.from_json(data[:_PREFIX], allow_partial=True)
    except ValueError:
        return False
    return isinstance(head, dict) and "method" not in head and ("result" in head or "error" in head)


async def _after(
    first: dict[str, Any] | None, rest: ObjectReceiveStream[dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    if first is not None:
        yield first
    async for event in rest:
        yield event


class SdkPath:
    """Pure ASGI middleware in front of the SDK's transport: a handshake-era client that drops a call's
    connection cancels the call.

    The hub keeps no event store, so the SSE stream answering a POST has no event
    ids and cannot be resumed: once its connection is gone, the answer can never
    reach the client. (The spec's "disconnection is not cancellation" is for
    resumable streams; the 2026-07-28 protocol makes a disconnect the
    cancellation outright.) The SDK's transport would let the call run on, to
    the server's timeout, holding an upstream request and maybe a child
    process; instead the session hears `notifications/cancelled` for the
    request's id, as if the client had sent it, and cancels the call on the
    server. 2026-07-28 requests stand alone: the SDK cancels those itself.

    On the way it only notes the body's chunks and whether the response ended;
    the body is read as JSON only when a connection drops mid-answer.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        has_session = scope["type"] == "http" and any(key == b"mcp-session-id" for key, _ in scope["headers"])
        await self.serve(scope, receive, send, has_session)

    async def serve(self, scope: Scope, receive: Receive, send: Send, has_session: bool) -> None:
        """Serve a request; `has_session`: it carries an `Mcp-Session-Id` header."""
        if not has_session or scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        gone = answered = False

        async def watched_receive() -> Message:
            nonlocal gone
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
            elif message["type"] == "http.disconnect":
                gone = True
            return message

        async def watched_send(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        try:
            await self._app(scope, watched_receive, watched_send)
        finally:
            if gone and not answered:
                request_id = request_id_of(b"".join(chunks))
                if request_id is not None:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_TIMEOUT):
                        await self._cancel(scope, request_id)

    async def _cancel(self, scope: Scope, request_id: str | int) -> None:
        """Send the session `notifications/cancelled` for `request_id`, through the same endpoint."""
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "The client's connection closed."},
            }
        ).encode()
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        headers.append(content_length(body))
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(message: Message) -> None:
            pass

        await self._app({**scope, "headers": headers}, receive, discard)


_CANCEL_TIMEOUT = 5.0
