"""MCP tools in the formats of model providers' APIs, and back: definitions (`openai`, `anthropic`,
`gemini`), a provider's tool call as a hub call (`HubCall`), an MCP result as the provider's
tool-result message. Pure: no I/O, no provider SDK needed."""

from typing import Any

from mcp_hub.providers import anthropic, gemini, openai
from mcp_hub.providers.calls import HubCall, ToolCallError
from mcp_hub.providers.names import UnknownToolError
from mcp_hub.providers.schema import SchemaError
from mcp_hub.providers.toolset import Toolset

FORMATS = ("openai", "openai-responses", "anthropic", "gemini")
"""The providers' formats: OpenAI's Chat Completions and Responses APIs, Anthropic's Messages, Gemini."""


def export(provider: str, toolset: Toolset, *, strict: bool = True) -> list[dict[str, Any]]:
    """The `tools` of a request to `provider`'s API (`strict`: OpenAI's strict mode where it fits);
    SchemaError for a schema Gemini's subset cannot express."""
    if provider == "openai":
        return openai.chat_tools(toolset, strict=strict)
    if provider == "openai-responses":
        return openai.responses_tools(toolset, strict=strict)
    if provider == "anthropic":
        return anthropic.tools(toolset)
    if provider == "gemini":
        return gemini.tools(toolset)
    raise ValueError(f"unknown provider {provider!r}: one of {', '.join(FORMATS)}")


__all__ = [
    "FORMATS",
    "HubCall",
    "SchemaError",
    "ToolCallError",
    "Toolset",
    "UnknownToolError",
    "anthropic",
    "export",
    "gemini",
    "openai",
]
