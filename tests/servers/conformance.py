"""The server the official MCP conformance suite (npm `@modelcontextprotocol/conformance`) expects.

A real MCP server on the SDK's low-level `Server`, serving the tools, prompts,
resources and behaviours the suite's server scenarios call by name, in both
protocol eras: the `initialize` handshake (2025-11-25 and older: logging,
resource subscriptions, sampling and elicitation requested mid-call) and the
stateless 2026-07-28 protocol (`server/discover`, `input_required` rounds with
an integrity-protected `requestState`, `subscriptions/listen`, caching hints,
`Mcp-Param-*` headers).

Runs as a stdio child process (`python tests/servers/conformance.py`) or over
streamable HTTP on loopback (`--http PORT`, endpoint `/mcp`, with an event
store so SSE streams can be resumed).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import secrets
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.caching import CACHEABLE_METHODS, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

Ctx = ServerRequestContext[Any, Any]

# A 1x1 PNG and a tiny WAV file.
IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def _tool(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": schema or NO_ARGS}


def _string_args(*names: str) -> dict[str, Any]:
    return {"type": "object", "properties": {n: {"type": "string"} for n in names}, "required": list(names)}


TOOLS: list[dict[str, Any]] = [
    # First on purpose: header-validation scenarios call the first listed tool with no arguments.
    _tool("test_simple_text", "Answer with simple text."),
    _tool("test_image_content", "Answer with an image."),
    _tool("test_audio_content", "Answer with audio."),
    _tool("test_embedded_resource", "Answer with an embedded resource."),
    _tool("test_multiple_content_types", "Answer with text, an image and an embedded resource."),
    _tool("test_tool_with_logging", "Send three log messages while running."),
    _tool("test_logging_tool", "Send a log message (delivered only where the request opted in)."),
    _tool("test_error_handling", "Always fail with a tool error."),
    _tool("test_tool_with_progress", "Report progress 0, 50 and 100 of 100."),
    _tool("test_sampling", "Ask the client's model to answer a prompt.", _string_args("prompt")),
    _tool("test_elicitation", "Ask the user for a username and an email address.", _string_args("message")),
    _tool("test_elicitation_sep1034_defaults", "Ask the user with defaults for every primitive type (SEP-1034)."),
    _tool("test_elicitation_sep1330_enums", "Ask the user with every enum schema variant (SEP-1330)."),
    _tool("test_reconnection", "Close the SSE stream mid-call, then answer (SEP-1699)."),
    _tool("test_streaming_elicitation", "Ask the user for input while the call is open."),
    _tool("test_missing_capability", "Needs the client's sampling capability; refuses without it."),
    _tool("test_trigger_tool_change", "Change the tool list and announce it."),
    _tool("test_trigger_prompt_change", "Change the prompt list and announce it."),
    {
        "name": "json_schema_2020_12_tool",
        "description": "Tool with JSON Schema 2020-12 features",
        "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"},
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": False,
        },
    },
    {
        "name": "test_header_param",
        "description": "Echo a parameter that is mirrored into the Mcp-Param-Region header.",
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
    },
    _tool("test_input_required_result_elicitation", "Ask the user's name over an input_required round."),
    _tool("test_input_required_result_sampling", "Ask the client's model over an input_required round."),
    _tool("test_input_required_result_list_roots", "Ask the client's roots over an input_required round."),
    _tool("test_input_required_result_request_state", "Round-trip a requestState over an input_required round."),
    _tool("test_input_required_result_multiple_inputs", "Ask elicitation, sampling and roots in one round."),
    _tool("test_input_required_result_multi_round", "Ask over two input_required rounds."),
    _tool("test_input_required_result_tampered_state", "Reject a requestState that fails its integrity check."),
    _tool("test_input_required_result_capabilities", "Ask only what the client declared it can answer."),
]

PROMPTS: list[dict[str, Any]] = [
    {"name": "test_simple_prompt", "description": "A prompt without arguments."},
    {
        "name": "test_prompt_with_arguments",
        "description": "A prompt with two required arguments.",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    },
    {
        "name": "test_prompt_with_embedded_resource",
        "description": "A prompt that embeds a resource.",
        "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}],
    },
    {"name": "test_prompt_with_image", "description": "A prompt with an image."},
    {"name": "test_input_required_result_prompt", "description": "A prompt that asks the user for context first."},
]

STATIC_TEXT = "This is the content of the static text resource."
RESOURCES: list[dict[str, Any]] = [
    {
        "uri": "test://static-text",
        "name": "static-text",
        "description": "A static text resource",
        "mimeType": "text/plain",
    },
    {
        "uri": "test://static-binary",
        "name": "static-binary",
        "description": "A static binary resource (a PNG image)",
        "mimeType": "image/png",
    },
    {
        "uri": "test://watched-resource",
        "name": "watched-resource",
        "description": "A resource clients may subscribe to",
        "mimeType": "text/plain",
    },
]
TEMPLATES: list[dict[str, Any]] = [
    {
        "uriTemplate": "test://template/{id}/data",
        "name": "template-data",
        "description": "Data for one id",
        "mimeType": "application/json",
    }
]

SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}

SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _user(content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": content}


def _elicit(message: str, **properties: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {name: {"type": kind} for name, kind in properties.items()},
                "required": list(properties),
            },
        },
    }


def _sample(text: str, max_tokens: int) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens},
    }


ROOTS_REQUEST: dict[str, Any] = {"method": "roots/list", "params": {}}


class StateSeal:
    """Integrity protection for `requestState`: an HMAC over the state, keyed per process."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _mac(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()

    def seal(self, state: dict[str, Any]) -> str:
        payload = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()
        return f"{payload}.{self._mac(payload)}"

    def open(self, token: str | None) -> dict[str, Any] | None:
        """The state sealed in `token`; `None` when there is none; an error when it was tampered with."""
        if token is None:
            return None
        payload, _, mac = token.rpartition(".")
        if not payload or not hmac.compare_digest(mac, self._mac(payload)):
            raise MCPError(code=types.INVALID_PARAMS, message="requestState failed its integrity check")
        return json.loads(base64.urlsafe_b64decode(payload))


class InMemoryEventStore(EventStore):
    """Keeps every SSE event so a client can resume a stream with `Last-Event-ID`."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, types.JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        event_id = str(len(self._events) + 1)
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, e, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self._events:
            if stream_id == stream and int(event_id) > int(last_event_id) and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def final(handler: Any) -> Any:
    """Mark a handler's plain results final (`resultType`, required on the 2026-07-28 wire, dropped on older ones)."""

    async def wrapped(ctx: Ctx, params: Any) -> Any:
        result = await handler(ctx, params)
        return {"resultType": "complete", **result}

    return wrapped


def build_server() -> Server[Any]:
    changes = InMemorySubscriptionBus()
    seal = StateSeal()
    tools = [dict(t) for t in TOOLS]
    prompts = [dict(p) for p in PROMPTS]
    subscriptions: set[str] = set()
    log_level = {"value": "debug"}
    changed = {"tools": 0, "prompts": 0}

    def modern(ctx: Ctx) -> bool:
        return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def log(ctx: Ctx, level: str, text: str) -> None:
        if not modern(ctx) and LOG_LEVELS.index(level) < LOG_LEVELS.index(log_level["value"]):
            return
        # On 2026-07-28 the SDK delivers it only when this request's `_meta` opted in to that level.
        await ctx.session.send_log_message(level, text, logger="conformance", related_request_id=ctx.request_id)  # type: ignore[arg-type]

    def client_can(ctx: Ctx, capability: str) -> bool:
        declared = ctx.session.client_capabilities
        return declared is not None and getattr(declared, capability, None) is not None

    async def ask(ctx: Ctx, params: types.CallToolRequestParams, request: dict[str, Any]) -> Any:
        """Ask the client one question: mid-call on the handshake era, by an `input_required` round on 2026-07-28."""
        if modern(ctx):
            answers = params.input_responses or {}
            if "q" not in answers:
                return {"resultType": "input_required", "inputRequests": {"q": request}}
            return answers["q"]
        session = ctx.session
        if request["method"] == "sampling/createMessage":
            message = request["params"]["messages"][0]["content"]["text"]
            sampled = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=message))
            max_tokens = request["params"]["maxTokens"]
            return await session.create_message([sampled], max_tokens=max_tokens, related_request_id=ctx.request_id)
        if request["method"] == "elicitation/create":
            form = request["params"]
            return await session.elicit_form(form["message"], form["requestedSchema"], ctx.request_id)
        return await session.list_roots()

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"tools": tools}

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        args = params.arguments or {}
        name = params.name
        if name.startswith("test_input_required_result_"):
            return await input_required_tool(ctx, params)
        match name:
            case "test_simple_text":
                return _text("This is a simple text response for testing.")
            case "test_image_content":
                return {"content": [{"type": "image", "data": IMAGE, "mimeType": "image/png"}]}
            case "test_audio_content":
                return {"content": [{"type": "audio", "data": AUDIO, "mimeType": "audio/wav"}]}
            case "test_embedded_resource":
                embedded = {
                    "uri": "test://embedded-resource",
                    "mimeType": "text/plain",
                    "text": "This is an embedded resource content.",
                }
                return {"content": [{"type": "resource", "resource": embedded}]}
            case "test_multiple_content_types":
                embedded = {
                    "uri": "test://mixed-content-resource",
                    "mimeType": "application/json",
                    "text": '{"test": "data", "value": 123}',
                }
                return {
                    "content": [
                        {"type": "text", "text": "Multiple content types test:"},
                        {"type": "image", "data": IMAGE, "mimeType": "image/png"},
                        {"type": "resource", "resource": embedded},
                    ]
                }
            case "test_tool_with_logging":
                await log(ctx, "info", "Tool execution started")
                await anyio.sleep(0.05)
                await log(ctx, "info", "Tool processing data")
                await anyio.sleep(0.05)
                await log(ctx, "info", "Tool execution completed")
                return _text("Tool with logging executed successfully")
            case "test_logging_tool":
                await log(ctx, "info", "test_logging_tool ran")
                return _text("Logged")
            case "test_error_handling":
                return {**_text("This tool intentionally returns an error for testing"), "isError": True}
            case "test_tool_with_progress":
                for step in (0, 50, 100):
                    await ctx.session.report_progress(step, 100, f"Completed step {step} of 100")
                    if step < 100:
                        await anyio.sleep(0.05)
                return _text("Tool with progress executed successfully")
            case "test_sampling":
                answer = await ask(ctx, params, _sample(str(args.get("prompt", "")), 100))
                if isinstance(answer, dict):
                    return answer
                return _text(f"LLM response: {getattr(answer.content, 'text', '')}")
            case "test_elicitation":
                request = _elicit(str(args.get("message", "")), username="string", email="string")
                return await elicited(ctx, params, request, "User response")
            case "test_elicitation_sep1034_defaults":
                request = {
                    "method": "elicitation/create",
                    "params": {"message": "Please provide user information", "requestedSchema": SEP1034_SCHEMA},
                }
                return await elicited(ctx, params, request, "Elicitation completed")
            case "test_elicitation_sep1330_enums":
                request = {
                    "method": "elicitation/create",
                    "params": {"message": "Please select options", "requestedSchema": SEP1330_SCHEMA},
                }
                return await elicited(ctx, params, request, "Elicitation completed")
            case "test_streaming_elicitation":
                return await elicited(ctx, params, _elicit("What should I stream?", answer="string"), "Streamed")
            case "test_reconnection":
                await log(ctx, "info", "Before disconnect")
                if ctx.close_sse_stream is not None:
                    await ctx.close_sse_stream()
                await anyio.sleep(0.2)
                await log(ctx, "info", "After reconnect")
                return _text("Reconnection test completed")
            case "test_missing_capability":
                if not client_can(ctx, "sampling"):
                    raise MCPError(
                        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                        message="This tool needs the client's sampling capability",
                        data={"requiredCapabilities": {"sampling": {}}},
                    )
                return _text("The client can sample")
            case "test_trigger_tool_change":
                changed["tools"] += 1
                tools[0] = {**tools[0], "title": f"Simple text (change {changed['tools']})"}
                if modern(ctx):
                    await changes.publish(ToolsListChanged())
                else:
                    await ctx.session.send_tool_list_changed()
                return _text("Tool list changed")
            case "test_trigger_prompt_change":
                changed["prompts"] += 1
                prompts[0] = {**prompts[0], "title": f"Simple prompt (change {changed['prompts']})"}
                if modern(ctx):
                    await changes.publish(PromptsListChanged())
                else:
                    await ctx.session.send_prompt_list_changed()
                return _text("Prompt list changed")
            case "json_schema_2020_12_tool":
                return _text(f"Received {json.dumps(args, sort_keys=True)}")
            case "test_header_param":
                return _text(f"Region: {args.get('region')}")
        return {**_text(f"Unknown tool: {name}"), "isError": True}

    async def elicited(ctx: Ctx, params: types.CallToolRequestParams, request: dict[str, Any], label: str) -> Any:
        answer = await ask(ctx, params, request)
        if isinstance(answer, dict):
            return answer
        return _text(f"{label}: action={answer.action}, content={json.dumps(answer.content or {})}")

    async def input_required_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        """The `test_input_required_result_*` tools (2026-07-28 multi-round-trip requests)."""
        answers = params.input_responses or {}
        kind = params.name.removeprefix("test_input_required_result_")
        state = seal.open(params.request_state)

        def asking(requests: dict[str, Any], **sealed: Any) -> dict[str, Any]:
            result: dict[str, Any] = {"resultType": "input_required", "inputRequests": requests}
            if sealed:
                result["requestState"] = seal.seal(sealed)
            return result

        match kind:
            case "elicitation":
                if not isinstance(answers.get("user_name"), types.ElicitResult):
                    return asking({"user_name": _elicit("What is your name?", name="string")})
                return _text(f"Hello, {(answers['user_name'].content or {}).get('name')}!")
            case "sampling":
                if "capital_question" not in answers:
                    return asking({"capital_question": _sample("What is the capital of France?", 100)})
                return _text(f"The model said: {getattr(answers['capital_question'].content, 'text', '')}")
            case "list_roots":
                if not isinstance(answers.get("client_roots"), types.ListRootsResult):
                    return asking({"client_roots": ROOTS_REQUEST})
                roots = ", ".join(str(root.uri) for root in answers["client_roots"].roots)
                return _text(f"Roots: {roots}")
            case "request_state" | "tampered_state":
                if state is None or "confirm" not in answers:
                    return asking({"confirm": _elicit("Please confirm", ok="boolean")}, step="confirm")
                return _text("state-ok: confirmed")
            case "multiple_inputs":
                wanted = {
                    "user_name": _elicit("What is your name?", name="string"),
                    "greeting": _sample("Generate a greeting", 50),
                    "client_roots": ROOTS_REQUEST,
                }
                if state is None or not set(wanted) <= set(answers):
                    return asking(wanted, step="all")
                return _text("Received every answer")
            case "multi_round":
                step = state.get("step") if state else None
                if step == 1 and isinstance(answers.get("step1"), types.ElicitResult):
                    name = (answers["step1"].content or {}).get("name")
                    request = _elicit("Step 2: What is your favorite color?", color="string")
                    return asking({"step2": request}, step=2, name=name)
                if step == 2 and isinstance(answers.get("step2"), types.ElicitResult):
                    color = (answers["step2"].content or {}).get("color")
                    return _text(f"{state.get('name') if state else None} likes {color}")
                if step == 2:
                    request = _elicit("Step 2: What is your favorite color?", color="string")
                    return asking({"step2": request}, **(state or {}))
                return asking({"step1": _elicit("Step 1: What is your name?", name="string")}, step=1)
            case "capabilities":
                requests: dict[str, Any] = {}
                if client_can(ctx, "sampling"):
                    requests["sampling"] = _sample("Say something", 20)
                if client_can(ctx, "elicitation"):
                    requests["elicitation"] = _elicit("Say something", answer="string")
                if client_can(ctx, "roots"):
                    requests["roots"] = ROOTS_REQUEST
                if not requests or set(requests) <= set(answers):
                    return _text("Asked only what the client can answer")
                return asking(requests)
        return {**_text(f"Unknown tool: {params.name}"), "isError": True}

    async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"prompts": prompts}

    async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> Any:
        args = params.arguments or {}
        match params.name:
            case "test_simple_prompt":
                messages = [_user({"type": "text", "text": "This is a simple prompt for testing."})]
            case "test_prompt_with_arguments":
                text = f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"
                messages = [_user({"type": "text", "text": text})]
            case "test_prompt_with_embedded_resource":
                embedded = {
                    "uri": args.get("resourceUri", "test://example-resource"),
                    "mimeType": "text/plain",
                    "text": "Embedded resource content for testing.",
                }
                messages = [
                    _user({"type": "resource", "resource": embedded}),
                    _user({"type": "text", "text": "Please process the embedded resource above."}),
                ]
            case "test_prompt_with_image":
                messages = [
                    _user({"type": "image", "data": IMAGE, "mimeType": "image/png"}),
                    _user({"type": "text", "text": "Please analyze the image above."}),
                ]
            case "test_input_required_result_prompt":
                answer = (params.input_responses or {}).get("user_context")
                if not isinstance(answer, types.ElicitResult):
                    request = _elicit("What context should the prompt use?", context="string")
                    return {"resultType": "input_required", "inputRequests": {"user_context": request}}
                text = f"Use this context: {(answer.content or {}).get('context')}"
                messages = [_user({"type": "text", "text": text})]
            case other:
                raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {other}")
        return {"description": f"The {params.name} prompt", "messages": messages}

    async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"resources": RESOURCES}

    async def list_templates(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"resourceTemplates": TEMPLATES}

    async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> Any:
        uri = str(params.uri)
        if uri == "test://static-text":
            return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": STATIC_TEXT}]}
        if uri == "test://static-binary":
            return {"contents": [{"uri": uri, "mimeType": "image/png", "blob": IMAGE}]}
        if uri == "test://watched-resource":
            return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"}]}
        prefix, suffix = "test://template/", "/data"
        if uri.startswith(prefix) and uri.endswith(suffix) and "/" not in uri[len(prefix) : -len(suffix)]:
            item = uri[len(prefix) : -len(suffix)]
            data = json.dumps({"id": item, "templateTest": True, "data": f"Data for ID: {item}"})
            return {"contents": [{"uri": uri, "mimeType": "application/json", "text": data}]}
        raise MCPError(code=types.INVALID_PARAMS, message=f"Resource not found: {uri}", data={"uri": uri})

    async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> Any:
        subscriptions.add(str(params.uri))
        return {}

    async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> Any:
        subscriptions.discard(str(params.uri))
        return {}

    async def set_level(ctx: Ctx, params: types.SetLevelRequestParams) -> Any:
        log_level["value"] = params.level
        return {}

    async def completion(ctx: Ctx, params: types.CompleteRequestParams) -> Any:
        values = [v for v in ("paris", "park", "party", "test-value") if v.startswith(params.argument.value)]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    with warnings.catch_warnings():
        # Logging is deprecated on 2026-07-28, still served to handshake-era clients.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(
            "mcp-conformance-fixture",
            version="1.0.0",
            cache_hints={m: CacheHint() for m in CACHEABLE_METHODS if m != "server/discover"},
            on_list_tools=final(list_tools),
            on_call_tool=final(call_tool),
            on_list_prompts=final(list_prompts),
            on_get_prompt=final(get_prompt),
            on_list_resources=final(list_resources),
            on_list_resource_templates=final(list_templates),
            on_read_resource=final(read_resource),
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_set_logging_level=set_level,
            on_completion=final(completion),
            on_subscriptions_listen=ListenHandler(changes),
        )


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Server[Any], port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(event_store=InMemoryEventStore(), retry_interval=100)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    opts = parser.parse_args()
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    server = build_server()
    if opts.http is not None:
        anyio.run(serve_http, server, opts.http)
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
