"""The hub as a library: `HubClient`, an MCP client of a hub (one started in this process from a
hub.toml, or one served over streamable HTTP), with the catalog and calls in a model provider's
formats.

Every call goes through the hub's endpoint as any MCP client's would: the SDK's client, connected
to the in-process hub's server over memory, or to its URL over HTTP. So policy, confirmation, rate
limits, guardrails, pins and the audit log apply as they do over the wire; nothing here reaches past
the endpoint. An in-process hub serves the local user (principal "stdio", as `mcp-hub serve` over
stdio does), or the principal named, over its HTTP endpoint on loopback; a served hub, the principal
of the API key or access token given."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import httpx2
from mcp import types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_hub.config import HubConfig, load_config
from mcp_hub.hub import Hub
from mcp_hub.library.loopback import loopback_endpoint
from mcp_hub.providers import HubCall, ToolCallError, Toolset, UnknownToolError, anthropic, export, gemini, openai
from mcp_hub.tls import verifying

Provider = Literal["openai", "openai-responses", "anthropic", "gemini"]


def error_result(message: str) -> types.CallToolResult:
    """A tool error result the model reads, for a call the hub could not make as the model wrote it."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


class HubClient:
    """`async with HubClient.from_config("hub.toml") as hub:` or `HubClient.connect(url, api_key=...)`."""

    def __init__(
        self,
        target: HubConfig | str,
        *,
        headers: dict[str, str] | None = None,
        principal: str | None = None,
        endpoint: str | None = None,
        **client: Any,
    ) -> None:
        self._target = target
        self._principal = principal
        self._endpoint = endpoint
        self._headers = headers or {}
        self._client_options = client
        self._stack: AsyncExitStack | None = None
        self._client: Client | None = None
        self._toolset: Toolset | None = None
        self.hub: Hub | None = None
        """The in-process hub (None when connected by URL)."""

    @classmethod
    def from_config(
        cls, config: str | Path | HubConfig, *, principal: str | None = None, endpoint: str | None = None, **client: Any
    ) -> HubClient:
        """A hub started in this process from a hub.toml (its path, or a loaded HubConfig), stopped on exit.
        Without `principal`, the caller is the local user ("stdio"), over memory; with it, the caller is
        that principal, over the hub's HTTP endpoint served on a loopback port for it alone (see
        loopback.py). `endpoint`: what the `[endpoints.NAME]` view serves, not everything. `client`: options of
        the SDK's `Client`, such as `elicitation_callback` (the confirmation a policy's `confirm` rule asks for)."""
        loaded = config if isinstance(config, HubConfig) else load_config(config)
        return cls(loaded, principal=principal, endpoint=endpoint, **client)

    @classmethod
    def connect(cls, url: str, *, api_key: str | None = None, token: str | None = None, **client: Any) -> HubClient:
        """A hub served over streamable HTTP at `url` (its `/mcp` endpoint, or a curated one's `/mcp/NAME`), as
        the principal of `api_key` (sent as `X-API-Key`) or of the OAuth access `token` (a bearer token)."""
        headers = {"X-API-Key": api_key} if api_key else {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return cls(url, headers=headers, **client)

    async def __aenter__(self) -> Self:
        async with AsyncExitStack() as stack:
            options: dict[str, Any] = {"cache": None, **self._client_options}
            if isinstance(self._target, HubConfig):
                self.hub = await stack.enter_async_context(Hub(self._target, endpoint=self._endpoint).running())
                if self._principal is None:
                    self._client = await stack.enter_async_context(Client(self.hub.endpoint.server, **options))
                else:
                    url, key = await stack.enter_async_context(loopback_endpoint(self.hub, self._principal))
                    self._client = await self._over_http(stack, url, {"X-API-Key": key}, options)
            else:
                self._client = await self._over_http(stack, self._target, self._headers, options)
            self._stack = stack.pop_all()
        return self

    @staticmethod
    async def _over_http(stack: AsyncExitStack, url: str, headers: dict[str, str], options: dict[str, Any]) -> Client:
        http = await stack.enter_async_context(httpx2.AsyncClient(verify=verifying(), headers=headers, timeout=60))
        return await stack.enter_async_context(Client(streamable_http_client(url, http_client=http), **options))

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack, self._client, self.hub = self._stack, None, None, None
        if stack is None:
            return
        try:
            await stack.__aexit__(kind, exc, tb)
        except BaseExceptionGroup as group:  # the hub's task groups wrap what the caller's block raised
            if exc is not None and all(leaf is exc for leaf in _leaves(group)):
                raise exc.with_traceback(tb) from None
            raise

    @property
    def client(self) -> Client:
        """The SDK's client of the hub (for prompts, resources and the rest of MCP)."""
        if self._client is None:
            raise RuntimeError("HubClient is not connected: use it as `async with HubClient...(...) as hub:`")
        return self._client

    async def tools(self) -> list[types.Tool]:
        """Every tool the caller may see, all pages."""
        found: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await self.client.list_tools(cursor=cursor)
            found += page.tools
            cursor = page.next_cursor
            if not cursor:
                self._toolset = Toolset(found)
                return found

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        """Call a tool by its hub name. A tool error (and a denial, which reads as an unknown tool) is
        a result with isError; a failure of the hub itself raises the SDK's MCPError."""
        return await self.client.call_tool(name, arguments or {})

    async def toolset(self, *, refresh: bool = False) -> Toolset:
        """The tools as last listed (listing them when not yet, or when `refresh`)."""
        if self._toolset is None or refresh:
            await self.tools()
        assert self._toolset is not None
        return self._toolset

    async def definitions(self, provider: Provider, *, strict: bool = True) -> list[dict[str, Any]]:
        """The `tools` of a request to `provider`'s API (`strict`: OpenAI's strict mode where it fits)."""
        return export(provider, await self.toolset(refresh=True), strict=strict)

    async def answer(self, provider: Provider, tool_call: Any) -> dict[str, Any]:
        """Make a model's tool call through the hub and return the provider's message answering it:
        a Chat Completions `tool_call` -> a `role: tool` message; a Responses `function_call` item ->
        a `function_call_output` item; an Anthropic `tool_use` block -> a `tool_result` block; a
        Gemini `functionCall` -> a `functionResponse` part. A call the hub cannot make as written (bad
        JSON, an unknown name) or the hub refuses is answered as an error result, for the model to read."""
        toolset = await self.toolset()
        parse, reply = _PROVIDERS[provider]
        raw = tool_call if isinstance(tool_call, dict) else tool_call.model_dump(mode="json", exclude_none=True)
        try:
            hub_call = parse(toolset, raw)
        except (ToolCallError, UnknownToolError) as exc:
            hub_call = HubCall(name="", arguments={}, call_id=_call_id(provider, raw), exported_name=_name(raw))
            return reply(hub_call, error_result(str(exc)))
        try:
            result = await self.call(hub_call.name, hub_call.arguments)
        except MCPError as exc:  # the hub refused the call (a hidden tool is "Unknown tool"): the model reads why
            result = error_result(exc.error.message)
        return reply(hub_call, result)


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    return [
        leaf
        for inner in group.exceptions
        for leaf in (_leaves(inner) if isinstance(inner, BaseExceptionGroup) else [inner])
    ]


def _call_id(provider: Provider, raw: dict[str, Any]) -> str | None:
    return raw.get("call_id") if provider == "openai-responses" else raw.get("id")


def _name(raw: dict[str, Any]) -> str:
    return str(raw.get("name") or (raw.get("function") or {}).get("name") or "")


_PROVIDERS: dict[str, tuple[Any, Any]] = {
    "openai": (openai.chat_call, lambda c, r: openai.chat_result(c.call_id, r)),
    "openai-responses": (openai.responses_call, lambda c, r: openai.responses_result(c.call_id, r)),
    "anthropic": (anthropic.call, lambda c, r: anthropic.result(c.call_id, r)),
    "gemini": (gemini.call, gemini.result),
}
