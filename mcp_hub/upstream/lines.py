"""Requests to a stdio server, with their answers taken off the wire before the SDK session sees them.

The SDK client's session keeps a waiter per request, spawns a task per
progress notification and validates each result into a model. The hub
forwards results it does not inspect, so once a session is negotiated,
`DirectLines` writes each of the hub's requests, stamped as the session stamps
its own, on the transport's write stream (the SDK's writer task is the only
writer of the child's stdin, so lines never interleave), and the read stream
it wraps hands the request's answer, and its progress, to the waiting call
straight away; every other message reaches the session as before. The child's
process, its stderr and its shutdown stay the SDK's.

Request ids sent here are strings (`hub-1`, ...), so they never meet the SDK
session's integer ids. A request abandoned before its answer is followed by
`notifications/cancelled`, which is how both eras cancel over stdio. When the
read stream ends, every waiting call fails at once with `CONNECTION_CLOSED`.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Mapping
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client._transport import ReadStream, WriteStream
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from mcp_hub.upstream.streams import ReadStreamBase, deliver_progress

logger = logging.getLogger("mcp_hub.upstream")

_CANCEL_SECONDS = 2.0
"""How long the hub tries to tell a server that a request it abandoned is cancelled."""
_PROGRESS_BUFFER = 256
"""Progress notifications one request may have waiting for its caller; more are dropped."""

_Item = JSONRPCResponse | JSONRPCError | Mapping[str, Any]
"""What a waiting request receives: its answer, or the params of a progress notification."""


class DirectLines:
    """Sends requests to one stdio server and takes their answers directly (see the module docstring)."""

    def __init__(self, write: WriteStream[SessionMessage]) -> None:
        self._write = write
        self._ids = itertools.count(1)
        self._waiting: dict[str, MemoryObjectSendStream[_Item]] = {}
        self._closed = False

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str],
        *,
        on_progress: ProgressFnT | None = None,
        modern: bool = False,
    ) -> dict[str, Any]:
        """Write one request and return the server's raw result (`headers` do not apply to stdio).

        Raises:
            MCPError: the server answered with an error; `CONNECTION_CLOSED` when the
                connection ended before the answer.
        """
        if self._closed:
            raise MCPError(CONNECTION_CLOSED, "Connection closed")
        request_id = f"hub-{next(self._ids)}"
        out = dict(params or {})
        if on_progress is not None:
            out["_meta"] = {**(out.get("_meta") or {}), "progressToken": request_id}
        send, receive = anyio.create_memory_object_stream[_Item](_PROGRESS_BUFFER)
        self._waiting[request_id] = send
        # `params` stays unset when empty: the writer leaves unset fields out, and JSON-RPC forbids `null`.
        message = (
            JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=out)
            if out
            else JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method)
        )
        answered = False
        try:
            with send, receive:
                try:
                    await self._write.send(SessionMessage(message))
                    async for item in receive:
                        if isinstance(item, JSONRPCResponse):
                            answered = True
                            return _result(item.result)
                        if isinstance(item, JSONRPCError):
                            answered = True
                            raise MCPError.from_error_data(item.error)
                        if on_progress is not None:
                            await deliver_progress(on_progress, item)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
                raise MCPError(CONNECTION_CLOSED, f"the connection closed before the answer to {method}")
        finally:
            self._waiting.pop(request_id, None)
            if not answered and not self._closed:
                await self._cancel(request_id)

    def wrap(self, read: ReadStream[SessionMessage | Exception]) -> _TakingReadStream:
        """The read stream the session reads: `read`, less the answers and progress taken here."""
        return _TakingReadStream(read, self)

    def take(self, message: SessionMessage | Exception) -> bool:
        """Hand `message` to the request it answers or reports progress on; False if it is for none here."""
        if not isinstance(message, SessionMessage):
            return False
        inner = message.message
        if isinstance(inner, JSONRPCResponse | JSONRPCError):
            key = inner.id
            item: _Item = inner
        elif isinstance(inner, JSONRPCNotification) and inner.method == "notifications/progress":
            key = (inner.params or {}).get("progressToken")
            item = inner.params or {}
        else:
            return False
        waiting = self._waiting.get(key) if isinstance(key, str) else None
        if waiting is None:
            return False
        try:
            waiting.send_nowait(item)
        except anyio.WouldBlock:
            logger.debug("dropped a progress notification for %s: its caller is %d behind", key, _PROGRESS_BUFFER)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the request was abandoned a moment ago
        return True

    def close(self) -> None:
        """The connection ended: every waiting request fails at once."""
        self._closed = True
        for waiting in list(self._waiting.values()):
            waiting.close()

    async def _cancel(self, request_id: str) -> None:
        notice = JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/cancelled",
            params={"requestId": request_id, "reason": "the hub's caller abandoned the request"},
        )
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(_CANCEL_SECONDS),
            contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError),
        ):
            await self._write.send(SessionMessage(notice))


def _result(result: Any) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise MCPError(INTERNAL_ERROR, "the server's answer has no result object")
    return result  # pyright: ignore[reportUnknownVariableType]


class _TakingReadStream(ReadStreamBase):
    """A transport's read stream, with what `DirectLines` takes left out; its end fails the waiting requests."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], lines: DirectLines) -> None:
        self._inner = inner
        self._lines = lines

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            while True:
                message = await self._inner.receive()
                if not self._lines.take(message):
                    return message
        except BaseException:
            self._lines.close()
            raise

    async def aclose(self) -> None:
        self._lines.close()
        await self._inner.aclose()
