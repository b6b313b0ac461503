"""The hub's calls, served as the SDK's runner serves them, less the steps that serve any other method.

`ServerRunner.on_request` serves any method, so for each request it composes
the server's middleware anew, looks the handler up, and validates the params
twice (against the version's surface, then into the handler's model). For the
hub's calls (`tools/call`, `prompts/get`, `resources/read`) most of that is
known in advance: the hub's own middleware only turns its errors into JSON-RPC
errors and answers lists, and its handler reads the params as the client sent them.

`CallLane.serve` does what remains, in the runner's order and with its errors,
and with the runner's own pieces where they decide anything: the context (so
progress, log messages, questions and cancellation travel as before), the
surface validation (INVALID_PARAMS for params the version does not allow), the
hub's handler with its errors translated, and the runner's shaping of the
result for the connection's protocol version (cache hints, the version's sieve,
the `serverInfo` stamp). The observer of client requests (telemetry, the access
log; see chain/telemetry.py), when there is one, wraps that as it wraps every
other request. Every call of both eras and every door is served here, whatever
the configuration; the doors take the lane once (`lane_of`) and ask it what
serves each method (`CallLane.serving`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp.shared.dispatcher import DispatchContext, OnRequest
from mcp.shared.exceptions import MCPError
from mcp.shared.transport_context import TransportContext
from mcp_types import METHOD_NOT_FOUND, RequestParams, RequestParamsMeta
from mcp_types.methods import validate_client_request
from pydantic import ValidationError

from mcp_hub.errors import HubError
from mcp_hub.sdk import runner as sdk_runner

CALLS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The methods served here."""

Observer = Callable[[ServerRequestContext[Any, Any], CallNext], Awaitable[HandlerResult]]
"""A server middleware that sees each request and passes it on (chain/telemetry.py's `RequestObserver`)."""


class CallLane:
    """`server`'s calls, served by `serve_call` (a hub handler: params as sent, raises `HubError`)."""

    def __init__(
        self, server: Server[Any], serve_call: Callable[[ServerRequestContext[Any, Any]], Awaitable[dict[str, Any]]]
    ) -> None:
        self._server = server
        self._serve_call = serve_call
        self._observer: Observer | None = None

    def observe(self, observer: Observer | None) -> None:
        """Let `observer` see each call, as the server's outermost middleware sees every other request."""
        self._observer = observer

    def serving(self, runner: ServerRunner[Any], method: str) -> OnRequest:
        """What serves a request for `method` on `runner`'s connection: this lane for a call, else the
        runner."""
        if method in CALLS:
            return partial(self.serve, runner)
        return runner.on_request

    async def serve(
        self,
        runner: ServerRunner[Any],
        dctx: DispatchContext[TransportContext],
        method: str,
        params: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """One call's result, as `runner` (the connection's) would answer it: shaped for the connection's
        protocol version. Raises what the runner raises: `MCPError`, or pydantic's `ValidationError` for
        params the version does not allow."""
        version = runner.connection.protocol_version
        ctx = sdk_runner.make_context(runner, dctx, method, params, _request_meta(params), version)
        if self._observer is None:
            return await self._answer(runner, ctx)
        result = await self._observer(ctx, partial(self._answer, runner))
        assert isinstance(result, dict)  # `_answer`'s, passed through
        return result

    async def _answer(self, runner: ServerRunner[Any], ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        method, version = ctx.method, ctx.protocol_version
        try:
            validate_client_request(method, version, ctx.params)
        except KeyError:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method) from None
        try:
            result = await self._serve_call(ctx)
        except HubError as exc:
            raise exc.to_mcp() from None
        return sdk_runner.serialize(runner, method, version, result)


def lane_of(server: Server[Any]) -> CallLane | None:
    """The lane the hub's endpoint gave `server` (the doors take it once, when they are built); none for
    another server."""
    lane = getattr(server, "lane", None)
    return lane if isinstance(lane, CallLane) else None


def serving(lane: CallLane | None, runner: ServerRunner[Any], method: str) -> OnRequest:
    """What serves a request for `method` on `runner`'s connection: `lane` for a call, else the runner."""
    return lane.serving(runner, method) if lane is not None else runner.on_request


def _request_meta(params: Mapping[str, Any] | None) -> RequestParamsMeta | None:
    """The request's `_meta`, as the runner lifts it: None when absent or malformed."""
    if not params or "_meta" not in params:
        return None
    try:  # the `_meta` alone: the rest (a tool's arguments) is no part of it
        return RequestParams.model_validate({"_meta": params["_meta"]}, by_name=False).meta
    except ValidationError:
        return None
