"""The SDK low-level `Server` as the hub's: the capabilities and extensions it declares (what the mounted
servers offer, `merged_extensions`), its initialized handshake-era connections (`session_connections`), and
the one client of a hub serving stdio (`client_opened`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import mcp_types as types
import pydantic_core
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_hub import wire
from mcp_hub.server.lane import CallLane
from mcp_hub.server.origin import SoleClient
from mcp_hub.server.skills import skills_settings
from mcp_hub.upstream import CARRIED_EXTENSIONS, SKILLS_EXTENSION, Upstream

_SERVED_EXTENSIONS: Mapping[str, Mapping[str, Any]] = {
    **CARRIED_EXTENSIONS,
    SKILLS_EXTENSION: {"directoryRead": True},
}
"""The extensions a mount that has not connected yet counts as declaring: those the hub can carry, MCP Apps,
and Skills, whose requests the hub serves itself (skills.py)."""

NO_CACHING: dict[CacheableMethod, CacheHint] = {
    method: CacheHint(ttl_ms=0, scope="private")
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")
}
"""What the hub tells 2026-07-28 clients about caching its answers, unless a server said otherwise:
always revalidate, never share across callers (what a caller sees will depend on who it is)."""


class HubServer(Server[Any]):
    """The SDK server, advertising what the mounted servers offer, and that the hub's lists
    change as mounts come and go."""

    def __init__(self, name: str, upstreams: Mapping[str, Upstream], **options: Any) -> None:
        super().__init__(name, **options)
        self._upstreams = upstreams
        self.connections: dict[str | None, Connection] = {}
        """The handshake-era connections whose clients have initialized: HTTP sessions by session id,
        and under None the latest without one (in a hub serving stdio, its one client's)."""
        self.lane: CallLane | None = None
        """Where clients' calls are served past the SDK runner's generic steps (see lane.py)."""
        self.sole: SoleClient | None = None
        """Set while the hub serves stdio, which has one client (see `Clients.serve_one_client`)."""

    @property
    def server_info_stamp(self) -> dict[str, Any]:
        """A fresh copy of the hub's `serverInfo` stamp for each 2026-07-28 result, as the SDK's; parsed from
        its JSON, which takes a fraction of the SDK's `deepcopy`."""
        stamp = self.__dict__.get("_stamp_json")
        if stamp is None:
            stamp = self.__dict__["_stamp_json"] = wire.dumps(super().server_info_stamp)
        return pydantic_core.from_json(stamp)

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        """The hub's handlers, less what no mount offers (tools, prompts, resources, completions,
        resource subscriptions), and the extensions its connected mounts declared (`merged_extensions`).

        A mount that has not connected yet might offer anything, so it counts
        as offering everything: capabilities cannot grow after a client
        connects, while lists can. Of extensions, it counts as declaring those
        the hub can carry (`CARRIED_EXTENSIONS`: MCP Apps).
        """
        known = [u.known_capabilities for u in self._upstreams.values() if u.config.enabled]
        if not extensions:
            extensions = self.declared_extensions() or None
        caps = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if any(c is None for c in known):
            return caps
        offered = [c for c in known if c is not None]
        update: dict[str, Any] = {}
        for capability in ("tools", "prompts", "resources", "completions"):
            if not any(getattr(c, capability) for c in offered):
                update[capability] = None
        if (
            caps.resources is not None
            and "resources" not in update
            and protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            subscribe = any(c.resources and c.resources.subscribe for c in offered)
            update["resources"] = caps.resources.model_copy(update={"subscribe": subscribe})
        return caps.model_copy(update=update)

    def declared_extensions(self) -> dict[str, dict[str, Any]]:
        """The extensions the enabled mounts declared; one not connected yet counts as declaring those the
        hub can carry (`_SERVED_EXTENSIONS`). Skills' settings are the hub's own (`skills_settings`)."""
        known = [u.known_capabilities for u in self._upstreams.values() if u.config.enabled]
        declared = [c.extensions if c is not None else _SERVED_EXTENSIONS for c in known]
        merged = merged_extensions(declared)
        skills = skills_settings([(d or {}).get(SKILLS_EXTENSION) for d in declared])
        if skills is not None:
            merged[SKILLS_EXTENSION] = skills
        return merged

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options
            or NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
            experimental_capabilities,
            extensions,
        )

    def connected(self, connection: Connection) -> None:
        """A handshake-era client initialized on `connection`: among `connections` until it closes."""
        self.connections[connection.session_id] = connection
        connection.exit_stack.callback(_forget, self.connections, connection)

    async def declare_extensions(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: the `initialize` answer declares the mounts' extensions (`capabilities.extensions`),
        as a server speaking the handshake era directly does (MCP Apps hosts look for it there); the SDK's
        shaping of that era's answer leaves the field out, so it is put back here."""
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            capabilities = result.get("capabilities")
            if isinstance(capabilities, dict) and "extensions" not in capabilities:
                extensions = self.declared_extensions()
                if extensions:
                    capabilities["extensions"] = extensions
        return result


def merged_extensions(declared: Iterable[Mapping[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """The extensions several servers declared (identifier -> settings), as one declaration.

    Every identifier any of them declared, unknown ones included. Settings of the same
    identifier are merged key by key: lists are joined (each value once, in order of
    first mention, e.g. MCP Apps' `mimeTypes`), objects merged alike, and for anything
    else the first server's value stands.
    """
    merged: dict[str, dict[str, Any]] = {}
    for extensions in declared:
        for identifier, settings in (extensions or {}).items():
            if isinstance(settings, Mapping):
                merged[identifier] = _merged_settings(merged.get(identifier, {}), settings)
    return merged


def _merged_settings(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(first)
    for key, value in second.items():
        kept = merged.get(key)
        if key not in merged:
            merged[key] = value
        elif isinstance(kept, list) and isinstance(value, list):
            merged[key] = kept + [v for v in value if v not in kept]
        elif isinstance(kept, Mapping) and isinstance(value, Mapping):
            merged[key] = _merged_settings(kept, value)
    return merged


def session_connections(server: Server[Any]) -> Mapping[str | None, Connection]:
    """The hub's initialized handshake-era connections, by session id (see `HubServer.connections`);
    none for another server."""
    return server.connections if isinstance(server, HubServer) else {}


def client_opened(server: Server[Any], modern: bool) -> None:
    """The client of a hub serving stdio sent its first request (`modern`: a 2026-07-28 one, which is all
    there is to know of it; a handshake-era client is known once it has initialized)."""
    sole = server.sole if isinstance(server, HubServer) else None
    if sole is not None and modern:
        sole.arrived.set()


def _forget(connections: dict[str | None, Connection], connection: Connection) -> None:
    if connections.get(connection.session_id) is connection:
        del connections[connection.session_id]
