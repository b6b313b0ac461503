"""Opaque access tokens, asked about at the issuer's introspection endpoint (RFC 7662).

The hub authenticates as its own client (HTTP Basic, `client_secret_basic`). A token is taken when
the answer says `active`, names this resource in `aud` (RFC 8707), and, when it says, the issuer
and an `exp` still ahead. Answers are kept, by the token's SHA-256, no longer than the token lives
and at most `max_age` seconds; a refusal is kept a short while too, so a client retrying a dead
token does not reach the issuer each time. An unreachable issuer is not a refusal and is not kept; it
is left alone a few seconds before it is asked again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import httpx2
from cachetools import TLRUCache

from mcp_hub.auth.discovery import fetch_json
from mcp_hub.auth.jwt import same_resource
from mcp_hub.auth.refusal import Refusal, Unavailable

REFUSAL_MAX_AGE = 30.0
"""Seconds a refused token's answer is kept."""
RETRY_AFTER_FAILURE = 5.0
"""Seconds the endpoint is left alone after it could not be reached (its tokens are answered 503 meanwhile)."""
_ENTRIES = 10_000


class Introspection:
    """Asks `endpoint` about tokens, as the client `client_id`."""

    def __init__(
        self,
        client: httpx2.AsyncClient,
        endpoint: str,
        *,
        client_id: str,
        client_secret: str,
        issuer: str,
        resource: str,
        max_age: float,
        leeway: int,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._endpoint = endpoint
        self._auth = httpx2.BasicAuth(client_id, client_secret)
        self._issuer = issuer
        self._resource = resource
        self._max_age = max_age
        self._leeway = leeway
        self._clock = clock
        self._wall_clock = wall_clock
        self._answers: TLRUCache[str, tuple[float, dict[str, Any] | Refusal]] = TLRUCache(
            maxsize=_ENTRIES, ttu=lambda _key, value, _now: value[0], timer=clock
        )
        self._failure: tuple[float, str] | None = None
        """Until when the endpoint is not asked again after it could not be reached, and why."""
        self.requests = 0
        """How many times the endpoint was asked (for the tests)."""

    async def claims(self, token: str) -> dict[str, Any]:
        """The introspection answer for an active token for this resource; `Refusal` otherwise."""
        key = hashlib.sha256(token.encode()).hexdigest()
        kept = self._answers.get(key)
        if kept is None:
            if self._failure is not None and self._clock() < self._failure[0]:
                raise Unavailable(self._failure[1])  # an unreachable endpoint is not asked for each request
            try:
                kept = await self._ask(token)
            except Unavailable as exc:
                self._failure = (self._clock() + RETRY_AFTER_FAILURE, str(exc))
                raise
            self._failure = None
            self._answers[key] = kept
        answer = kept[1]
        if isinstance(answer, Refusal):
            raise answer
        return answer

    async def _ask(self, token: str) -> tuple[float, dict[str, Any] | Refusal]:
        self.requests += 1
        answer = await fetch_json(
            self._client,
            "POST",
            self._endpoint,
            data={"token": token, "token_type_hint": "access_token"},
            auth=self._auth,
            headers={"Accept": "application/json"},
        )
        if not isinstance(answer, dict):
            raise Unavailable(f"{self._endpoint} answered something that is not a JSON object")
        try:
            lifetime = self._check(answer)
        except Refusal as refusal:
            return self._clock() + REFUSAL_MAX_AGE, refusal
        return self._clock() + min(self._max_age, lifetime), answer

    def _check(self, answer: dict[str, Any]) -> float:
        """Seconds the token has left (inf: it does not say); `Refusal` for a token not to be taken."""
        if answer.get("active") is not True:
            raise Refusal("the token is not active (expired, revoked or unknown to the issuer)")
        issuer = answer.get("iss")
        if issuer is not None and issuer != self._issuer:
            raise Refusal(f"the token was not issued by {self._issuer}")
        audience = answer.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if not any(isinstance(each, str) and same_resource(each, self._resource) for each in audiences):
            raise Refusal(f"the token is not for this resource ({self._resource}): its audience does not name it")
        expires = answer.get("exp")
        if expires is None:
            return float("inf")
        if not isinstance(expires, int | float) or isinstance(expires, bool):
            raise Refusal("the introspection answer's exp is not a number")
        left = expires + self._leeway - self._wall_clock()
        if left <= 0:
            raise Refusal("the token has expired")
        return left
