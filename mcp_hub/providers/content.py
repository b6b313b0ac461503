"""An MCP tool definition or result, read as plain JSON whatever object carries it (the SDK's types or
dicts), and an MCP result's content as text for a provider that takes text only."""

from __future__ import annotations

import json
from typing import Any

JSON = dict[str, Any]


def as_json(item: Any) -> JSON:
    """A tool or a CallToolResult (the SDK's pydantic type or its JSON) as its JSON, by the wire's names."""
    if isinstance(item, dict):
        return item
    return item.model_dump(mode="json", by_alias=True, exclude_none=True)


def text_of(block: JSON) -> str:
    """One content block as text: text itself; anything else as a short note of what it was."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "resource":
        resource = block.get("resource", {})
        if "text" in resource:
            return str(resource["text"])
        return f"[resource {resource.get('uri')} ({resource.get('mimeType', 'binary')}), not shown]"
    if kind == "resource_link":
        return f"[resource {block.get('uri')}: {block.get('name', '')}]"
    if kind in ("image", "audio"):
        return f"[{kind} ({block.get('mimeType', 'unknown type')}), not shown]"
    return f"[{kind} content, not shown]"


def result_text(result: JSON, *, skip: tuple[str, ...] = ()) -> str:
    """The result's content as one text, and its structured content as JSON when no text block
    already carries it (the spec asks servers to send both; not all do); blocks of the types in `skip`
    left out (a provider that takes them as they are)."""
    blocks = [b for b in result.get("content", []) if b.get("type") not in skip]
    texts = [text_of(b) for b in blocks]
    structured = result.get("structuredContent")
    if structured is not None:
        encoded = json.dumps(structured, ensure_ascii=False)
        if not any(_same_json(t, structured) for t in texts):
            texts.append(encoded)
    return "\n".join(texts)


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def is_error(result: JSON) -> bool:
    return bool(result.get("isError"))
