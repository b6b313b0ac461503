"""The client of a guarded call, as a server's questions reach it: each question and its answer through the guards.

A server may ask the client of a call questions while it serves the call (a handshake-era server's
`elicitation/create` and `sampling/createMessage` requests, or the hub asking a handshake-era client a 2026-07-28
server's `input_required` questions): the guardrails link (guardrails.py) hands the upstream side a
`GuardedOrigin` in place of the call's client, whose `ask` passes the question through `question` (on its way to
the person or the model: the guards on results) and the answer through `answer` (on its way to the server: the
guards on arguments). A guard that blocks either raises `Refused`, which the server receives as the JSON-RPC error
it names (the Origin protocol's `MCPError`): the question goes unasked, or the answer undelivered. `roots/list`
passes as it is (the client's folders, which the mount's configuration governs, see relay.py).

Everything else (the client's identity, capabilities, log messages, whether it hears of a URL-mode elicitation's
completion) is the call's client's own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp_hub.errors import Refused
from mcp_hub.upstream import ClientAs, Origin

Guard = Callable[[str, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
"""`guard(method, value)`: the value as it may go on (redacted). Raises `Refused`."""

GUARDED = frozenset(("elicitation/create", "sampling/createMessage"))
"""The questions whose text and answers are guarded."""


class GuardedOrigin(ClientAs):
    """The call's client (`origin`), its questions guarded by `question` and their answers by `answer`."""

    def __init__(self, origin: Origin, question: Guard, answer: Guard) -> None:
        super().__init__(origin)
        self._question = question
        self._answer = answer

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        if method not in GUARDED:
            return await self._origin.ask(method, params)
        try:
            params = await self._question(method, params)
            answer = await self._origin.ask(method, params)
            return dict(await self._answer(method, answer))
        except Refused as exc:
            raise exc.to_mcp() from None

    def __getattr__(self, name: str) -> Any:
        """What else the client offers (`elicitation_complete`, say), as its own."""
        return getattr(self._origin, name)
