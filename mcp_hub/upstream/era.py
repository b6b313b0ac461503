"""The era a client's request is sent to its server in, and the handshake-era session that carries it.

A mount whose `protocol` is "auto" connects in 2026-07-28 where the server
offers it: that connection (the supervisor's) carries the hub's own requests
(listings, the change stream, subscriptions, pings) and 2026-07-28 clients'
requests. A client's request goes in the era a direct client of its era would
reach the server in, so that the hub never makes the server pay more than that
client would directly:

- a 2026-07-28 client's, in 2026-07-28;
- a handshake-era client's, over streamable HTTP, in the era that measured
  cheaper for that server: as the shared handshake-era session beside the
  2026-07-28 connection opens, the hub sends the same side-effect-free probe
  in each era, interleaved (`tools/call` of a tool no server has,
  `PROBE_TOOL`, with an argument: answered "unknown tool", or by a server
  that answers any name, with a line of text), and compares the fastest of
  the round trips. In 2026-07-28, a server built on the SDK's low-level
  `Server` that does not set `get_tool_input_schema` runs its whole
  `tools/list` handler on every `tools/call` with arguments, to check the
  `Mcp-Param-*` headers, so a call costs it more the more tools it lists:
  there the handshake era wins, and the requests go on that shared session
  (or on the client's own, `isolation = "per-client"`). SDK servers whose
  schemas are looked up directly (`MCPServer`) spend less on a 2026-07-28
  request than on a handshake-era session's: there 2026-07-28 wins, the
  session is closed, and the requests are bridged. A probe that fails
  to answer in time, or a server without tools, keeps the caller's own era,
  as does `era_probe = false` (no probe sent);
- bridged, in the one era the connection speaks, where the server offers one:
  a 2026-07-28 client's request to a server without 2026-07-28, a handshake-era
  client's to one that refused the handshake, and every request over stdio,
  where a server is one process with one session (a second era would be a
  second process) and there are no HTTP headers to check, so 2026-07-28 costs
  it no more.

A pinned `protocol` ("legacy" or "2026-07-28") is the era of every request.
`sessions()` says, for the status reports, which session serves whom, in which
era, and why.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from mcp.shared.exceptions import MCPError

from mcp_hub.config import ServerConfig
from mcp_hub.upstream.channel import HttpStatusError
from mcp_hub.upstream.connection import Connection, described

logger = logging.getLogger("mcp_hub.upstream")

MODERN = "2026-07-28"
_CLOSE_SECONDS = 2.0
"""How long closing the handshake-era session (its DELETE) may take."""

_COST = (
    "the caller's own era, which the server offers: in 2026-07-28 an SDK low-level server without "
    "get_tool_input_schema lists all its tools on every tools/call"
)
PROBE_TOOL = "mcp-hub-era-probe"
"""The tool the era probe calls: a name no server is expected to have."""
PROBE_SAMPLES = 12
"""Probes in each era (interleaved, after one unmeasured each); their fastest are compared: a server's fixed cost
is in every round trip, while the machine's other work only ever adds to some."""
_PROBE_SECONDS = 5.0
"""How long the probes may take in all (bounded by `connect_timeout` too); past it, the caller's own era."""


class ProbeFailed(Exception):
    """A probe had no answer from the server (a timeout, an HTTP error, a closed connection)."""


AS_CHEAP = 1.1
"""2026-07-28 counts as cheap as the handshake era up to this ratio of their fastest probes: within it the two are
one cost as far as timings on a busy machine can tell, and bridging keeps one connection to the server."""


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def _round_trip(connection: Connection, timeout: float) -> float:
    """One probe's round trip (s). An error answer ("unknown tool") is the expected one."""
    started = time.perf_counter()
    try:
        with anyio.fail_after(timeout):
            await connection.request("tools/call", {"name": PROBE_TOOL, "arguments": {"probe": "mcp-hub"}})
    except HttpStatusError as exc:
        raise ProbeFailed(described(exc)) from exc
    except MCPError as exc:  # the server's own answer (an unknown tool); anything else ends the probe
        logger.debug("era probe answered: %s", exc)
    except Exception as exc:
        raise ProbeFailed(described(exc)) from exc
    return time.perf_counter() - started


async def measure(modern: Connection, handshake: Connection, timeout: float) -> tuple[float, float] | None:
    """The fastest round trip (s) of the probe in 2026-07-28 and in the handshake era, sent alternately;
    None if the server lists no tools or the probes could not be had within `timeout`."""
    if modern.session.server_capabilities is None or modern.session.server_capabilities.tools is None:
        return None
    spent: dict[bool, list[float]] = {True: [], False: []}
    with anyio.move_on_after(timeout):
        try:
            for sample in range(PROBE_SAMPLES + 1):
                for connection in (modern, handshake) if sample % 2 else (handshake, modern):
                    seconds = await _round_trip(connection, timeout)
                    if sample:  # the first of each warms the path
                        spent[connection is modern].append(seconds)
        except ProbeFailed as exc:
            logger.info("era probe: %s", described(exc))
            return None
        return min(spent[True]), min(spent[False])
    return None


def own_era_beside(config: ServerConfig, transport: str) -> bool:
    """Whether a handshake-era client's request to a server connected in 2026-07-28 goes in the handshake era,
    on a session of its own era (the rule above), rather than bridged on the 2026-07-28 connection."""
    return config.protocol == "auto" and transport in ("streamable-http", "auto")


@dataclass(eq=False)
class _Held:
    connection: Connection | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """The whole session: its deadline bounds the opening, then the closing."""
    serving: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """While it serves: cancelled to close it as a client closes a session (its DELETE sent)."""


class HandshakeSession:
    """The shared handshake-era session of a mount connected in 2026-07-28, for its handshake-era clients.

    Opened as the 2026-07-28 connection comes up, in its own task of the supervisor's
    task group (the SDK's client is entered and exited in one task); reopened at
    the next request after it broke; closed with the 2026-07-28 connection
    (`reset`). A server that refuses the handshake is not asked again until the
    mount reconnects: its handshake-era clients are bridged meanwhile.
    """

    def __init__(
        self,
        config: ServerConfig,
        task_group: anyio.abc.TaskGroup,
        open_session: Callable[[Callable[[str], None]], AbstractAsyncContextManager[Connection]],
        on_open: Callable[[Connection], Any],
        on_lost: Callable[[str], None],
        main: Callable[[], Connection | None] = lambda: None,
    ) -> None:
        """`open_session(on_broken)`: the session's connection, negotiated in the handshake era (connect.py's
        `mode="legacy"`). `on_open`: awaited with each new session before it serves (a log level to set).
        `on_lost`: told when an open session breaks or closes, which says the server went away or restarted:
        the mount reconnects (and lists the server again), and this session closes with it. `main`: the mount's
        2026-07-28 connection, the probe's other era (none: no probe, the caller's own era)."""
        self._config = config
        self._main = main
        self._task_group = task_group
        self._open = open_session
        self._on_open = on_open
        self._on_lost = on_lost
        self._held: _Held | None = None
        self.refused: str | None = None
        """Why the server's handshake-era clients are bridged: its handshake-era session could not be had, or
        2026-07-28 measured cheaper (the figures); None: they are not."""
        self.measured: str | None = None
        """The probe's figures, when it kept the handshake era (None: not measured)."""

    @property
    def connection(self) -> Connection | None:
        """The session, while it is open."""
        return self._held.connection if self._held is not None else None

    def open(self) -> _Held | None:
        """Start opening the session, unless it is open or opening, or the server refused it."""
        if self.refused is not None:
            return None
        held = self._held
        if held is None:
            held = self._held = _Held()
            self._task_group.start_soon(self._hold, held)
        return held

    async def acquire(self) -> Connection | None:
        """The session, opened if need be (up to the mount's `connect_timeout`); None: bridge the request."""
        held = self.open()
        if held is None:
            return None
        if not held.ready.is_set():
            with anyio.move_on_after(self._config.connect_timeout):
                await held.ready.wait()
        connection = held.connection
        if connection is None or connection.closed.is_set():
            return None
        return connection

    def reset(self) -> None:
        """The 2026-07-28 connection ended, or the mount stops: close the session (within `_CLOSE_SECONDS`), and
        ask the server afresh next time."""
        held, self._held, self.refused, self.measured = self._held, None, None, None
        if held is None:
            return
        if held.connection is None:
            held.scope.cancel()  # still opening
        else:
            held.scope.deadline = anyio.current_time() + _CLOSE_SECONDS
            held.serving.cancel()

    async def _hold(self, held: _Held) -> None:
        """Open the session and keep it until it breaks or `reset` closes it. Shielded from the cancellation of
        the mount's task group, so that a hub stopping closes it as a client closes a session (the server's
        session ends with it, rather than lingering until it idles out): the mount calls `reset` first."""

        def broken(reason: str) -> None:
            held.scope.cancel()
            self._on_lost(f"its handshake-era session: {reason}")

        held.scope.deadline = anyio.current_time() + self._config.connect_timeout
        try:
            with anyio.CancelScope(shield=True), held.scope:
                async with self._open(broken) as connection:
                    if connection.modern:  # the handshake refused: `connect` fell back to 2026-07-28
                        refused = self.refused = "the server refused the handshake era"
                        logger.info("server %r: %s; its handshake-era clients are bridged", self._config.name, refused)
                        return
                    await self._on_open(connection)
                    held.scope.deadline = anyio.current_time() + self._config.connect_timeout
                    if await self._bridge_cheaper(connection):
                        return
                    held.scope.deadline = math.inf
                    held.connection = connection
                    held.ready.set()
                    version = connection.session.protocol_version
                    logger.info("server %r: handshake-era session up (%s)", self._config.name, version)
                    with held.serving:
                        await connection.closed.wait()
                        self._on_lost("its handshake-era session closed")
            if held.scope.cancelled_caught and held.connection is None and self._held is held:
                self.refused = f"no answer to initialize within {self._config.connect_timeout:g}s"
        except Exception as exc:  # boundary: a session that cannot be had bridges its clients' requests
            if held.connection is None:
                self.refused = described(exc)
            logger.warning("server %r: its handshake-era session: %s", self._config.name, described(exc))
        finally:
            held.connection = None
            held.ready.set()
            if self._held is held:
                self._held = None

    async def _bridge_cheaper(self, connection: Connection) -> bool:
        """Probe the server in both eras (module docstring); True: 2026-07-28 is as cheap, so its handshake-era
        clients are bridged (this session then closes). Measured once per connection of the mount."""
        main = self._main()
        if not self._config.era_probe or main is None or not main.modern or self.measured is not None:
            return False
        budget = min(_PROBE_SECONDS, self._config.connect_timeout / 2)
        fastest = await measure(main, connection, budget)
        if fastest is None:
            return False
        modern, handshake = fastest
        figures = (
            f"a probe tools/call took {_ms(modern)} in 2026-07-28 and {_ms(handshake)} in the handshake era "
            f"(fastest of {PROBE_SAMPLES})"
        )
        if modern <= handshake * AS_CHEAP:
            self.refused = f"2026-07-28 measured as cheap: {figures}"
            logger.info("server %r: %s; its handshake-era clients are bridged", self._config.name, figures)
            return True
        self.measured = figures
        logger.info("server %r: %s; its handshake-era clients keep their era", self._config.name, figures)
        return False


def sessions(
    config: ServerConfig, transport: str, protocol: str | None, beside: HandshakeSession | None
) -> list[dict[str, Any]]:
    """Each session of a mount: whom it serves, its protocol version (None: not open now) and why."""
    if protocol is None:
        return []
    isolated = config.isolation == "per-client"
    shared = "clients without a session of their own and the hub's own requests" if isolated else "every client"
    if config.protocol != "auto":
        rows = [{"serves": shared, "protocol": protocol, "why": f'protocol = "{config.protocol}" in its configuration'}]
    elif protocol != MODERN:
        why = "the server offers only the handshake era: 2026-07-28 clients are bridged"
        rows = [{"serves": shared, "protocol": protocol, "why": why}]
    elif not own_era_beside(config, transport):
        why = (
            f"the server's one session over {transport} (a second era would be a second process, and 2026-07-28 "
            "costs it no more there): handshake-era clients are bridged"
        )
        rows = [{"serves": shared, "protocol": protocol, "why": why}]
    else:
        modern_serves = "2026-07-28 clients and the hub's own requests"
        handshake_serves = "handshake-era clients"
        if isolated:
            modern_serves = "anonymous 2026-07-28 clients and the hub's own requests"
            handshake_serves = "handshake-era clients without a session of their own"
        rows = [{"serves": modern_serves, "protocol": protocol, "why": "the callers' own era"}]
        if beside is not None and beside.refused is not None:
            why = f"bridged on the 2026-07-28 session: {beside.refused}"
            rows.append({"serves": handshake_serves, "protocol": protocol, "why": why})
        else:
            connection = beside.connection if beside is not None else None
            version = connection.session.protocol_version if connection is not None else None
            why = _COST + ("" if version else " (not open now: opened again at the next handshake-era request)")
            if beside is not None and beside.measured is not None:
                why += f"; measured: {beside.measured}"
            rows.append({"serves": handshake_serves, "protocol": version, "why": why})
    if isolated:
        rows.append(
            {
                "serves": "each client's own session (isolation = per-client)",
                "protocol": None,
                "why": "in its client's era where the server offers it, by the same rule",
            }
        )
    return rows
