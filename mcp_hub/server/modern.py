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
SDK's table gives its error; its first notification, or `deferred.WINDOW`
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

import anyio
import orjson
from cachetools import LRUCache
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner, aclose_shielded, modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
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
from mcp_types import ErrorData, JSONRPCError, ProgressToken, RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub import wire
from mcp_hub.scopes import cancel_scope
from mcp_hub.server import deferred
from mcp_hub.server.direct import read_body, replaying, request_of, until_disconnect
from mcp_hub.server.lane import lane_of, serving

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


def notification(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A JSON-RPC notification as the SDK writes it (no `params` when there are none)."""
    if params is None:
        return {"jsonrpc": "2.0", "method": method}
    return {"jsonrpc": "2.0", "method": method, "params": dict(params)}


class ModernContext:
    """The dispatch context of a 2026-07-28 request served past the SDK's entry: no server requests (the era
    has none), its notifications handed to `emit` until it ends, and its own cancel scope."""

    can_send_request = False

    def __init__(
        self,
        transport: TransportContext,
        request_id: RequestId,
        progress_token: ProgressToken | None,
        emit: Callable[[dict[str, Any]], Any],
        message_metadata: Any = None,
    ) -> None:
        self.transport = transport
        self.request_id = request_id
        self.message_metadata = message_metadata
        self._progress_token = progress_token
        self._emit = emit
        self._closed = False
        self.cancel_requested = anyio.Event()
        self.scope = cancel_scope()

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        if not self._closed:
            await self._emit(notification(method, params))

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self._progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self._progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)

    def close(self) -> None:
        self._closed = True


KEPT_BYTES = 4096
"""The largest envelope (its client info and capabilities, as JSON) `Envelopes` keeps."""


class Envelopes:
    """Connections for 2026-07-28 requests, each from its request's envelope (`Connection.from_envelope`).

    A client sends the same `clientInfo` and `clientCapabilities` with every
    request, and typing them into models is most of what building a connection
    costs. The models typed from the last `size` distinct envelopes are kept,
    by their JSON, and handed to `from_envelope` in place of the raw values,
    which it takes as they are. Either way each request gets a connection of
    its own, exactly as the SDK builds it; its capabilities model is the same
    object from one request to the next, so what is worked out from it can be
    kept too (`relayed_capabilities`). An envelope over `KEPT_BYTES` of JSON
    (far beyond any real client's) is typed afresh and not kept, so what is
    kept stays small whatever clients send.
    """

    def __init__(self, size: int = 64) -> None:
        self._typed: LRUCache[bytes, tuple[Any, Any]] = LRUCache(size)

    def connection(
        self, protocol_version: str, client_info: Any, client_capabilities: Any, **options: Any
    ) -> Connection:
        """`Connection.from_envelope(protocol_version, client_info, client_capabilities, **options)`."""
        try:
            key = orjson.dumps([client_info, client_capabilities])
        except TypeError:  # not JSON orjson writes (an integer beyond 64 bits, say)
            key = None
        if key is None or len(key) > KEPT_BYTES:  # typed afresh, not kept
            return Connection.from_envelope(protocol_version, client_info, client_capabilities, **options)
        typed = self._typed.get(key)
        if typed is not None:
            return Connection.from_envelope(protocol_version, *typed, **options)
        connection = Connection.from_envelope(protocol_version, client_info, client_capabilities, **options)
        params = connection.client_params
        # The info is typed only when both are well formed (`client_params`); when not, it matters to nothing.
        self._typed[key] = (params.client_info if params is not None else None, connection.client_capabilities)
        return connection


async def serve_modern(
    server: Any, dctx: ModernContext, method: str, params: dict[str, Any] | None, connection: Connection, lifespan: Any
) -> tuple[dict[str, Any] | None, ErrorData | None]:
    """Run one 2026-07-28 request as the SDK's entries run it (`serve_one`; a call in the hub's lane, see
    lane.py): its result or error (neither: cancelled). The connection's exit stack is unwound as `serve_one`
    unwinds it, when anything is on it."""
    result: dict[str, Any] | None = None
    error: ErrorData | None = None
    serve = serving(lane_of(server), ServerRunner(server, connection, lifespan), method)
    with dctx.scope:
        try:
            result = await serve(dctx, method, params)
        except Exception as exc:
            error = modern_error_data(exc)
        finally:
            dctx.close()
            if getattr(connection.exit_stack, "_exit_callbacks", True):  # nothing on it: nothing to unwind
                await aclose_shielded(connection)
    return result, error


def error_body(request_id: RequestId, error: ErrorData) -> bytes:
    """A JSON-RPC error as the SDK's 2026-07-28 entries write it."""
    return wire.dumps(
        JSONRPCError(jsonrpc="2.0", id=request_id, error=error).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    )


class ModernRequests:
    """Pure ASGI middleware: a 2026-07-28 request POSTed to the MCP endpoint, served in the POST's task.

    `manager` is the SDK's session manager behind it (its server, security
    settings and lifespan state are used here); `max_body` is the largest body
    served here (a larger one goes to the SDK, which refuses it).
    """

    def __init__(self, app: ASGIApp, manager: StreamableHTTPSessionManager, max_body: int) -> None:
        self._app = app
        self._manager = manager
        self._server = manager.app
        self._security = TransportSecurityMiddleware(manager.security_settings)
        self._max_body = max_body
        self._accepted: dict[tuple[str | None, ...], bool] = {}
        self._envelopes = Envelopes()
        self._marked: dict[int, tuple[Any, bool]] = {}
        """Whether an input schema declares `x-mcp-header` properties, by the schema's id (the schema is
        kept with its answer, so its id is not reused while the answer stands)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _modern_post_headers(scope) if not self._manager.json_response else None
        if headers is None:
            await self._app(scope, receive, send)
            return
        if not await self._acceptable(headers):
            await self._app(scope, receive, send)
            return
        request = Request(scope, receive)
        chunks, complete = await read_body(receive, self._max_body)
        message = request_of(b"".join(chunks)) if complete else None
        if message is None or message["method"] == "subscriptions/listen" or not self._served(message):
            await self._app(scope, replaying(chunks, receive), send)
            return
        verdict = classify_inbound_request(message, headers=headers)
        if isinstance(verdict, InboundLadderRejection) or self._param_headers_disagree(message, headers):
            await self._app(scope, replaying(chunks, receive), send)  # the SDK refuses it
            return
        connection = self._envelopes.connection(
            verdict.protocol_version, verdict.client_info, verdict.client_capabilities
        )
        exchange = _Exchange(send, message["id"])
        dctx = ModernContext(
            TransportContext(kind="streamable-http", can_send_request=False, headers=request.headers),
            message["id"],
            progress_token_from_params(message.get("params")),
            exchange.emit,
            ServerMessageMetadata(request_context=request),
        )
        await exchange.serve(
            dctx,
            receive,
            serve_modern(
                self._server,
                dctx,
                message["method"],
                message.get("params"),
                connection,
                self._manager._lifespan_state,  # pyright: ignore[reportPrivateUsage]
            ),
        )

    async def _acceptable(self, headers: Mapping[str, str]) -> bool:
        """Whether the SDK takes a POST with these headers: it accepts JSON and SSE, and passes the transport's
        security check (content type, and with DNS rebinding protection, host and origin). The SDK's checks,
        remembered for the few header values a server sees."""
        key = tuple(headers.get(name) for name in _CHECKED_HEADERS)
        known = self._accepted.get(key)
        if known is None:
            shim = _HeadersOnly(headers)
            has_json, has_sse = check_accept_headers(shim)  # type: ignore[arg-type]
            refused = await self._security.validate_request(shim, is_post=True)  # type: ignore[arg-type]
            known = has_json and has_sse and refused is None
            if len(self._accepted) >= 1024:
                self._accepted.clear()
            self._accepted[key] = known
        return known

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


_CHECKED_HEADERS = ("accept", "content-type", "host", "origin")


class _HeadersOnly:
    """What the SDK's accept and security checks read of a request: its headers."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self.headers = headers


def _modern_post_headers(scope: Scope) -> dict[str, str] | None:
    """A POST's headers (the first of each name), if it is for a 2026-07-28 version the SDK serves and no
    `Mcp-*` header is repeated; else None."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    headers: dict[str, str] = {}
    for key, value in scope["headers"]:
        name = key.decode("latin-1")
        if name in headers:
            if name.startswith("mcp-"):
                return None
            continue
        headers[name] = value.decode("latin-1")
    if headers.get("mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS:
        return None
    return headers


class _Exchange:
    """One request's answer: JSON when it sent nothing on its way, else an SSE stream that ends with it."""

    def __init__(self, send: Send, request_id: RequestId) -> None:
        self._send = send
        self._id = request_id
        self._lock = asyncio.Lock()
        self._streaming = False
        self._gone = False
        self._pinger: asyncio.Task[None] | None = None

    async def serve(self, dctx: ModernContext, receive: Receive, run: Any) -> None:
        loop = asyncio.get_running_loop()
        watcher = loop.create_task(self._watch(receive, dctx))
        timer = loop.call_later(deferred.WINDOW, self._start_pinging)
        try:
            result, error = await run
        finally:
            timer.cancel()
            watcher.cancel()
            if self._pinger is not None:
                self._pinger.cancel()
        if self._gone or (result is None and error is None):
            return  # the client went away: there is no one to answer
        if error is not None:
            body = error_body(self._id, error)
            status = ERROR_CODE_HTTP_STATUS.get(error.code, 200)
        else:
            body = wire.dumps({"jsonrpc": "2.0", "id": self._id, "result": result})
            status = 200
        async with self._lock:
            if self._streaming:
                await self._send({"type": "http.response.body", "body": _event(body), "more_body": False})
                return
            headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
            await self._send({"type": "http.response.start", "status": status, "headers": headers})
            await self._send({"type": "http.response.body", "body": body, "more_body": False})

    async def emit(self, message: dict[str, Any]) -> None:
        """Send a notification on the request's stream (starting it)."""
        async with self._lock:
            await self._open()
            await self._send({"type": "http.response.body", "body": _event(wire.dumps(message)), "more_body": True})

    async def _open(self) -> None:
        if not self._streaming:
            self._streaming = True
            await self._send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})

    def _start_pinging(self) -> None:
        self._pinger = asyncio.get_running_loop().create_task(self._ping())

    async def _ping(self) -> None:
        """The window passed: start the stream if nothing has, and ping it every window while the request runs,
        so that an idle-read timeout between client and hub does not close it."""
        try:
            while True:
                async with self._lock:
                    await self._open()
                    await self._send({"type": "http.response.body", "body": _PING, "more_body": True})
                await asyncio.sleep(deferred.WINDOW)
        except Exception:  # the client is gone: its watcher cancels the request
            logger.debug("pinging a 2026-07-28 stream failed", exc_info=True)

    async def _watch(self, receive: Receive, dctx: ModernContext) -> None:
        """A client gone before its answer cancels the request (the 2026-07-28 era's cancellation)."""
        if not await until_disconnect(receive):
            return
        self._gone = True
        dctx.cancel_requested.set()
        dctx.scope.cancel()


def _event(data: bytes) -> bytes:
    return b"event: message\r\ndata: " + data + b"\r\n\r\n"
