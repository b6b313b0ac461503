"""Questions a server asks back: sampling, elicitation and roots, relayed to the right client.

A server may answer a request with questions of its own. A handshake-era
server sends them as JSON-RPC requests on its connection while the call is in
flight; a 2026-07-28 server answers the call with an `input_required` result
and expects the call again, with the answers. Either way the question belongs
to the client whose request the server is serving, and goes to that client
only.

`InFlight` tracks, per upstream connection, which client (`Origin`) each
request in flight came from. A handshake-era server's question is relayed when
exactly one client has requests in flight on that connection; with several,
nothing on the wire says whose it is, so the server gets an error that says
so. While a client is answering, the deadlines of its requests on that
connection are paused: a person reading an elicitation form is not a hung
server.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from pydantic import BaseModel, TypeAdapter, ValidationError

MAX_INPUT_ROUNDS = 8
"""How many `input_required` rounds the hub drives for one call before giving up."""

_SAMPLING_RESULT: TypeAdapter[types.CreateMessageResult | types.CreateMessageResultWithTools] = TypeAdapter(
    types.CreateMessageResult | types.CreateMessageResultWithTools
)


class ClientCannotAnswer(MCPError):
    """The client cannot be asked this: it lacks the capability, or its protocol era has no way."""

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
        """Identifies the client connection across its requests; None when it has none to keep."""
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
        """What the client can be asked (its `sampling`, `elicitation`, `roots` capabilities), as declared."""
        ...


@dataclass(eq=False)
class _Entry:
    origin: Origin
    scope: anyio.CancelScope


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
    _entries: set[_Entry] = field(default_factory=set)

    @contextmanager
    def track(self, origin: Origin | None, scope: anyio.CancelScope) -> Iterator[None]:
        if origin is None:
            yield
            return
        entry = _Entry(origin, scope)
        self._entries.add(entry)
        try:
            yield
        finally:
            self._entries.discard(entry)

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Relay a handshake-era server's question to the one client it can be for."""
        origin = self._whose()
        started = time.monotonic()
        try:
            return await origin.ask(method, params)
        finally:
            paused = time.monotonic() - started
            for entry in self._entries:
                if entry.origin is origin:
                    entry.scope.deadline += paused

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
        origins = [entry.origin for entry in self._entries]
        if not origins:
            if self.owner is not None:
                return self.owner.for_client()
            raise MCPError(INVALID_REQUEST, f"mcp-hub: no client request is in flight on '{self.mount}' to ask")
        clients = {_client_of(origin) for origin in origins}
        if len(clients) > 1:
            raise MCPError(
                INVALID_REQUEST,
                f"mcp-hub: requests from {len(clients)} clients are in flight on '{self.mount}', and nothing "
                'says whose question this is; give the mount isolation = "per-client"',
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


def _client_of(origin: Origin) -> Hashable:
    """The client connection an origin belongs to (a 2026-07-28 request is its own)."""
    return origin.client_key if origin.client_key is not None else id(origin)


async def drive_input_required(
    send: Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]],
    params: Mapping[str, Any],
    result: dict[str, Any],
    origin: Origin,
) -> dict[str, Any]:
    """Answer a 2026-07-28 server's `input_required` results for a handshake-era client.

    Each round puts the server's questions to the client as requests, then sends
    the original request again with `inputResponses` and the echoed `requestState`.
    """
    for _ in range(MAX_INPUT_ROUNDS):
        if result.get("resultType") != "input_required":
            return result
        requests = result.get("inputRequests") or {}
        responses = {}
        for key, request in requests.items():
            responses[key] = await origin.ask(request.get("method", ""), request.get("params") or {})
        retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        if responses:
            retry["inputResponses"] = responses
        if result.get("requestState") is not None:
            retry["requestState"] = result["requestState"]
        result = await send(retry)
    raise MCPError(INVALID_REQUEST, f"mcp-hub: the server still needed input after {MAX_INPUT_ROUNDS} rounds")
