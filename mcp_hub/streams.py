"""What the hub's wrappers of the SDK's transports share.

The hub wraps the read streams of the SDK's transports (to learn when one
ends, to merge in messages it read itself, to take the answers to its own
requests); each wrapper defines `receive` and `aclose`, and `ReadStreamBase`
adds the iteration and context-manager surface the SDK's session expects.
`deliver_progress` hands a progress notification to the callback of the
request it reports on, for the upstream channels (upstream/stdio.py, upstream/http.py).
`LineStart` holds the start of a line still arriving off a pipe (a child's
stdout, and the hub's own stdin), up to a limit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self, TypeGuard

import anyio
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import SessionMessage

logger = logging.getLogger("mcp_hub.upstream")

Incoming = SessionMessage | Exception
"""What a transport's read stream yields: messages, and the exceptions it met while reading."""


class ReadStreamBase:
    """A read stream of `Incoming`, given `receive` and `aclose`; `last_context` is its sender's context."""

    @property
    def last_context(self) -> Any:
        """The context of the task that sent the last message received (None: unknown)."""
        return None

    async def receive(self) -> Incoming:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Incoming:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


async def deliver_progress(callback: ProgressFnT, params: Mapping[str, Any]) -> None:
    """Call a progress callback with a `notifications/progress` notification's params, if they are valid;
    a callback that fails is logged, not raised (it must not fail the request it reports on)."""
    progress, total, text = params.get("progress"), params.get("total"), params.get("message")
    if not _is_number(progress):
        return
    try:
        await callback(
            float(progress),
            float(total) if _is_number(total) else None,
            text if isinstance(text, str) else None,
        )
    except Exception:  # boundary: see above
        logger.exception("progress callback raised")


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class LineStart:
    """The start of a line still arriving, held as its chunks and joined once, when the line ends. Past
    `limit` bytes it is dropped as it arrives, and only its length is kept."""

    __slots__ = ("_dropped", "_limit", "_parts", "_size")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._dropped = 0
        """Bytes of an over-long line dropped so far (0: not dropping)."""

    def __bool__(self) -> bool:
        return bool(self._parts) or self._dropped > 0

    def extend(self, chunk: bytes) -> None:
        if self._dropped:
            self._dropped += len(chunk)
        elif self._size + len(chunk) > self._limit:
            self._dropped = self._size + len(chunk)
            self._parts, self._size = [], 0
        else:
            self._parts.append(chunk)
            self._size += len(chunk)

    def fits(self, first: int) -> bool:
        """Whether the line, ending `first` bytes into what arrives next, is within the limit."""
        return not self._dropped and self._size + first <= self._limit

    def length(self, first: int) -> int:
        """The line's length in bytes (its newline not counted), ending `first` bytes into what arrives next."""
        return self._dropped + self._size + first

    def join(self, rest: bytes) -> bytes:
        """What is held, followed by `rest`."""
        return b"".join([*self._parts, rest]) if self._parts else rest

    def restart(self, tail: bytes = b"") -> None:
        """Hold `tail`, the start of the next line, instead."""
        self._parts, self._size, self._dropped = ([tail] if tail else []), len(tail), 0
