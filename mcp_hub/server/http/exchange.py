"""One POST and its answer, as every HTTP door handles it: the body read, the answer sent, the client watched.

- `read_body` reads a request's body (up to a limit), and `replaying` hands it on to the SDK unread.
- `send_response` (and `send_start`, `send_body` for a stream) are the one place a response starts.
- `until_disconnect` waits for the client to go away; `watch_disconnect` runs it in a bare asyncio task
  that calls back when it does (a dropped connection cancels its call: the answer can never reach it).
- `Exchange` is a request served in the POST's task and answered as JSON, unless the request sends the
  client something on its way or `WINDOW` passes first: either starts an SSE stream that ends with the
  answer; its client is watched once it has run for `WATCH_AFTER`. Each era's door (handshake.py,
  modern.py) says how its stream starts and how an answer is written; the SDK's own path (sdk_path.py)
  makes the same choice for the answers the SDK writes.

The watcher and the stream are bare asyncio tasks (uvicorn serves on asyncio): a task group would cost
each request a task for the handler, and cancelling an anyio scope formats the current task's repr for its
reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_types import ErrorData
from starlette.types import Message, Receive, Send

logger = logging.getLogger("mcp_hub.server")

WINDOW = 15.0
"""Seconds a POST's answer may take before its stream starts anyway (the SDK's 2026-07-28 ping interval)."""

WATCH_AFTER = 0.1
"""Seconds a request runs before its client is watched for going away (see `Exchange`)."""


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


async def send_start(send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    """Start a response."""
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def send_body(send: Send, body: bytes, *, more: bool = False) -> None:
    """Send (more of) a response's body."""
    await send({"type": "http.response.body", "body": body, "more_body": more})


async def send_response(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    """A whole response (`headers` include its length: `content_length(body)`)."""
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def content_length(body: bytes) -> tuple[bytes, bytes]:
    return (b"content-length", str(len(body)).encode())


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


def watch_disconnect(receive: Receive, gone: Callable[[], None]) -> asyncio.Task[None]:
    """A bare task that calls `gone` when the client goes away (cancel it once that no longer matters)."""
    return asyncio.get_running_loop().create_task(_watch(receive, gone))


async def _watch(receive: Receive, gone: Callable[[], None]) -> None:
    if await until_disconnect(receive):
        gone()


Outcome = tuple[dict[str, Any] | None, ErrorData | None]
"""A request's result or error (neither: it was cancelled)."""


class Exchange:
    """One request served in the POST's task, and its answer: JSON, or an SSE stream once the request sends
    the client something on its way or `WINDOW` passes (`_window`). A client gone before its answer cancels
    the request (`_cancel`).

    The client is watched only once the request has run for `WATCH_AFTER`: most calls are answered
    sooner, and a task per request to watch, started and then cancelled, costs about 7 us of CPU and two
    task steps (benchmarks/results/2026-12-05c-edges.md). A client that left earlier is seen at once when
    the watch starts (the server keeps its disconnect), so its request is cancelled at most `WATCH_AFTER`
    later than it would have been.

    An era's door says how: `_window` (what the window passing does), `_cancel` (how its request is
    cancelled), `_answer` (how an outcome is written, as JSON or at the end of the stream) and `_finish`
    (what is left to stop once the request ran). `_stop_watching` ends the watch (an answer being written
    is no longer cancelled by its client leaving)."""

    gone = False
    """Whether the client went away before its answer."""

    _watcher: asyncio.Task[None] | None = None
    _timer: asyncio.TimerHandle | None = None

    async def serve(self, receive: Receive, run: Awaitable[Outcome]) -> None:
        """Run the request (`run`) in this task, and answer it."""
        loop = asyncio.get_running_loop()
        self._receive = receive
        self._started = loop.time()
        self._timer = loop.call_later(min(WATCH_AFTER, WINDOW), self._tick)
        try:
            outcome = await run
            self._stop_timer()
            await self._answer(outcome)
        finally:
            self._stop_timer()
            self._stop_watching()
            self._finish()

    def _tick(self) -> None:
        """The request has run for `WATCH_AFTER` (start watching its client) or `WINDOW` (`_window`)."""
        loop = asyncio.get_running_loop()
        self._watch_client()
        left = self._started + WINDOW - loop.time()
        if left > 0:
            self._timer = loop.call_later(left, self._tick)
        else:
            self._timer = None
            self._window()

    def _watch_client(self) -> None:
        """Watch the client from now on (if not yet)."""
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(_watch(self._receive, self._gone))

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()

    def _gone(self) -> None:
        self.gone = True
        self._cancel()

    def _window(self) -> None:
        raise NotImplementedError

    def _cancel(self) -> None:
        raise NotImplementedError

    async def _answer(self, outcome: Outcome) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        return None
