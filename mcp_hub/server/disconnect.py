"""A handshake-era client that drops a call's connection over HTTP cancels the call."""

from __future__ import annotations

import json

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class CancelOnDisconnect:
    """Pure ASGI middleware: a handshake-era client that drops a call's connection cancels the call.

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
        if scope["type"] != "http" or scope["method"] != "POST" or _header(scope, b"mcp-session-id") is None:
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
                request_id = _request_id(b"".join(chunks))
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
        headers.append((b"content-length", str(len(body)).encode()))
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


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


def _request_id(body: bytes) -> str | int | None:
    """The id of the JSON-RPC request in `body`, if it is one (not a notification, a response or `initialize`)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return None if message["method"] == "initialize" else request_id
