"""Who sent a request, and how to reach its client: the identity a request carries (`principal_of`,
`identity_of`, `session_of`, the HTTP layer's `PRINCIPAL_KEY` and `HTTP_PRINCIPAL`, from auth/identity.py),
a handshake-era client's connection while it lasts (`Client`), and `ClientOrigin`, through which a
server's questions, log messages and progress reach the client behind a call.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast, get_args

import anyio
import mcp_types as types
from cachetools import LRUCache
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import RootModel

from mcp_hub.auth.identity import ANONYMOUS, PRINCIPAL_KEY, Identity, identity_in
from mcp_hub.auth.identity import HTTP_PRINCIPAL as HTTP_PRINCIPAL  # where the HTTP layer's code finds it
from mcp_hub.sdk import runner as sdk_runner
from mcp_hub.server.tasks import TASKS_EXTENSION
from mcp_hub.upstream import ClientCannotAnswer

logger = logging.getLogger("mcp_hub.server")


NOTIFY_TIMEOUT = 5.0
"""How long a notification to one client may take before it is given up."""

LOG_LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)
"""Severity-ascending."""


def at_least(level: Any, threshold: str | None) -> bool:
    if threshold is None:
        return True
    return level in LOG_LEVELS and LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)


@dataclass(eq=False)
class Client:
    """A handshake-era client's connection to the hub, while it lasts."""

    session: ServerSession
    """A session on the connection; without a related request id it sends on the standalone channel."""
    log_level: str | None = None
    """From `logging/setLevel`; None: every message."""
    subscriptions: set[str] = field(default_factory=set)
    """Public URIs of the resources the client subscribed to."""


@dataclass(eq=False)
class SoleClient:
    """The one client of a hub serving stdio: asked a server's `roots/list` that no call explains."""

    arrived: anyio.Event = field(default_factory=anyio.Event)
    """Set once the client is known: a handshake-era client initialized, or a 2026-07-28 client's first request."""
    origin: ClientOrigin | None = None
    """A handshake-era client, outside its requests (a 2026-07-28 client can be asked only during a call)."""


class _RawResult(RootModel[dict[str, Any]]):
    """A client's answer, kept as the client's own JSON."""


_NEEDS = {
    "sampling/createMessage": ("sampling", types.ClientCapabilities(sampling=types.SamplingCapability())),
    "elicitation/create": ("elicitation", types.ClientCapabilities(elicitation=types.ElicitationCapability())),
    "roots/list": ("roots", types.ClientCapabilities(roots=types.RootsCapability())),
}


class ClientOrigin:
    """The downstream client behind one request: where a server's questions about it go.

    Its `client_key` picks the per-client session that serves it on an
    `isolation = "per-client"` mount: a handshake-era client's connection, which
    lasts across its requests; for a 2026-07-28 request, which stands alone, the
    principal the HTTP layer authenticated (an API key's name), so that each
    principal's requests share a session of their own; over stdio (and in
    process), the local user, "stdio", the one client there is. An anonymous
    2026-07-28 request over HTTP has none, and is served by the shared session:
    nothing tells two anonymous callers apart.
    """

    def __init__(self, ctx: ServerRequestContext[Any, Any], client: Client | None, *, scoped: bool = True) -> None:
        self._ctx = ctx
        self._client = client
        self._session = ctx.session
        self._request_id = ctx.request_id if scoped else None
        self.modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        # The SDK exposes a handshake-era client's connection only here.
        self._connection = None if self.modern else sdk_runner.connection_of(self._session)
        self._key: Hashable | None = self._connection if not self.modern else self._authenticated(ctx)

    @staticmethod
    def _authenticated(ctx: ServerRequestContext[Any, Any]) -> Hashable | None:
        """The principal the HTTP layer authenticated the request as ("stdio" with no HTTP layer: the local user);
        None when it authenticated none."""
        if ctx.request is None:
            return ("principal", "stdio")
        principal = ctx.request.scope.get("state", {}).get(PRINCIPAL_KEY)
        return ("principal", str(principal)) if principal is not None else None

    @property
    def client_key(self) -> Hashable | None:
        return self._key

    @property
    def identity(self) -> Identity | None:
        """The caller's validated access token and its claims (None: it sent none); for acting toward other
        servers on the caller's behalf (token exchange), never for sending on as it is."""
        return identity_of(self._ctx)

    @property
    def access_token(self) -> str | None:
        identity = self.identity
        return identity.token if identity is not None else None

    @property
    def principal(self) -> str | None:
        principal = principal_of(self._ctx)
        return None if principal == ANONYMOUS else principal

    def for_client(self) -> ClientOrigin:
        return ClientOrigin(self._ctx, self._client, scoped=False)

    def on_close(self, callback: Callable[[], None]) -> None:
        if self._connection is not None:
            self._connection.exit_stack.callback(callback)

    async def log(self, params: Mapping[str, Any]) -> None:
        level = params.get("level")
        if self.modern and self._request_id is None:
            return  # a 2026-07-28 client hears log messages only in answer to a request
        if self.modern:
            meta = (self._ctx.params or {}).get("_meta")
            if level not in allowed_log_levels(self._ctx.protocol_version, meta if isinstance(meta, dict) else None):
                return
        elif self._client is not None and not at_least(level, self._client.log_level):
            return
        await deliver(self._session, log_notification(params), related_request_id=self._request_id)

    @property
    def capabilities(self) -> Mapping[str, Any] | None:
        declared = self._session.client_capabilities
        if declared is None:
            return {}
        relayed = relayed_capabilities(declared)
        extensions = relayed.get("extensions")
        if not self.modern and isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions:
            # A handshake-era client cannot be sent a task handle: its calls are not to be answered with one.
            others = {name: value for name, value in extensions.items() if name != TASKS_EXTENSION}
            return {**relayed, "extensions": others}
        return relayed

    def check_can_ask(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Raise `ClientCannotAnswer` unless the client declared the capability `method` needs.

        A URL-mode elicitation (`params` with `mode: "url"`) needs `elicitation.url`; a client
        declaring `elicitation` alone takes forms only.
        """
        feature, capability = _NEEDS.get(method, (method, None))
        if capability is None or not self._session.check_client_capability(capability):
            raise ClientCannotAnswer(f"mcp-hub: the client connected to the hub does not support {feature}")
        if method == "elicitation/create" and params is not None and params.get("mode") == "url":
            declared = self._session.client_capabilities
            if declared is None or declared.elicitation is None or declared.elicitation.url is None:
                raise ClientCannotAnswer(
                    "mcp-hub: the client connected to the hub does not support URL-mode elicitation"
                )

    async def elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the client that a URL-mode elicitation it accepted is complete (2026-07-28 has no such notice)."""
        if self.modern:
            return
        params = types.ElicitCompleteNotificationParams(elicitation_id=elicitation_id)
        notification = types.ElicitCompleteNotification(params=params)
        await deliver(self._session, notification, related_request_id=self._request_id)

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        if self.modern:
            # Asked through `ParkingLot` when the call may ask; otherwise nothing can carry it.
            when = "mid-call" if self._request_id is not None else "outside a call"
            raise ClientCannotAnswer(f"mcp-hub: {method} cannot be sent {when} to a 2026-07-28 client")
        self.check_can_ask(method, params)
        request = cast(Any, types.Request[dict[str, Any], str](method=method, params=dict(params)))
        metadata = ServerMessageMetadata(related_request_id=self._request_id) if self._request_id is not None else None
        answer = await self._session.send_request(request, _RawResult, metadata=metadata)
        return answer.root


def log_notification(params: Mapping[str, Any]) -> types.LoggingMessageNotification:
    return types.LoggingMessageNotification(params=types.LoggingMessageNotificationParams.model_validate(params))


async def deliver(
    session: ServerSession, notification: types.ServerNotification, related_request_id: Any = None
) -> None:
    """Send a notification a client may no longer be there to receive."""
    try:
        with anyio.fail_after(NOTIFY_TIMEOUT):
            await session.send_notification(notification, related_request_id=related_request_id)
    except Exception:  # boundary: a gone or stuck client loses its notification, nothing else
        logger.debug("could not deliver %s to a client", notification.method, exc_info=True)


_RELAYED_CAPABILITIES = frozenset({"sampling", "elicitation", "roots", "extensions"})
"""The client capabilities a server's questions need, and the extensions the client declared (each as
declared, known to the hub or not), which the hub relays."""
_RELAYED: LRUCache[int, tuple[weakref.ref[Any], Mapping[str, Any]]] = LRUCache(256)
"""`relayed_capabilities` of the models seen last, by `id`, each with a weak reference to its model."""


def relayed_capabilities(declared: Any) -> Mapping[str, Any]:
    """What a client's declared capabilities model (`ClientCapabilities`) lets it be asked: its `sampling`,
    `elicitation` and `roots`, and its `extensions`, as sent on to a 2026-07-28 server. Read only.

    Kept while the model lives, by its identity: a handshake-era connection's model stands for the
    connection's life, and the 2026-07-28 requests of one client share theirs (`Envelopes`). The entry
    goes with the model, so neither outlives the other, and an `id` reused by a later model finds no entry.
    """
    key = id(declared)
    kept = _RELAYED.get(key)
    if kept is not None and kept[0]() is declared:
        return kept[1]
    dumped = declared.model_dump(by_alias=True, mode="json", exclude_none=True)
    relayed = {name: value for name, value in dumped.items() if name in _RELAYED_CAPABILITIES}

    def forget(ref: weakref.ref[Any]) -> None:
        entry = _RELAYED.get(key)
        if entry is not None and entry[0] is ref:
            del _RELAYED[key]

    _RELAYED[key] = (weakref.ref(declared, forget), relayed)
    return relayed


def principal_of(ctx: ServerRequestContext[Any, Any]) -> str:
    """Who is calling: the HTTP layer's authenticated principal (for an access token, a `policy.Principal`
    with its scopes and groups), or "stdio" for the local user."""
    request = ctx.request
    if request is None:
        return "stdio"
    principal = request.scope.get("state", {}).get(PRINCIPAL_KEY, ANONYMOUS)
    return principal if isinstance(principal, str) else str(principal)


def identity_of(ctx: ServerRequestContext[Any, Any]) -> Identity | None:
    """The caller's validated access token and its claims (None: no token; stdio, an API key, anonymous)."""
    request = ctx.request
    return identity_in(request.scope.get("state", {})) if request is not None else None


def address_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The HTTP client's network address, as uvicorn gives it (the peer's, or, from a proxy it trusts, the client
    `X-Forwarded-For` names); None over stdio."""
    request = ctx.request
    if request is None:
        return None
    client = request.scope.get("client")
    return str(client[0]) if client else None


def session_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    request = ctx.request
    return request.headers.get("mcp-session-id") if request is not None else None


def progress_relay(ctx: ServerRequestContext[Any, Any]) -> ProgressFnT | None:
    """Relay a server's progress to the client, if the client asked for progress: with a `progressToken` in
    the request's `_meta`, or, in process (the SDK's direct dispatcher, which sends no token), with a
    progress callback on the request."""
    meta = (ctx.params or {}).get("_meta")
    if (not isinstance(meta, dict) or meta.get("progressToken") is None) and not sdk_runner.has_progress_callback(
        ctx.session
    ):
        return None
    session = ctx.session

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await session.report_progress(progress, total, message)

    return relay
