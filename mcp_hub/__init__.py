"""mcp-hub: one Model Context Protocol endpoint in front of many MCP servers."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mcp-hub")
    """The installed distribution's version: pyproject.toml's `version`, the one place it is written."""
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
