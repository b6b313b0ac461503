"""A streamable HTTP server: the SDK's client for its session, and the hub's requests each POSTed by the hub.

`StreamableHttpTransport` opens the SDK's streamable HTTP client on an httpx2
client of its own, with no cap on one SSE event's size (the SDK caps one at
1 MiB by default; a proxy must pass results of any size), whose responses are
read to their end before they are closed (`_DrainOnClose`), so its TCP
connection is kept and used again: the SDK closes a POST's SSE response as soon
as the JSON-RPC response event has arrived, a moment before the body's last
chunk, and a connection closed with its response unfinished cannot be reused,
so every call paid for a new one.

Through the SDK's client a request crosses the session, the dispatcher, the
transport's writer task, a task of its own for the POST, the SSE reader and
the session's reader again before its caller has the result, and the result
is validated into models on the way. The hub forwards requests whose results
it does not inspect, so once a session is negotiated, `HttpChannel` sends each
of the hub's requests as its own POST, with the headers and `_meta` the SDK
session stamps on it, and reads the answer straight off that POST's body:

- an `application/json` body is the answer;
- an SSE body is read until the answer; progress for the request goes to its
  callback, and any other message on the stream (a log message, a question a
  handshake-era server asks about this request, a response to some other
  request) is handed to the SDK session exactly as the SDK's transport would
  have handed it, so it takes the session's usual path;
- an SSE body that ends (or breaks) before the answer, after an event with an
  `id`, is resumed as the SDK's transport resumes it: after the stream's
  `retry` delay (a second if it gave none), a GET with `Last-Event-ID` opens
  the rest of the request's stream, read as the POST's was. A resumed stream
  that ends without the answer is resumed again; two attempts in a row that
  bring no new event end the request with an error, as does a body with no
  event id. The request's deadline bounds the waiting as it bounds the rest.

The POSTs go out through aiohttp, whose client spends well under half the CPU
of httpx2's on one request (about 0.4 against 1.3 ms on the benchmark VM, for
the same POST to the same server); its pooled connections are kept when an
answer arrives before the end of its body (aiohttp gives the connection back
when the rest has arrived, within bounds, as `_DrainOnClose` does for the SDK's
client).

The SDK's client keeps everything else: the handshake or discovery, the
standalone GET stream, `subscriptions/listen`, answering a server's questions,
pings, notifications and the DELETE that ends a session. `HttpChannel.merging`
puts its transport's read stream and the messages handed over here into the
one stream its session reads; progress on that stream for a request sent here
(a server may send it on the GET stream) goes to the request's callback as well.

Request ids sent here are strings (`hub-1`, ...; see channel.py). A request abandoned before its answer (the caller's
deadline, a cancelled client call) is followed by `notifications/cancelled` on
a handshake-era session; on 2026-07-28, whose HTTP wire has no notifications
from the client, closing the request's stream is the signal.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import logging
import urllib.request
import warnings
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
import anyio.abc
import httpx2
import pydantic_core
from aiohttp.payload import TOO_LARGE_BYTES_BODY
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCNotification,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from mcp_hub import wire
from mcp_hub.credentials import Credential, CredentialError
from mcp_hub.sdk.client import ReadStream, TransportStreams
from mcp_hub.streams import Incoming, ReadStreamBase, deliver_progress
from mcp_hub.tls import verifying
from mcp_hub.upstream.channel import (
    CANCEL_SECONDS,
    HttpStatusError,
    cancel_notice,
    closed,
    raw_result,
    request_ids,
    request_message,
)

logger = logging.getLogger("mcp_hub.upstream")

# Per-request deadlines are the supervisor's (`ServerConfig.timeout`); the SDK client's own read timeout
# only guards a stream that goes silent for good.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
_INJECT_BUFFER = 32
"""Messages handed over to the session that may wait for its reader."""
_DRAIN_SECONDS = 0.5
_DRAIN_BYTES = 64 * 1024
"""How long and how much of a body is read past its answer to keep the connection (the SDK's client's
responses; the hub's own wait as long for theirs to end, see `HttpChannel._finish`)."""
_LISTEN_WAIT = 2.0
"""How long a new session waits for the server to answer its standalone GET stream before it serves anyway."""
_KEEPALIVE_SECONDS = 4.0
"""How long an idle connection to the server is kept: under the 5 s after which uvicorn and Node close
theirs, so the hub never sends a request on a connection the server is closing."""
_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=30.0, sock_read=300.0)
"""Per-request deadlines are the supervisor's; these only guard a connection that goes silent for good."""
_RETRY_DEFAULT_SECONDS = 1.0
"""How long to wait before resuming a stream that named no `retry` delay (the SDK's client waits as long)."""
_RETRY_MAX_SECONDS = 60.0
"""The longest `retry` delay a server gets waited for; the request's deadline may end the wait sooner."""
_RESUME_ATTEMPTS = 2
"""Attempts in a row to resume a request's stream that bring no new event before the request fails (as the SDK)."""


class StreamableHttpTransport:
    """The SDK's streamable HTTP client on an httpx2 client of its own (see the module docstring), with the
    hub's requests POSTed by `channel`; the session reads both its transport's messages and those the
    channel hands over."""

    def __init__(self, url: str, headers: dict[str, str], credential: Credential | None = None) -> None:
        self._url = url
        self._headers = headers
        self._credential = credential
        self._stack = AsyncExitStack()
        self.channel: HttpChannel | None = None
        self.refused: int | None = None
        """The 4xx status the server answered every POST with so far (None: none, or one was accepted)."""
        self._accepted = False
        self._listening = anyio.Event()
        self._posts: HttpChannel | None = None

    async def __aenter__(self) -> TransportStreams:
        async with AsyncExitStack() as stack:
            credential = self._credential
            auth = credential.http_auth() if credential is not None else None
            client = await stack.enter_async_context(
                httpx2.AsyncClient(verify=verifying(), headers=self._headers, timeout=_HTTP_TIMEOUT, auth=auth)
            )
            posts = HttpChannel(self._url, self._headers, credential)

            async def learn(response: httpx2.Response) -> None:
                posts.learn(response.headers)
                if response.request.method == "POST" and not self._accepted:
                    self._note_post(response.status_code)
                elif response.request.method == "GET" and "last-event-id" not in response.request.headers:
                    self._listening.set()

            client.event_hooks = {"response": [_drain_on_close, learn]}
            read_stream, write_stream = await stack.enter_async_context(
                streamable_http_client(self._url, http_client=client, max_sse_event_size=None)
            )
            merged = await stack.enter_async_context(posts.merging(read_stream))
            self._posts = posts
            self._stack = stack.pop_all()
            # A credential whose auth flow must see every response (a login) takes the SDK client's path only.
            self.channel = posts if credential is None or credential.channel_ok else None
            return merged, write_stream

    async def listening(self) -> None:
        """Return once the server has answered the session's standalone GET stream (at most `_LISTEN_WAIT`).

        The SDK's client opens that stream in the background after the
        handshake; a server sends what is not about a request (a `roots/list`,
        a question it asks the session) on it, and drops it while no stream is
        open. The hub's first request could otherwise reach the server before
        the GET does, and a question asked during it would be lost. A server
        that refuses the GET (405) has answered it; a session without an id
        (a stateless server, 2026-07-28) opens none.
        """
        if self._posts is None or self._posts.session_id is None:
            return
        with anyio.move_on_after(_LISTEN_WAIT):
            await self._listening.wait()

    def _note_post(self, status: int) -> None:
        """Keep the status of a refused POST until one is accepted (see `refused`)."""
        if 400 <= status < 500:
            self.refused = status
        else:
            self._accepted, self.refused = True, None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._stack.__aexit__(exc_type, exc, tb)


async def _drain_on_close(response: httpx2.Response) -> None:
    """Response hook: give the response a body that is read to its end when closed early."""
    assert isinstance(response.stream, httpx2.AsyncByteStream)
    response.stream = _DrainOnClose(response.stream)


class _DrainOnClose(httpx2.AsyncByteStream):
    """A response body that, closed before its end, first reads the rest, so its connection is kept.

    httpcore2 returns a connection to the pool only if the response on it was
    read to its end; closed earlier, the connection is dropped. The SDK's
    streamable HTTP client closes a POST's SSE response (and a resumed GET's) as
    soon as the JSON-RPC response event arrives, after it has handed that event
    to the session; the server ends the stream right after it, so the rest is
    normally one empty chunk already on its way. Reading it here, at most
    `_DRAIN_BYTES` within `_DRAIN_SECONDS`, costs the call nothing and spares
    the next one a TCP (and TLS) handshake. Past either bound, or on a read
    error, the response is closed as it would have been (connection dropped).
    A response never iterated (a 202, an error status) is read from its start.

    It wraps the client's body stream from a response hook rather than the
    client's transport, so the client still builds its own transports, with
    the environment's proxy settings. It keeps `elapsed`, which httpx2's
    `Response.elapsed` reads from the stream.
    """

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._chunks: AsyncIterator[bytes] | None = None
        self._ended = False

    @property
    def elapsed(self) -> datetime.timedelta | None:
        return getattr(self._inner, "elapsed", None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self._chunks = chunks = self._inner.__aiter__()
        async for chunk in chunks:
            yield chunk
        self._ended = True

    async def aclose(self) -> None:
        try:
            if not self._ended:
                await self._drain()
        finally:
            await self._inner.aclose()

    async def _drain(self) -> None:
        # Resumes the inner iterator where the reader left it; the reader's own
        # generators stay suspended and are finalized as they would be anyway.
        chunks = self._chunks if self._chunks is not None else self._inner.__aiter__()
        received = 0
        with anyio.move_on_after(_DRAIN_SECONDS):
            try:
                async for chunk in chunks:
                    received += len(chunk)
                    if received > _DRAIN_BYTES:
                        return
            except httpx2.TransportError:
                return
            self._ended = True


class HttpChannel:
    """Sends requests to one streamable HTTP server as POSTs of their own (see the module docstring).

    Use within `merging`, which opens and closes its HTTP client.
    """

    def __init__(self, url: str, headers: Mapping[str, str], credential: Credential | None = None) -> None:
        self._url = url
        self._headers = dict(headers)
        self._credential = credential
        self._http: aiohttp.ClientSession | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self._inject, self._merged = anyio.create_memory_object_stream[tuple[contextvars.Context | None, Incoming]](
            _INJECT_BUFFER
        )
        self._ids = request_ids()
        self._progress: dict[str, ProgressFnT] = {}
        self._unfinished: set[aiohttp.ClientResponse] = set()
        """Answered responses whose body had not ended (see `_finish`)."""
        self.session_id: str | None = None
        """The server's `Mcp-Session-Id`, learned from its responses (see `learn`)."""

    def learn(self, headers: Mapping[str, str]) -> None:
        """Remember the session id a response assigns (the SDK's client's responses included)."""
        session_id = headers.get("mcp-session-id")
        if session_id:
            self.session_id = session_id

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str],
        *,
        on_progress: ProgressFnT | None = None,
        modern: bool = False,
    ) -> dict[str, Any]:
        """POST one request and return the server's raw result.

        `headers` are the request's own (`MCP-Protocol-Version`, and on 2026-07-28
        `Mcp-Method` and the like); the session id is added here. A request
        abandoned before its answer is followed by `notifications/cancelled`,
        unless the session is `modern` (2026-07-28), where closing the request's
        stream is the signal.

        Raises:
            MCPError: the server answered with an error, or with something that is not an
                answer, or the connection broke during the request; `CONNECTION_CLOSED` when
                the server cannot be reached or no longer knows the session (the hub's
                connection to it is then broken and opened anew).
        """
        http = self._http
        if http is None:
            raise closed()
        request_id = next(self._ids)
        message = request_message(request_id, method, params, on_progress is not None)
        if on_progress is not None:
            self._progress[request_id] = on_progress
        answered = unsent = False
        response: aiohttp.ClientResponse | None = None
        try:
            response = await self._post(http, message, headers)
            self.learn(response.headers)
            result = await self._answer_of(response, request_id, method, headers)
            answered = True
            return result
        except aiohttp.ClientConnectorError as exc:
            raise MCPError(CONNECTION_CLOSED, f"cannot reach the server: {exc}") from exc
        except CredentialError as exc:
            unsent = True  # no credential, so not sent (or refused): nothing to cancel
            raise exc.to_mcp() from exc
        except (aiohttp.ClientError, OSError) as exc:
            # The connection broke during this request; the next one finds out whether the server is gone.
            raise MCPError(INTERNAL_ERROR, f"the server's answer to {method} broke off: {exc}") from exc
        finally:
            self._progress.pop(request_id, None)
            if response is not None:
                self._finish(response, answered)
            if not answered and not modern and not unsent:
                await self._cancel(request_id, headers)

    async def _post(
        self, http: aiohttp.ClientSession, message: Mapping[str, Any], headers: Mapping[str, str]
    ) -> aiohttp.ClientResponse:
        """POST `message` with the mount's credential; a 401 is retried once with a fresh one, if it may help."""
        credential = await self._credential_headers()
        response = await http.post(self._url, data=_body(message), headers={**self._headers_for(headers), **credential})
        if (
            response.status == 401
            and self._credential is not None
            and await self._credential.rejected(credential, response.headers)
        ):
            response.close()
            fresh = {**self._headers_for(headers), **await self._credential_headers()}
            response = await http.post(self._url, data=_body(message), headers=fresh)
        return response

    async def _credential_headers(self) -> Mapping[str, str]:
        return {} if self._credential is None else await self._credential.headers("POST", self._url)

    def _finish(self, response: aiohttp.ClientResponse, answered: bool) -> None:
        """Give the response's connection back: at once if its body is read, else once the rest of it has
        arrived (bounded); an unanswered request's connection is dropped.

        The rest of an answered body is normally its end, already on its way: aiohttp gives the connection
        back to its pool by itself when a response left open reaches the end of its body, so nothing reads
        it here. A body not ended within `_DRAIN_SECONDS` (a server that streams on, or goes quiet) is
        closed, its connection dropped; meanwhile aiohttp holds at most its read buffer of it, and stops
        reading from the connection when that is full."""
        if not answered or self._tasks is None:
            response.close()
        elif response.content.at_eof():
            response.release()
        else:
            self._unfinished.add(response)
            asyncio.get_running_loop().call_later(_DRAIN_SECONDS, self._close_unfinished, response)

    def _close_unfinished(self, response: aiohttp.ClientResponse) -> None:
        """Close a response whose body has not ended (aiohttp closed it, connection kept, if it has)."""
        self._unfinished.discard(response)
        if not response.closed:
            response.close()

    async def progress(self, message: Mapping[str, Any]) -> bool:
        """Deliver `notifications/progress` for a request sent here; False if it is for no such request."""
        params = message.get("params")
        if not isinstance(params, Mapping):
            return False
        token = params.get("progressToken")
        callback = self._progress.get(token) if isinstance(token, str) else None
        if callback is None:
            return False
        await deliver_progress(callback, params)
        return True

    @asynccontextmanager
    async def merging(self, transport_read: ReadStream[Incoming]) -> AsyncIterator[_MergedReceive]:
        """Open the HTTP client; yield the one stream the session reads.

        That stream carries the transport's messages and those handed over here;
        progress on the transport's stream for a request sent here goes to its
        callback instead. It ends when the transport's does.
        """

        async def forward() -> None:
            async with self._inject:
                try:
                    async for message in transport_read:
                        if (
                            isinstance(message, SessionMessage)
                            and isinstance(message.message, JSONRPCNotification)
                            and message.message.method == "notifications/progress"
                            and await self.progress(message.message.model_dump(by_alias=True, mode="json"))
                        ):
                            continue
                        await self._inject.send((getattr(transport_read, "last_context", None), message))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass  # the session stopped reading (the connection is closing), or the transport did

        async with (
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(keepalive_timeout=_KEEPALIVE_SECONDS),
                headers=self._headers,
                timeout=_TIMEOUT,
                proxy=_env_proxy(self._url),
            ) as http,
            anyio.create_task_group() as tg,
        ):
            self._http, self._tasks = http, tg
            tg.start_soon(forward)
            try:
                yield _MergedReceive(self._merged)
            finally:
                self._http = self._tasks = None
                tg.cancel_scope.cancel()
                for response in self._unfinished:
                    response.close()
                self._unfinished.clear()

    # -- reading an answer ---------------------------------------------------------

    def _headers_for(self, headers: Mapping[str, str]) -> dict[str, str]:
        merged = {"accept": "application/json, text/event-stream", "content-type": "application/json", **headers}
        if self.session_id:
            merged["mcp-session-id"] = self.session_id
        return merged

    async def _answer_of(
        self, response: aiohttp.ClientResponse, request_id: str, method: str, headers: Mapping[str, str]
    ) -> dict[str, Any]:
        status = response.status
        content_type = response.headers.get("content-type", "").lower()
        if 200 <= status < 300 and content_type.startswith("text/event-stream"):
            cursor = _Cursor()
            message = await self._answer_on(response.content, request_id, cursor)
            if message is None:
                if not cursor.event_id:
                    raise MCPError(INTERNAL_ERROR, f"the server ended its response to {method} without an answer")
                message = await self._resume(request_id, method, headers, cursor)
            return _result_of(message)
        if status == 202:
            raise MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
        if content_type.startswith("application/json"):
            body = await response.read()
            try:
                message = _parse(body)
            except MCPError:
                if status < 300:
                    raise
            else:
                if "error" in message or status < 300:
                    return _result_of(message)
        if status == 404 and self.session_id is not None:
            raise MCPError(CONNECTION_CLOSED, "the server no longer knows this session (HTTP 404)")
        if 300 <= status < 400:
            location = response.headers.get("location", "")
            raise MCPError(INVALID_REQUEST, f"redirect to {location} not followed; use that URL as the endpoint")
        if status < 300:
            raise MCPError(INVALID_REQUEST, f"unexpected content type: {content_type or '(none)'}")
        raise HttpStatusError(status)

    async def _answer_on(
        self, content: aiohttp.StreamReader, request_id: str, cursor: _Cursor
    ) -> dict[str, Any] | None:
        """Read a request's SSE body until its answer, handing the other messages over (see `_other`).

        None if the body ends first, or breaks after an event with an id (the stream can be resumed then).
        """
        events = _SseEvents(cursor)
        try:
            async for chunk in content.iter_any():
                for data in events.feed(chunk):
                    message = _parse(data)
                    if message.get("id") == request_id and ("result" in message or "error" in message):
                        return message
                    await self._other(message)
        except (aiohttp.ClientError, OSError) as exc:
            if not cursor.event_id:
                raise
            logger.debug("the stream of %s broke after event %r: %s", request_id, cursor.event_id, exc)
        return None

    async def _resume(
        self, request_id: str, method: str, headers: Mapping[str, str], cursor: _Cursor
    ) -> dict[str, Any]:
        """Resume a request's stream that ended before its answer (GET with `Last-Event-ID`); its answer.

        Raises:
            MCPError: attempts in a row brought no new event, or the server refused the GET
                (`CONNECTION_CLOSED` if it no longer knows the session or cannot be reached).
        """
        failures = 0
        failure = ""
        code = INTERNAL_ERROR
        while failures < _RESUME_ATTEMPTS and cursor.event_id:
            await anyio.sleep(cursor.delay())
            http = self._http
            if http is None:
                raise closed()
            resumed_from = cursor.event_id
            try:
                resume_headers = {**self._resume_headers(headers, resumed_from), **await self._credential_headers()}
                response = await http.get(self._url, headers=resume_headers)
            except (aiohttp.ClientError, CredentialError) as exc:
                failures += 1
                failure = f"cannot reach the server: {exc}"
                code = CONNECTION_CLOSED if isinstance(exc, aiohttp.ClientConnectorError) else INTERNAL_ERROR
                continue
            answered = False
            try:
                status = response.status
                content_type = response.headers.get("content-type", "").lower()
                if status == 404 and self.session_id is not None:
                    raise MCPError(CONNECTION_CLOSED, "the server no longer knows this session (HTTP 404)")
                if not (200 <= status < 300 and content_type.startswith("text/event-stream")):
                    failures += 1
                    failure = f"HTTP {status} ({content_type or 'no content type'})"
                    code = INTERNAL_ERROR
                    if 400 <= status < 500:
                        break  # refused: asking again gets the same answer
                    continue
                message = await self._answer_on(response.content, request_id, cursor)
                if message is not None:
                    answered = True
                    return message
                failures = 0 if cursor.event_id != resumed_from else failures + 1
                failure, code = "the resumed stream ended without it", INTERNAL_ERROR
            finally:
                self._finish(response, answered)
        if not cursor.event_id:
            failure = "the resumed stream gave no event id to resume from"
        raise MCPError(code, f"the server ended its response to {method} without an answer; resuming failed: {failure}")

    def _resume_headers(self, headers: Mapping[str, str], event_id: str) -> dict[str, str]:
        """A resuming GET's headers: the request's protocol version, the session, `Last-Event-ID`."""
        merged = {key: value for key, value in headers.items() if key.lower() == "mcp-protocol-version"}
        merged.update({"accept": "text/event-stream", "last-event-id": event_id})
        if self.session_id:
            merged["mcp-session-id"] = self.session_id
        return merged

    async def _other(self, message: dict[str, Any]) -> None:
        """A message on a request's stream that is not its answer: progress here, the rest to the session."""
        if message.get("method") == "notifications/progress" and await self.progress(message):
            return
        try:
            parsed = jsonrpc_message_adapter.validate_python(message, by_name=False)
        except ValidationError as exc:
            logger.warning("a server sent a message that is not JSON-RPC: %s", exc)
            return
        try:
            await self._inject.send((contextvars.copy_context(), SessionMessage(parsed)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise closed() from None

    async def _cancel(self, request_id: str, headers: Mapping[str, str]) -> None:
        """Tell the server an abandoned request is cancelled (best effort, bounded, shielded)."""
        http = self._http
        if http is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SECONDS):
            try:
                notice = _body(cancel_notice(request_id))
                post_headers = {**self._headers_for(headers), **await self._credential_headers()}
                async with http.post(self._url, data=notice, headers=post_headers):
                    pass
            except (aiohttp.ClientError, CredentialError) as exc:
                logger.debug("cancellation of %s not delivered: %s", request_id, exc)


class _Cursor:
    """Where a request's SSE stream stands: the id of its last event (`Last-Event-ID`) and its `retry` delay."""

    __slots__ = ("event_id", "retry_ms")

    def __init__(self) -> None:
        self.event_id: str | None = None
        self.retry_ms: int | None = None

    def delay(self) -> float:
        """Seconds to wait before resuming: the stream's `retry`, bounded, else the SDK's default."""
        if self.retry_ms is None:
            return _RETRY_DEFAULT_SECONDS
        return min(self.retry_ms / 1000, _RETRY_MAX_SECONDS)


class _MergedReceive(ReadStreamBase):
    """The session's read stream: each message with the context of the task that received it (`last_context`)."""

    def __init__(self, inner: MemoryObjectReceiveStream[tuple[contextvars.Context | None, Incoming]]) -> None:
        self._inner = inner
        self._context: contextvars.Context | None = None

    @property
    def last_context(self) -> contextvars.Context | None:
        return self._context

    async def receive(self) -> Incoming:
        self._context, message = await self._inner.receive()
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()


class _SseEvents:
    """The data of each `message` event of an SSE body, from its chunks as they arrive (`feed`).

    A plain parser rather than an async generator: a request's reader stops at its answer, and an
    async generator left suspended there is closed by the event loop through a thread-safe wake-up
    and a task of its own, on every call.

    Lines end at LF (a CR before it is dropped); a line is joined from its
    chunks once, when its end arrives, so a long event costs time linear in its
    length. Comments, fields other than `event`, `data`, `id` and `retry`, and
    events with no data are skipped; an event cut off by the end of the body is
    discarded, as the SSE standard says (it is never dispatched). `cursor` follows
    the stream as the standard's EventSource does: each event dispatched (one
    without data too, a priming event) sets its last event id from the latest
    `id` field, and a `retry` field of digits sets the reconnection delay at once.
    """

    __slots__ = ("_cursor", "_data", "_event", "_event_id", "_parts")

    def __init__(self, cursor: _Cursor) -> None:
        self._cursor = cursor
        self._parts: list[bytes] = []
        self._event = b"message"
        self._data: list[bytes] = []
        self._event_id = cursor.event_id

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of the `message` events `chunk` completes, in order."""
        messages: list[bytes] = []
        parts = self._parts
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if parts:
                parts.append(chunk[start:end])
                line = b"".join(parts)
                parts = self._parts = []
            else:
                line = chunk[start:end]
            start = end + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                self._cursor.event_id = self._event_id
                if self._event == b"message" and (message := b"\n".join(self._data)):
                    messages.append(message)  # an event without data (a priming event, say) carries no message
                self._event, self._data = b"message", []
                continue
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                self._data.append(value)
            elif field == b"event":
                self._event = value
            elif field == b"id":
                if b"\0" not in value and b"\r" not in value:
                    self._event_id = value.decode("utf-8", "replace")
            elif field == b"retry" and value.isdigit():
                self._cursor.retry_ms = int(value) if len(value) <= 9 else 10**9  # past any bound, without a huge int
        if start < len(chunk):
            parts.append(chunk[start:])
        return messages


def _body(message: Mapping[str, Any]) -> aiohttp.BytesPayload:
    """A message as a request body.

    aiohttp warns about bodies over 1 MiB given as bytes, for fear a single
    write blocks the loop; a tool's arguments may well be that large, and the
    transport buffers the write, so the warning is not raised for them.
    """
    data = wire.dumps(message)
    if len(data) <= TOO_LARGE_BYTES_BODY:  # most bodies: not warned about, so no filter to set (and reset)
        return aiohttp.BytesPayload(data, content_type="application/json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        return aiohttp.BytesPayload(data, content_type="application/json")


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`), as httpx2 reads it.

    Read once per connection: aiohttp's own `trust_env` reads the environment,
    and a netrc file in a thread, on every request.
    """
    parts = urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _parse(data: str | bytes) -> dict[str, Any]:
    try:
        message = pydantic_core.from_json(data)
    except ValueError as exc:
        raise MCPError(PARSE_ERROR, f"the server's answer is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise MCPError(PARSE_ERROR, "the server's answer is not a JSON-RPC message")
    return message


def _result_of(message: Mapping[str, Any]) -> dict[str, Any]:
    """The result of a JSON-RPC response, or its error raised as `MCPError`."""
    error = message.get("error")
    if error is not None:
        try:
            data = ErrorData.model_validate(error)
        except ValidationError:
            raise MCPError(INTERNAL_ERROR, f"the server answered with a malformed error: {error!r}") from None
        raise MCPError.from_error_data(data)
    return raw_result(message.get("result"))
