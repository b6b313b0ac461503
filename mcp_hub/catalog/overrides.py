"""What a model reads of a tool, as the hub's administrator says (`[servers.NAME.tools.TOOL]`).

Without forking a server, an administrator may give one of its tools (named by the server's own
name) another title or description, annotations merged over the server's, and arguments fixed to a
value: a fixed argument is left out of the input schema a client lists (its `properties` and
`required`), and the hub adds it to every call of the tool. A client that sends a fixed argument all
the same is answered invalid params naming it, rather than having its value silently replaced.

Only what the hub shows is rewritten (`Overrides.shown`, applied as the catalog builds its public view):
the catalog keeps the server's own definitions, so pinning fingerprints what the server serves (an
override never makes a pin look changed; a server's change is still held) and the catalog snapshot
holds the server's listing. Calls carry the fixed arguments from the router on (`Overrides.sent`), so
the policy's constraints, the guardrails, the cache and the audit see the call as it is sent upstream.

An override naming a tool its server does not list (a typo, a tool renamed, or held by pinning) is
a warning once the server lists, never an error: the override applies when the tool appears.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from mcp_types import INVALID_PARAMS

from mcp_hub.config import ServerConfig, ToolOverride
from mcp_hub.errors import HubError

logger = logging.getLogger("mcp_hub.catalog")


class FixedArgumentSent(HubError):
    """A call sent an argument the hub's configuration fixes for its tool (-32602)."""

    code = INVALID_PARAMS

    def __init__(self, tool: str, names: Iterable[str], mount: str, native: str) -> None:
        self.tool = tool
        self.names = tuple(names)
        self.mount, self.native = mount, native
        listed = ", ".join(repr(name) for name in self.names)
        super().__init__(
            f"Invalid arguments for tool {tool}: {listed} {'is' if len(self.names) == 1 else 'are'} set by the hub "
            "and not part of the tool's input schema; leave it out"
        )


class Overrides:
    """Every mount's tool overrides, by mount and the server's own tool name."""

    def __init__(self, tables: Mapping[str, Mapping[str, ToolOverride]] | None = None) -> None:
        self._tables = {mount: dict(tools) for mount, tools in (tables or {}).items() if tools}
        self._warned: set[tuple[str, str]] = set()

    @classmethod
    def of(cls, servers: Mapping[str, ServerConfig]) -> Overrides:
        """The overrides the enabled servers' `[servers.NAME.tools.TOOL]` tables configure."""
        return cls({name: server.tools for name, server in servers.items()})

    def __bool__(self) -> bool:
        return bool(self._tables)

    def get(self, mount: str, native: str) -> ToolOverride | None:
        return self._tables.get(mount, {}).get(native)

    def shown(self, mount: str, native: str, tool: dict[str, Any]) -> dict[str, Any]:
        """`tool` (the server's `native`, under its public name) as a model is to read it."""
        override = self.get(mount, native)
        if override is None:
            return tool
        shown = dict(tool)
        if override.title is not None:
            shown["title"] = override.title
        if override.description is not None:
            shown["description"] = override.description
        if override.annotations:
            own = tool.get("annotations")
            shown["annotations"] = {**(own if isinstance(own, dict) else {}), **override.annotations}
        if override.arguments:
            shown["inputSchema"] = _without(tool.get("inputSchema"), override.arguments)
        return shown

    def sent(self, mount: str, native: str, public: str, arguments: Any) -> Any:
        """A call's `arguments` as they are sent upstream: with the tool's fixed arguments added. Raises
        `FixedArgumentSent` when the call sent one of them itself."""
        override = self.get(mount, native)
        if override is None or not override.arguments:
            return arguments
        given = arguments if isinstance(arguments, Mapping) else {}
        clashing = [name for name in override.arguments if name in given]
        if clashing:
            raise FixedArgumentSent(public, clashing, mount, native)
        return {**given, **override.arguments}

    def check(self, mount: str, listed: Iterable[Mapping[str, Any]]) -> None:
        """Warn (once each) of the overrides of `mount` that name no tool its listing has, and of fixed
        arguments its tool's schema does not have."""
        configured = self._tables.get(mount)
        if not configured:
            return
        tools = {tool.get("name"): tool for tool in listed}
        for native, override in configured.items():
            tool = tools.get(native)
            if tool is None:
                if (mount, native) not in self._warned:
                    self._warned.add((mount, native))
                    logger.warning(
                        "server %r lists no tool %r (or pinning holds it): its [servers.%s.tools.%s] override "
                        "applies only once it does; check the tool's name (the server's own, as in `mcp-hub tools`)",
                        mount,
                        native,
                        mount,
                        native,
                    )
                continue
            self._warned.discard((mount, native))
            schema = tool.get("inputSchema")
            properties = schema.get("properties") if isinstance(schema, Mapping) else None
            for name in override.arguments:
                key = (mount, f"{native}\0{name}")
                if isinstance(properties, Mapping) and name not in properties and key not in self._warned:
                    self._warned.add(key)
                    logger.warning(
                        "server %r: tool %r has no argument %r in its input schema; the fixed value is sent all "
                        "the same ([servers.%s.tools.%s] arguments)",
                        mount,
                        native,
                        name,
                        mount,
                        native,
                    )


def _without(schema: Any, fixed: Mapping[str, Any]) -> Any:
    """An input schema without the `fixed` arguments in its `properties` and `required`."""
    if not isinstance(schema, dict):
        return schema
    shown = dict(schema)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        shown["properties"] = {key: value for key, value in properties.items() if key not in fixed}
    required = schema.get("required")
    if isinstance(required, list):
        kept = [name for name in required if name not in fixed]
        if kept:
            shown["required"] = kept
        else:
            del shown["required"]
    return shown
