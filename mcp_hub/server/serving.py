"""The serving core every door shares: a request recognised, run, and its answer encoded.

A door (stdio.py; http/handshake.py and http/modern.py) takes a client's request past the SDK's message
loop when it is one the SDK would serve no differently, runs it here, and writes the answer its own way.

- Recognising: `request_of` (a request served past the loop), `request_id_of` (any request but
  `initialize`, whose id a dropped connection cancels), `has_unusable_id` (a request but for its id),
  `cancelled_id_of` (what a `notifications/cancelled` cancels), `has_modern_envelope` (a request that
  carries the 2026-07-28 envelope).
- Running, handshake era: `run_request` on the connection's runner (`runner_for`), under a context of the
  connection's own dispatcher (`sdk.server.handshake_context`), so progress, log messages, questions and
  the client's cancellation travel as the SDK's loop sends them.
- Running, 2026-07-28 (the modern era, in the SDK's words): `serve_modern`, as the SDK's `serve_one`,
  with a `ModernContext` and a connection from the request's envelope (`Envelopes`).
- Encoding: `encode_answer` (a result or error, as the SDK's transports write it), `encode_modern_error`
  (an error, as the SDK's 2026-07-28 HTTP entry writes it) and `notification`.

A call (`tools/call`, `prompts/get`, `resources/read`) goes through the hub's lane (lane.py) where the
door's lane takes it, else through the connection's runner.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import orjson
import pydantic_core
from cachetools import LRUCache
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner, aclose_shielded, modern_error_data
from mcp.shared.dispatcher import CallOptions, OnRequest
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params, handler_exception_to_error_data
from mcp.shared.transport_context import TransportContext
from mcp_types import PROTOCOL_VERSION_META_KEY, ErrorData, JSONRPCError, ProgressToken, RequestId

from mcp_hub import wire
from mcp_hub.scopes import cancel_scope
from mcp_hub.sdk.server import HandshakeContext, needs_unwinding
from mcp_hub.server.lane import CallLane, serving

logger = logging.getLogger("mcp_hub.server")

# Recognising a request

_ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})


def _parsed(body: bytes | str) -> Any:
    try:
        return pydantic_core.from_json(body)
    except ValueError:
        return None


def _usable_id(request_id: object) -> bool:
    return not isinstance(request_id, bool) and isinstance(request_id, str | int)


def request_of(body: bytes | str) -> dict[str, Any] | None:
    """The JSON-RPC request `body` holds, if it is one served past the message loop (not `initialize`)."""
    message = _parsed(body)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or set(message) - _ENVELOPE:
        return None
    method, params = message.get("method"), message.get("params")
    if not isinstance(method, str) or method == "initialize" or not _usable_id(message.get("id")):
        return None
    if params is not None and not isinstance(params, dict):
        return None
    return message


def request_id_of(body: bytes | str) -> str | int | None:
    """The id of the JSON-RPC request in `body`, if it is one (not a notification, a response or `initialize`)."""
    message = _parsed(body)
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    request_id = message.get("id")
    if not _usable_id(request_id) or message["method"] == "initialize":
        return None
    return request_id


def has_unusable_id(body: bytes | str) -> bool:
    """Whether `body` is a request but for its id: one that is neither a string nor an integer."""
    message = _parsed(body)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return False
    return "id" in message and not _usable_id(message["id"])


def cancelled_id_of(body: bytes | str) -> RequestId | None:
    """The id of the request a `notifications/cancelled` in `body` cancels, if it is one."""
    message = _parsed(body)
    if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
        return None
    return cancelled_request_id_from_params(message.get("params"))


def has_modern_envelope(params: Mapping[str, Any] | None) -> bool:
    """Whether a request carries the 2026-07-28 per-request envelope (which a handshake-era connection refuses)."""
    meta = params.get("_meta") if params is not None else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


# Encoding an answer


def encode_answer(
    request_id: str | int, result: dict[str, Any] | None, error: ErrorData | None, *, line: bool = False
) -> bytes:
    """The JSON-RPC response or error, as the SDK's transports serialize it (`line`: with its newline)."""
    if error is not None:
        answer = JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        text = answer.model_dump_json(by_alias=True, exclude_unset=True).encode()
        return text + b"\n" if line else text
    message = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return wire.dumps_line(message) if line else wire.dumps(message)


def encode_modern_error(request_id: RequestId, error: ErrorData) -> bytes:
    """A JSON-RPC error as the SDK's 2026-07-28 HTTP entry writes it."""
    return wire.dumps(
        JSONRPCError(jsonrpc="2.0", id=request_id, error=error).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    )


def notification(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A JSON-RPC notification as the SDK writes it (no `params` when there are none)."""
    if params is None:
        return {"jsonrpc": "2.0", "method": method}
    return {"jsonrpc": "2.0", "method": method, "params": dict(params)}


# Running a handshake-era request


def runner_for(
    runners: WeakKeyDictionary[Connection, ServerRunner[Any]], server: Any, connection: Connection, lifespan: Any
) -> ServerRunner[Any]:
    """The connection's own `ServerRunner` for requests served past its message loop (made on first use)."""
    runner = runners.get(connection)
    if runner is None:
        runner = runners[connection] = ServerRunner(server, connection, lifespan)
    return runner


async def run_request(
    on_request: OnRequest,
    dctx: HandshakeContext,
    scope: anyio.CancelScope,
    method: str,
    params: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, ErrorData | None]:
    """Run one request through `on_request` (the session's runner's, say), as the session's dispatcher would:
    its result or error (neither: cancelled, by the client or through `scope`). Errors are shaped as the
    dispatcher shapes them."""
    result: dict[str, Any] | None = None
    error: ErrorData | None = None
    with scope:
        try:
            result = await on_request(dctx, method, params)
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                logger.exception("handler for %r raised", method)
                error = ErrorData(code=0, message=str(exc))  # as the SDK's dispatcher answers it
        finally:
            dctx.close()
    return result, error


# Running a 2026-07-28 request


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
    server: Any,
    lane: CallLane | None,
    dctx: ModernContext,
    method: str,
    params: dict[str, Any] | None,
    connection: Connection,
    lifespan: Any,
) -> tuple[dict[str, Any] | None, ErrorData | None]:
    """Run one 2026-07-28 request as the SDK's entries run it (`serve_one`; a call in `lane`, see lane.py):
    its result or error (neither: cancelled). The connection's exit stack is unwound as `serve_one` unwinds
    it, when anything is on it."""
    result: dict[str, Any] | None = None
    error: ErrorData | None = None
    serve = serving(lane, ServerRunner(server, connection, lifespan), method)
    with dctx.scope:
        try:
            result = await serve(dctx, method, params)
        except Exception as exc:
            error = modern_error_data(exc)
        finally:
            dctx.close()
            if needs_unwinding(connection):  # nothing on it: nothing to unwind
                await aclose_shielded(connection)
    return result, error
