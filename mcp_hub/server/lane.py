"""The hub's calls, served as the SDK's runner serves them, less the steps that serve any other method.

`ServerRunner.on_request` serves any method, so for each request it composes
the server's middleware anew, looks the handler up, and validates the params
twice (against the version's surface, then into the handler's model). For the
hub's calls (`tools/call`, `prompts/get`, `resources/read`) most of that is
known in advance: the hub's middleware only turns its errors into JSON-RPC
errors, and its handler reads the params as the client sent them.

`CallLane.serve` does what remains, in the runner's order and with its errors,
and with the runner's own pieces where they decide anything: the surface
validation (INVALID_PARAMS for params the version does not allow), the context
(so progress, log messages, questions and cancellation travel as before), the
hub's handler with its errors translated, and the runner's shaping of the
result for the connection's protocol version (cache hints, the version's sieve,
the `serverInfo` stamp). Both eras are served here. A server whose middleware
is not the hub's own alone (telemetry or an access log adds an observer, which
sees each request) is served by the runner: `takes` says no.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp.shared.dispatcher import DispatchContext, OnRequest
from mcp.shared.exceptions import MCPError
from mcp.shared.transport_context import TransportContext
from mcp_types import METHOD_NOT_FOUND, RequestParams, RequestParamsMeta
from mcp_types.methods import validate_client_request
from pydantic import ValidationError

from mcp_hub.errors import HubError

CALLS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The methods served here."""


class CallLane:
    """`server`'s calls, served by `serve_call` (a hub handler: params as sent, raises `HubError`) while the
    server's middleware is `own` alone."""

    def __init__(
        self,
        server: Server[Any],
        serve_call: Callable[[ServerRequestContext[Any, Any]], Awaitable[dict[str, Any]]],
        own: Sequence[Any],
    ) -> None:
        self._server = server
        self._serve_call = serve_call
        self._own = list(own)

    def takes(self, method: str) -> bool:
        """Whether a request for `method` is served here."""
        return method in CALLS and self._server.middleware == self._own

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
        try:
            validate_client_request(method, version, params)
        except KeyError:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method) from None
        ctx = runner._make_context(dctx, method, params, _request_meta(params), version)  # pyright: ignore[reportPrivateUsage]
        try:
            result = await self._serve_call(ctx)
        except HubError as exc:
            raise exc.to_mcp() from None
        return runner._serialize(method, version, result)  # pyright: ignore[reportPrivateUsage]

    def serving(self, runner: ServerRunner[Any], method: str) -> OnRequest:
        """What serves a request for `method` on `runner`'s connection: this lane for a call it takes, else
        the runner."""
        if self.takes(method):
            return partial(self.serve, runner)
        return runner.on_request


def lane_of(server: Server[Any]) -> CallLane | None:
    """The lane the hub's endpoint gave `server` (the doors take it once, when they are built); none for
    another server."""
    lane = getattr(server, "lane", None)
    return lane if isinstance(lane, CallLane) else None


def serving(lane: CallLane | None, runner: ServerRunner[Any], method: str) -> OnRequest:
    """What serves a request for `method` on `runner`'s connection: `lane` for a call it takes, else the
    runner."""
    return lane.serving(runner, method) if lane is not None else runner.on_request


def _request_meta(params: Mapping[str, Any] | None) -> RequestParamsMeta | None:
    """The request's `_meta`, as the runner lifts it: None when absent or malformed."""
    if not params or "_meta" not in params:
        return None
    try:
        return RequestParams.model_validate(params, by_name=False).meta
    except ValidationError:
        return None
