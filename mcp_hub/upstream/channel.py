"""The channel a mount's requests go down: one small interface, and what every kind of channel shares.

A `Connection` (connection.py) sends the hub's requests on a negotiated session
through its transport's `Channel`, past the SDK session's per-request machinery
(a waiter, a task per progress notification, a model per result), since the hub
forwards results it does not inspect. A channel:

- sends a request (`request`) and returns the server's raw result, or raises the
  error it answered with (`MCPError`; `CONNECTION_CLOSED` when the connection
  ended first);
- hands the request's progress to its caller's callback (`on_progress`), the
  request's id standing as its progress token;
- tells the server when a request is abandoned before its answer (the cancel
  notice, sent here within `CANCEL_SECONDS`), unless the session's era has
  another signal.

Request ids sent on a channel are strings (`hub-1`, ...), so they never meet
the SDK session's integer ids. The kinds: stdio.py (a child process's pipes)
and http.py (streamable HTTP, each request a POST of its own); the legacy SSE
transport has none (sse.py), and its requests take the SDK session's path.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR

CANCEL_SECONDS = 2.0
"""How long the hub tries to tell a server that a request it abandoned is cancelled."""


class HttpStatusError(MCPError):
    """The server answered a request with an HTTP error status and no JSON-RPC answer.

    Raised by http.py's channel; kept here, with what every channel shares, so that code which tells it
    apart (era.py's probes) does not import the HTTP client (aiohttp) before an HTTP server is mounted.
    """

    def __init__(self, status: int) -> None:
        super().__init__(INTERNAL_ERROR, f"server returned HTTP {status}")
        self.status = status


class Channel(Protocol):
    """Where a connection's requests go past the SDK session (see the module docstring)."""

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str],
        *,
        on_progress: ProgressFnT | None = None,
        modern: bool = False,
    ) -> dict[str, Any]:
        """Send one request (`headers`: the request's own, where the wire has headers; `modern`: a
        2026-07-28 session) and return the server's raw result.

        Raises:
            MCPError: the server answered with an error; `CONNECTION_CLOSED` when the connection
                ended before the answer.
        """
        ...


def request_ids() -> Iterator[str]:
    """The ids of one channel's requests: `hub-1`, `hub-2`, ..."""
    return map("hub-{}".format, itertools.count(1))


def request_message(request_id: str, method: str, params: Mapping[str, Any] | None, progress: bool) -> dict[str, Any]:
    """A request as sent: with `params` (a copy; unset when empty, since JSON-RPC forbids `null`), and,
    if its caller follows `progress`, its id as the progress token in `_meta`."""
    out = dict(params or {})
    if progress:
        out["_meta"] = {**(out.get("_meta") or {}), "progressToken": request_id}
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if out:
        message["params"] = out
    return message


def cancel_notice(request_id: str) -> dict[str, Any]:
    """The notice that tells a server a request it was sent is abandoned."""
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "the hub's caller abandoned the request"},
    }


def closed() -> MCPError:
    """The error a request sent on a channel that has closed fails with."""
    return MCPError(CONNECTION_CLOSED, "Connection closed")


def raw_result(result: Any) -> dict[str, Any]:
    """A response's result, which must be an object."""
    if not isinstance(result, dict):
        raise MCPError(INTERNAL_ERROR, "the server's answer has no result object")
    return result  # pyright: ignore[reportUnknownVariableType]
