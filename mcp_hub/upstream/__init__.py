"""Connections to mounted MCP servers: transports and the supervisor that keeps them up."""

from mcp_hub.upstream.relay import ClientCannotAnswer, Origin
from mcp_hub.upstream.supervisor import LIST_METHODS, State, Upstream

__all__ = ["LIST_METHODS", "ClientCannotAnswer", "Origin", "State", "Upstream"]
