"""The hub as a library: `HubClient` (see client.py)."""

from mcp_hub.library.client import HubClient

__all__ = ["HubClient"]
