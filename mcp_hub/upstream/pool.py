"""Per-client sessions: one server session (one child process, for stdio) per client.

With `isolation = "per-client"`, a stateful server never sees two clients'
state in one session, and every question it asks (sampling, elicitation,
roots) has one client it can be for. A client is what `Origin.client_key`
names: a handshake-era client's connection, or the principal an authenticated
2026-07-28 caller's requests share (anonymous ones use the shared session).
Each session speaks its client's era where the server offers it (see era.py). A
client's session opens on its first request, closes when the client
disconnects (a principal never does) or after `idle_timeout` seconds without
requests, and at most `max_sessions` are open per mount: beyond that a
request answers at once with an error that says so.

Each session lives in its own task in the pool's task group, since the SDK's
client must be entered and exited in one task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import anyio
import anyio.abc
from mcp.client.session import IncomingMessage

from mcp_hub.config import ServerConfig
from mcp_hub.errors import UpstreamError, UpstreamUnavailable
from mcp_hub.upstream.connection import Connection, TransportChoice, connect, described
from mcp_hub.upstream.relay import InFlight, Origin

logger = logging.getLogger("mcp_hub.upstream")


@dataclass(eq=False)
class _Seat:
    """One client's session, while it lasts."""

    connection: Connection | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    error: str | None = None
    busy: int = 0
    last_used: float = 0.0
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class SessionPool:
    """The per-client sessions of one mount."""

    def __init__(
        self,
        config: ServerConfig,
        task_group: anyio.abc.TaskGroup,
        transport: TransportChoice | None = None,
        mode_for: Callable[[Origin], str | None] | None = None,
    ) -> None:
        """`mode_for`: the mode a client's session is negotiated in (None: the mount's `protocol`; see era.py)."""
        self._config = config
        self._transport = transport
        self._mode_for = mode_for
        self._task_group = task_group
        self._seats: dict[Hashable, _Seat] = {}

    def __len__(self) -> int:
        return len(self._seats)

    async def acquire(self, origin: Origin) -> tuple[Connection, _Seat]:
        """The origin's session, opened on first use."""
        key = origin.client_key
        seat = self._seats.get(key)
        if seat is None or (seat.ready.is_set() and seat.connection is None):
            if len(self._seats) >= self._config.max_sessions:
                raise UpstreamError(
                    self._config.name,
                    f"has {self._config.max_sessions} client sessions open, its max_sessions; "
                    "try again when one closes",
                )
            seat = self._seats[key] = _Seat()
            origin.on_close(lambda: self.release(key))
            self._task_group.start_soon(self._hold, key, seat, origin)
        seat.busy += 1
        try:
            with anyio.fail_after(self._config.connect_timeout):
                await seat.ready.wait()
        except TimeoutError:
            seat.busy -= 1
            raise UpstreamUnavailable(self._config.name, "timed out opening a session for this client") from None
        if seat.connection is None:
            seat.busy -= 1
            raise UpstreamUnavailable(self._config.name, f"could not open a session for this client: {seat.error}")
        return seat.connection, seat

    async def roots_changed(self, key: Hashable) -> None:
        """Tell the client's own session that the client's roots changed."""
        seat = self._seats.get(key)
        if seat is not None and seat.connection is not None:
            await seat.connection.roots_changed()

    def done(self, seat: _Seat) -> None:
        seat.busy -= 1
        seat.last_used = anyio.current_time()

    def release(self, key: Hashable) -> None:
        """The client went away: close its session."""
        seat = self._seats.get(key)
        if seat is not None:
            self._forget(key, seat)  # at once: closing the session (and reaping its process) takes a while
            seat.scope.cancel()

    async def _hold(self, key: Hashable, seat: _Seat, origin: Origin) -> None:
        """Open the client's session and keep it until the client leaves or it idles out."""

        def broken(reason: str) -> None:
            seat.error = reason
            seat.scope.cancel()

        async def ignore(message: IncomingMessage) -> None:
            """List changes come from the mount's shared session; nothing here to act on."""

        try:
            with seat.scope:
                async with connect(
                    self._config,
                    inflight=InFlight(self._config.name, owner=origin.for_client(), configured=self._config.roots),
                    message_handler=ignore,
                    on_broken=broken,
                    choice=self._transport,
                    extensions=(origin.capabilities or {}).get("extensions", {}),
                    for_client=True,
                    mode=self._mode_for(origin) if self._mode_for is not None else None,
                ) as connection:
                    if connection.modern:
                        await connection.learn_tools()  # what calls over HTTP need to name their arguments
                    seat.connection = connection
                    seat.last_used = anyio.current_time()
                    seat.ready.set()
                    await self._until_idle(seat, connection)
                    self._forget(key, seat)  # before the (slower) close, so the next request opens anew
        except Exception as exc:  # boundary: a session that fails to open or breaks is reported to its client
            seat.error = described(exc)
            logger.warning("server %r: a client session failed: %s", self._config.name, seat.error)
        finally:
            self._forget(key, seat)
            seat.ready.set()

    def _forget(self, key: Hashable, seat: _Seat) -> None:
        seat.connection = None
        if self._seats.get(key) is seat:
            del self._seats[key]

    async def _until_idle(self, seat: _Seat, connection: Connection) -> None:
        idle = self._config.idle_timeout
        while not connection.closed.is_set():
            with anyio.move_on_after(max(seat.last_used + idle - anyio.current_time(), 0.01)):
                await connection.closed.wait()
                return
            if seat.busy == 0 and anyio.current_time() - seat.last_used >= idle:
                logger.info("server %r: closing a client session idle for %gs", self._config.name, idle)
                return
