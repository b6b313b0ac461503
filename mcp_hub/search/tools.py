"""The search tool and the call tool a client lists in place of a big catalog, and what answers them.

With `[search] enabled = true` (or `tool_search = true` in the caller's policy profile), a client's
tools/list holds two tools of the hub's own (and the
`pinned` tools it may see):

- the search tool (`search_tools`): `{"query": "undo my last commit", "limit": 5}` answers with the
  best-matching tools the caller may see, each as tools/list would list it (name, title, description,
  input schema, annotations), in `structuredContent.tools` and as JSON text;
- the call tool (`call_tool`): `{"name": "git_git_reset", "arguments": {...}}` is served exactly as a
  tools/call of that tool: the endpoint unwraps it (`ToolSearch.unwrap`) before anything else reads the
  request, so policy, pins, guardrails, confirmation, the audit and the answer (an unknown tool, a
  denial) are those of a direct call.

Pinning's `hold` and the policy's visibility apply as to the list: a held tool is not in the
catalog, and a tool the caller may not see is never found.

Each search is told to `on_search` (the hub points it at the audit trail, chain/audit.py) as a
`Searched`: who searched, for what, and the names found (or why the search was refused).
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic_core
from mcp_types import INVALID_PARAMS

from mcp_hub.catalog.catalog import Target, View
from mcp_hub.config import SearchSettings
from mcp_hub.errors import HubError
from mcp_hub.policy import PolicySet
from mcp_hub.search.index import ToolIndex

MAX_RESULTS = 50


class BadSearchCall(HubError):
    """A call of the search or call tool whose arguments are not what its input schema says."""

    code = INVALID_PARAMS


@dataclass(frozen=True, slots=True)
class Searched:
    """One search, as the audit records it."""

    principal: str
    session: str | None
    tool: str
    """The search tool's name."""
    arguments: Mapping[str, Any]
    """The search's arguments, as the caller sent them (query, limit)."""
    found: tuple[str, ...]
    """The public names of the tools found, best first."""
    outcome: str
    """"searched", or "error" for a search whose arguments are not what the search tool's schema says."""
    reason: str | None
    latency_ms: float


class ToolSearch:
    """The hub's search and call tools, over the tools view `view` (see the module's docstring)."""

    def __init__(self, settings: SearchSettings, view: Callable[[], View]) -> None:
        self.settings = settings
        self.index = ToolIndex(view, settings.ranking)
        self._pinned = (
            re.compile("|".join(fnmatch.translate(glob) for glob in settings.pinned)) if settings.pinned else None
        )
        self.tools: tuple[dict[str, Any], ...] = (
            {
                "name": settings.search_tool,
                "title": "Search tools",
                "description": (
                    "Find the tools that can do what you need among the many this hub offers. Describe the task "
                    "in plain words; the answer lists the best-matching tools with their input schemas. Then call "
                    f"one with {settings.call_tool}."
                ),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What you want to do, in plain words."},
                        "limit": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_RESULTS,
                            "description": f"How many tools to return (default {settings.results}).",
                        },
                    },
                    "required": ["query"],
                },
                "annotations": {"readOnlyHint": True, "openWorldHint": False},
            },
            {
                "name": settings.call_tool,
                "title": "Call a tool",
                "description": (
                    f"Call a tool found with {settings.search_tool}, by its name, with arguments that match its "
                    "input schema. The answer is that tool's."
                ),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "The tool's name, as the search returned it."},
                        "arguments": {"type": "object", "description": "The tool's arguments."},
                    },
                    "required": ["name"],
                },
            },
        )
        self._schemas = {tool["name"]: tool["inputSchema"] for tool in self.tools}
        self.on_search: Callable[[Searched], None] | None = None
        """Told of every search (the audit trail's `searched`), if set."""

    def active(self, principal: str, policy: PolicySet) -> bool:
        """Whether `principal` lists the search and call tools: as its policy profile's `tool_search` says, else
        as `[search] enabled` says."""
        chosen = policy.tool_search(principal)
        return self.settings.enabled if chosen is None else chosen

    def on_for_anyone(self, policy: PolicySet) -> bool:
        """Whether some caller lists the search and call tools: `[search] enabled`, or a profile that says
        `tool_search = true`."""
        return self.settings.enabled or any(profile.tool_search for profile in policy.profiles.values())

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The input schema of the search or call tool `name`; None for any other name."""
        return self._schemas.get(name)

    def listed(self, visible: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
        """What a caller lists: the search and call tools, then the pinned ones among the tools it may see."""
        pinned = self._pinned
        names = {tool["name"] for tool in self.tools}
        kept = () if pinned is None else tuple(t for t in visible if pinned.match(t["name"]) and t["name"] not in names)
        return self.tools + kept

    def unwrap(self, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """A tools/call's params as they are to be served: a call of the call tool becomes a call of the tool it
        names (its other fields, `_meta` and the like, kept); any other call is left as it is."""
        if params.get("name") != self.settings.call_tool:
            return params
        arguments = params.get("arguments") or {}
        name = arguments.get("name") if isinstance(arguments, Mapping) else None
        inner = arguments.get("arguments") if isinstance(arguments, Mapping) else None
        inner = {} if inner is None else inner
        if not isinstance(name, str) or not name:
            raise BadSearchCall(f"{self.settings.call_tool}: 'name' must be the name of a tool, as a string")
        if not isinstance(inner, Mapping):
            raise BadSearchCall(f"{self.settings.call_tool}: 'arguments' must be an object")
        return {**params, "name": name, "arguments": dict(inner)}

    def is_search(self, params: Mapping[str, Any]) -> bool:
        return params.get("name") == self.settings.search_tool

    async def search(
        self,
        params: Mapping[str, Any],
        visible: Callable[[Target], bool],
        *,
        principal: str = "",
        session: str | None = None,
    ) -> dict[str, Any]:
        """The search tool's result: the best matches for the query among the tools `visible` lets through,
        searched by `principal` (told to `on_search`)."""
        started = time.monotonic()
        arguments = params.get("arguments") or {}
        try:
            tools = await self._found(arguments, visible)
        except BadSearchCall as exc:
            self._tell(principal, session, arguments, (), "error", str(exc), started)
            raise
        self._tell(principal, session, arguments, tuple(str(tool["name"]) for tool in tools), "searched", None, started)
        structured = {"tools": tools}
        return {
            "content": [{"type": "text", "text": pydantic_core.to_json(structured).decode()}],
            "structuredContent": structured,
            "isError": False,
        }

    def _tell(
        self,
        principal: str,
        session: str | None,
        arguments: Any,
        found: tuple[str, ...],
        outcome: str,
        reason: str | None,
        started: float,
    ) -> None:
        if self.on_search is None:
            return
        elapsed = round((time.monotonic() - started) * 1000, 3)
        given = dict(arguments) if isinstance(arguments, Mapping) else {"arguments": arguments}
        self.on_search(Searched(principal, session, self.settings.search_tool, given, found, outcome, reason, elapsed))

    async def _found(self, arguments: Any, visible: Callable[[Target], bool]) -> list[dict[str, Any]]:
        query = arguments.get("query") if isinstance(arguments, Mapping) else None
        limit = arguments.get("limit", self.settings.results) if isinstance(arguments, Mapping) else None
        if not isinstance(query, str) or not query.strip():
            raise BadSearchCall(f"{self.settings.search_tool}: 'query' must be a non-empty string")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RESULTS:
            raise BadSearchCall(f"{self.settings.search_tool}: 'limit' must be an integer from 1 to {MAX_RESULTS}")
        found = await self.index.search(query, limit, visible)
        return [_described(tool) for tool in found]


def _described(tool: Mapping[str, Any]) -> dict[str, Any]:
    """What a search tells of a tool: what tools/list would (less `_meta`, `icons` and the output schema)."""
    keep = ("name", "title", "description", "inputSchema", "annotations")
    return {key: tool[key] for key in keep if key in tool}
