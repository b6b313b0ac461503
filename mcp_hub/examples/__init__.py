"""Small MCP servers that ship with the hub, so the shipped hub.toml works out of the box."""
