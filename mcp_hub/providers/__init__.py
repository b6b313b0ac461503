"""MCP tools in the formats of model providers' APIs, and back: definitions (`openai`, `anthropic`,
`gemini`), a provider's tool call as a hub call (`HubCall`), an MCP result as the provider's
tool-result message. Pure: no I/O, no provider SDK needed."""

from mcp_hub.providers import anthropic, gemini, openai
from mcp_hub.providers.calls import HubCall, ToolCallError
from mcp_hub.providers.names import UnknownToolError
from mcp_hub.providers.schema import SchemaError
from mcp_hub.providers.toolset import Toolset

__all__ = ["HubCall", "SchemaError", "ToolCallError", "Toolset", "UnknownToolError", "anthropic", "gemini", "openai"]
