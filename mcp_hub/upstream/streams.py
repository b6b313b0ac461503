"""The iteration and context-manager surface the SDK's session expects of a read stream, once.

The hub wraps the read streams of the SDK's transports (to learn when one
ends, to merge in messages it read itself, to take the answers to its own
requests); each wrapper defines `receive` and `aclose`, and `ReadStreamBase`
adds the rest.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import anyio
from mcp.shared.message import SessionMessage

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
