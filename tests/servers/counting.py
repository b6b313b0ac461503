"""A real MCP server that counts what it serves, for the cache's tests and benchmark.

As a stdio child: `python tests/servers/counting.py [--ttl-ms N] [--work-ms N]` (the benchmark's upstream).
In-process over streamable HTTP: `server, served = counting_server(ttl_ms=60_000, scope="private")`, then
`server.streamable_http_app()`;
`served[("tool", NAME)]` and `served[("resource", URI)]` say how many times it actually answered.
Its `resources/read` results carry the cache hints it was built with (2026-07-28 clients see them).

Tools: `lookup` (read-only; answers its arguments and how many times it was served), `failing`
(read-only; a tool error), `write` (not read-only), `ask` (read-only; asks its client for an answer:
by elicitation mid-call in the handshake era, by `input_required` in 2026-07-28), `touch` (announces
that a resource changed), `redefine` (changes `lookup`'s description and announces the tools changed),
`announce` (announces the tools changed, though they did not).
Resources: `count://a`, `count://b`, `count://slow` (waits for the `gate` it was built with).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

Ctx = ServerRequestContext[Any, Any]

READ_ONLY = {"readOnlyHint": True}
OBJECT = {"type": "object"}


def counting_server(
    name: str = "counting",
    *,
    ttl_ms: int = 60_000,
    scope: Literal["public", "private"] = "private",
    gate: anyio.Event | None = None,
    list_ttl_ms: int = 0,
    work_ms: float = 0.0,
) -> tuple[Server[Any], Counter[tuple[str, str]]]:
    """`gate`: reads of `count://slow` wait for it; `list_ttl_ms`: the `ttlMs` of its lists; `work_ms`: how long
    each served call and read takes."""
    served: Counter[tuple[str, str]] = Counter()
    changes = InMemorySubscriptionBus()
    subscribed: set[str] = set()
    tools: list[dict[str, Any]] = [
        {"name": "lookup", "description": "Look something up.", "inputSchema": OBJECT, "annotations": READ_ONLY},
        {"name": "failing", "description": "Fail.", "inputSchema": OBJECT, "annotations": READ_ONLY},
        {"name": "write", "description": "Write something.", "inputSchema": OBJECT},
        {"name": "ask", "description": "Ask the client.", "inputSchema": OBJECT, "annotations": READ_ONLY},
        {"name": "touch", "description": "Announce a resource changed.", "inputSchema": OBJECT},
        {"name": "redefine", "description": "Change lookup's description.", "inputSchema": OBJECT},
        {"name": "announce", "description": "Announce the tools changed (they did not).", "inputSchema": OBJECT},
    ]
    resources = [{"uri": f"count://{key}", "name": key, "mimeType": "text/plain"} for key in ("a", "b", "slow")]

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"tools": tools, "resultType": "complete"}

    async def announce(ctx: Ctx, event: Any) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await changes.publish(event)
        elif isinstance(event, ToolsListChanged):
            await ctx.session.send_tool_list_changed()
        elif event.uri in subscribed:
            await ctx.session.send_resource_updated(event.uri)

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        args = params.arguments or {}
        served[("tool", params.name)] += 1
        count = served[("tool", params.name)]
        if work_ms:
            await anyio.sleep(work_ms / 1000)
        match params.name:
            case "lookup" | "write":
                text = f"{json.dumps(args, sort_keys=True)} #{count}"
                return {"content": [{"type": "text", "text": text}], "resultType": "complete"}
            case "failing":
                return {
                    "content": [{"type": "text", "text": f"failed #{count}"}],
                    "isError": True,
                    "resultType": "complete",
                }
            case "ask":
                return await ask(ctx, params, count)
            case "touch":
                await announce(ctx, ResourceUpdated(uri=str(args["uri"])))
            case "redefine":
                tools[0] = {**tools[0], "description": str(args.get("text", "Look something else up."))}
                await announce(ctx, ToolsListChanged())
            case "announce":
                await announce(ctx, ToolsListChanged())
        return {"content": [{"type": "text", "text": "done"}], "resultType": "complete"}

    async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return {"resources": resources, "resultType": "complete"}

    async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> Any:
        uri = str(params.uri)
        served[("resource", uri)] += 1
        if work_ms:
            await anyio.sleep(work_ms / 1000)
        if uri == "count://slow" and gate is not None:
            await gate.wait()
        text = f"{uri} #{served[('resource', uri)]}"
        return {"contents": [{"uri": uri, "text": text, "mimeType": "text/plain"}], "resultType": "complete"}

    server: Server[Any] = Server(
        name,
        version="1.0.0",
        cache_hints={
            "resources/read": CacheHint(ttl_ms=ttl_ms, scope=scope),
            "tools/list": CacheHint(ttl_ms=list_ttl_ms, scope="public"),
            "resources/list": CacheHint(ttl_ms=list_ttl_ms, scope="public"),
        },
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscriptions_listen=ListenHandler(changes),
    )

    async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> Any:
        subscribed.add(str(params.uri))
        return {}

    async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> Any:
        subscribed.discard(str(params.uri))
        return {}

    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    return server, served


async def ask(ctx: Ctx, params: types.CallToolRequestParams, count: int) -> Any:
    """Ask the client for an answer: mid-call (handshake era), or by `input_required` (2026-07-28)."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        answer = await ctx.session.elicit_form("Answer?", schema, related_request_id=ctx.request_id)  # type: ignore[arg-type]
        return {"content": [{"type": "text", "text": f"answered {answer.content} #{count}"}], "resultType": "complete"}
    responses = params.input_responses or {}
    if "q" not in responses:
        question = types.ElicitRequest(params=types.ElicitRequestFormParams(message="Answer?", requested_schema=schema))
        return types.InputRequiredResult(input_requests={"q": question}, request_state="asked")
    answer = responses["q"]
    return {"content": [{"type": "text", "text": f"answered {answer.content} #{count}"}], "resultType": "complete"}  # type: ignore[union-attr]


def main() -> None:
    import argparse

    from mcp.server.stdio import stdio_server

    parser = argparse.ArgumentParser()
    parser.add_argument("--ttl-ms", type=int, default=60_000)
    parser.add_argument("--work-ms", type=float, default=0.0)
    args = parser.parse_args()
    server, _ = counting_server(ttl_ms=args.ttl_ms, work_ms=args.work_ms)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
