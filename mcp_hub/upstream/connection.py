"""One live session with a mounted server, and the one way requests are sent on it.

`connect()` opens the transport, runs the SDK client's negotiation (either
protocol era) and yields a `Connection`. `Connection.send()` sends a request
with the mount's deadline and translates library and transport failures into
`UpstreamError`s: this is the I/O edge. Errors the server answers itself
(`MCPError`) pass through unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from pydantic import TypeAdapter

from mcp_hub import __version__
from mcp_hub.config import ServerConfig
from mcp_hub.errors import UpstreamTimeout, UpstreamUnavailable
from mcp_hub.upstream.relay import InFlight, Origin, drive_input_required
from mcp_hub.upstream.transports import WatchedTransport, open_transport

_RAW_RESULT: TypeAdapter[Any] = TypeAdapter(dict[str, Any])
"""Results stay the server's own JSON: the hub forwards, it does not re-model."""

_SAMPLING = types.SamplingCapability(context=types.SamplingContextCapability(), tools=types.SamplingToolsCapability())


class Connection:
    """A negotiated session with one server."""

    def __init__(
        self,
        config: ServerConfig,
        session: ClientSession,
        inflight: InFlight,
        transport: WatchedTransport,
        on_broken: Callable[[str], None],
    ) -> None:
        self.config = config
        self.session = session
        self.inflight = inflight
        self.closed = transport.closed
        """Set when the transport's read side ends (a child exited, a stream broke)."""
        self._on_broken = on_broken

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        on_progress: ProgressFnT | None = None,
        origin: Origin | None = None,
    ) -> dict[str, Any]:
        """Send one request on behalf of `origin` and return the server's raw result.

        A 2026-07-28 server's `input_required` result reaches a 2026-07-28 client as
        is (the client answers and calls again); for a handshake-era client the hub
        asks the client and calls again itself.
        """

        async def send(params: Mapping[str, Any] | None) -> dict[str, Any]:
            return await self.send(method, params, on_progress=on_progress, origin=origin)

        result = await send(params)
        if result.get("resultType") == "input_required" and origin is not None and not origin.modern:
            result = await drive_input_required(send, params or {}, result, origin)
        return result

    async def send(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        on_progress: ProgressFnT | None = None,
        origin: Origin | None = None,
    ) -> dict[str, Any]:
        """One request, one deadline.

        Raises:
            UpstreamUnavailable: the connection broke.
            UpstreamTimeout: no answer within the mount's `timeout`.
            MCPError: the server answered with a JSON-RPC error (passed through).
        """
        name = self.config.name
        request = types.Request[dict[str, Any], str](method=method, params=dict(params or {}))
        timeout = self.config.timeout
        try:
            with anyio.fail_after(timeout) as scope, self.inflight.track(origin, scope):
                result: dict[str, Any] = await self.session.send_request(
                    request, _RAW_RESULT, progress_callback=on_progress
                )
                return result
        except TimeoutError:
            raise UpstreamTimeout(name, f"did not answer {method} within {timeout:g}s") from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            self._on_broken(f"connection closed during {method}")
            raise UpstreamUnavailable(name, f"closed the connection during {method}") from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._on_broken(f"{type(exc).__name__}: {exc}")
            raise UpstreamUnavailable(name, f"connection failed during {method}: {exc}") from exc


@asynccontextmanager
async def connect(
    config: ServerConfig,
    *,
    inflight: InFlight,
    message_handler: MessageHandlerFnT,
    on_broken: Callable[[str], None],
) -> AsyncIterator[Connection]:
    """Open and negotiate a session. The caller bounds the time this takes.

    The server's log messages go to the client they are for (see `InFlight.log`);
    every other notification goes to `message_handler`.
    """

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.LoggingMessageNotification):
            await inflight.log(_log_params(config, message.params))
        else:
            await message_handler(message)

    transport = open_transport(config)
    client = Client(
        transport,
        mode=config.protocol,
        client_info=types.Implementation(name="mcp-hub", version=__version__),
        message_handler=on_message,
        cache=None,
        # The hub asks its clients on the server's behalf (see relay.py), so it
        # offers what a client may offer; a client that cannot gets an error.
        sampling_callback=inflight.sampling,
        sampling_capabilities=_SAMPLING,
        elicitation_callback=inflight.elicitation,
        list_roots_callback=inflight.roots,
    )
    async with client:
        if config.protocol not in ("auto", "legacy"):
            # A pinned version skips the probe, and with it the server's capabilities: ask.
            discovered = await client.session.send_discover(config.protocol)
            client.session.adopt(types.DiscoverResult.model_validate(discovered))
        yield Connection(config, client.session, inflight, transport, on_broken)


def _log_params(config: ServerConfig, params: types.LoggingMessageNotificationParams) -> dict[str, Any]:
    """The message as sent, its logger named after the mount (unless the mount is unprefixed)."""
    raw = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    if config.prefix:
        raw["logger"] = f"{config.name}.{raw['logger']}" if raw.get("logger") else config.name
    return raw
