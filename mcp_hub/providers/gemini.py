"""Gemini's function calling: `{"function_declarations": [...]}` with schemas in Gemini's OpenAPI
subset (see `schema.gemini_schema`), `functionCall` parts in, `functionResponse` parts out
(`{"output": ...}`, or `{"error": ...}` for an error result). Gemini reads a function response as JSON:
structured content goes as it is, other content as text; images are described."""

from __future__ import annotations

from typing import Any

from mcp_hub.providers.calls import HubCall
from mcp_hub.providers.content import as_json, is_error, result_text
from mcp_hub.providers.schema import gemini_schema, input_schema, resolved
from mcp_hub.providers.toolset import Toolset

JSON = dict[str, Any]


def declaration(tool: JSON, name: str) -> JSON:
    """One tool as a Gemini function declaration; SchemaError when its schema cannot be said in
    Gemini's subset (a recursive reference)."""
    out: JSON = {"name": name}
    description = tool.get("description") or tool.get("title")
    if description:
        out["description"] = description
    parameters = gemini_schema(resolved(input_schema(tool.get("inputSchema"))))
    if parameters.get("properties"):  # a tool without arguments declares no parameters
        out["parameters"] = parameters
    return out


def tools(toolset: Toolset) -> list[JSON]:
    """The `tools` of a generateContent request: one Tool holding every declaration."""
    return [{"function_declarations": [declaration(t, toolset.names.exported(t["name"])) for t in toolset.tools]}]


def call(toolset: Toolset, function_call: Any) -> HubCall:
    """A `functionCall` part's call (`{"name", "args", "id"?}`, the SDK's `FunctionCall` or its JSON)."""
    fc = as_json(function_call)
    return toolset.call(fc.get("name"), fc.get("args"), fc.get("id"))


def result(hub_call: HubCall, mcp_result: Any) -> JSON:
    """The `functionResponse` part answering the call (send it in a `user` turn's parts)."""
    answer = as_json(mcp_result)
    structured = answer.get("structuredContent")
    if is_error(answer):
        response: JSON = {"error": result_text(answer)}
    elif isinstance(structured, dict) and not [b for b in answer.get("content", []) if b.get("type") != "text"]:
        response = {"output": structured}
    else:
        response = {"output": result_text(answer)}
    out: JSON = {"name": hub_call.exported_name, "response": response}
    if hub_call.call_id:
        out["id"] = hub_call.call_id
    return {"functionResponse": out}
