"""An MCP Apps server (`io.modelcontextprotocol/ui`) on the SDK's `MCPServer` with its `Apps` extension.

`show_chart` names the page `ui://demo/app.html` in `_meta.ui.resourceUri`, and its
results name it again in `_meta` (both the current key and the deprecated flat
`ui/resourceUri`); `refresh_chart` is app-only (`visibility: ["app"]`), the kind of
tool a page calls, and `model_only` is not a page's to call; `heard_extensions` answers with the extensions the client
declared, as this server hears them. The page's resource carries CSP domains and
permissions in its `_meta.ui`. Runs as a stdio child: `python tests/servers/apps.py`.
"""

from __future__ import annotations

from typing import Any

from mcp.server.apps import Apps, ResourceCsp, ResourcePermissions, client_supports_apps
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent

PAGE_URI = "ui://demo/app.html"
PAGE = "<!DOCTYPE html><html><body><h1>chart</h1><script>/* calls refresh_chart */</script></body></html>"
CSP = ResourceCsp(connect_domains=["https://api.example.com"], resource_domains=["https://cdn.example.com"])
PERMISSIONS = ResourcePermissions(clipboard_write={})


def build_server() -> MCPServer:
    apps = Apps()

    @apps.tool(resource_uri=PAGE_URI, name="show_chart", description="Show a chart of the series.")
    def show_chart(series: str, ctx: Context) -> CallToolResult:
        return CallToolResult(
            content=[TextContent(type="text", text=f"chart of {series} (apps: {client_supports_apps(ctx)})")],
            structured_content={"series": series, "points": [1, 2, 3]},
            _meta={"ui": {"resourceUri": PAGE_URI}, "ui/resourceUri": PAGE_URI, "source": "demo"},
        )

    @apps.tool(resource_uri=PAGE_URI, visibility=["app"], name="refresh_chart", description="New points (app only).")
    def refresh_chart(series: str) -> str:
        return f"refreshed {series}"

    @apps.tool(resource_uri=PAGE_URI, visibility=["model"], name="model_only", description="Not for pages.")
    def model_only() -> str:
        return "for the model"

    apps.add_html_resource(PAGE_URI, PAGE, name="chart page", csp=CSP, permissions=PERMISSIONS, prefers_border=True)

    mcp = MCPServer("apps", extensions=[apps])

    @mcp.tool(description="The extensions the client declared, as this server hears them.")
    def heard_extensions(ctx: Context) -> dict[str, Any]:
        capabilities = ctx.client_capabilities
        return {"extensions": (capabilities.extensions if capabilities else None) or {}}

    return mcp


def main() -> None:
    build_server().run("stdio")


if __name__ == "__main__":
    main()
