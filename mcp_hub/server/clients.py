"""The clients connected to the hub: each handshake-era client while its connection lasts (its log level,
the resources it subscribed to), the notifications they hear, and the one client of a hub serving stdio.

A 2026-07-28 client has no connection to keep: it hears what its own requests carry, and the events
of its `subscriptions/listen` stream (endpoint.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_hub.sdk import runner as sdk_runner
from mcp_hub.server.hub_server import HubServer
from mcp_hub.server.origin import (
    LOG_LEVELS,
    NOTIFY_TIMEOUT,
    Client,
    ClientOrigin,
    SoleClient,
    at_least,
    deliver,
    log_notification,
)
from mcp_hub.server.subscriptions import Subscriptions
from mcp_hub.upstream import Upstream

logger = logging.getLogger("mcp_hub.server")

SOLE_CLIENT_WAIT = 10.0
"""How long a server's `roots/list` outside any call waits for the client of a hub serving stdio to arrive
(a server may ask as soon as it starts, while the client that launched the hub is still initializing)."""

_LIST_CHANGED = {
    "tools": ServerSession.send_tool_list_changed,
    "prompts": ServerSession.send_prompt_list_changed,
    "resources": ServerSession.send_resource_list_changed,
}
"""The notification of each kind's list changing (resource templates: the resources')."""


class Clients:
    """The handshake-era clients of one server, by connection, and the notifications they are sent."""

    def __init__(
        self,
        server: HubServer,
        subscriptions: Subscriptions,
        upstreams: Mapping[str, Upstream],
    ) -> None:
        self._server = server
        self._subscriptions = subscriptions
        self._upstreams = upstreams
        self._clients: dict[Connection, Client] = {}

    def register(self, session: ServerSession) -> Client:
        connection = sdk_runner.connection_of(session)
        client = self._clients.get(connection)
        if client is None:
            client = self._clients[connection] = Client(session)
            # Forget the client, and what it subscribed to, when its connection closes.
            connection.exit_stack.callback(self._clients.pop, connection, None)
            self._server.connected(connection)
            connection.exit_stack.push_async_callback(self._subscriptions.drop, connection)
        return client

    def of(self, ctx: ServerRequestContext[Any, Any]) -> Client | None:
        """The handshake-era client behind a request; None for a 2026-07-28 request, or an unknown client."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None
        return self._clients.get(sdk_runner.connection_of(ctx.session))

    def log_level(self, default: str | None = "info") -> str | None:
        """The most verbose level any connected client asked for (what servers are asked to send); `default`
        while none asked."""
        levels = [c.log_level for c in self._clients.values() if c.log_level is not None]
        return min(levels, key=LOG_LEVELS.index) if levels else default

    async def broadcast_log(self, params: Mapping[str, Any]) -> None:
        """A server's log message that belongs to no one request: to every client at its level."""
        notification = log_notification(params)
        for client in list(self._clients.values()):
            if at_least(params.get("level"), client.log_level):
                await deliver(client.session, notification)

    async def resource_updated(self, public: str) -> None:
        """Tell the clients that subscribed to the resource `public` that it changed."""
        notification = types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=public))
        for client in list(self._clients.values()):
            if public in client.subscriptions:
                await deliver(client.session, notification)

    async def notify_changed(self, kinds: Iterable[str]) -> None:
        """Tell every client which of the hub's lists changed; a client that cannot be told is dropped."""
        kinds = set(kinds)
        senders = []
        for kind in ("tools", "prompts", "resources"):
            if kind in kinds or (kind == "resources" and "resource_templates" in kinds):  # one notification for both
                senders.append(_LIST_CHANGED[kind])
        for connection, client in list(self._clients.items()):
            for send in senders:
                try:
                    with anyio.fail_after(NOTIFY_TIMEOUT):
                        await send(client.session)
                except Exception:  # boundary: one gone client must not stop the others' notifications
                    logger.debug("dropping a client that could not be notified", exc_info=True)
                    self._clients.pop(connection, None)
                    break

    # -- notifications from clients -------------------------------------------------

    async def initialized(self, ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
        client = self.register(ctx.session)
        sole = self._sole
        if sole is not None and sole.origin is None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            sole.origin = ClientOrigin(ctx, client, scoped=False)
            sole.arrived.set()

    async def roots_changed(self, ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
        key = sdk_runner.connection_of(ctx.session)
        sole = self._sole is not None and self._sole.origin is not None and self._sole.origin.client_key is key
        for upstream in list(self._upstreams.values()):  # mounts may come and go meanwhile (a reload)
            await upstream.roots_changed(key, sole=sole)

    # -- the one client of a hub serving stdio --------------------------------------

    @property
    def _sole(self) -> SoleClient | None:
        return self._server.sole

    def serve_one_client(self) -> None:
        """The hub serves stdio, to one client: servers' `roots/list` that no call explains go to it
        (shared sessions' questions, on its behalf), and its `notifications/roots/list_changed` reaches
        the shared sessions too. Call before the mounts start."""
        if self._server.sole is None:
            self._server.sole = SoleClient()

    async def sole_client(self) -> ClientOrigin | None:
        """The client of a hub serving stdio, waiting (up to `SOLE_CLIENT_WAIT`) for it to arrive; None: not
        serving stdio, no client yet, or a 2026-07-28 client (which can be asked only during its calls)."""
        sole = self._sole
        if sole is None:
            return None
        with anyio.move_on_after(SOLE_CLIENT_WAIT):
            await sole.arrived.wait()
        return sole.origin
