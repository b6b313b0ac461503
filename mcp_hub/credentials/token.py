"""An access token the hub holds for a server, kept until shortly before it expires.

`CachedToken` fetches a token when none is held or the one held is about to
expire, and only one fetch runs at a time: callers that arrive during a fetch
wait for its token rather than fetching their own (single-flight). A token the
server refused is dropped, unless another caller already replaced
it (`invalidate_header`). Lifetimes are kept on the monotonic clock.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

EARLY_SECONDS = 30.0
"""How long before its expiry a token is replaced (at most; a short-lived token is replaced at 90% of its life)."""


@dataclass(frozen=True, eq=False)
class Token:
    """An access token, as the token endpoint issued it."""

    access_token: str
    token_type: str = "Bearer"
    expires_at: float | None = None
    """When it expires on `time.monotonic()`'s clock; None: the server gave no lifetime."""

    @classmethod
    def issued(cls, access_token: str, token_type: str | None, expires_in: float | None, now: float) -> Token:
        return cls(access_token, token_type or "Bearer", None if expires_in is None else now + expires_in)

    def __repr__(self) -> str:  # never show the token itself
        return f"Token(token_type={self.token_type!r}, expires_at={self.expires_at!r})"

    @property
    def header(self) -> str:
        """The `Authorization` header's value."""
        kind = "Bearer" if self.token_type.lower() == "bearer" else self.token_type
        return f"{kind} {self.access_token}"


class CachedToken:
    """One token, fetched by `fetch` when needed (see the module docstring)."""

    def __init__(self, fetch: Callable[[], Awaitable[Token]], clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._clock = clock
        self._token: Token | None = None
        self._fresh_until = 0.0
        self._lock = anyio.Lock()

    async def get(self) -> Token:
        """The token held, or a fresh one if it is missing or about to expire."""
        token = self._current()
        if token is not None:
            return token
        async with self._lock:
            token = self._current()  # fetched by the caller this one waited for
            if token is not None:
                return token
            issued_at = self._clock()
            token = await self._fetch()
            self._token, self._fresh_until = token, _fresh_until(token, issued_at)
            return token

    def invalidate_header(self, header: str | None) -> None:
        """The server refused a request whose `Authorization` was `header`: drop the token held if it is the one
        refused (another caller may already have replaced it)."""
        if self._token is not None and (header is None or header == self._token.header):
            self._token = None

    def _current(self) -> Token | None:
        if self._token is not None and self._clock() < self._fresh_until:
            return self._token
        return None


def _fresh_until(token: Token, issued_at: float) -> float:
    if token.expires_at is None:
        return float("inf")
    life = token.expires_at - issued_at
    return token.expires_at - min(EARLY_SECONDS, life * 0.1)
