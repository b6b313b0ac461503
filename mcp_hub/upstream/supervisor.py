"""One mounted server: its connection, its health and its restarts.

`Upstream.run()` is the supervisor loop, one task per mount in the hub's task
group: connect (bounded by `connect_timeout`), tell the hub what the server
offers, then watch the connection — the transport's read side ending, a failed
health ping, or a request that found the connection broken — and reconnect. A
connection that stayed up `HEALTHY_RUN` seconds or more was a healthy run: the
server is restarted (reconnected) at once, and the backoff starts over. One that
never came up, or ended sooner (a server that crashes as it starts), is retried
after the backoff, which doubles with each such failure in a row (a stdio command
not found: logged once, and looked for again every `_BACKOFF_MAX` seconds). A slow
or failing mount never blocks another: each has its own loop. A request to a mount
making a connection attempt, its first or a restart, waits for it (up to the
mount's `timeout`); one to a mount that is down (backing off), or whose attempt
failed, fails at once with an error that names it.

A server is taken as it is. A list method it does not implement (-32601, or a
capability it did not declare) is an empty list of that kind; an optional
request the hub makes on its own (ping, logging/setLevel, resources/subscribe,
subscriptions/listen, and completion/complete, which the hub answers with no
completions) that the server answers with an error leaves that feature out for
the server: `refused` records what it refused and why, logged once, and the
connection stays up.

`Upstream.request()` is the one way the hub talks to a mounted server: on the
shared session (for a handshake-era client of a server connected in 2026-07-28,
the shared session of its own era beside it: see era.py), or on the calling
client's own session when the mount is
`isolation = "per-client"` and the client has one to keep (a handshake-era
client's connection, an authenticated 2026-07-28 caller's principal; see
pool.py). A client's request to a `mode = "token_exchange"` mount goes only to
its own session, with its caller's token to exchange (`CALLER_TOKEN`), and fails
at once for a caller who has none (so does one to a `mode = "enterprise"` mount that
takes each caller's identity assertion, with the caller's principal, whose token
it keeps: `CALLER_PRINCIPAL`); one to a `mode = "user"` mount, with its
person's own token (`CALLER_PRINCIPAL`), or, when they have none, is answered
with the URL-mode elicitation that sends them to sign in (credentials/user.py).
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any
from weakref import WeakValueDictionary

import anyio
import mcp_types as types
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    SubscriptionLost,
    ToolsListChanged,
    listen,
)
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_hub.config import ServerConfig
from mcp_hub.credentials import CredentialError
from mcp_hub.credentials.token_exchange import CALLER_TOKEN, CallerToken
from mcp_hub.credentials.user import CALLER_PRINCIPAL, LOGIN_SECONDS, LoginRequired, UserLogin, client_of
from mcp_hub.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable
from mcp_hub.upstream.command import CommandNotFound
from mcp_hub.upstream.connection import Connection, TransportChoice, connect
from mcp_hub.upstream.era import HandshakeSession, own_era_beside, sessions
from mcp_hub.upstream.pool import SessionPool
from mcp_hub.upstream.relay import (
    ClientCannotAnswer,
    HearsElicitationComplete,
    InFlight,
    Origin,
    SoleClient,
    takes_url_elicitation,
)
from mcp_hub.upstream.sandbox import SandboxUnavailable
from mcp_hub.upstream.stderr import StderrTail

logger = logging.getLogger("mcp_hub.upstream")

_MAX_LIST_PAGES = 1000
_HEALTH_INTERVAL = 30.0
_BACKOFF_FIRST = 0.5
_BACKOFF_MAX = 30.0
HEALTHY_RUN = 10.0
"""Seconds a connection must have stayed up (from coming up to its loss being noticed) to count as a healthy
run: when it ends, the server is restarted at once and the backoff starts over from `_BACKOFF_FIRST`. A shorter
one, or an attempt that never came up, waits the backoff first (as supervisord's `startsecs`)."""
_REAPED_WITHIN = 1.0
"""How long to wait, once a stdio server's connection has closed, for its exit status (to say how it ended)."""
_SAY_AGAIN = 3600.0
"""A stdio server's command still not found is logged again after this many seconds (else once)."""

LIST_METHODS: Mapping[str, tuple[str, str]] = {
    "tools": ("tools/list", "tools"),
    "prompts": ("prompts/list", "prompts"),
    "resources": ("resources/list", "resources"),
    "resource_templates": ("resources/templates/list", "resourceTemplates"),
}
"""Catalog kind -> (list method, result key)."""

_NO_COMPLETIONS: Mapping[str, Any] = {"completion": {"values": [], "total": 0, "hasMore": False}}
"""What a client hears when the server it asks for completions has none to offer."""

_LISTEN_EVENTS: Mapping[type[Any], frozenset[str]] = {
    ToolsListChanged: frozenset({"tools"}),
    PromptsListChanged: frozenset({"prompts"}),
    ResourcesListChanged: frozenset({"resources", "resource_templates"}),
}

_CHANGED_NOTIFICATIONS: Mapping[type[Any], frozenset[str]] = {
    types.ToolListChangedNotification: frozenset({"tools"}),
    types.PromptListChangedNotification: frozenset({"prompts"}),
    types.ResourceListChangedNotification: frozenset({"resources", "resource_templates"}),
}

ListingHook = Callable[["Upstream", frozenset[str]], Awaitable[None]]
"""Called (in the supervisor task) when the listed `kinds` of a mount may have changed."""

LogHook = Callable[[Mapping[str, Any]], Awaitable[None]]
"""Delivers a server's log message that no single client's request explains (to every client)."""

LimitHook = Callable[["Upstream", str], None]
"""Called when a stdio server's sandbox killed it for a limit, with how it ended ("the server was killed for its
memory limit (1 GiB)")."""

UpdatedHook = Callable[["Upstream", str], Awaitable[None]]
"""Called when the server says a resource it was asked about (`subscribe`) changed; the server's URI."""


class State(enum.StrEnum):
    STARTING = "starting"
    UP = "up"
    DOWN = "down"
    DISABLED = "disabled"
    STOPPED = "stopped"


class _ConnectionLost(Exception):
    """Internal: the current connection is unusable; reconnect."""


class Upstream:
    """A mounted MCP server seen from the hub."""

    def __init__(
        self,
        config: ServerConfig,
        on_listing: ListingHook,
        on_log: LogHook | None = None,
        on_updated: UpdatedHook | None = None,
        sole_client: SoleClient | None = None,
        on_limit: LimitHook | None = None,
    ) -> None:
        """`sole_client`: the one client of a hub serving stdio, asked the shared session's `roots/list`
        when no client's call explains it (see relay.py)."""
        self.config = config
        self.name = config.name
        self.transport = TransportChoice(config)
        """The transport the mount is reached by ("auto" until its first connection has found out)."""
        self._on_listing = on_listing
        self._on_log = on_log
        self._on_updated = on_updated
        self._sole_client = sole_client
        self._on_limit = on_limit
        self.limit_hit: str | None = None
        """How the server's sandbox last ended it for a limit, and when (kept across restarts)."""
        self._log_level: str | None = None
        self._subscribed: set[str] = set()
        """The server's URIs of the resources some client wants to hear about."""
        self._listen_scope: anyio.CancelScope | None = None
        self._wake_listen = anyio.Event()
        self._known_capabilities: types.ServerCapabilities | None = None
        self.state = State.STARTING if config.enabled else State.DISABLED
        self.last_error: str | None = None
        self.refused: dict[str, str] = {}
        """What the server answered with an error that the hub goes on without: method -> reason."""
        self.stderr = StderrTail()
        """The last lines a stdio server wrote to stderr (its shared session's child; see stderr.py)."""
        self._attempt_started: float | None = None
        self._awaiting = "initialize"
        """What the connection attempt under way waits for: the handshake, then each first listing."""
        self.restarts = 0
        """Connection attempts after the first, counted as each begins (a restart after a healthy run, or another
        try after a failed one), since the hub started."""
        self.failures = 0
        """Connection attempts in a row that failed, or came up and ended before a healthy run; 0 once the mount is
        up."""
        self._retry_at: float | None = None
        """While backing off: when (`time.monotonic()`) the next attempt begins."""
        self.up_since: float | None = None
        """When (`time.monotonic()`) the current connection came up; None while there is none."""
        self._moved = anyio.Event()
        """Set, and replaced, each time the mount comes up or goes down: wakes the requests waiting for a restart."""
        self.settled = anyio.Event()
        """Set once the first connection attempt has ended, either way."""
        self.wanted = anyio.Event()
        """Set when a request waits for the first connection (a mount held back at start-up starts at once)."""
        self.list_ttl: dict[str, int] = {}
        """How long (ms) the server said each kind's last listing stays fresh (`ttlMs`, 2026-07-28 servers;
        0: it said nothing, or not to keep it)."""
        self._connection: Connection | None = None
        self._pool: SessionPool | None = None
        self._beside: HandshakeSession | None = None
        """An "auto" mount: the handshake-era session for its handshake-era clients, beside a 2026-07-28
        connection (see era.py)."""
        self._exchanges = config.auth.per_caller and config.auth.mode in ("token_exchange", "enterprise")
        """Each client's request carries its caller's token, exchanged (its clients' sessions only): by token
        exchange, or for an ID-JAG and that for the person's token (enterprise-managed authorization)."""
        self._callers: WeakValueDictionary[Hashable, CallerToken] = WeakValueDictionary()
        """A "token_exchange" mount: each client's `CallerToken`, held by its session's task while it lives."""
        self._users = config.auth.mode == "user"
        """Each client's request carries its person's own token (`mode = "user"`; its clients' sessions only)."""
        self._user_sessions: dict[str, set[Hashable]] = {}
        """A "user" mount: principal -> the clients whose sessions carry that person's token."""
        # What the current connection's watcher has to act on: kinds to re-list,
        # whether the connection is lost, and the event that wakes it for either.
        self._dirty: set[str] = set()
        self._relist_later: set[str] = set()
        """Kinds whose listing the server answered with an error: asked for again at the next health check."""
        self._broken = False
        self._wake = anyio.Event()

    # -- what the hub reads ---------------------------------------------------

    @property
    def capabilities(self) -> types.ServerCapabilities | None:
        return self._connection.session.server_capabilities if self._connection is not None else None

    @property
    def known_capabilities(self) -> types.ServerCapabilities | None:
        """What the server offered when last connected; None if it never was."""
        return self._known_capabilities

    @property
    def protocol_version(self) -> str | None:
        return self._connection.session.protocol_version if self._connection is not None else None

    @property
    def modern(self) -> bool:
        """Whether the server speaks 2026-07-28 (per-request envelopes, no session) on the mount's connection."""
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    def modern_for(self, origin: Origin | None) -> bool:
        """Whether a request sent for `origin` goes in 2026-07-28 (see era.py)."""
        if not self.modern:
            return False
        if origin is None or origin.modern or not own_era_beside(self.config, self.transport.kind):
            return True
        return self._beside is not None and self._beside.refused is not None

    async def sessions_ready(self) -> None:
        """Wait (up to `connect_timeout`) for the sessions the mount opens beside its connection (era.py)."""
        connection = self._connection
        if connection is not None and self._beside is not None and self._beside_serves(connection):
            await self._beside.acquire()

    def _beside_serves(self, connection: Connection) -> bool:
        """Whether the handshake-era clients of a mount connected by `connection` are served on the handshake-era
        session beside it (see era.py)."""
        return self._beside is not None and connection.modern and own_era_beside(self.config, connection.transport)

    def sessions(self) -> list[dict[str, Any]]:
        """Each session of the mount: whom it serves, its protocol version and why (see era.py)."""
        return sessions(self.config, self.transport.kind, self.protocol_version, self._beside)

    @property
    def waiting_for(self) -> str | None:
        """While a connection attempt is under way: what the hub waits for, and how long it has."""
        if self.state != State.STARTING or self._attempt_started is None:
            return None
        waited = time.monotonic() - self._attempt_started
        if waited >= self.config.connect_timeout:
            return f"no answer to {self._awaiting} within {self.config.connect_timeout:g}s"
        return f"waiting for an answer to {self._awaiting} ({waited:.0f}s so far)"

    @property
    def next_attempt_in(self) -> float | None:
        """While the mount is down, backing off: seconds until its next connection attempt."""
        if self.state != State.DOWN or self._retry_at is None:
            return None
        return max(0.0, self._retry_at - time.monotonic())

    @property
    def client_sessions(self) -> int:
        """Per-client sessions open now (always 0 for a shared mount)."""
        return len(self._pool) if self._pool is not None else 0

    @property
    def offers_subscriptions(self) -> bool:
        """Whether the server tells about changes to a resource (resources/subscribe, or listen)."""
        caps = self.capabilities
        return bool(caps is not None and caps.resources is not None and caps.resources.subscribe)

    @property
    def subscribed(self) -> frozenset[str]:
        """The server's URIs of the resources some client wants to hear about (kept across reconnects)."""
        return frozenset(self._subscribed)

    def offers(self, kind: str) -> bool:
        """Whether the connected server declared the capability behind a catalog kind."""
        caps = self.capabilities
        if caps is None:
            return False
        if kind == "tools":
            return caps.tools is not None
        if kind == "prompts":
            return caps.prompts is not None
        return caps.resources is not None

    # -- talking to the server ------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        on_progress: ProgressFnT | None = None,
        origin: Origin | None = None,
    ) -> dict[str, Any]:
        """Send one request on behalf of `origin` and return the server's raw result.

        While the mount makes a connection attempt, its first or a restart, the request waits for
        it (up to the mount's `timeout`).

        Raises:
            UpstreamUnavailable: the mount is not connected (the attempt failed, it is down and
                backing off, or a restart did not come up within its `timeout`), or the connection broke.
            UpstreamTimeout: no answer within the mount's `timeout` (or no first connection).
            UpstreamError: the mount's per-client sessions are all taken.
            MCPError: the server answered with a JSON-RPC error (passed through).
        """
        if method == "completion/complete":
            return await self._complete(params, on_progress=on_progress, origin=origin)
        return await self._request(method, params, on_progress=on_progress, origin=origin)

    async def _request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        on_progress: ProgressFnT | None = None,
        origin: Origin | None = None,
        wait: bool = True,
    ) -> dict[str, Any]:
        """`wait`: False for the supervisor's own requests (its listings), which go on the current connection
        or fail, never waiting for a connection the supervisor itself would have to make."""
        if self._pool is not None and origin is not None and self._exchanges:
            return await self._exchanged_request(method, params, on_progress=on_progress, origin=origin)
        if self._pool is not None and origin is not None and self._users:
            return await self._user_request(method, params, on_progress=on_progress, origin=origin)
        if self._pool is not None and origin is not None and origin.client_key is not None:
            return await self._client_request(method, params, on_progress=on_progress, origin=origin)
        connection = self._usable() if wait else self._connection
        if connection is None and wait:
            connection = await (self._restarted() if self.settled.is_set() else self._first_connection())
        if connection is None:
            reason = f": {self.last_error}" if self.last_error else ""
            raise UpstreamUnavailable(self.name, f"is not connected ({self.state}{reason})")
        if origin is not None and not origin.modern and connection.modern:
            connection = await self._in_handshake_era(connection)
        return await connection.request(method, params, on_progress=on_progress, origin=origin)

    async def _in_handshake_era(self, connection: Connection) -> Connection:
        """Where a handshake-era client's request to a server connected in 2026-07-28 goes: the handshake-era
        session beside it where the rule says so (see era.py), else `connection` (bridged)."""
        if self._beside is None or not self._beside_serves(connection):
            return connection
        return await self._beside.acquire() or connection

    async def _client_request(
        self, method: str, params: Mapping[str, Any] | None, *, on_progress: ProgressFnT | None, origin: Origin
    ) -> dict[str, Any]:
        """Send a request on `origin`'s own session (opened on its first request)."""
        assert self._pool is not None
        connection, seat = await self._pool.acquire(origin)
        try:
            return await connection.request(method, params, on_progress=on_progress, origin=origin)
        finally:
            self._pool.done(seat)

    async def _exchanged_request(
        self, method: str, params: Mapping[str, Any] | None, *, on_progress: ProgressFnT | None, origin: Origin
    ) -> dict[str, Any]:
        """A client's request to a "token_exchange" mount: only on the caller's own session, with the caller's
        token to exchange (`CALLER_TOKEN`, read by the credential in this task, and by the session's own task,
        started from here, for all it sends by itself: the client's `CallerToken`, which each request brings up
        to date). Never on the shared session, which carries the hub's token."""
        token = origin.access_token
        key = origin.client_key
        if token is None or key is None:
            raise CredentialError(
                self.name,
                "its token exchange needs the caller's OAuth access token, and this caller signed in without one "
                "(an API key, stdio, or anonymous); sign in to the hub with OAuth",
            )
        caller = self._callers.get(key)
        if caller is None:
            caller = self._callers[key] = CallerToken(token)
        caller.token = token
        reset = CALLER_TOKEN.set(caller)
        person = CALLER_PRINCIPAL.set(origin.principal)  # whose token an "enterprise" mount keeps
        try:
            return await self._client_request(method, params, on_progress=on_progress, origin=origin)
        finally:
            CALLER_PRINCIPAL.reset(person)
            CALLER_TOKEN.reset(reset)

    async def _user_request(
        self, method: str, params: Mapping[str, Any] | None, *, on_progress: ProgressFnT | None, origin: Origin
    ) -> dict[str, Any]:
        """A client's request to a "user" mount: only on the client's own session, with its person's own token
        (`CALLER_PRINCIPAL`, read by the credential). A person with no token (never signed in, revoked, or
        refused on refresh) is answered with the URL-mode elicitation that sends them to sign in, and the
        sessions that carried their old token are closed (`_sign_in`).

        The same holds when the server refuses the token during the call (a 401) and no refresh helps: a client
        that takes URL elicitation is asked, and once the person has signed in the request is sent again, once
        (not in a loop), with their new token; any other client is answered with the link (-32042). Sending it
        again is safe even for a `tools/call`: a 401 is the server's HTTP layer refusing the request, which was
        never run. It is sent again only when the failure came of the token (`LoginRequired` in its causes);
        another failure met while the person's token went away (say, revoked by the admin during a call that
        ran) is answered with the link and not repeated."""
        login = self.transport.client_credential
        assert isinstance(login, UserLogin)
        principal = origin.principal
        if origin.client_key is None or principal is None:
            raise CredentialError(
                self.name,
                "each person signs in to it with their own account, and this caller is anonymous; "
                "sign in to the hub (an API key or an OAuth token)",
            )
        notify = origin.for_client() if isinstance(origin, HearsElicitationComplete) else None
        if await login.connection(principal) is None:
            self._close_user_sessions(principal)
            await self._sign_in(login, principal, origin, notify)
        reset = CALLER_PRINCIPAL.set(principal)
        try:
            try:
                self._user_sessions.setdefault(principal, set()).add(origin.client_key)
                return await self._client_request(method, params, on_progress=on_progress, origin=origin)
            except (MCPError, UpstreamError) as exc:
                if await login.connection(principal) is not None:
                    raise
                self._close_user_sessions(principal)  # the server refused the token and no refresh helped
                if not _token_refused(exc):
                    raise await login.login_required(principal, notify) from exc
                await self._sign_in(login, principal, origin, notify)
            self._user_sessions.setdefault(principal, set()).add(origin.client_key)
            return await self._client_request(method, params, on_progress=on_progress, origin=origin)  # once
        finally:
            CALLER_PRINCIPAL.reset(reset)

    async def _sign_in(self, login: UserLogin, principal: str, origin: Origin, notify: Any) -> None:
        """`principal` has no token: a client that takes URL elicitation is asked to open the sign-in link
        (`elicitation/create`, mode "url"), and the call waits for the sign-in (up to the mount's `timeout`);
        any other, or one that declines or does not finish in time, is answered with the link (-32042); a sign-in
        the person denied on the hub's consent page fails as a declined one does."""
        required, signed_in = await login.begin_sign_in(principal, notify, client=client_of(principal))
        if not takes_url_elicitation(origin.capabilities):
            raise required
        (asked,) = required.elicitations
        try:
            answer = await origin.ask("elicitation/create", asked.model_dump(by_alias=True, exclude_none=True))
        except (ClientCannotAnswer, MCPError):
            raise required from None  # it cannot be asked now (a 2026-07-28 call that cannot park): the link
        if answer.get("action") != "accept":
            raise CredentialError(self.name, f"{principal} did not agree to sign in to it ({answer.get('action')})")
        with anyio.move_on_after(min(self.config.timeout, LOGIN_SECONDS)):
            await signed_in.wait()
        if signed_in.denied:
            raise CredentialError(self.name, f"{principal} did not agree to sign in to it (denied on the consent page)")
        if not signed_in.is_set() or await login.connection(principal) is None:
            raise required

    def _close_user_sessions(self, principal: str) -> None:
        """Close the sessions that carried `principal`'s token (it is gone: revoked, or refused)."""
        if self._pool is not None:
            for key in self._user_sessions.pop(principal, set()):
                self._pool.release(key)

    async def _complete(
        self, params: Mapping[str, Any] | None, *, on_progress: ProgressFnT | None, origin: Origin | None
    ) -> dict[str, Any]:
        """Completion is optional: a server that does not offer it, or refuses it, has no completions."""
        caps = self.capabilities
        if caps is not None and caps.completions is None:
            return dict(_NO_COMPLETIONS)
        try:
            result = await self._request("completion/complete", params, on_progress=on_progress, origin=origin)
        except MCPError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise  # about the arguments it was given: the client's to hear
            self._refused("completion/complete", exc)
            return dict(_NO_COMPLETIONS)
        self._answered("completion/complete")
        return result

    def _refused(self, method: str, exc: MCPError) -> None:
        """Note that the server answered an optional `method` with an error (logged once per reason)."""
        reason = f"{exc.message} ({exc.code})"
        if self.refused.get(method) == reason:
            return
        self.refused[method] = reason
        level = logging.INFO if exc.code == METHOD_NOT_FOUND else logging.WARNING
        logger.log(level, "server %r refused %s: %s; going on without it", self.name, method, reason)

    def _answered(self, method: str) -> None:
        if self.refused.pop(method, None) is not None:
            logger.info("server %r: answers %s again", self.name, method)

    async def _first_connection(self) -> Connection | None:
        """Wait (up to the mount's `timeout`) for the first connection attempt to end; the connection, if it came.

        The hub lists a mount from the last known catalog before it connects
        (see snapshot.py), so a client may call it while it is still starting.

        Raises:
            UpstreamTimeout: the attempt outlasted the call's `timeout`.
        """
        self.wanted.set()
        with anyio.move_on_after(self.config.timeout) as waiting:
            await self.settled.wait()
        if waiting.cancelled_caught:
            raise UpstreamTimeout(self.name, f"did not finish starting within {self.config.timeout:g}s")
        return self._connection

    def _usable(self) -> Connection | None:
        """The current connection, unless it is known to be lost (closed, or found broken)."""
        connection = self._connection
        if connection is None or self._broken or connection.closed.is_set():
            return None
        return connection

    async def _restarted(self) -> Connection | None:
        """Wait (up to the mount's `timeout`) while the mount restarts: the new connection once it is up; None
        at once if the mount is down (backing off between attempts), when the attempt fails, or past the bound.

        A lost connection the supervisor has not yet handled is waited out too: the supervisor then either
        restarts the server at once (a healthy run ended) or goes down to back off (`_supervise`).
        """
        with anyio.move_on_after(self.config.timeout):
            while (connection := self._usable()) is None and self.state in (State.STARTING, State.UP):
                await self._moved.wait()
            return connection
        return None

    def _move(self, state: State) -> None:
        """The mount is now `state` (up, down or stopped): wake the requests waiting for a restart."""
        self.state = state
        self._moved.set()
        self._moved = anyio.Event()

    async def set_log_level(self, level: str) -> None:
        """Ask the server for log messages from `level` up (handshake-era servers that log; kept across restarts).

        2026-07-28 servers take the level with each request instead.
        """
        self._log_level = level
        await self._apply_log_level()

    async def _apply_log_level(self) -> None:
        if self._connection is not None and not self.modern:
            await self._apply_log_level_to(self._connection)
        beside = self._beside.connection if self._beside is not None else None
        if beside is not None:
            await self._apply_log_level_to(beside)

    async def _apply_log_level_to(self, connection: Connection) -> None:
        """Ask one handshake-era session for the log level its clients want."""
        caps = connection.session.server_capabilities
        if self._log_level is None or caps is None or caps.logging is None or connection.modern:
            return
        try:
            await connection.send("logging/setLevel", {"level": self._log_level})
        except MCPError as exc:
            self._refused("logging/setLevel", exc)
        except UpstreamError as exc:
            logger.warning("server %r: could not set its log level: %s", self.name, exc)
        else:
            self._answered("logging/setLevel")

    async def subscribe(self, uri: str) -> None:
        """Hear about changes to the resource at (the server's) `uri`; kept across reconnects."""
        if uri not in self._subscribed:
            self._subscribed.add(uri)
            await self._send_subscription("resources/subscribe", uri)

    async def unsubscribe(self, uri: str) -> None:
        if uri in self._subscribed:
            self._subscribed.discard(uri)
            await self._send_subscription("resources/unsubscribe", uri)

    async def _send_subscription(self, method: str, uri: str) -> None:
        if self._connection is None or not self.offers_subscriptions:
            return
        if self.modern:
            self._relisten()  # the listen stream's filter names the URIs
            return
        try:
            await self._connection.send(method, {"uri": uri})
        except MCPError as exc:
            self._refused(method, exc)
        except UpstreamError as exc:
            logger.warning("server %r: %s %s failed: %s", self.name, method, uri, exc)
        else:
            self._answered(method)

    async def roots_changed(self, client_key: Hashable, *, sole: bool = False) -> None:
        """A client's roots changed: tell its own session (isolation = "per-client"), and, when it is the
        sole client of a hub serving stdio (`sole`), the shared session, which asks it outside calls.

        A shared session serving many clients asks about roots only during a
        client's call, where it hears that client's current roots. A mount with
        configured roots hears those whatever the clients say: nothing to tell.
        """
        if self.config.roots is not None:
            return
        if self._pool is not None:
            await self._pool.roots_changed(client_key)
        if not sole:
            return
        for connection in (self._connection, self._beside.connection if self._beside is not None else None):
            if connection is not None and not connection.modern:  # 2026-07-28 has no such notice
                await connection.roots_changed()

    async def list_all(self, kind: str) -> list[Any] | None:
        """Every item of one catalog kind, following the server's cursors, as the server sent them.

        A kind the server did not declare is empty, and so is one whose list method it
        does not implement (-32601). Another error it answers is None, "no listing this
        time", and the kind is asked for again at the next health check. Either way the
        refusal is noted in `refused`, and the connection stays up.
        """
        if not self.offers(kind):
            return []
        method, key = LIST_METHODS[kind]
        items: list[Any] = []
        cursor: str | None = None
        ttl: int | None = None
        if self.state == State.STARTING:
            self._awaiting = method
        for _ in range(_MAX_LIST_PAGES):
            try:
                result = await self._request(method, {"cursor": cursor} if cursor else None, wait=False)
            except MCPError as exc:
                self._refused(method, exc)
                if exc.code == METHOD_NOT_FOUND:
                    return []
                self._relist_later.add(kind)
                return None
            page = result.get(key)
            items.extend(page if isinstance(page, list) else [])
            hinted = result.get("ttlMs") if self.modern else None
            hinted = hinted if isinstance(hinted, int) and not isinstance(hinted, bool) and hinted > 0 else 0
            ttl = hinted if ttl is None else min(ttl, hinted)
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str):
                cursor = None
            if not cursor:
                self._answered(method)
                self.list_ttl[kind] = ttl or 0
                if kind == "tools" and self._connection is not None and self._connection.modern:
                    try:
                        kept = await self._connection.learn_tools()
                    except (MCPError, ValidationError) as exc:  # a listing the SDK cannot read whole
                        logger.warning("server %r: its tools/list, read by the SDK: %s", self.name, exc)
                    else:
                        items = [tool for tool in items if isinstance(tool, dict) and tool.get("name") in kept]
                return items
        raise UpstreamError(self.name, f"kept paginating {method} past {_MAX_LIST_PAGES} pages")

    # -- supervision ----------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, reconnect (at once after a healthy run, else after the backoff); until cancelled."""
        if not self.config.enabled:
            self.settled.set()
            return
        async with anyio.create_task_group() as tg:
            if self.config.isolation == "per-client":
                self._pool = SessionPool(self.config, tg, self.transport, self._own_mode)
            if self.config.protocol == "auto":
                self._beside = HandshakeSession(
                    self.config,
                    tg,
                    self._open_handshake,
                    self._apply_log_level_to,
                    self._lost,
                    lambda: self._connection,
                )
            try:
                await self._supervise()
            finally:
                if self._beside is not None:
                    self._beside.reset()  # closed as a client closes a session (its task is shielded)
                tg.cancel_scope.cancel()

    async def _supervise(self) -> None:
        backoff = _BACKOFF_FIRST
        said: tuple[str, float] | None = None
        """The error a command not found was last logged with, and when (it is not logged again each try)."""
        try:
            while True:
                started = time.monotonic()
                missing = False
                ran = 0.0  # how long the connection stayed up (0: it never came up)
                try:
                    await self._connect_and_serve()
                except Exception as exc:  # boundary: any failure of one connection means reconnect
                    ran = time.monotonic() - self.up_since if self.up_since is not None else 0.0
                    self.last_error = _describe(exc)
                    closed = _closed(exc) or (self.transport.kind == "stdio" and _found_lost(exc))
                    ended = await self.stderr.wait_ended(_REAPED_WITHIN) if closed else None
                    if ended is not None and ended not in self.last_error:  # the watcher may have said it already
                        self.last_error = f"{self.last_error}: {ended}"
                    if self.stderr.limit is not None and self.stderr.ended is not None:
                        self._limited(self.stderr.ended)
                    missing = _command_missing(exc)
                    if not missing or said is None or said[0] != self.last_error or started - said[1] > _SAY_AGAIN:
                        logger.warning("server %r: %s", self.name, self.last_error)
                        said = (self.last_error, started) if missing else None
                finally:
                    self._connection = None
                    self.up_since = None
                    self.settled.set()
                    if self._beside is not None:
                        self._beside.reset()
                if ran >= HEALTHY_RUN:  # a healthy run ended: restarted at once, requests meanwhile wait for it
                    backoff = _BACKOFF_FIRST
                    logger.info("server %r: reconnecting now (it was up %.0fs)", self.name, ran)
                else:
                    self.failures += 1
                    if missing:  # no child started: looked for again now and then, quietly, until it is installed
                        backoff = _BACKOFF_MAX
                    else:
                        logger.info("server %r: reconnecting in %.1fs", self.name, backoff)
                    self._retry_at = time.monotonic() + backoff
                    self._move(State.DOWN)
                    try:
                        await anyio.sleep(backoff)
                    finally:
                        self._retry_at = None
                    backoff = min(backoff * 2, _BACKOFF_MAX)
                self.restarts += 1  # counted as the attempt begins, whether or not it comes up
                self.state = State.STARTING
        finally:
            self._connection = None
            self.up_since = None
            self._move(State.STOPPED)

    def _open_handshake(self, on_broken: Callable[[str], None]) -> Any:
        """The handshake-era session beside a 2026-07-28 connection (see era.py)."""
        inflight = InFlight(
            self.name, broadcast=self._on_log, configured=self.config.roots, sole_client=self._sole_client
        )
        return connect(
            self.config,
            inflight=inflight,
            message_handler=self._on_message,
            on_broken=on_broken,
            choice=self.transport,
            mode="legacy",
        )

    def _own_mode(self, origin: Origin) -> str | None:
        """The mode a client's own session is negotiated in: its own era where the rule says so (see era.py)."""
        if origin.modern or not own_era_beside(self.config, self.transport.kind):
            return None
        refused = self._beside is not None and self._beside.refused is not None
        return None if refused else "legacy"

    async def _connect_and_serve(self) -> None:
        # One scope spans the whole connection (the client's task groups must be
        # exited in the scope they were entered in); its deadline bounds only
        # the connect phase and is lifted once the mount is up.
        self._attempt_started, self._awaiting = time.monotonic(), "initialize"
        with (
            self.stderr.capturing(),
            anyio.CancelScope(deadline=anyio.current_time() + self.config.connect_timeout) as connecting,
        ):
            async with connect(
                self.config,
                inflight=InFlight(
                    self.name, broadcast=self._on_log, configured=self.config.roots, sole_client=self._sole_client
                ),
                message_handler=self._on_message,
                on_broken=self._lost,
                choice=self.transport,
                stderr=self.stderr,
            ) as connection:
                self._connection = connection
                self._known_capabilities = connection.session.server_capabilities
                self._dirty.clear()  # whatever a previous connection left behind
                self._relist_later.clear()
                self._broken = False
                await self._on_listing(self, frozenset(LIST_METHODS))
                await self._apply_log_level()
                if not self.modern:
                    for uri in sorted(self._subscribed):
                        await self._send_subscription("resources/subscribe", uri)
                connecting.deadline = math.inf
                self.up_since = time.monotonic()
                self.last_error = None
                self.failures = 0
                self._move(State.UP)
                self.settled.set()
                logger.info("server %r: up (%s)", self.name, self.protocol_version)
                if self._beside is not None and self._beside_serves(connection):
                    self._beside.open()  # its handshake-era clients' session (see era.py)
                await self._watch(connection)
        if connecting.cancelled_caught:
            raise TimeoutError(f"no answer to {self._awaiting} within {self.config.connect_timeout:g}s")

    async def _watch(self, connection: Connection) -> None:
        """Serve until the connection ends; refresh listings when the server says they changed."""
        async with anyio.create_task_group() as tg:

            async def closed() -> None:
                await connection.closed.wait()
                ended = await self.stderr.wait_ended(_REAPED_WITHIN) if connection.transport == "stdio" else None
                self._lost(f"connection closed: {ended}" if ended else "connection closed")

            tg.start_soon(closed)
            if self.modern:
                tg.start_soon(self._listen)
            while True:
                with anyio.move_on_after(_HEALTH_INTERVAL):
                    await self._wake.wait()
                    self._wake = anyio.Event()
                    if self._broken:
                        raise _ConnectionLost(self.last_error or "connection closed")
                    kinds = frozenset(self._dirty)
                    self._dirty.clear()
                    await self._on_listing(self, kinds)
                    continue
                await self._ping()
                if self._relist_later:
                    kinds = frozenset(self._relist_later)
                    self._relist_later.clear()
                    await self._on_listing(self, kinds)

    def _listen_filter(self) -> dict[str, Any] | None:
        """What to ask a 2026-07-28 server to stream: list changes it offers and the subscribed resources."""
        caps = self.capabilities
        if caps is None or not self.modern:
            return None
        wanted: dict[str, Any] = {
            "tools_list_changed": bool(caps.tools and caps.tools.list_changed),
            "prompts_list_changed": bool(caps.prompts and caps.prompts.list_changed),
            "resources_list_changed": bool(caps.resources and caps.resources.list_changed),
            "resource_subscriptions": sorted(self._subscribed) if self.offers_subscriptions else [],
        }
        return wanted if any(wanted.values()) else None

    def _relisten(self) -> None:
        """The filter changed: end the current stream; `_listen` opens one with the new filter."""
        if self._listen_scope is not None:
            self._listen_scope.cancel()
        self._wake_listen.set()

    async def _listen(self) -> None:
        """Receive a 2026-07-28 server's changes over `subscriptions/listen`, while connected.

        There is no replay: after the stream drops, re-listen and re-list everything.
        """
        backoff = _BACKOFF_FIRST
        while (connection := self._connection) is not None:
            self._wake_listen = anyio.Event()
            wanted = self._listen_filter()
            if wanted is None:
                await self._wake_listen.wait()
                continue
            lost = refused = False
            with anyio.CancelScope() as self._listen_scope:
                try:
                    async with listen(connection.session, **wanted) as subscription:
                        backoff = _BACKOFF_FIRST
                        self._answered("subscriptions/listen")
                        async for event in subscription:
                            if isinstance(event, ResourceUpdated):
                                if self._on_updated is not None:
                                    await self._on_updated(self, event.uri)
                            else:
                                self._queue(_LISTEN_EVENTS.get(type(event), frozenset()))
                    lost = True
                except MCPError as exc:
                    if exc.code == METHOD_NOT_FOUND:
                        self._refused("subscriptions/listen", exc)
                        refused = True
                    else:
                        logger.warning("server %r: change stream ended: %s", self.name, exc)
                        lost = True
                except SubscriptionLost as exc:
                    logger.warning("server %r: change stream ended: %s", self.name, exc)
                    lost = True
            self._listen_scope = None
            if refused:  # asked again only with another filter
                await self._wake_listen.wait()
            elif lost:
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX)
                self._queue(frozenset(LIST_METHODS))

    async def _ping(self) -> None:
        try:
            if self._connection is not None:
                await self._connection.send("ping", None)
        except UpstreamError as exc:
            raise _ConnectionLost(f"health check failed: {exc}") from exc
        except MCPError as exc:
            self._refused("ping", exc)  # answered, just not with a result: the connection works

    def _limited(self, ended: str) -> None:
        self.limit_hit = f"{ended} at {time.strftime('%Y-%m-%d %H:%M:%S')}"
        if self._on_limit is not None:
            self._on_limit(self, ended)

    def _lost(self, reason: str) -> None:
        """Mark the current connection unusable; its watcher reconnects."""
        self.last_error = reason
        self._broken = True
        self._wake.set()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            logger.warning("server %r sent something unreadable: %s", self.name, message)
            return
        if isinstance(message, types.ResourceUpdatedNotification):
            if self._on_updated is not None:
                await self._on_updated(self, str(message.params.uri))
            return
        kinds = _CHANGED_NOTIFICATIONS.get(type(message))
        if kinds is not None:
            self._queue(kinds)

    def _queue(self, kinds: frozenset[str]) -> None:
        """Ask the supervisor to re-list `kinds` (never blocks the caller)."""
        if kinds:
            self._dirty |= kinds
            self._wake.set()


def _token_refused(exc: BaseException) -> bool:
    """True if `exc` came of the person's token being refused (`LoginRequired`: no token to send, the server's
    401 included, which no refresh helped): the request was not run by the server."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, LoginRequired):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _closed(exc: BaseException) -> bool:
    """Whether `exc` (or an error of a group) says the server closed the connection (a stdio child that exited)."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_closed(inner) for inner in exc.exceptions)
    return (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED) or isinstance(exc, UpstreamUnavailable)


def _found_lost(exc: BaseException) -> bool:
    """Whether `exc` (or an error of a group) is the connection found lost (`_lost`: by a request that saw it
    close, by the watcher, or by a failed health check), which a stdio child's exit explains first of all."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_found_lost(inner) for inner in exc.exceptions)
    return isinstance(exc, _ConnectionLost)


def _command_missing(exc: BaseException) -> bool:
    """Whether `exc` (or every error of a group) is a stdio server's command not found, or its sandbox's tools
    (something to install: looked for again now and then)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_command_missing(inner) for inner in exc.exceptions)
    return isinstance(exc, CommandNotFound | SandboxUnavailable)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return str(exc) or "timed out connecting"
    if isinstance(exc, ExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    text = str(exc) or type(exc).__name__
    plain = isinstance(exc, UpstreamError | _ConnectionLost | MCPError | CommandNotFound | SandboxUnavailable)
    return text if plain else f"{type(exc).__name__}: {text}"
