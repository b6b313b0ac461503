"""A real MCP server for the hub's tests, built on the SDK's low-level `Server`.

Runs as a stdio child process (`python tests/servers/fixture.py --name a`) or
in-process over streamable HTTP (`build_server(...).streamable_http_app()`).
Its tools cover what a proxy must carry unchanged (structured content, tool
errors, resource links, progress, large results) and what a proxy must
survive (a server that dies mid-call, one that never answers, one that
writes junk between its messages).

Options:
  --name NAME          serverInfo name, and the text in its answers
  --tools N            N extra generated tools (tool_0 ... tool_{N-1})
  --page-size K        paginate its own lists, K items a page (0: no pagination)
  --hang-on-start      never answer anything (a server that hangs at start-up)
  --exit-on-start      exit at once with status 3 (a server that cannot start)
  --say TEXT           first write TEXT to stderr, its $VARIABLES expanded (a server telling why it fails)
  --start-delay S      wait S seconds before serving (a server that is slow to start)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from io import TextIOWrapper
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.caching import CACHEABLE_METHODS, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

Ctx = ServerRequestContext[Any, Any]

ECHO_ICON = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAAAHElEQVR42mP4TyJgoKMG/ejLeNCohuGjYdAkPgCN"
    "Blqf8x6REAAAAABJRU5ErkJggg=="
)
"""A 16x16 picture (a blue square), the echo tool's second icon: one a page can draw without fetching anything."""

BASE_TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "title": "Echo",
        "description": "Echo the text back, as text and as structured content.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}, "server": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
        "icons": [
            {"src": "https://example.com/echo.png", "mimeType": "image/png"},
            {"src": ECHO_ICON, "mimeType": "image/png", "sizes": ["16x16"]},
        ],
        "_meta": {"example.com/owner": "tests"},
    },
    {
        "name": "fail",
        "description": "Return a tool error with the given message.",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
    },
    {
        "name": "slow",
        "description": "Report progress `steps` times over `seconds`, then answer.",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "steps": {"type": "integer"}},
        },
    },
    {
        "name": "big",
        "description": "Answer with `size` bytes of text.",
        "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]},
    },
    {
        "name": "link",
        "description": "Answer with a resource link and an embedded resource.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "read_file",
        "description": "Say which file it would read (reads nothing).",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "delete_note",
        "description": "Pretend to delete a note.",
        "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        "annotations": {"destructiveHint": True},
    },
    {"name": "crash", "description": "Exit the server process mid-call.", "inputSchema": {"type": "object"}},
    {"name": "hang", "description": "Never answer.", "inputSchema": {"type": "object"}},
    {"name": "pid", "description": "The server's process id.", "inputSchema": {"type": "object"}},
    {
        "name": "wait",
        "description": "Write `<marker>.started`, wait until cancelled, then write `<marker>.cancelled`.",
        "inputSchema": {"type": "object", "properties": {"marker": {"type": "string"}}, "required": ["marker"]},
    },
    {
        "name": "misbehave",
        "description": (
            "Write to stdout what is no JSON-RPC message, then answer: `garbage` (lines that are not JSON, or "
            "not UTF-8), `not-jsonrpc` (JSON that is no message, a response to nothing, a request for a method "
            "no client has), `oversized` (one line of `size` bytes), `unterminated` (`size` bytes and no "
            "newline, so the answer is lost in them). Over stdio only."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "what": {"enum": ["garbage", "not-jsonrpc", "oversized", "unterminated"]},
                "size": {"type": "integer"},
            },
            "required": ["what"],
        },
    },
    {
        "name": "ask",
        "description": (
            "Ask the client (sampling, elicitation or roots) and answer with what it said. Sampling and "
            "elicitation are asked as part of the call (over HTTP, on its stream); roots on the session "
            "(the standalone stream), unless `related`."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "what": {"enum": ["sampling", "elicitation", "roots"]},
                "text": {"type": "string"},
                "related": {"type": "boolean"},
            },
            "required": ["what"],
        },
    },
    {
        "name": "redefine",
        "description": "Change the echo tool's description and announce that the tool list changed.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "grow",
        "description": "Add a tool named `name` and announce that the tool list changed.",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
    {
        "name": "touch",
        "description": "Tell subscribers that the note `key` changed; answer whether it was subscribed to.",
        "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    },
    {
        "name": "heard",
        "description": "Answer how many times the client said its roots changed.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "log",
        "description": "Send a log message at each of debug, info and warning (from the level set), then answer.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {
        "name": "request_meta",
        "description": "Answer with the `_meta` the request carried, as structured content.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "ask_url",
        "description": (
            "Ask the client a URL-mode elicitation `id`; if it accepts and `complete` is true, send "
            "notifications/elicitation/complete for it before answering (2026-07-28: by input_required, "
            "with no id and no notice)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {"url": {"type": "string"}, "id": {"type": "string"}, "complete": {"type": "boolean"}},
            "required": ["url", "id"],
        },
    },
    {
        "name": "complete_url",
        "description": "Send notifications/elicitation/complete for the URL-mode elicitation `id`.",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    },
]

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

NOTES = {"1": "first note", "2": "second note"}

WIRE: list[anyio.AsyncFile[str]] = []
"""The stdout this server's messages go out on, when it runs over stdio: where `misbehave` writes."""

NOT_JSONRPC = [
    '{"hello": "world"}',
    "[]",
    "42",
    '{"jsonrpc": "2.0", "id": 424242, "result": {}}',
    '{"jsonrpc": "2.0", "id": 7, "error": "not an object"}',
    '{"jsonrpc": "2.0", "method": "notifications/bogus", "params": {"x": 1}}',
    '{"jsonrpc": "2.0", "id": "fixture-bogus-1", "method": "bogus/method"}',
]


async def misbehave(wire: anyio.AsyncFile[str], what: str, size: int) -> None:
    """Write `what` to the wire, between two of the server's own messages."""
    if what == "garbage":
        await wire.write('this is not JSON\n{"truncated": \n\udcff\udcfe neither is this UTF-8\n\n')
    elif what == "not-jsonrpc":
        await wire.write("\n".join(NOT_JSONRPC) + "\n")
    else:
        piece = "x" * (1 << 20)
        for start in range(0, size, len(piece)):
            await wire.write(piece[: size - start])
        if what == "oversized":
            await wire.write("\n")
    await wire.flush()


def build_server(
    name: str = "fixture", extra_tools: int = 0, page_size: int = 0, tools_only: bool = False
) -> Server[Any]:
    changes = InMemorySubscriptionBus()
    log_level = {"level": "debug"}
    subscribed: set[str] = set()
    """URIs subscribed to with resources/subscribe (handshake era)."""
    heard = {"roots/list_changed": 0}
    tools = [dict(t) for t in BASE_TOOLS]
    tools += [
        {"name": f"tool_{i}", "description": f"Generated tool {i}.", "inputSchema": {"type": "object"}}
        for i in range(extra_tools)
    ]
    resources = [
        {"uri": f"fixture://notes/{key}", "name": f"note-{key}", "mimeType": "text/plain"} for key in NOTES
    ] + [{"uri": "fixture://blob", "name": "blob", "mimeType": "application/octet-stream"}]
    templates = [{"uriTemplate": "fixture://notes/{id}", "name": "note", "mimeType": "text/plain"}]
    prompts = [
        {
            "name": "greet",
            "description": "Greet someone.",
            "arguments": [{"name": "who", "description": "Who to greet", "required": True}],
        }
    ]

    def paged(items: list[dict[str, Any]], key: str, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        if not page_size:
            return {key: items}
        start = int(params.cursor) if params and params.cursor else 0
        result: dict[str, Any] = {key: items[start : start + page_size]}
        if start + page_size < len(items):
            result["nextCursor"] = str(start + page_size)
        return result

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return paged(tools, "tools", params)

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        args = params.arguments or {}
        match params.name:
            case "echo":
                text = str(args.get("text", ""))
                return {
                    "content": [{"type": "text", "text": f"{name}: {text}", "annotations": {"priority": 0.5}}],
                    "structuredContent": {"text": text, "server": name},
                    "_meta": {"example.com/served-by": name},
                }
            case "fail":
                return {"content": [{"type": "text", "text": str(args.get("message", "failed"))}], "isError": True}
            case "slow":
                steps = int(args.get("steps", 3))
                for step in range(1, steps + 1):
                    await anyio.sleep(float(args.get("seconds", 0.3)) / steps)
                    await ctx.session.report_progress(step, steps, f"step {step}")
                return {"content": [{"type": "text", "text": "done"}]}
            case "big":
                return {"content": [{"type": "text", "text": "x" * int(args["size"])}]}
            case "link":
                return {
                    "content": [
                        {"type": "resource_link", "uri": "fixture://notes/1", "name": "note-1"},
                        {"type": "resource", "resource": {"uri": "fixture://notes/2", "text": NOTES["2"]}},
                    ]
                }
            case "read_file":
                return {"content": [{"type": "text", "text": f"would read {args['path']}"}]}
            case "delete_note":
                return {"content": [{"type": "text", "text": f"deleted {args['key']}"}]}
            case "crash":
                os._exit(3)
            case "hang":
                await anyio.sleep_forever()
            case "wait":
                marker = str(args["marker"])
                Path(f"{marker}.started").touch()
                try:
                    await anyio.sleep_forever()
                finally:
                    Path(f"{marker}.cancelled").touch()
            case "pid":
                return {"content": [{"type": "text", "text": str(os.getpid())}]}
            case "misbehave":
                if not WIRE:
                    return {"content": [{"type": "text", "text": "misbehave: stdio only"}], "isError": True}
                await misbehave(WIRE[0], str(args["what"]), int(args.get("size", 0)))
                return {"content": [{"type": "text", "text": f"{name}: misbehaved"}]}
            case "ask":
                return await ask(ctx, params, str(args["what"]), str(args.get("text", "")), args.get("related") is True)
            case "redefine":
                echo = next(t for t in tools if t["name"] == "echo")
                echo["description"] = str(args["text"])
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    await changes.publish(ToolsListChanged())
                else:
                    await ctx.session.send_tool_list_changed()
                return {"content": [{"type": "text", "text": "redefined"}]}
            case "heard":
                return {"content": [{"type": "text", "text": str(heard["roots/list_changed"])}]}
            case "touch":
                uri = f"fixture://notes/{args['key']}"
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    await changes.publish(ResourceUpdated(uri=uri))
                elif uri in subscribed:
                    await ctx.session.send_resource_updated(uri)
                return {"content": [{"type": "text", "text": "subscribed" if uri in subscribed else "touched"}]}
            case "log":
                text = str(args.get("text", ""))
                for level in ("debug", "info", "warning"):
                    if LOG_LEVELS.index(level) >= LOG_LEVELS.index(log_level["level"]):
                        await ctx.session.send_log_message(level, f"{level}: {text}", logger="fixture")
                return {"content": [{"type": "text", "text": f"logged at {log_level['level']}"}]}
            case "request_meta":
                meta = (ctx.params or {}).get("_meta") or {}
                return {"content": [{"type": "text", "text": f"{name}: {sorted(meta)}"}], "structuredContent": meta}
            case "ask_url":
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    return ask_url_modern(params, str(args["url"]))
                elicitation_id = str(args["id"])
                answer = await ctx.session.elicit_url(
                    "Open the link to finish.", str(args["url"]), elicitation_id, related_request_id=ctx.request_id
                )
                if answer.action == "accept" and args.get("complete", True):
                    await ctx.session.send_elicit_complete(elicitation_id)
                return {"content": [{"type": "text", "text": f"url-elicited: {answer.action}"}]}
            case "complete_url":
                await ctx.session.send_elicit_complete(str(args["id"]))
                return {"content": [{"type": "text", "text": f"completed {args['id']}"}]}
            case "grow":
                tools.append({"name": str(args["name"]), "inputSchema": {"type": "object"}})
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    await changes.publish(ToolsListChanged())  # delivered on subscriptions/listen streams
                else:
                    await ctx.session.send_tool_list_changed()
                return {"content": [{"type": "text", "text": "grown"}]}
            case other if any(t["name"] == other for t in tools):
                return {"content": [{"type": "text", "text": f"{name}: {other}"}]}
        return {"content": [{"type": "text", "text": f"Unknown tool: {params.name}"}], "isError": True}

    async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return paged(resources, "resources", params)

    async def list_templates(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return paged(templates, "resourceTemplates", params)

    async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> Any:
        uri = str(params.uri)
        if uri == "fixture://blob":
            return {"contents": [{"uri": uri, "blob": "AAEC", "mimeType": "application/octet-stream"}]}
        key = uri.removeprefix("fixture://notes/")
        if uri.startswith("fixture://notes/") and key in NOTES:
            return {"contents": [{"uri": uri, "text": NOTES[key], "mimeType": "text/plain"}]}
        raise_unknown(uri)

    async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return paged(prompts, "prompts", params)

    async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> Any:
        who = (params.arguments or {}).get("who", "world")
        return {
            "description": "A greeting",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": f"Hello, {who}, from {name}"}},
                {"role": "user", "content": {"type": "resource_link", "uri": "fixture://notes/1", "name": "n"}},
            ],
        }

    async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> Any:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            values = [v for v in ("alice", "albert", "bob") if v.startswith(params.argument.value)]
        else:
            values = [k for k in NOTES if k.startswith(params.argument.value)] + [f"template:{ref.uri}"]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    async def set_level(ctx: Ctx, params: types.SetLevelRequestParams) -> Any:
        log_level["level"] = params.level
        return {}

    if tools_only:  # a server that offers tools and nothing else
        return Server(name, version="1.0.0", on_list_tools=final(list_tools), on_call_tool=final(call_tool))
    server = Server(
        name,
        version="1.0.0",
        cache_hints={m: CacheHint() for m in CACHEABLE_METHODS if m != "server/discover"},
        on_list_tools=final(list_tools),
        on_call_tool=final(call_tool),
        on_list_resources=final(list_resources),
        on_list_resource_templates=final(list_templates),
        on_read_resource=final(read_resource),
        on_list_prompts=final(list_prompts),
        on_get_prompt=final(get_prompt),
        on_completion=final(complete),
        on_subscriptions_listen=ListenHandler(changes),
    )

    async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> Any:
        subscribed.add(str(params.uri))
        return {}

    async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> Any:
        subscribed.discard(str(params.uri))
        return {}

    async def roots_changed(ctx: Ctx, params: types.NotificationParams) -> None:
        heard["roots/list_changed"] += 1

    server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, roots_changed)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    return server


QUESTIONS: dict[str, Any] = {
    "sampling": lambda text: types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
            max_tokens=50,
        )
    ),
    "elicitation": lambda text: types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=text,
            requested_schema={"type": "object", "properties": {"answer": {"type": "string"}}},
        )
    ),
    "roots": lambda text: types.ListRootsRequest(),
}


def _answer_text(what: str, answer: Any) -> str:
    if what == "sampling":
        return f"sampled: {answer.content.text}"
    if what == "elicitation":
        return f"elicited: {answer.action} {answer.content}"
    return "roots: " + ", ".join(str(root.uri) for root in answer.roots)


async def ask(ctx: Ctx, params: types.CallToolRequestParams, what: str, text: str, related: bool = False) -> Any:
    """Ask the client: as a request mid-call (handshake era), or by `input_required` (2026-07-28).

    Roots are asked on the session unless `related`, as part of the call like the other questions.
    """
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        session = ctx.session
        if what == "sampling":
            message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
            answer: Any = await session.create_message([message], max_tokens=50, related_request_id=ctx.request_id)
        elif what == "elicitation":
            schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
            answer = await session.elicit_form(text, schema, related_request_id=ctx.request_id)  # type: ignore[arg-type]
        elif related:
            metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
            answer = await session.send_request(types.ListRootsRequest(), types.ListRootsResult, metadata=metadata)
        else:
            answer = await session.list_roots()
        return {"content": [{"type": "text", "text": _answer_text(what, answer)}]}
    responses = params.input_responses or {}
    if "q" not in responses:
        return types.InputRequiredResult(input_requests={"q": QUESTIONS[what](text)}, request_state=f"asked-{what}")
    if params.request_state != f"asked-{what}":
        return {"content": [{"type": "text", "text": "lost my state"}], "isError": True}
    return {"content": [{"type": "text", "text": _answer_text(what, responses["q"])}]}


def ask_url_modern(params: types.CallToolRequestParams, url: str) -> Any:
    """`ask_url` for a 2026-07-28 client: the question by `input_required` (no id, no completion notice)."""
    responses = params.input_responses or {}
    if "q" not in responses:
        question = types.ElicitRequest(params=types.ElicitRequestURLParams(message="Open the link to finish.", url=url))
        return types.InputRequiredResult(input_requests={"q": question}, request_state="asked-url")
    return {"content": [{"type": "text", "text": f"url-elicited: {responses['q'].action}"}]}  # type: ignore[union-attr]


def final(handler: Any) -> Any:
    """Answer with a final result (`resultType`, required on the 2026-07-28 wire, dropped on older ones)."""

    async def wrapped(ctx: Ctx, params: Any) -> Any:
        result = await handler(ctx, params)
        if isinstance(result, types.InputRequiredResult):
            return result
        return {**result, "resultType": "complete"}

    return wrapped


def sse_app(server: Server[Any]) -> Any:
    """The server over the legacy HTTP+SSE transport: GET /sse, POST /messages/."""
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    transport = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    return Starlette(
        routes=[Route("/sse", handle_sse, methods=["GET"]), Mount("/messages/", transport.handle_post_message)]
    )


def raise_unknown(uri: str) -> Any:
    from mcp.shared.exceptions import MCPError

    raise MCPError(code=-32002, message=f"Resource not found: {uri}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="fixture")
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--hang-on-start", action="store_true")
    parser.add_argument("--exit-on-start", action="store_true")
    parser.add_argument("--say", default="")
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--tools-only", action="store_true", help="offer tools and nothing else")
    opts = parser.parse_args()
    if opts.say:
        print(os.path.expandvars(opts.say), file=sys.stderr, flush=True)
    if opts.exit_on_start:
        print("fixture: refusing to start", file=sys.stderr)
        sys.exit(3)
    if opts.hang_on_start:
        while True:
            time.sleep(3600)
    time.sleep(opts.start_delay)
    server = build_server(opts.name, opts.tools, opts.page_size, opts.tools_only)

    async def run() -> None:
        # The server's own stdout, kept so `misbehave` can write between its messages
        # (surrogateescape: lone surrogates go out as the raw bytes they stand for).
        wire = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="surrogateescape"))
        WIRE.append(wire)
        async with stdio_server(stdout=wire) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
