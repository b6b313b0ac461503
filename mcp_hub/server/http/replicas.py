"""Replicas (`[cluster]`): a request for what another replica holds is forwarded to that replica.

- A handshake-era session's `Mcp-Session-Id` is issued as `REPLICA.ID`: this replica's id before the SDK's
  id. A request naming a session of another replica (a POST, the GET stream, a DELETE) is forwarded to it,
  at the address it registered in Redis; if it is gone, the request is answered 404 "Session not found"
  (the session is gone: the client initializes anew, as the spec says). A request naming one of this
  replica's sessions goes on with the SDK's id; an id without a replica's goes on as it is.
- A 2026-07-28 retry carrying a `requestState` the hub sealed (with the key the replicas share) for a call
  parked on another replica is forwarded there; if it is gone, the answer is a JSON-RPC error telling the
  client to call again.
- A person's sign-in to a `mode = "user"` mount lives on the replica that handed out its link
  (credentials/consent.py and user.py), whose id begins the consent ID (`/oauth/consent/REPLICA.ID`)
  and the `state` the authorization server brings back (`/oauth/callback?state=REPLICA.STATE`). Another
  replica forwards the page, the form and the callback there as the browser sent them (its cookies
  included: the `state` is bound to the browser's cookie) and sends the answer back as it is (status,
  `Location`, `Set-Cookie`), so the sign-in completes where the call waiting for it is (`SignIns`). If
  that replica is gone, the answer is a 410 page telling the person to start again.

A forwarded request carries `Mcp-Hub-Forwarded` and is never forwarded again (the owner serves it, or
refuses it as it would any stranger's). The owner authenticates it as it would the client's: the
credentials go along. While a request is forwarded, the owner's registration is read every
`CHECK_EVERY` seconds: an owner that stopped answering without closing its connections ends the
forward once its registration expires (`REPLICA_TTL`), with the same answers. An answer cut short
(the owner died mid-answer) ends: a 2026-07-28 SSE answer with the JSON-RPC error first.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp_types import INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_hub import wire
from mcp_hub.cluster import CHECK_EVERY, TIMEOUT, Cluster
from mcp_hub.config import USER_CALLBACK_PATH
from mcp_hub.server.http.exchange import content_length, read_body, replaying, send_response, until_disconnect
from mcp_hub.server.parking import STATE_PREFIX, ParkingLot
from mcp_hub.server.serving import request_id_of
from mcp_hub.tls import verifying

logger = logging.getLogger("mcp_hub.cluster")

FORWARDED = b"mcp-hub-forwarded"
_SESSION = b"mcp-session-id"
_MODERN = {version.encode() for version in MODERN_PROTOCOL_VERSIONS}
_HOP_BY_HOP = {b"host", b"content-length", b"transfer-encoding", b"connection", b"keep-alive", b"upgrade", FORWARDED}
_ANSWER_DROPS = {b"transfer-encoding", b"connection", b"keep-alive", b"date", b"server"}
_JSON = [(b"content-type", b"application/json")]
_PAGE = [
    (b"content-type", b"text/html; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
]

CALL_GONE = "mcp-hub: the replica that held this call is gone; call again without requestState"


class Replicas:
    """Pure ASGI middleware in front of the MCP endpoint: this replica's sessions and parked calls are served
    here, other replicas' are forwarded to them. `below`: the endpoint's path below the one each replica
    registers (a curated endpoint's `/NAME`), added to the owner's address."""

    def __init__(self, app: ASGIApp, cluster: Cluster, parking: ParkingLot, max_body: int, below: str = "") -> None:
        self._app = app
        self._below = below
        self._cluster = cluster
        self._parking = parking
        self._max_body = max_body
        self._forwarder = Forwarder(cluster, max_body)

    async def aclose(self) -> None:
        await self._forwarder.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        session = version = None
        forwarded = False
        for key, value in scope["headers"]:
            if key == _SESSION:
                session = value
            elif key == b"mcp-protocol-version":
                version = value
            elif key == FORWARDED:
                forwarded = True
        own = self._cluster.replica
        stamped = self._stamping(send)
        if session is not None:
            replica, dot, local = session.partition(b".")
            if dot and replica.decode("latin-1") == own:
                headers = [(k, local if k == _SESSION else v) for k, v in scope["headers"]]
                await self._app({**scope, "headers": headers}, receive, stamped)
            elif dot and replica and not forwarded:
                await self._forward(scope, receive, send, replica.decode("latin-1"), None, _session_gone)
            else:
                await self._app(scope, receive, stamped)
            return
        if scope["method"] == "POST" and version in _MODERN and not forwarded:
            chunks, whole = await read_body(receive, self._max_body)
            body = b"".join(chunks)
            owner = self._owner(body) if whole and STATE_PREFIX.encode() in body else None
            if owner is not None and owner != own:
                await self._forward(scope, receive, send, owner, body, _call_gone(body))
                return
            receive = replaying(chunks, receive)
        await self._app(scope, receive, stamped)

    def _stamping(self, send: Send) -> Send:
        """`send`, with this replica's id before the session id of a response that issues one."""
        prefix = self._cluster.replica.encode() + b"."

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start" and any(k == _SESSION for k, _ in message["headers"]):
                headers = [(k, prefix + v if k == _SESSION else v) for k, v in message["headers"]]
                message = {**message, "headers": headers}
            await send(message)

        return stamped

    def _owner(self, body: bytes) -> str | None:
        """The replica a 2026-07-28 request's hub-sealed `requestState` names, if it carries one."""
        try:
            message = json.loads(body)
        except ValueError:
            return None
        params = message.get("params") if isinstance(message, dict) else None
        state = params.get("requestState") if isinstance(params, dict) else None
        if not isinstance(state, str) or not state.startswith(STATE_PREFIX):
            return None
        return self._parking.owner_of(state)

    async def _forward(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        replica: str,
        body: bytes | None,
        gone: Callable[[Send, bool], Awaitable[None]],
    ) -> None:
        def where(address: str) -> str:
            return address.rstrip("/") + self._below if self._below else address

        await self._forwarder.forward(scope, receive, send, replica, where, body, gone)


class Forwarder:
    """Sends a request to another replica, and its answer back (streamed as it comes)."""

    def __init__(self, cluster: Cluster, max_body: int) -> None:
        self._cluster = cluster
        self._max_body = max_body
        self._http = httpx2.AsyncClient(
            verify=verifying(), timeout=httpx2.Timeout(None, connect=2 * TIMEOUT), follow_redirects=False
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def forward(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        replica: str,
        where: Callable[[str], str],
        body: bytes | None,
        gone: Callable[[Send, bool], Awaitable[None]],
    ) -> None:
        """Send the request to `replica` (at `where(its registered address)`, with the request's query) and its
        answer back; `body`: the request's, if already read. `gone(send, started)` answers when the replica is
        gone (`started`: part of its answer was already sent)."""
        if body is None and scope["method"] not in ("GET", "HEAD"):
            chunks, whole = await read_body(receive, self._max_body)
            if not whole:
                await send_response(send, 413, [], b"")
                return
            body = b"".join(chunks)
        address = await self._cluster.address_of(replica)
        if address is None:
            await gone(send, False)
            return
        headers = [(k, v) for k, v in scope["headers"] if k not in _HOP_BY_HOP]
        headers.append((FORWARDED, self._cluster.replica.encode()))
        url = where(address)
        url += "?" + scope["query_string"].decode("latin-1") if scope.get("query_string") else ""
        request = self._http.build_request(scope["method"], url, headers=headers, content=body)
        started = finished = owner_gone = streaming = False

        async with anyio.create_task_group() as tg:

            async def client_left() -> None:
                if await until_disconnect(receive):
                    tg.cancel_scope.cancel()

            async def owner_alive() -> None:
                nonlocal owner_gone
                while True:
                    await anyio.sleep(CHECK_EVERY)
                    if await self._cluster.address_of(replica) is None:
                        owner_gone = True
                        tg.cancel_scope.cancel()

            tg.start_soon(client_left)
            tg.start_soon(owner_alive)
            try:
                response = await self._http.send(request, stream=True)
                try:
                    answer = [(k, v) for k, v in response.headers.raw if k.lower() not in _ANSWER_DROPS]
                    await send({"type": "http.response.start", "status": response.status_code, "headers": answer})
                    started = True
                    streaming = response.headers.get("content-type", "").startswith("text/event-stream")
                    async for chunk in response.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    finished = True
                finally:
                    await response.aclose()
            except httpx2.HTTPError as exc:
                owner_gone = True
                logger.info("cluster: replica %s did not answer a forwarded request: %s", replica, exc)
            tg.cancel_scope.cancel()
        if finished or (owner_gone and started and not streaming):  # a JSON answer cut short can only end
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif owner_gone:
            with anyio.CancelScope(shield=True):
                await gone(send, started)


async def _session_gone(send: Send, started: bool) -> None:
    """The replica holding the session is gone, and the session with it: 404, as for an unknown session."""
    if started:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    body = wire.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": "Session not found"}}
    )
    await send_response(send, 404, [*_JSON, content_length(body)], body)


def _call_gone(request: bytes) -> Callable[[Send, bool], Awaitable[None]]:
    """The replica holding the call is gone: the client is told to call again (on an SSE answer already
    started, as its last event)."""
    request_id: Any = request_id_of(request)

    async def gone(send: Send, started: bool) -> None:
        error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": INVALID_REQUEST, "message": CALL_GONE}}
        body = wire.dumps(error)
        if started:
            event = b"event: message\r\ndata: " + body + b"\r\n\r\n"
            await send({"type": "http.response.body", "body": event, "more_body": False})
            return
        await send_response(send, 400, [*_JSON, content_length(body)], body)

    return gone


SIGN_IN_CALLBACK = USER_CALLBACK_PATH
"""Where a person's browser comes back from a `mode = "user"` mount's authorization server (`?state=...`)."""
SIGN_IN_CONSENT = USER_CALLBACK_PATH.rpartition("/")[0] + "/consent/"
"""The hub's consent page, `/oauth/consent/ID` (credentials/consent.py's `CONSENT_PATH`)."""

SIGN_IN_GONE = (
    "The hub replica that began this sign-in is gone, and the sign-in with it. "
    "Start again: call the tool again in your client for a new sign-in link."
)


class SignIns:
    """Pure ASGI middleware in front of the hub's sign-in routes (credentials/user.py and consent.py): a
    consent page (`/oauth/consent/REPLICA.ID`) or a callback (`/oauth/callback?state=REPLICA.STATE`) that
    another replica began is forwarded to it, as the browser sent it (method, query, cookies, form), and its
    answer sent back as it is (status, `Location`, `Set-Cookie`, page). If that replica is gone, the answer
    is a 410 page that says to start again. Everything else goes to `app`. `path`: the MCP endpoint's path,
    the end of each registered address (a replica's sign-in routes are beside it)."""

    def __init__(self, app: ASGIApp, cluster: Cluster, path: str, max_body: int) -> None:
        self._app = app
        self._cluster = cluster
        self._path = path
        self._forwarder = Forwarder(cluster, max_body)

    async def aclose(self) -> None:
        await self._forwarder.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        owner = _sign_in_owner(scope) if scope["type"] == "http" else None
        if owner is None or owner == self._cluster.replica or any(k == FORWARDED for k, _ in scope["headers"]):
            await self._app(scope, receive, send)
            return
        path = scope["path"]

        def where(address: str) -> str:
            base = address.rstrip("/")
            endpoint = self._path.rstrip("/")
            if endpoint and base.endswith(endpoint):
                base = base.removesuffix(endpoint)
            else:  # an address that does not end with the endpoint's path: the sign-in routes at its root
                parts = urlsplit(base)
                base = f"{parts.scheme}://{parts.netloc}"
            return base + path

        await self._forwarder.forward(scope, receive, send, owner, where, None, _sign_in_gone)


def _sign_in_owner(scope: Scope) -> str | None:
    """The replica a sign-in request's consent ID or `state` names (`REPLICA.` before it), if it names one."""
    path: str = scope["path"]
    if path == SIGN_IN_CALLBACK:
        states = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("state")
        named = states[-1] if states else ""  # the one the callback reads
    elif path.startswith(SIGN_IN_CONSENT):
        named = path.removeprefix(SIGN_IN_CONSENT)
    else:
        return None
    replica, dot, rest = named.partition(".")
    return replica if dot and replica and rest else None


async def _sign_in_gone(send: Send, started: bool) -> None:
    """The replica that began the sign-in is gone, and the sign-in with it: a page that says to start again."""
    if started:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    body = f"<!doctype html><meta charset=utf-8><title>mcp-hub</title><p>{html.escape(SIGN_IN_GONE)}</p>".encode()
    await send_response(send, 410, [*_PAGE, content_length(body)], body)
