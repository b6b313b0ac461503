"""Handshake-era POSTs answered as plain JSON when the answer is all there is to send.

The SDK answers a handshake-era request POST with an SSE stream, opened before
the handler runs, so that progress, log messages and questions to the client
can travel on it. Most calls send none of those, and for them the stream costs
a task group of four tasks, a ping timer and SSE framing on both ends. The
SDK's own 2026-07-28 path defers the choice instead: it waits for the first
message, up to its ping interval, and answers `application/json` when that
message is the response. `DeferredEventSource` does the same for the
handshake-era path, where the SDK looks up `EventSourceResponse` by name when
it answers a POST; `defer_sse_for_posts()` rebinds that name. Both content
types are ones every client must take (the spec: the server returns either).

What goes on the wire is otherwise unchanged: a notification or a request to
the client, or the window passing, starts the stream (headers, the held
message, then the rest as before), and the standalone GET stream and replays
are left to `EventSourceResponse` as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any

import anyio
import mcp.server.streamable_http
import pydantic_core
from anyio.abc import ObjectReceiveStream
from sse_starlette import EventSourceResponse
from starlette.types import Receive, Scope, Send

WINDOW = 15.0
"""Seconds a POST's answer may take before its stream starts anyway (the SDK's 2026-07-28 ping interval)."""

_PREFIX = 512
"""How much of an event's data is read to tell a response from a notification or a request."""

_STREAM_ONLY = {"content-type", "cache-control", "connection"}


def defer_sse_for_posts() -> None:
    """Have the SDK's handshake-era transport build `DeferredEventSource` where it builds `EventSourceResponse`.

    Rebound only while the name is still sse-starlette's class, so a later SDK that changes it is left alone.
    """
    if mcp.server.streamable_http.EventSourceResponse is EventSourceResponse:  # pyright: ignore[reportPrivateImportUsage]
        mcp.server.streamable_http.EventSourceResponse = DeferredEventSource  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]


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
            watching = anyio.CancelScope()
            tg.start_soon(_cancel_on_disconnect, receive, watching, tg.cancel_scope)
            first: dict[str, Any] | None = None
            with anyio.move_on_after(WINDOW):
                with contextlib.suppress(anyio.EndOfStream):
                    first = await self._content.receive()
            watching.cancel()
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
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


async def _cancel_on_disconnect(receive: Receive, watching: anyio.CancelScope, call: anyio.CancelScope) -> None:
    """While the answer is awaited, a client that goes away ends the wait (and, with it, the sender)."""
    with watching:
        while (await receive())["type"] != "http.disconnect":
            pass
        call.cancel()


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
