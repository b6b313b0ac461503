"""anyio cancel scopes for the request paths, made without anyio's lookup of the running backend.

`anyio.CancelScope()` and `anyio.current_time()` ask which async library runs the
current task, and for its backend, on every call. A tools/call makes two scopes and
reads the clock once, and those lookups cost more than the scopes. On asyncio, the
backend's scope class (taken from the first scope made) and the event loop's clock
are used directly; anywhere else, anyio's own calls.
"""

from __future__ import annotations

import asyncio
import math

import anyio

_asyncio_scope: type[anyio.CancelScope] | None = None


def cancel_scope(*, deadline: float = math.inf) -> anyio.CancelScope:
    """`anyio.CancelScope(deadline=deadline)`."""
    global _asyncio_scope
    if _asyncio_scope is None or not on_asyncio():
        scope = anyio.CancelScope(deadline=deadline)
        if _asyncio_scope is None and on_asyncio():
            _asyncio_scope = type(scope)
        return scope
    return _asyncio_scope(deadline=deadline)


def deadline_after(seconds: float) -> float:
    """`anyio.current_time() + seconds`."""
    try:
        return asyncio.get_running_loop().time() + seconds
    except RuntimeError:
        return anyio.current_time() + seconds


def on_asyncio() -> bool:
    """Whether an asyncio event loop runs the current thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
