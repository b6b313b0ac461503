"""mcp-hub: one Model Context Protocol endpoint in front of many MCP servers."""

__version__ = "0.1.0"
