"""Tool definitions, calls and results in model providers' formats (mcp_hub/providers/), checked
against the providers' own published types (the `openai`, `anthropic` and `google-genai` packages; no
network) and against the rules those types leave unchecked (names, Gemini's schema subset, OpenAI's
strict mode), on the 112 real tool definitions of tests/data/tool_corpus.json."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from anthropic.types import ToolParam, ToolResultBlockParam
from google.genai import types as genai
from openai.types.chat import ChatCompletionToolMessageParam, ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter

from mcp_hub.providers import SchemaError, ToolCallError, Toolset, UnknownToolError, anthropic, gemini, openai
from mcp_hub.providers.names import NAME_RULE, fitted
from mcp_hub.providers.schema import gemini_problems, gemini_schema, openai_strict, resolved

CORPUS = json.loads((Path(__file__).parent / "data" / "tool_corpus.json").read_text(encoding="utf-8"))
TOOLS = [
    {**tool, "name": f"{mount}_{tool['name']}"}
    for mount, server in CORPUS["servers"].items()
    for tool in server["tools"]
]
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def typed(kind: Any, value: Any) -> None:
    """`value` is valid as the TypedDict `kind` (pydantic, strict) and has no key `kind` does not declare
    (pydantic lets a TypedDict's extra keys through)."""
    TypeAdapter(kind).validate_python(value, strict=True)
    assert set(value) <= set(get_type_hints(kind)), sorted(set(value) - set(get_type_hints(kind)))


def test_the_corpus_is_the_realistic_catalog() -> None:
    assert len(TOOLS) == 112 and len(CORPUS["servers"]) >= 12


def test_openai_chat_and_responses_accept_every_corpus_tool() -> None:
    toolset = Toolset(TOOLS)
    chat, responses = openai.chat_tools(toolset), openai.responses_tools(toolset)
    assert len(chat) == len(responses) == len(TOOLS)
    for tool, entry, flat in zip(TOOLS, chat, responses, strict=True):
        typed(ChatCompletionToolParam, entry)
        typed(FunctionToolParam, flat)
        function = entry["function"]
        assert OPENAI_NAME.match(function["name"]) and function["name"] == tool["name"]
        assert function["description"] == tool["description"]  # descriptions kept
        assert function["parameters"]["type"] == "object" and "$schema" not in function["parameters"]
        assert flat == {"type": "function", **function}
        if function["strict"]:
            assert_strict(function["parameters"])
    strict = sum(entry["function"]["strict"] for entry in chat)
    # of 112; the others have a keyword strict mode lacks (mostly a `default`), or a free-form object
    assert strict == 83


def assert_strict(schema: Any) -> None:
    """OpenAI's strict-mode rules: every object closed, with every property required."""
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            assert schema["additionalProperties"] is False
            assert schema["required"] == list(schema["properties"])
        for value in schema.values():
            assert_strict(value)
    elif isinstance(schema, list):
        for value in schema:
            assert_strict(value)


def test_anthropic_accepts_every_corpus_tool() -> None:
    definitions = anthropic.tools(Toolset(TOOLS))
    for tool, definition in zip(TOOLS, definitions, strict=True):
        typed(ToolParam, definition)
        assert OPENAI_NAME.match(definition["name"])
        assert definition["input_schema"]["type"] == "object" and "$schema" not in definition["input_schema"]
        assert definition["description"] == tool["description"]


def test_gemini_accepts_every_corpus_tool() -> None:
    (tool,) = gemini.tools(Toolset(TOOLS))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # google-genai only warns about a type it does not know
        genai.Tool.model_validate(tool)  # its models refuse keys they do not know
    declarations = tool["function_declarations"]
    assert len(declarations) == len(TOOLS)
    changed = 0
    for original, declaration in zip(TOOLS, declarations, strict=True):
        assert NAME_RULE.match(declaration["name"])
        assert declaration["description"] == original["description"]
        if "parameters" in declaration:
            assert gemini_problems(declaration["parameters"]) == [], declaration["name"]
        else:
            assert not original["inputSchema"].get("properties")
        changed += declaration.get("parameters") != original["inputSchema"]
    assert changed == len(TOOLS)  # every schema needs at least its types in upper case, most their $schema dropped


def test_gemini_subset_conversions() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": False,
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "properties": {
            "where": {"$ref": "#/$defs/Point", "description": "the place"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "count": {"type": ["integer", "null"], "exclusiveMinimum": 0},
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "mode": {"const": "fast"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "one or the other"},
            "tags": {"type": "array"},
        },
        "required": ["where", "ghost"],
    }
    out = gemini_schema(resolved(schema))
    assert out == {
        "type": "OBJECT",
        "properties": {
            "where": {
                "type": "OBJECT",
                "description": "the place",
                "properties": {"x": {"type": "NUMBER"}},
                "required": ["x"],
            },
            "note": {"type": "STRING", "default": None, "nullable": True},
            "count": {"type": "INTEGER", "nullable": True},
            "level": {"type": "INTEGER", "description": "One of: 1, 2, 3"},
            "mode": {"type": "STRING", "enum": ["fast"]},
            "either": {
                "anyOf": [
                    {"type": "STRING", "description": "one or the other"},
                    {"type": "INTEGER", "description": "one or the other"},
                ]
            },
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
        },
        "required": ["where"],
    }
    assert gemini_problems(out) == []
    genai.Schema.model_validate(out)


def test_a_recursive_or_foreign_reference_is_refused_clearly() -> None:
    tree = {"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}}
    tree["$defs"] = {
        "Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}
    }
    with pytest.raises(SchemaError, match="recursive"):
        resolved(tree)
    with pytest.raises(SchemaError, match="not a local definition"):
        resolved({"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}})
    # OpenAI and Anthropic take references as they are
    toolset = Toolset([{"name": "t", "inputSchema": tree}])
    assert anthropic.tools(toolset)[0]["input_schema"]["$defs"] == tree["$defs"]
    with pytest.raises(SchemaError):
        gemini.tools(toolset)


def test_strict_mode_only_where_it_means_the_same() -> None:
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert openai_strict(closed) == {**closed, "additionalProperties": False}
    # an optional argument: required and nullable, its null dropped before the call
    optional = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"enum": ["x", "y"], "type": "string"}}}
    assert openai_strict(optional) == {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}, "b": {"enum": ["x", "y", None], "type": ["string", "null"]}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    # one that takes null already: a null would not say whether it was left out
    assert openai_strict({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}) is None
    assert (
        openai_strict({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}, "required": ["a"]})
        is None
    )
    assert openai_strict({"type": "object", "properties": {}}) is None
    [entry] = openai.chat_tools(Toolset([{"name": "t", "inputSchema": closed}]), strict=False)
    assert entry["function"]["strict"] is False and "additionalProperties" not in entry["function"]["parameters"]


def test_nulls_for_left_out_arguments_are_dropped() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "keep": {"type": ["string", "null"]},
            "inner": {
                "type": "object",
                "properties": {"b": {"type": "integer"}, "c": {"type": "integer"}},
                "required": ["c"],
            },
        },
        "required": ["inner"],
    }
    toolset = Toolset([{"name": "t", "inputSchema": schema}])
    arguments = '{"a": null, "keep": null, "inner": {"b": null, "c": 1}}'
    call = openai.chat_call(toolset, {"id": "c", "type": "function", "function": {"name": "t", "arguments": arguments}})
    assert call.arguments == {"keep": None, "inner": {"c": 1}}


def test_names_that_do_not_fit_are_mapped_and_mapped_back() -> None:
    long_name = "x" * 80
    toolset = Toolset(
        [
            {"name": "files.read", "inputSchema": {}},
            {"name": long_name, "inputSchema": {}},
            {"name": "9lives", "inputSchema": {}},
        ]
    )
    names = [entry["function"]["name"] for entry in openai.chat_tools(toolset)]
    assert all(NAME_RULE.match(name) for name in names) and len(set(names)) == 3
    assert names[0] != "files.read" and names[0] == fitted("files.read")
    for original, exported in zip(["files.read", long_name, "9lives"], names, strict=True):
        call = openai.chat_call(
            toolset, {"id": "c1", "type": "function", "function": {"name": exported, "arguments": "{}"}}
        )
        assert call.name == original
    with pytest.raises(UnknownToolError, match="Unknown tool: nope"):
        anthropic.call(toolset, {"type": "tool_use", "id": "t", "name": "nope", "input": {}})


def test_calls_in_each_provider_shape() -> None:
    toolset = Toolset([{"name": "time_now", "inputSchema": {"type": "object"}}])
    chat = openai.chat_call(
        toolset, {"id": "call_1", "type": "function", "function": {"name": "time_now", "arguments": '{"tz": "UTC"}'}}
    )
    flat = openai.responses_call(
        toolset, {"type": "function_call", "call_id": "call_2", "name": "time_now", "arguments": ""}
    )
    claude = anthropic.call(toolset, {"type": "tool_use", "id": "toolu_1", "name": "time_now", "input": {"tz": "UTC"}})
    gem = gemini.call(toolset, genai.FunctionCall(name="time_now", args={"tz": "UTC"}))
    assert (chat.name, chat.arguments, chat.call_id) == ("time_now", {"tz": "UTC"}, "call_1")
    assert (flat.arguments, flat.call_id) == ({}, "call_2")
    assert (claude.arguments, claude.call_id) == ({"tz": "UTC"}, "toolu_1")
    assert (gem.arguments, gem.call_id) == ({"tz": "UTC"}, None)
    for bad in ('{"tz": ', "[1, 2]"):
        with pytest.raises(ToolCallError):
            openai.chat_call(
                toolset, {"id": "c", "type": "function", "function": {"name": "time_now", "arguments": bad}}
            )


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
RESULT = {
    "content": [{"type": "text", "text": "a chart"}, {"type": "image", "data": PNG, "mimeType": "image/png"}],
    "structuredContent": {"points": 3},
}


@pytest.mark.slow
def test_results_in_each_provider_shape() -> None:
    toolset = Toolset([{"name": "plot", "inputSchema": {}}])
    message = openai.chat_result("call_1", RESULT)
    typed(ChatCompletionToolMessageParam, message)
    assert message["content"] == 'a chart\n[image (image/png), not shown]\n{"points": 3}'
    output = openai.responses_result("call_2", {**RESULT, "isError": True})
    typed(FunctionCallOutput, output)
    assert output["output"].startswith(openai.ERROR_MARK)

    block = anthropic.result("toolu_1", {**RESULT, "isError": True})
    typed(ToolResultBlockParam, block)
    assert block["content"] == [
        {"type": "text", "text": 'a chart\n{"points": 3}'},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]
    assert block["is_error"] is True
    assert "is_error" not in anthropic.result("toolu_2", RESULT)

    call = gemini.call(toolset, {"name": "plot", "args": {}, "id": "fc_1"})
    part = gemini.result(call, RESULT)
    genai.Part.model_validate(part)
    assert part["functionResponse"]["response"] == {"output": 'a chart\n[image (image/png), not shown]\n{"points": 3}'}
    assert part["functionResponse"]["id"] == "fc_1"
    structured = gemini.result(
        call, {"content": [{"type": "text", "text": '{"points": 3}'}], "structuredContent": {"points": 3}}
    )
    assert structured["functionResponse"]["response"] == {"output": {"points": 3}}
    failed = gemini.result(call, {"content": [{"type": "text", "text": "no"}], "isError": True})
    assert failed["functionResponse"]["response"] == {"error": "no"}
