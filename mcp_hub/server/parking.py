"""Questions for a 2026-07-28 client, asked the only way its protocol allows: inside a result.

A 2026-07-28 client cannot be sent a request while its call is in flight. When
the hub has a question for it mid-call (a policy confirmation, or a question a
handshake-era server asked: sampling, elicitation, roots), the call is parked:
it keeps running in a task of the lot, waiting for the answer, while the
client receives an `input_required` result carrying the question and a
`requestState`. A server's question takes this way whether the call went to
the mount's shared session or, with `isolation = "per-client"`, to the
session of the caller's principal. The client answers by sending the same
request again with `inputResponses` and that state; the hub hands the answers
to the parked call and waits for its result, or for its next question.

The state the client carries is sealed (HMAC-SHA256 under a key that never
leaves this process) and names the principal, the method, the name and the
arguments (a digest of their canonical JSON) of the call it was issued for:
the call that runs is the one the client was asked about. A state presented
by anyone else, for anything else (another name, other arguments: a person
confirmed deleting one file, and the retry names another), after it expired,
or altered in any way is refused (`StateRefused`), and the parked call waits
on, untouched, for the right retry. A parked call the client never comes
back to ends when its time runs out.

With replicas (`[cluster]`), the key is the one they share (`use_key`), the state names the replica
that holds the call (`owner`; the others forward the retry there, see http/replicas.py), and each
state is accepted once (`claim`, in Redis): a state replayed after its answers were taken is refused,
where it could otherwise answer the call's next question.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST

from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.scopes import cancel_scope
from mcp_hub.upstream import ClientAs, Origin

logger = logging.getLogger("mcp_hub.server")

STATE_PREFIX = "mcp-hub.1."
"""Marks a `requestState` the hub sealed; any other state belongs to the server, and goes on to it."""

PARKED_TTL = 600.0
"""How long a parked call waits for its client to come back with answers, in seconds."""


@dataclass(eq=False)
class _Question:
    method: str
    params: Mapping[str, Any]
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None
    sent: bool = False


@dataclass(eq=False)
class _Parked:
    """One call, running in the lot, and what it is waiting for."""

    principal: str
    method: str
    public: str
    arguments: Mapping[str, Any]
    """The call's arguments, as the client sent them (their `arguments_digest` goes in the state)."""
    scope: anyio.CancelScope
    id: str = ""
    """Given when the call is first parked (a call that asks nothing, the common case, needs none)."""
    questions: dict[str, _Question] = field(default_factory=dict)
    changed: anyio.Event = field(default_factory=anyio.Event)
    done: bool = False
    result: dict[str, Any] | None = None
    error: BaseException | None = None

    def poke(self) -> None:
        self.changed.set()


class StateRefused(MCPError):
    """A `requestState` presented for something other than the call it was issued for (or forged): refused
    with invalid params, and nothing runs."""

    def __init__(self, why: str = "") -> None:
        super().__init__(INVALID_PARAMS, "mcp-hub: requestState is not valid for this request" + why)


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """A digest of a call's arguments as JSON with sorted keys: equal for the same JSON values only (`1` is
    not `1.0` nor `true`), whatever the order of their keys."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return _b64(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())


class _AskingOrigin(ClientAs):
    """The client of a parked call: its questions become `input_required` rounds (and `for_client` is the client
    outside this call, which a 2026-07-28 client cannot be asked through)."""

    def __init__(self, origin: Origin, parked: _Parked, check: Callable[[str], None]) -> None:
        super().__init__(origin)
        self._parked = parked
        self._check = check

    @property
    def modern(self) -> bool:
        return True

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        self._check(method)
        parked = self._parked
        key = f"mcp-hub-{len(parked.questions) + 1}"
        question = parked.questions[key] = _Question(method, dict(params))
        parked.poke()
        await question.answered.wait()
        answer = question.answer
        if not isinstance(answer, dict):
            raise MCPError(INVALID_PARAMS, f"mcp-hub: the client sent no answer to {method}")
        return answer


class ParkingLot:
    """Parked calls of 2026-07-28 clients, and the tasks they run in, held by `run`.

    Each call runs in a bare asyncio task (the hub serves on asyncio), which `run` cancels and waits for
    when it ends, as a task group would: every 2026-07-28 call that may ask comes through here, most ask
    nothing, and spawning one into an anyio task group costs a call about 15 us more.
    """

    def __init__(self, ttl: float = PARKED_TTL) -> None:
        self._ttl = ttl
        self._keys = [secrets.token_bytes(32)]
        """Keys states are opened with; the first seals. A replica's own key stays, for what it sealed
        before the shared key was known."""
        self.owner: str | None = None
        """This replica's id, named in each state (None: no replicas)."""
        self.claim: Callable[[str, float], Awaitable[bool]] | None = None
        """`claim(token, ttl)`: whether a state is presented for the first time (None: no replicas)."""
        self._parked: dict[str, _Parked] = {}
        self._tasks: set[asyncio.Task[None]] | None = None
        """The calls running (None: the lot is not open)."""

    def use_key(self, key: bytes) -> None:
        """Seal with `key` from now on (the replicas' shared key), still opening what the old key sealed."""
        if key not in self._keys:
            self._keys.insert(0, key)

    @property
    def open(self) -> bool:
        return self._tasks is not None

    async def run(self) -> None:
        """Open the lot until cancelled; then cancel the calls running in it, and wait for them to end."""
        tasks = self._tasks = set()
        try:
            await anyio.sleep_forever()
        finally:
            self._tasks = None
            for task in tasks:
                task.cancel()
            if tasks:
                with anyio.CancelScope(shield=True):
                    await asyncio.wait(tasks)

    async def call(self, ctx: CallContext, handler: Handler, can_ask: Callable[[str], None]) -> dict[str, Any]:
        """Run a 2026-07-28 client's call so that it may ask the client questions.

        `can_ask(method)` raises `ClientCannotAnswer` for a question the client cannot take.
        """
        tasks = self._tasks
        assert tasks is not None
        parked = _Parked(ctx.principal, ctx.method, ctx.public, ctx.arguments, cancel_scope())
        asking = replace(ctx, origin=_AskingOrigin(ctx.origin, parked, can_ask))

        async def run() -> None:
            try:
                with parked.scope:
                    parked.result = await handler(asking)
                if parked.scope.cancelled_caught:
                    parked.error = MCPError(INVALID_REQUEST, "mcp-hub: the call ended waiting for answers")
            except BaseException as exc:  # delivered to whichever request is waiting for the call
                parked.error = exc
                if not isinstance(exc, Exception):
                    raise
            finally:
                parked.done = True
                if parked.id:
                    self._parked.pop(parked.id, None)
                parked.poke()

        task = asyncio.get_running_loop().create_task(run())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return await self._next(parked)

    async def resume(self, ctx: CallContext, state: str, responses: Any) -> dict[str, Any]:
        """The client came back with answers: hand them to its parked call, and wait for what comes next.

        Raises `StateRefused` for a state not issued for this request (its principal, method, name and
        arguments), before any answer is handed over.
        """
        parked, token = self._unseal(state, ctx)
        if self.claim is not None and not await self.claim(token, self._ttl):
            raise MCPError(INVALID_REQUEST, "mcp-hub: this requestState was already answered; call again")
        parked.scope.deadline = math.inf
        if not isinstance(responses, dict):
            responses = {}
        for key, question in parked.questions.items():
            if question.sent and not question.answered.is_set():
                question.answer = responses.get(key)
                question.answered.set()
        return await self._next(parked)

    async def _next(self, parked: _Parked) -> dict[str, Any]:
        """Wait for the call's result, or its next questions (answered with `input_required`)."""
        handed_out = False
        try:
            while True:
                if parked.done:
                    if parked.error is not None:
                        raise parked.error
                    assert parked.result is not None
                    return parked.result
                new = {key: q for key, q in parked.questions.items() if not q.sent}
                if new:
                    for question in new.values():
                        question.sent = True
                    parked.id = parked.id or secrets.token_urlsafe(16)
                    self._parked[parked.id] = parked
                    parked.scope.deadline = anyio.current_time() + self._ttl
                    handed_out = True
                    return {
                        "resultType": "input_required",
                        "inputRequests": {key: {"method": q.method, "params": q.params} for key, q in new.items()},
                        "requestState": self._seal(parked),
                    }
                if parked.changed.is_set():  # what it told of is looked at above: a new one for what comes next
                    parked.changed = anyio.Event()
                await parked.changed.wait()
        finally:
            if not handed_out and not parked.done:
                # The client gave up on this request (cancelled, or went away): so does the call.
                parked.scope.cancel()

    # -- the state the client carries ---------------------------------------------

    def _seal(self, parked: _Parked) -> str:
        claims = {
            "id": parked.id,
            "sub": parked.principal,
            "method": parked.method,
            "name": parked.public,
            "args": arguments_digest(parked.arguments),
            "exp": time.time() + self._ttl,
            "jti": secrets.token_urlsafe(12),
        }
        if self.owner is not None:
            claims["own"] = self.owner
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        return f"{STATE_PREFIX}{body}.{_b64(self._mac(body))}"

    def _claims(self, state: str) -> dict[str, Any]:
        """What a state sealed with one of the keys says; empty if it was not (or was altered)."""
        body, _, mac = state.removeprefix(STATE_PREFIX).partition(".")
        try:
            sealed = base64.urlsafe_b64decode(mac + "=" * (-len(mac) % 4))
            if not any(hmac.compare_digest(sealed, self._mac(body, key)) for key in self._keys):
                return {}
            claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, UnicodeDecodeError):
            return {}
        return claims if isinstance(claims, dict) else {}

    def owner_of(self, state: str) -> str | None:
        """The replica holding the call a state (sealed with a key this replica knows) was issued for."""
        owner = self._claims(state).get("own")
        return owner if isinstance(owner, str) else None

    def _unseal(self, state: str, ctx: CallContext) -> tuple[_Parked, str]:
        claims = self._claims(state)
        if claims.get("sub") != ctx.principal:
            raise StateRefused()
        if claims.get("method") != ctx.method or claims.get("name") != ctx.public:
            raise StateRefused(": it was issued for a call of something else; call anew")
        if claims.get("args") != arguments_digest(ctx.arguments):
            raise StateRefused(
                ": it was issued for a call with other arguments; retry with that call's arguments, or call anew"
            )
        parked = self._parked.get(str(claims.get("id")))
        if parked is None or not isinstance(claims.get("exp"), int | float) or claims["exp"] < time.time():
            raise MCPError(INVALID_REQUEST, "mcp-hub: the call this requestState belongs to has ended; call again")
        return parked, str(claims.get("jti"))

    def _mac(self, body: str, key: bytes | None = None) -> bytes:
        return hmac.new(key or self._keys[0], body.encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sealed_by_hub(params: Mapping[str, Any]) -> str | None:
    """The hub's `requestState` in a request's params, if it carries one."""
    state = params.get("requestState")
    return state if isinstance(state, str) and state.startswith(STATE_PREFIX) else None
