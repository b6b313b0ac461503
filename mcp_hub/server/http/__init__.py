"""The MCP endpoint over streamable HTTP: the app (app.py) and its doors, one per protocol era
(handshake.py, modern.py) beside the SDK's own path (sdk_path.py), sharing exchange.py."""

from mcp_hub.server.http.app import MAX_REQUEST_BODY, build_app

__all__ = ["MAX_REQUEST_BODY", "build_app"]
