"""The hub's own MCP endpoint: one SDK server, served over stdio or streamable HTTP."""

from mcp_hub.server.endpoint import Endpoint

__all__ = ["Endpoint"]
