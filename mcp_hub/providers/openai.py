"""OpenAI's function tools: Chat Completions (`tools=[{"type": "function", "function": {...}}]`, tool
calls with JSON-text arguments, answered by `role: tool` messages) and the Responses API (flat
`{"type": "function", "name", ...}`, `function_call` items answered by `function_call_output`).
The same shapes serve any OpenAI-compatible server (Ollama, vLLM, llama.cpp).

Strict mode (`strict: true`) is used where the tool's schema means the same under it (see
`schema.openai_strict`), else `strict: false`. OpenAI's tool messages carry text only: images are
described, structured content goes as JSON, and an error result is marked at the start of the text."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mcp_hub.providers.calls import HubCall
from mcp_hub.providers.content import as_json, is_error, result_text
from mcp_hub.providers.schema import absent_nulls, input_schema, openai_strict
from mcp_hub.providers.toolset import Toolset

JSON = dict[str, Any]

ERROR_MARK = "[tool error] "


def function(tool: JSON, name: str, *, strict: bool = True) -> JSON:
    """One tool as an OpenAI function definition (the Responses API's flat form; Chat Completions
    nests it under "function")."""
    parameters = input_schema(tool.get("inputSchema"))
    closed = openai_strict(parameters) if strict else None
    out: JSON = {"name": name}
    description = tool.get("description") or tool.get("title")
    if description:
        out["description"] = description
    out["parameters"] = closed if closed is not None else parameters
    out["strict"] = closed is not None
    return out


def chat_tools(toolset: Toolset, *, strict: bool = True) -> list[JSON]:
    """The `tools` of a Chat Completions request."""
    return [
        {"type": "function", "function": function(t, toolset.names.exported(t["name"]), strict=strict)}
        for t in toolset.tools
    ]


def responses_tools(toolset: Toolset, *, strict: bool = True) -> list[JSON]:
    """The `tools` of a Responses API request."""
    return [
        {"type": "function", **function(t, toolset.names.exported(t["name"]), strict=strict)} for t in toolset.tools
    ]


def chat_call(toolset: Toolset, tool_call: Any) -> HubCall:
    """A Chat Completions tool call (`message.tool_calls[i]`, the SDK's object or its JSON)."""
    call = as_json(tool_call)
    fn = call.get("function") or {}
    return _without_absent_nulls(toolset, toolset.call(fn.get("name"), fn.get("arguments"), call.get("id")))


def responses_call(toolset: Toolset, item: Any) -> HubCall:
    """A Responses API `function_call` output item."""
    call = as_json(item)
    return _without_absent_nulls(toolset, toolset.call(call.get("name"), call.get("arguments"), call.get("call_id")))


def _without_absent_nulls(toolset: Toolset, call: HubCall) -> HubCall:
    """Under strict mode an optional argument is required and nullable: a null the model sent for one is
    the argument left out, as the server's own schema says it."""
    schema = input_schema(toolset.tool(call.name).get("inputSchema"))
    return replace(call, arguments=absent_nulls(schema, call.arguments))


def _text(result: JSON) -> str:
    text = result_text(result)
    return f"{ERROR_MARK}{text}" if is_error(result) else text


def chat_result(call_id: str | None, result: Any) -> JSON:
    """The `role: tool` message answering a Chat Completions tool call with an MCP result."""
    return {"role": "tool", "tool_call_id": call_id or "", "content": _text(as_json(result))}


def responses_result(call_id: str | None, result: Any) -> JSON:
    """The `function_call_output` input item answering a Responses API function call."""
    return {"type": "function_call_output", "call_id": call_id or "", "output": _text(as_json(result))}
