"""Open the transport a mount's config asks for, watched for its end.

One module per kind: stdio.py (a child process), http.py (streamable HTTP) and
sse.py (legacy SSE). `open_transport` picks one and wraps it so the supervisor
learns the moment the connection's read side ends (a child exited, a stream
broke); the wrapper passes on the kind's `channel` (see channel.py), through
which the connection sends the hub's requests past the SDK session, and, for
streamable HTTP, the status a server refused every POST with (how an "auto"
mount learns it must try legacy SSE; see connection.py).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import anyio
from mcp.client import Transport
from mcp.shared.message import SessionMessage

from mcp_hub.config import ServerConfig
from mcp_hub.credentials import Credential
from mcp_hub.sdk import client as sdk_client
from mcp_hub.sdk.client import ReadStream, TransportStreams
from mcp_hub.streams import ReadStreamBase
from mcp_hub.upstream.channel import Channel
from mcp_hub.upstream.sse import sse_transport
from mcp_hub.upstream.stderr import StderrTail
from mcp_hub.upstream.stdio import StdioTransport


def open_transport(
    config: ServerConfig,
    kind: str | None = None,
    stderr: StderrTail | None = None,
    credential: Credential | None = None,
) -> WatchedTransport:
    """A fresh, not yet entered transport for one connection attempt.

    `kind` overrides the config's (a URL mount with no `transport` is opened as
    streamable HTTP first, and as legacy SSE if that is refused; see connection.py).
    `stderr` keeps the last lines a stdio child writes to its stderr (None: they
    only go on to the hub's stderr). `credential` is what a remote mount presents
    to its server besides its headers (see mcp_hub/credentials/).
    """
    sdk_client.install()  # once the hub installs the SDK's patches at start-up, this changes nothing
    kind = kind or config.kind
    if kind == "stdio":
        return WatchedTransport(StdioTransport(config, stderr))
    if kind == "sse":
        return WatchedTransport(sse_transport(config, credential))
    assert config.url is not None
    # aiohttp is imported only once a streamable HTTP server is mounted (about 0.2 s and 10 MiB).
    from mcp_hub.upstream.http import StreamableHttpTransport

    return WatchedTransport(StreamableHttpTransport(config.url, dict(config.headers), credential))


class WatchedTransport:
    """A transport whose `closed` event fires when its read side ends."""

    def __init__(self, inner: Transport | Any) -> None:
        self._inner = inner
        self.closed = anyio.Event()

    @property
    def channel(self) -> Channel | None:
        """Where the hub's requests go past the SDK session, once entered (streamable HTTP and stdio)."""
        return getattr(self._inner, "channel", None)

    @property
    def refused(self) -> int | None:
        """The HTTP 4xx status a streamable HTTP server answered every POST with (None: it accepted one,
        none was sent, or the transport is not streamable HTTP)."""
        return getattr(self._inner, "refused", None)

    async def listening(self) -> None:
        """Return once the server can send the session what is not about a request (see
        `StreamableHttpTransport.listening`); at once for other transports."""
        listening = getattr(self._inner, "listening", None)
        if listening is not None:
            await listening()

    async def __aenter__(self) -> TransportStreams:
        read_stream, write_stream = await self._inner.__aenter__()
        return _WatchedReadStream(read_stream, self.closed), write_stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self.closed.set()
        return await self._inner.__aexit__(exc_type, exc, tb)


class _WatchedReadStream(ReadStreamBase):
    """Delegates to the transport's read stream; sets `closed` when it ends."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], closed: anyio.Event) -> None:
        self._inner = inner
        self._closed = closed

    @property
    def last_context(self) -> Any:
        # The SDK's own optional attribute (its read streams that carry a sender's context have it).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except BaseException:
            self._closed.set()
            raise

    async def aclose(self) -> None:
        self._closed.set()
        await self._inner.aclose()
