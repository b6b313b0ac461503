"""Requests to a stdio server, written to its stdin and answered off its stdout past the SDK's transport.

The SDK client's session keeps a waiter per request, spawns a task per
progress notification and validates each result into a model; its transport
writes each message through a writer task and parses each line into a model
in a reader task. The hub forwards results it does not inspect, so once a
session is negotiated, `DirectLines` writes each of the hub's requests straight
to the child's stdin (`transports.Pipes`; one write per line, so lines never
interleave with the SDK writer's), and each line the child writes that names
one of its ids is offered to it before the SDK's reader parses it: the
request's answer, and its progress, go to the waiting call at once; every
other message reaches the session as before. Where the pipes are not at hand,
the transport's streams serve instead (the write stream, and the read stream
it wraps). The child's process, its stderr and its shutdown stay the SDK's.

Request ids sent here are strings (`hub-1`, ...), so they never meet the SDK
session's integer ids. A request abandoned before its answer is followed by
`notifications/cancelled`, which is how both eras cancel over stdio. When the
read stream ends, every waiting call fails at once with `CONNECTION_CLOSED`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import pydantic_core
from mcp.client._transport import ReadStream, WriteStream
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from mcp_hub import wire
from mcp_hub.streams import ReadStreamBase, deliver_progress

if TYPE_CHECKING:
    from mcp_hub.upstream.transports import Pipes

logger = logging.getLogger("mcp_hub.upstream")

_CANCEL_SECONDS = 2.0
"""How long the hub tries to tell a server that a request it abandoned is cancelled."""
_PROGRESS_BUFFER = 256
"""Progress notifications one request may have waiting for its caller; more are dropped."""


@dataclass(frozen=True, slots=True)
class _Answer:
    """A request's answer: its result, or its error."""

    result: Any = None
    error: ErrorData | None = None


_Item = _Answer | Mapping[str, Any]
"""What a waiting request receives: its answer, or the params of a progress notification."""


class DirectLines:
    """Sends requests to one stdio server and takes their answers directly (see the module docstring)."""

    def __init__(self, write: WriteStream[SessionMessage], pipes: Pipes | None = None) -> None:
        self._write = write
        self._stdin = pipes.stdin if pipes is not None else None
        if pipes is not None:
            pipes.take, pipes.handing_on = self.take_line, self._handing_on
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Queue[_Item | None]] = {}
        """The inbox of each request waiting for its answer (None in it: the connection closed)."""
        self._behind: set[str] = set()
        """Requests that were waiting when a line went to the SDK's reader: their answers, and progress,
        follow it there (`take`), behind what the server sent first."""
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
        # An asyncio queue, not an anyio memory stream: a call waits on it once or twice, and the stream's
        # machinery (events, task records) cost more than the rest of taking the answer.
        inbox: asyncio.Queue[_Item | None] = asyncio.Queue()
        self._waiting[request_id] = inbox
        # `params` stays unset when empty: JSON-RPC forbids `null`.
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": out} if out else {})}
        answered = False
        try:
            try:
                await self._send(message)
                while (item := await inbox.get()) is not None:
                    if isinstance(item, _Answer):
                        answered = True
                        if item.error is not None:
                            raise MCPError.from_error_data(item.error)
                        return _result(item.result)
                    if on_progress is not None:
                        await deliver_progress(on_progress, item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
            raise MCPError(CONNECTION_CLOSED, f"the connection closed before the answer to {method}")
        finally:
            self._waiting.pop(request_id, None)
            self._behind.discard(request_id)
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
        if isinstance(inner, JSONRPCResponse):
            return self._hand(inner.id, _Answer(result=inner.result))
        if isinstance(inner, JSONRPCError):
            return self._hand(inner.id, _Answer(error=inner.error))
        if isinstance(inner, JSONRPCNotification) and inner.method == "notifications/progress":
            return self._hand((inner.params or {}).get("progressToken"), inner.params or {})
        return False

    def take_line(self, line: bytes) -> bool:
        """`take` for a line from the child's stdout, before the SDK's reader parses it into a model."""
        try:
            message = pydantic_core.from_json(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return False
        if "method" in message:
            params = message.get("params")
            if message["method"] != "notifications/progress" or not isinstance(params, dict):
                return False
            token = params.get("progressToken")
            return isinstance(token, str) and token not in self._behind and self._hand(token, params)
        key = message.get("id")
        if not isinstance(key, str) or key in self._behind:
            return False
        if "result" in message and "error" not in message:
            return self._hand(key, _Answer(result=message["result"]))
        if "error" in message and "result" not in message:
            try:
                error = ErrorData.model_validate(message["error"])
            except ValidationError:
                return False  # the SDK's reader reports it
            return self._hand(key, _Answer(error=error))
        return False

    def _handing_on(self) -> None:
        self._behind.update(self._waiting)

    def _hand(self, key: Any, item: _Item) -> bool:
        waiting = self._waiting.get(key) if isinstance(key, str) else None
        if waiting is None:
            return False
        if isinstance(item, _Answer) or waiting.qsize() < _PROGRESS_BUFFER:
            waiting.put_nowait(item)
        else:
            logger.debug("dropped a progress notification for %s: its caller is %d behind", key, _PROGRESS_BUFFER)
        return True

    def close(self) -> None:
        """The connection ended: every waiting request fails at once."""
        self._closed = True
        for waiting in list(self._waiting.values()):
            waiting.put_nowait(None)

    async def _send(self, message: dict[str, Any]) -> None:
        """Write one message to the child: straight to its stdin (one write), else through the SDK's writer."""
        if self._stdin is not None:
            await self._stdin.send(wire.dumps_line(message))
        else:
            await self._write.send(SessionMessage(jsonrpc_message_adapter.validate_python(message)))

    async def _cancel(self, request_id: str) -> None:
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the hub's caller abandoned the request"},
        }
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(_CANCEL_SECONDS),
            contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError),
        ):
            await self._send(notice)


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
