"""The terminal link: send a client's request to the mount that owns it.

The router restores native names on the way in (and adds the arguments an
administrator fixed for a tool, catalog/overrides.py) and maps names and resource
URIs back on the way out; everything else in params and results passes
untouched (content of every type, structuredContent, isError, annotations,
icons, `_meta`). Tool errors from a server are results and reach the client
exactly as sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.shared.dispatcher import ProgressFnT
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)

from mcp_hub.catalog.catalog import Catalog, Kind, Target
from mcp_hub.chain.context import CallContext
from mcp_hub.errors import UnknownName, UpstreamUnavailable
from mcp_hub.upstream import SKILLS_EXTENSION, UI_EXTENSION, Origin, Upstream
from mcp_hub.upstream.startup import Startup

_HOP_BY_HOP_META = frozenset(
    {PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY, "progressToken"}
)
"""`_meta` keys that describe the client's connection to the hub, not the request:
the hub's own connection to the server carries its own. (The log level a request
asks for is the request's own, and goes on to 2026-07-28 servers.)"""

_HOP_BY_HOP_META_LEGACY = _HOP_BY_HOP_META | {LOG_LEVEL_META_KEY}
"""A handshake-era server takes its log level from `logging/setLevel`, not from requests."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where a client's request goes: the item's kind, mount and native name, and the native params."""

    kind: Kind
    mount: str
    native: str
    public: str
    params: dict[str, Any]
    via: str | None = None
    """How the request named its target, when not by the hub's public name: "app", by the server's own
    name or URI, as an MCP Apps page does."""


class Router:
    def __init__(self, catalog: Catalog, upstreams: Mapping[str, Upstream], startup: Startup | None = None) -> None:
        self._catalog = catalog
        self._upstreams = upstreams
        self._startup = startup

    async def route_arriving(self, method: str, params: Mapping[str, Any]) -> Route:
        """`route`, but a name of a mount still making its first connection waits for that mount
        (within the start-up grace, see startup.py) and is resolved once it has listed."""
        try:
            return self.route(method, params)
        except UpstreamUnavailable as exc:
            if self._startup is None or not await self._startup.mount_settled(exc.mount):
                raise
        return self.route(method, params)

    def route(self, method: str, params: Mapping[str, Any]) -> Route:
        """Resolve the public name or URI a request names. Raises `UnknownName`."""
        if method == "tools/call":
            return self._named_route("tool", params, "name")
        if method == "prompts/get":
            return self._named_route("prompt", params, "name")
        if method == "resources/read":
            target, public, via = self._resource(params.get("uri"))
            return Route("resource", target.mount, target.native, public, {**params, "uri": target.native}, via)
        if method in ("skills/get", "resources/directory/read"):
            target, public, _ = self._resource(params.get("uri"))
            skills = self.skills_settings(target.mount)
            if skills is None or (method == "resources/directory/read" and skills.get("directoryRead") is not True):
                # Not a server's that serves skills (or reads folders): no such skill or folder, as it would say.
                raise self._unknown("skill" if method == "skills/get" else "directory", public, target.mount)
            return Route("resource", target.mount, target.native, public, {**params, "uri": target.native})
        if method == "completion/complete":
            ref = params.get("ref")
            if not isinstance(ref, dict):
                raise UnknownName("completion reference", repr(ref))
            if ref.get("type") == "ref/prompt":
                inner = self._named_route("prompt", ref, "name")
                return Route("prompt", inner.mount, inner.native, inner.public, {**params, "ref": inner.params})
            target, public, _ = self._resource(ref.get("uri"))
            native_ref = {**ref, "uri": target.native}
            return Route("resource", target.mount, target.native, public, {**params, "ref": native_ref})
        raise UnknownName("method", method)

    async def call(self, ctx: CallContext) -> dict[str, Any]:
        """The chain's last link: send the call to its mount."""
        return await self.forward(ctx.method, ctx.mount, ctx.params, on_progress=ctx.on_progress, origin=ctx.origin)

    async def forward(
        self,
        method: str,
        mount: str,
        params: Mapping[str, Any],
        *,
        on_progress: ProgressFnT | None = None,
        origin: Origin | None = None,
    ) -> dict[str, Any]:
        """Send a routed request (native params) to its mount; map names and URIs in the result back."""
        result = await self._send(mount, method, dict(params), on_progress, origin)
        if method == "tools/call":
            if "_meta" in result:
                result["_meta"] = self._catalog.public_meta(mount, result["_meta"])
            return self._map_content_list(mount, result, "content")
        if method == "prompts/get":
            messages = result.get("messages")
            if isinstance(messages, list):
                result["messages"] = [
                    {**m, "content": self._map_block(mount, m["content"])}
                    if isinstance(m, dict) and isinstance(m.get("content"), dict)
                    else m
                    for m in messages
                ]
        elif method == "tasks/get" and isinstance(result.get("result"), dict):
            result["result"] = self._map_content_list(mount, result["result"], "content")  # a task's call result
        elif method == "resources/read":
            contents = result.get("contents")
            if isinstance(contents, list):
                result["contents"] = [self._map_uri_field(mount, c) for c in contents]
        elif method == "skills/get" and isinstance(result.get("skill"), dict):
            result["skill"] = self.map_skill(mount, result["skill"])
        elif method == "resources/directory/read" and isinstance(result.get("resources"), list):
            result["resources"] = [self._map_uri_field(mount, r) for r in result["resources"]]
        return result

    # -- resolution -------------------------------------------------------------

    def _named_route(self, kind: Kind, params: Mapping[str, Any], key: str) -> Route:
        name = params.get(key)
        if not isinstance(name, str):
            raise UnknownName(kind, repr(name))
        target, via = self._catalog.resolve(f"{kind}s", name), None
        if target is None and kind == "tool":
            target, via = self._page_call(name), "app"
        if target is None:
            raise self._unknown(kind, name, self._catalog.mount_of(name))
        native = {**params, key: target.native}
        if kind == "tool":  # with the arguments the hub's configuration fixes (catalog/overrides.py)
            arguments = self._catalog.overrides.sent(target.mount, target.native, name, params.get("arguments"))
            if arguments is not params.get("arguments"):
                native["arguments"] = arguments
        return Route(kind, target.mount, target.native, name, native, via)

    def _page_call(self, native: str) -> Target | None:
        """The tool an MCP Apps page means by its server's own name: the one tool of that name among the
        mounts that serve pages (`serves_pages`), if a page may call it (its visibility includes "app")."""
        found = [t for t in self._catalog.natives("tools", native) if self.serves_pages(t.mount)]
        return found[0] if len(found) == 1 and self._catalog.pages_may_call(found[0]) else None

    def serves_pages(self, mount: str) -> bool:
        """Whether a mount serves MCP Apps pages: it declared the extension, or lists a tool naming a page
        (a handshake-era SDK server cannot declare extensions)."""
        upstream = self._upstreams.get(mount)
        capabilities = upstream.known_capabilities if upstream is not None else None
        if capabilities is not None and UI_EXTENSION in (capabilities.extensions or {}):
            return True
        return self._catalog.names_pages(mount)

    def skills_settings(self, mount: str) -> Mapping[str, Any] | None:
        """The settings of the skills extension a mount declared (`directoryRead`), or None: it serves no skills
        (or has not connected yet)."""
        upstream = self._upstreams.get(mount)
        capabilities = upstream.known_capabilities if upstream is not None else None
        settings = (capabilities.extensions or {}).get(SKILLS_EXTENSION) if capabilities is not None else None
        return settings if isinstance(settings, Mapping) else None

    def _resource(self, uri: Any) -> tuple[Target, str, str | None]:
        if not isinstance(uri, str):
            raise UnknownName("resource", repr(uri))
        target, via = self._catalog.resolve_uri(uri), None
        if target is None:
            target, via = self._page_read(uri), "app"
        if target is None:
            raise UnknownName("resource", uri)
        return target, uri, via

    def _page_read(self, native: str) -> Target | None:
        """The page an MCP Apps page means by its server's own `ui://` URI: that of the one mount serving
        pages that lists it or names it in a tool."""
        found = [m for m in self._catalog.page_owners(native) if self.serves_pages(m)]
        return Target(found[0], native) if len(found) == 1 else None

    def _unknown(self, noun: str, name: str, mount: str | None) -> Exception:
        """Unknown everywhere — unless its mount is down, which the caller should hear about."""
        upstream = self._upstreams.get(mount) if mount is not None else None
        if upstream is not None and upstream.capabilities is None and upstream.config.enabled:
            reason = f": {upstream.last_error}" if upstream.last_error else ""
            return UpstreamUnavailable(mount or "", f"is not connected ({upstream.state}{reason})")
        return UnknownName(noun, name)

    async def _send(
        self,
        mount: str,
        method: str,
        params: dict[str, Any],
        on_progress: ProgressFnT | None = None,
        origin: Origin | None = None,
    ) -> dict[str, Any]:
        upstream = self._upstreams.get(mount)
        if upstream is None:  # routed just before a configuration reload removed its mount
            raise UpstreamUnavailable(mount, "is no longer configured")
        meta = params.get("_meta")
        if isinstance(meta, dict):
            hop = _HOP_BY_HOP_META if upstream.modern_for(origin) else _HOP_BY_HOP_META_LEGACY
            if not hop.isdisjoint(meta):
                kept = {k: v for k, v in meta.items() if k not in hop}
                params = {**params, "_meta": kept} if kept else {k: v for k, v in params.items() if k != "_meta"}
        result = await upstream.request(method, params, on_progress=on_progress, origin=origin)
        meta = result.get("_meta")
        if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
            # The server's identity stamp describes its hop; the hub stamps its own.
            kept = {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY}
            if kept:
                result["_meta"] = kept
            else:
                del result["_meta"]
        return result

    # -- mapping results back ---------------------------------------------------

    def _map_content_list(self, mount: str, result: dict[str, Any], key: str) -> dict[str, Any]:
        blocks = result.get(key)
        if isinstance(blocks, list) and any(_links_resource(b) for b in blocks):
            result[key] = [self._map_block(mount, b) for b in blocks]
        return result

    def _map_block(self, mount: str, block: Any) -> Any:
        """Resource links and embedded resources point at the server's URIs: give them the hub's."""
        if not isinstance(block, dict):
            return block
        if block.get("type") == "resource_link":
            return self._map_uri_field(mount, block)
        if block.get("type") == "resource" and isinstance(block.get("resource"), dict):
            return {**block, "resource": self._map_uri_field(mount, block["resource"])}
        return block

    def map_skill(self, mount: str, skill: Any) -> Any:
        """A skill's entry with its URI and its files' given the hub's; digests, sizes and frontmatter untouched."""
        if not isinstance(skill, dict):
            return skill
        mapped = self._map_uri_field(mount, skill)
        files = skill.get("resources")
        if isinstance(files, list):
            mapped["resources"] = [self._map_uri_field(mount, f) for f in files]
        return mapped

    def _map_uri_field(self, mount: str, item: Any) -> Any:
        if isinstance(item, dict) and isinstance(item.get("uri"), str):
            return {**item, "uri": self._catalog.public_uri(mount, item["uri"])}
        return item


def _links_resource(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in ("resource_link", "resource")
