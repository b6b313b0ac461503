"""The tools a caller may see, ready to export: each tool's JSON and the names a provider sees."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mcp_hub.providers.calls import HubCall, ToolCallError
from mcp_hub.providers.content import as_json
from mcp_hub.providers.names import ToolNames

JSON = dict[str, Any]


class Toolset:
    """MCP tool definitions (the SDK's `Tool`s or their JSON) and their exported names."""

    def __init__(self, tools: Iterable[Any]) -> None:
        self.tools: list[JSON] = [as_json(tool) for tool in tools]
        self.names = ToolNames(tool["name"] for tool in self.tools)
        self._by_name = {tool["name"]: tool for tool in self.tools}

    def tool(self, name: str) -> JSON:
        """The definition of the tool the hub calls `name`."""
        return self._by_name[name]

    def call(self, exported_name: Any, arguments: Any, call_id: str | None) -> HubCall:
        """A hub call from a provider's name and arguments (a JSON object, or its text as OpenAI sends it)."""
        if not isinstance(exported_name, str) or not exported_name:
            raise ToolCallError("the tool call names no tool")
        name = self.names.original(exported_name)
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                raise ToolCallError(f"the arguments of {exported_name} are not valid JSON: {exc}") from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolCallError(f"the arguments of {exported_name} are not a JSON object")
        return HubCall(name=name, arguments=arguments, call_id=call_id, exported_name=exported_name)
