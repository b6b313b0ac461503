"""Anthropic's Messages API tools: `{"name", "description", "input_schema"}` definitions, `tool_use`
content blocks in, `tool_result` blocks out (text, images as base64 sources, `is_error`)."""

from __future__ import annotations

from typing import Any

from mcp_hub.providers.calls import HubCall
from mcp_hub.providers.content import as_json, is_error, result_text
from mcp_hub.providers.schema import input_schema
from mcp_hub.providers.toolset import Toolset

JSON = dict[str, Any]

IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
"""The image types a tool_result may carry (others are described in text)."""


def tools(toolset: Toolset) -> list[JSON]:
    """The `tools` of a Messages request."""
    out = []
    for tool in toolset.tools:
        definition: JSON = {"name": toolset.names.exported(tool["name"])}
        description = tool.get("description") or tool.get("title")
        if description:
            definition["description"] = description
        definition["input_schema"] = input_schema(tool.get("inputSchema"))
        out.append(definition)
    return out


def call(toolset: Toolset, block: Any) -> HubCall:
    """A `tool_use` content block of the model's message."""
    use = as_json(block)
    return toolset.call(use.get("name"), use.get("input"), use.get("id"))


def result(tool_use_id: str | None, mcp_result: Any) -> JSON:
    """The `tool_result` block answering a tool_use (send it in a `user` message's content)."""
    answer = as_json(mcp_result)
    images = [
        {"type": "image", "source": {"type": "base64", "media_type": b["mimeType"], "data": b["data"]}}
        for b in answer.get("content", [])
        if b.get("type") == "image" and b.get("mimeType") in IMAGE_TYPES
    ]
    text = result_text({**answer, "content": [b for b in answer.get("content", []) if _not_shown(b)]})
    content: list[JSON] = ([{"type": "text", "text": text}] if text else []) + images
    out: JSON = {"type": "tool_result", "tool_use_id": tool_use_id or "", "content": content}
    if is_error(answer):
        out["is_error"] = True
    return out


def _not_shown(block: JSON) -> bool:
    return not (block.get("type") == "image" and block.get("mimeType") in IMAGE_TYPES)
