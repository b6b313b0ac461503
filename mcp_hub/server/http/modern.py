"""2026-07-28 requests over HTTP, served in the POST's own task.

The SDK serves a 2026-07-28 POST (`handle_modern_request`) by re-reading the
request's headers through Starlette, parsing its body twice (`json`, then a
pydantic model), and running the handler in a task group beside a disconnect
watcher, with a memory stream between them for the handler's notifications
and a Starlette response for the answer. Together that costs a tool call more
CPU than the hub's own routing of it.

`ModernRequests` serves the same requests with the same steps and the SDK's
own pieces where they decide anything: its transport security, its
classification of the request (`classify_inbound_request`), its check of
`Mcp-Param-*` headers against the tool's schema, `Connection.from_envelope`,
`serve_one` and `modern_error_data`. The handler runs in the POST's task; a
bare asyncio task watches for the client going away, which cancels it. A
request that sent nothing on its way is answered as JSON with the status the
SDK's table gives its error; its first notification, or `exchange.WINDOW`
passing, starts an SSE stream (pinged every window) that ends with the answer.

Anything else goes to the SDK with its body, unchanged: other methods and
versions, notifications, batches, `subscriptions/listen`, duplicated `Mcp-*`
headers, and every request the SDK would refuse (it then refuses it itself).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    X_MCP_HEADER_KEY,
    InboundLadderRejection,
    classify_inbound_request,
    validate_mcp_param_headers,
)
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import RequestId
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from mcp_hub import wire
from mcp_hub.sdk import server as sdk_server
from mcp_hub.server.http import exchange
from mcp_hub.server.http.acceptance import Acceptance
from mcp_hub.server.http.exchange import (
    Exchange,
    Outcome,
    content_length,
    read_body,
    replaying,
    send_body,
    send_response,
    send_start,
)
from mcp_hub.server.lane import CallLane
from mcp_hub.server.serving import Envelopes, ModernContext, encode_modern_error, request_of, serve_modern

logger = logging.getLogger("mcp_hub.server")

_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()
_SCHEMA_MARK = f'"{X_MCP_HEADER_KEY}"'.encode()
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
"""The SDK's headers for a 2026-07-28 answer streamed as SSE."""
_PING = b": ping\r\n\r\n"

ASGIFallback = Callable[[Scope, Receive, Send], Any]


class ModernRequests:
    """A 2026-07-28 request POSTed to the MCP endpoint, served in the POST's task (`serve`).

    `manager` is the SDK's session manager behind it (its server, security
    settings and lifespan state are used here); `max_body` is the largest body
    served here (a larger one goes to `sdk`, the SDK's path, which refuses it);
    `acceptance` checks a POST's headers as the SDK does (acceptance.py).
    """

    def __init__(
        self,
        manager: StreamableHTTPSessionManager,
        lane: CallLane | None,
        max_body: int,
        sdk: ASGIFallback,
        acceptance: Acceptance | None = None,
    ) -> None:
        self._manager = manager
        self._server = manager.app
        self._lane = lane
        self._acceptance = acceptance if acceptance is not None else Acceptance(manager.security_settings)
        self._max_body = max_body
        self._sdk = sdk
        self._envelopes = Envelopes()
        self._marked: dict[int, tuple[Any, bool]] = {}
        """Whether an input schema declares `x-mcp-header` properties, by the schema's id (the schema is
        kept with its answer, so its id is not reused while the answer stands)."""

    async def serve(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        """Serve a POST of a 2026-07-28 version, with `headers` (the first of each name; no `Mcp-*` repeated)."""
        if not await self._acceptance.modern(headers):
            await self._sdk(scope, receive, send)
            return
        request = Request(scope, receive)
        chunks, complete = await read_body(receive, self._max_body)
        message = request_of(b"".join(chunks)) if complete else None
        if message is None or message["method"] == "subscriptions/listen" or not self._served(message):
            await self._sdk(scope, replaying(chunks, receive), send)
            return
        verdict = classify_inbound_request(message, headers=headers)
        if isinstance(verdict, InboundLadderRejection) or self._param_headers_disagree(message, headers):
            await self._sdk(scope, replaying(chunks, receive), send)  # the SDK refuses it
            return
        connection = self._envelopes.connection(
            verdict.protocol_version, verdict.client_info, verdict.client_capabilities
        )
        answer = ModernExchange(send, message["id"])
        dctx = ModernContext(
            TransportContext(kind="streamable-http", can_send_request=False, headers=request.headers),
            message["id"],
            progress_token_from_params(message.get("params")),
            answer.emit,
            ServerMessageMetadata(request_context=request),
        )
        answer.dctx = dctx
        await answer.serve(
            receive,
            serve_modern(
                self._server,
                self._lane,
                dctx,
                message["method"],
                message.get("params"),
                connection,
                sdk_server.lifespan_state(self._manager),
            ),
        )

    def _served(self, message: dict[str, Any]) -> bool:
        """Whether the SDK checks nothing for this request that is not checked here: a `tools/call` of a
        server without a schema lookup (not the hub's) is checked against the server's own tools/list."""
        if message["method"] != "tools/call" or self._server.get_tool_input_schema is not None:
            return True
        return self._server.get_request_handler("tools/list") is None

    def _param_headers_disagree(self, message: dict[str, Any], headers: Mapping[str, str]) -> bool:
        """Whether a `tools/call`'s `Mcp-Param-*` headers and its arguments disagree as the tool's schema
        declares them (the SDK's check, run only for a schema that declares any)."""
        lookup = self._server.get_tool_input_schema
        if message["method"] != "tools/call" or lookup is None:
            return False
        params = message.get("params") or {}
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or (arguments is not None and not isinstance(arguments, Mapping)):
            return False
        if not arguments and not any(key.startswith(_PARAM_PREFIX) for key in headers):
            return False
        try:
            schema = lookup(name)
        except Exception:
            return True  # the SDK logs it and goes on
        if schema is None or not self._declares_headers(schema):
            return False
        return validate_mcp_param_headers(schema, arguments or {}, headers) is not None

    def _declares_headers(self, schema: Any) -> bool:
        known = self._marked.get(id(schema))
        if known is not None and known[0] is schema:
            return known[1]
        if len(self._marked) >= 4096:
            self._marked.clear()
        marked = _SCHEMA_MARK in wire.dumps(schema)
        self._marked[id(schema)] = (schema, marked)
        return marked


class ModernExchange(Exchange):
    """One 2026-07-28 request's answer: JSON when it sent nothing on its way, else an SSE stream that ends with
    it (pinged every window while the request runs)."""

    def __init__(self, send: Send, request_id: RequestId) -> None:
        self._send = send
        self._id = request_id
        self._lock = asyncio.Lock()
        self._streaming = False
        self._pinger: asyncio.Task[None] | None = None
        self.dctx: ModernContext | None = None

    def _cancel(self) -> None:
        """A client gone before its answer cancels the request (the 2026-07-28 era's cancellation)."""
        assert self.dctx is not None
        self.dctx.cancel_requested.set()
        self.dctx.scope.cancel()

    def _finish(self) -> None:
        if self._pinger is not None:
            self._pinger.cancel()

    async def _answer(self, outcome: Outcome) -> None:
        self._stop_watching()
        self._finish()
        result, error = outcome
        if self.gone or (result is None and error is None):
            return  # the client went away: there is no one to answer
        if error is not None:
            body = encode_modern_error(self._id, error)
            status = ERROR_CODE_HTTP_STATUS.get(error.code, 200)
        else:
            body = wire.dumps({"jsonrpc": "2.0", "id": self._id, "result": result})
            status = 200
        async with self._lock:
            if self._streaming:
                await send_body(self._send, _event(body))
                return
            headers = [content_length(body), (b"content-type", b"application/json")]
            await send_response(self._send, status, headers, body)

    async def emit(self, message: dict[str, Any]) -> None:
        """Send a notification on the request's stream (starting it)."""
        async with self._lock:
            await self._open()
            await send_body(self._send, _event(wire.dumps(message)), more=True)

    async def _open(self) -> None:
        if not self._streaming:
            self._streaming = True
            await send_start(self._send, 200, _SSE_HEADERS)

    def _window(self) -> None:
        self._pinger = asyncio.get_running_loop().create_task(self._ping())

    async def _ping(self) -> None:
        """The window passed: start the stream if nothing has, and ping it every window while the request runs,
        so that an idle-read timeout between client and hub does not close it."""
        try:
            while True:
                async with self._lock:
                    await self._open()
                    await send_body(self._send, _PING, more=True)
                await asyncio.sleep(exchange.WINDOW)
        except Exception:  # the client is gone: its watcher cancels the request
            logger.debug("pinging a 2026-07-28 stream failed", exc_info=True)


def _event(data: bytes) -> bytes:
    return b"event: message\r\ndata: " + data + b"\r\n\r\n"
