"""Questions a server asks back: sampling, elicitation and roots, relayed to the right client.

A server may answer a request with questions of its own. A handshake-era
server sends them as JSON-RPC requests on its connection while the call is in
flight; a 2026-07-28 server answers the call with an `input_required` result
and expects the call again, with the answers. Either way the question belongs
to the client whose request the server is serving, and goes to that client
only.

`InFlight` tracks, per upstream connection, which client (`Origin`) each
request in flight came from, and whose a handshake-era server's question is:

- A question that arrived on the stream of a call (over streamable HTTP, the
  SSE response of the POST that carried the call) is that call's client's,
  however many clients have calls in flight. A call's stream is read in the
  context (`contextvars`) of the task that sent the call, and the SDK client
  answers a question in the context it was read in, so the request `track`
  marks in the sending task's context (`_SENDING`) is the one the question
  arrived with. A question about a request no client is waiting for (a call
  that ended, or the hub's own request) is refused.
- Any other question (on the standalone GET stream, on stdio or legacy SSE,
  where nothing says whose it is) is relayed when exactly one client has
  requests in flight on the connection, or, with none in flight, to the
  connection's `owner` (a client's own session); otherwise the server gets
  an error that says so.

While a client is answering, the deadlines of its requests on that
connection are paused: a person reading an elicitation form is not a hung
server.

`roots/list` is answered differently (see `InFlight.list_roots`): from the
mount's configured roots (`configured`) whenever it has them (the
administrator's word on what the server may see); else as above, except that a
question no client's call explains goes to the sole client of a hub serving
stdio (`sole_client`) if there is one and it declared `roots`, and is otherwise
answered with an empty list, never an error: many servers ask for roots on
their own as soon as they start.

A URL-mode elicitation goes only to a client that declared URL mode. Once such
a client accepts, the server may later send `notifications/elicitation/complete`
naming the elicitation: `InFlight` remembers which client each open URL
elicitation went to (at most `MAX_OPEN_ELICITATIONS`, for at most
`OPEN_ELICITATION_TTL` seconds) and tells that client alone.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import anyio
import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from pydantic import BaseModel, TypeAdapter, ValidationError

MAX_INPUT_ROUNDS = 8
"""How many `input_required` rounds the hub drives for one call before giving up."""

MAX_OPEN_ELICITATIONS = 256
"""URL-mode elicitations remembered per upstream connection, awaiting the server's completion notice."""
OPEN_ELICITATION_TTL = 600.0
"""How long, in seconds, an accepted URL-mode elicitation waits for its completion notice."""

_SAMPLING_RESULT: TypeAdapter[types.CreateMessageResult | types.CreateMessageResultWithTools] = TypeAdapter(
    types.CreateMessageResult | types.CreateMessageResultWithTools
)


class ClientCannotAnswer(MCPError):
    """The client cannot be asked this: it lacks the capability, or its protocol era has no way."""

    def __init__(self, message: str) -> None:
        super().__init__(INVALID_REQUEST, message)


class _NoCall(MCPError):
    """A server's question that no client's call explains (and no client owns the session)."""

    def __init__(self, message: str) -> None:
        super().__init__(INVALID_REQUEST, message)


class Origin(Protocol):
    """The client a request came from, as the upstream side needs to see it."""

    @property
    def modern(self) -> bool:
        """Whether the client speaks 2026-07-28 (questions travel inside results, not as requests)."""
        ...

    @property
    def client_key(self) -> Hashable | None:
        """Which of a mount's per-client sessions serves the client; None: the shared session.

        A handshake-era client's connection, or an authenticated 2026-07-28 caller's
        principal; an anonymous 2026-07-28 request has none.
        """
        ...

    @property
    def access_token(self) -> str | None:
        """The caller's validated OAuth access token (None: it signed in without one), only to exchange for a
        token meant for a server (mode = "token_exchange"), never to send on as it is."""
        ...

    @property
    def principal(self) -> str | None:
        """Who is calling, as the hub authenticated them ("stdio" for the local user; None when the hub
        authenticates no one): whose own token a "user" mount's request carries."""
        ...

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Put a server's question (sampling/createMessage, elicitation/create, roots/list) to the client.

        Raises:
            ClientCannotAnswer: the client cannot be asked this.
            MCPError: the client answered with an error.
        """
        ...

    def for_client(self) -> Origin:
        """The same client, outside this request: asks go on the client's connection, not its request."""
        ...

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the client's connection closes."""
        ...

    async def log(self, params: Mapping[str, Any]) -> None:
        """Deliver a server's log message (`notifications/message` params) at the client's chosen level."""
        ...

    @property
    def capabilities(self) -> Mapping[str, Any] | None:
        """What the client can be asked (its `sampling`, `elicitation`, `roots` capabilities) and the extensions
        it declared, as declared."""
        ...


class ClientAs:
    """A call's client as another part of the hub sees it: the client (`_origin`) in everything a subclass does
    not override (its identity, capabilities, connection and logs; `ask` too, unless overridden)."""

    def __init__(self, origin: Origin) -> None:
        self._origin = origin

    @property
    def modern(self) -> bool:
        return self._origin.modern

    @property
    def client_key(self) -> Hashable | None:
        return self._origin.client_key

    @property
    def access_token(self) -> str | None:
        return self._origin.access_token

    @property
    def principal(self) -> str | None:
        return self._origin.principal

    @property
    def capabilities(self) -> Mapping[str, Any] | None:
        return self._origin.capabilities

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        return await self._origin.ask(method, params)

    def for_client(self) -> Origin:
        return self._origin.for_client()

    def on_close(self, callback: Callable[[], None]) -> None:
        self._origin.on_close(callback)

    async def log(self, params: Mapping[str, Any]) -> None:
        await self._origin.log(params)


SoleClient = Callable[[], Awaitable[Origin | None]]
"""The one client of a hub serving stdio, asked a question no client's call explains (None: there is none)."""


@runtime_checkable
class HearsElicitationComplete(Protocol):
    """A client that can be told a URL-mode elicitation it accepted is complete (handshake era only:
    2026-07-28 has no `notifications/elicitation/complete`)."""

    async def elicitation_complete(self, elicitation_id: str) -> None: ...


def takes_url_elicitation(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether declared client capabilities include URL-mode elicitation (`elicitation.url`)."""
    elicitation = (capabilities or {}).get("elicitation")
    return isinstance(elicitation, Mapping) and elicitation.get("url") is not None


@dataclass(eq=False)
class _Entry:
    """One call in flight: the client it came from, and the cancel scope that holds its deadline."""

    origin: Origin
    scope: anyio.CancelScope


_SENDING: ContextVar[tuple[InFlight, _Entry | None] | None] = ContextVar("mcp_hub_sending", default=None)
"""The request the current task sends (set by `InFlight.track`): its connection, and its call (None:
the hub's own request).

Seen by the callback that answers a question that arrived on that request's
stream, which runs in the context the stream was read in (see the module's doc).
"""


class _Tracked:
    """`InFlight.track`: a plain class, entered on every request (a generator-based one costs more)."""

    __slots__ = ("_entries", "_entry", "_in_flight", "_token")

    def __init__(self, in_flight: InFlight, entries: set[_Entry], entry: _Entry | None) -> None:
        self._in_flight = in_flight
        self._entries = entries
        """The calls in flight on `in_flight`'s connection, which `entry` joins while it is sent."""
        self._entry = entry

    def __enter__(self) -> None:
        self._token = _SENDING.set((self._in_flight, self._entry))
        if self._entry is not None:
            self._entries.add(self._entry)

    def __exit__(self, *exc_info: object) -> None:
        _SENDING.reset(self._token)
        if self._entry is not None:
            self._entries.discard(self._entry)


@dataclass
class InFlight:
    """Requests in flight on one upstream connection, and the clients they came from.

    `owner` is set for a client's own session (isolation = "per-client"): its
    questions go to that client even when none of its requests is in flight.
    """

    mount: str
    owner: Origin | None = None
    broadcast: Callable[[Mapping[str, Any]], Awaitable[None]] | None = None
    """Where a log message goes that no single client's request explains."""
    configured: tuple[str, ...] | None = None
    """The mount's configured roots (`file://` URIs), the answer to every `roots/list`; None: ask a client."""
    sole_client: SoleClient | None = None
    """Asked `roots/list` when no client's call explains the question (set on a hub serving stdio)."""
    _entries: set[_Entry] = field(default_factory=set)
    _open_elicitations: OrderedDict[str, tuple[Origin, float]] = field(
        default_factory=OrderedDict[str, tuple[Origin, float]]
    )
    """Accepted URL-mode elicitations: elicitationId -> (the client asked, when it was asked)."""

    def track(self, origin: Origin | None, scope: anyio.CancelScope) -> _Tracked:
        """Count a request sent for `origin` (None: the hub's own) in flight while it is being sent (a context
        manager).

        `scope` holds the request's deadline, paused while its client answers a question.
        """
        return _Tracked(self, self._entries, _Entry(origin, scope) if origin is not None else None)

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Relay a handshake-era server's question to the one client it can be for (see the module's doc).

        Raises:
            ClientCannotAnswer: a URL-mode elicitation, for a client that did not declare URL mode.
        """
        if method == "roots/list":
            return await self.list_roots()
        return await self._relay(self._whose(), method, params)

    async def ask_for(self, origin: Origin, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Put a 2026-07-28 server's question about `origin`'s call to `origin`, or answer it from the
        configured roots."""
        if method == "roots/list" and self.configured is not None:
            return self.configured_roots()
        return await origin.ask(method, params)

    def configured_roots(self) -> dict[str, Any]:
        """The answer to `roots/list` from the mount's configured roots (only when it has them)."""
        return {"roots": [{"uri": uri} for uri in self.configured or ()]}

    async def list_roots(self) -> dict[str, Any]:
        """Answer a handshake-era server's `roots/list`: the configured roots if any; else the roots of the
        client whose call it is (as any question); else of the sole client of a hub serving stdio; else none.

        A client that cannot be asked (it did not declare `roots`, or speaks 2026-07-28) makes an empty
        list, not an error.
        """
        if self.configured is not None:
            return self.configured_roots()
        try:
            origin = self._whose()
        except _NoCall:
            origin = await self.sole_client() if self.sole_client is not None else None
        if origin is None:
            return {"roots": []}
        try:
            return await self._relay(origin, "roots/list", {})
        except ClientCannotAnswer:
            # A stdio or SSE server's question carries no call of its own: the one call in flight is a guess,
            # and a client without roots has none to give. Never an error: the hub told the server it may ask.
            return {"roots": []}

    async def _relay(self, origin: Origin, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        url_id = _url_elicitation_id(method, params)
        if url_id is not None:
            if not takes_url_elicitation(origin.capabilities):
                raise ClientCannotAnswer(
                    "mcp-hub: the client connected to the hub does not support URL-mode elicitation"
                )
            self._open_elicitation(url_id, origin)
        started = time.monotonic()
        answer: dict[str, Any] | None = None
        try:
            answer = await origin.ask(method, params)
            return answer
        finally:
            if url_id and (answer is None or answer.get("action") != "accept"):
                self._open_elicitations.pop(url_id, None)  # declined, cancelled or failed: nothing will complete
            paused = time.monotonic() - started
            for entry in self._entries:
                if entry.origin is origin:
                    entry.scope.deadline += paused

    async def elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the client that accepted a URL-mode elicitation that the server says it is complete.

        On the stream of the client's call if that call is still in flight, else on the
        client's connection. A notice for an elicitation the hub did not relay, or no
        longer remembers, goes to no one.
        """
        self._expire_elicitations()
        remembered = self._open_elicitations.pop(elicitation_id, None)
        if remembered is None:
            return
        origin = remembered[0]
        if not any(entry.origin is origin for entry in self._entries):
            origin = origin.for_client()
        if isinstance(origin, HearsElicitationComplete):
            await origin.elicitation_complete(elicitation_id)

    def _open_elicitation(self, elicitation_id: str, origin: Origin) -> None:
        if not elicitation_id or origin.modern or not isinstance(origin, HearsElicitationComplete):
            return  # 2026-07-28 has no completion notice to deliver
        self._expire_elicitations()
        self._open_elicitations.pop(elicitation_id, None)
        self._open_elicitations[elicitation_id] = (origin, time.monotonic())
        while len(self._open_elicitations) > MAX_OPEN_ELICITATIONS:
            self._open_elicitations.popitem(last=False)

    def _expire_elicitations(self) -> None:
        horizon = time.monotonic() - OPEN_ELICITATION_TTL
        while self._open_elicitations:
            _, asked = next(iter(self._open_elicitations.values()))
            if asked >= horizon:
                break
            self._open_elicitations.popitem(last=False)

    async def log(self, params: Mapping[str, Any]) -> None:
        """Relay a server's log message to the client whose request it came during, else to `broadcast`.

        A log message has no request id: it belongs to the one client with
        requests in flight (on its request's stream), or to the session's owner;
        otherwise it is the server's own news, for every client.
        """
        clients = {_client_of(entry.origin): entry.origin for entry in self._entries}
        if len(clients) == 1:
            await next(iter(clients.values())).log(params)
        elif not clients and self.owner is not None:
            await self.owner.for_client().log(params)
        elif self.broadcast is not None:
            await self.broadcast(params)

    def _whose(self) -> Origin:
        """The client the question being answered (in this task) is for.

        Raises:
            _NoCall: no client's call explains the question.
            MCPError: several clients' calls, and nothing says which.
        """
        sending = _SENDING.get()
        if sending is not None and sending[0] is self:  # it arrived on the stream of a request sent here
            call = sending[1]
            if call is not None and call in self._entries:
                return call.origin
            raise _NoCall(
                f"mcp-hub: '{self.mount}' asked about a request no client is waiting for "
                "(one that ended, or the hub's own)",
            )
        origins = [entry.origin for entry in self._entries]
        if not origins:
            if self.owner is not None:
                return self.owner.for_client()
            raise _NoCall(f"mcp-hub: no client request is in flight on '{self.mount}' to ask")
        clients = {_client_of(origin) for origin in origins}
        if len(clients) > 1:
            advice = (
                'give the mount isolation = "per-client"'
                if self.owner is None
                else "they share one principal's session; give each client an API key of its own"
            )
            raise MCPError(
                INVALID_REQUEST,
                f"mcp-hub: requests from {len(clients)} clients are in flight on '{self.mount}', and nothing "
                f"says whose question this is; {advice}",
            )
        return origins[0]

    # -- the SDK client's callbacks ------------------------------------------------

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        return await self._answer("sampling/createMessage", params, _SAMPLING_RESULT.validate_python)

    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await self._answer("elicitation/create", params, types.ElicitResult.model_validate)

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        return await self._answer("roots/list", None, types.ListRootsResult.model_validate)

    async def _answer(self, method: str, params: BaseModel | None, parse: Callable[[Any], Any]) -> Any:
        raw = params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else {}
        try:
            return parse(await self.ask(method, raw))
        except MCPError as exc:
            return exc.error
        except ValidationError:
            message = f"mcp-hub: the client's answer to {method} is malformed"
            return types.ErrorData(code=INVALID_REQUEST, message=message)


def _url_elicitation_id(method: str, params: Mapping[str, Any]) -> str | None:
    """The elicitationId of a URL-mode `elicitation/create` ("" when it has none); None for any other question."""
    if method != "elicitation/create" or params.get("mode") != "url":
        return None
    elicitation_id = params.get("elicitationId")
    return elicitation_id if isinstance(elicitation_id, str) else ""


def _client_of(origin: Origin) -> Hashable:
    """The client an origin can be asked as: a handshake-era client's connection; a 2026-07-28 request
    is its own (two requests of one principal may come from two programs, each with roots of its own)."""
    key = origin.client_key
    return key if key is not None and not origin.modern else id(origin)


async def drive_input_required(
    send: Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]],
    params: Mapping[str, Any],
    result: dict[str, Any],
    ask: Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]],
    answerable: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """Answer a 2026-07-28 server's `input_required` results in the hub.

    Each round puts the server's questions to `ask` (for a handshake-era client: the
    client, as requests), then sends the original request again with `inputResponses`
    and the echoed `requestState`. With `answerable`, only rounds whose every question
    it accepts are answered here; the first other result is returned as it is (for a
    2026-07-28 client to answer).
    """
    for _ in range(MAX_INPUT_ROUNDS):
        if result.get("resultType") != "input_required":
            return result
        requests = result.get("inputRequests") or {}
        if answerable is not None and (
            not requests or not all(answerable(request.get("method", "")) for request in requests.values())
        ):
            return result
        responses = {}
        for key, request in requests.items():
            responses[key] = await ask(request.get("method", ""), request.get("params") or {})
        retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        if responses:
            retry["inputResponses"] = responses
        if result.get("requestState") is not None:
            retry["requestState"] = result["requestState"]
        result = await send(retry)
    raise MCPError(INVALID_REQUEST, f"mcp-hub: the server still needed input after {MAX_INPUT_ROUNDS} rounds")
