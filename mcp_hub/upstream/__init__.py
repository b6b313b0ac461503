"""Connections to mounted MCP servers: transports and the supervisor that keeps them up."""

from mcp_hub.upstream.connection import CARRIED_EXTENSIONS, UI_EXTENSION
from mcp_hub.upstream.relay import ClientCannotAnswer, Origin
from mcp_hub.upstream.supervisor import LIST_METHODS, State, Upstream

__all__ = ["CARRIED_EXTENSIONS", "LIST_METHODS", "UI_EXTENSION", "ClientCannotAnswer", "Origin", "State", "Upstream"]
