"""A handshake-era client's calls, served as the SDK's runner serves them, without its generic steps.

`ServerRunner.on_request` serves any method of any era, so for each request it
composes the server's middleware anew, looks the handler up, validates the
params twice (against the version's surface, then into the handler's model),
and shapes the result in several passes (cache hints, a copy, the version's
sieve, the `serverInfo` stamp). For the hub's calls (`tools/call`,
`prompts/get`, `resources/read`) on an initialized handshake-era connection,
most of that is known in advance: the hub's middleware only turns its errors
into JSON-RPC errors, its handler reads the params as the client sent them, and
a handshake-era result has no cache hints and no stamp.

`CallLane.serve` does what remains, in the runner's order and with its errors:
the surface validation (INVALID_PARAMS for params the version does not allow),
a context made as the runner makes it (so progress, log messages, questions and
cancellation travel as before), the hub's handler with its errors translated,
and the version's sieve of the result. A server whose middleware is not the
hub's own alone (telemetry or an access log adds an observer) is served by the
runner: `takes` says no.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import DispatchContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import INTERNAL_ERROR, METHOD_NOT_FOUND, RequestParams, RequestParamsMeta
from mcp_types.methods import serialize_server_result, validate_client_request
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_hub.errors import HubError

logger = logging.getLogger("mcp_hub.server")

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

    def takes(self, connection: Connection, method: str) -> bool:
        """Whether a request for `method` on `connection` (initialized) is served here."""
        return (
            method in CALLS
            and connection.protocol_version not in MODERN_PROTOCOL_VERSIONS
            and self._server.middleware == self._own
        )

    async def serve(
        self,
        connection: Connection,
        lifespan_state: Any,
        dctx: DispatchContext[TransportContext],
        method: str,
        params: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The result of one call, shaped for the connection's protocol version. Raises what the runner
        raises: `MCPError`, or pydantic's `ValidationError` for params the version does not allow."""
        version = connection.protocol_version
        try:
            validate_client_request(method, version, params)
        except KeyError:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method) from None
        meta = _request_meta(params)
        carried = dctx.message_metadata
        http = carried if isinstance(carried, ServerMessageMetadata) else None  # the POST that carried it
        ctx = ServerRequestContext(
            session=ServerSession(dctx, connection, request_meta=meta),
            lifespan_context=lifespan_state,
            method=method,
            params=params,
            request_id=dctx.request_id,
            meta=meta,
            protocol_version=version,
            request=http.request_context if http is not None else None,
            close_sse_stream=http.close_sse_stream if http is not None else None,
            close_standalone_sse_stream=http.close_standalone_sse_stream if http is not None else None,
        )
        try:
            result = await self._serve_call(ctx)
        except HubError as exc:
            raise exc.to_mcp() from None
        try:
            return serialize_server_result(method, version, result)
        except ValidationError:
            logger.exception("handler for %r returned an invalid result", method)
            raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None


def _request_meta(params: Mapping[str, Any] | None) -> RequestParamsMeta | None:
    """The request's `_meta`, as the runner lifts it: None when absent or malformed."""
    if not params or "_meta" not in params:
        return None
    try:
        return RequestParams.model_validate(params, by_name=False).meta
    except ValidationError:
        return None
