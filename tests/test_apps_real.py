"""A real MCP Apps server through the hub: one built with npm's `@modelcontextprotocol/ext-apps`.

The server is tests/npm/ext_apps_server.mjs: the TypeScript SDK's `McpServer` with ext-apps'
`registerAppTool` / `registerAppResource`, as their README shows. `show_chart` names its page
`ui://charts/chart.html` (registerAppTool adds the deprecated flat `ui/resourceUri` key too),
`refresh_chart` is app-only (`visibility: ["app"]`), and `ui_support` answers what the server heard of
the client's MCP Apps support (ext-apps' `getUiCapability`). It serves both eras over stdio (the SDK's
`serveStdio`) and over streamable HTTP (`createMcpHandler`, stateless in the handshake era).

The host is the SDK's client declaring the UI extension, as a host that renders MCP Apps does: it lists
the tools, reads the page the tool names, calls the tool, then calls the app-only tool by the server's
own name the way a page does. What it gets through the hub is compared with what the same client gets
connected directly to the same server. The hub mounts the server once, as `charts`; each upstream (stdio
or HTTP, in either era) gets a hub of its own for the module, so the server's own names stay unambiguous.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client import advertise

from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import ROOT, hub_client, make_config, running_hub, serve_app
from tests.harness.processes import logging_until

NPM = ROOT / "tests" / "npm"
NODE = NPM / "node_modules" / ".bin" / "node"
SERVER = NPM / "ext_apps_server.mjs"
EXT_APPS = NPM / "node_modules" / "@modelcontextprotocol" / "ext-apps" / "package.json"

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not (NODE.exists() and EXT_APPS.exists()),
        reason="npm's @modelcontextprotocol/ext-apps is not in tests/npm (run `npm ci --prefix tests/npm`)",
    ),
    pytest.mark.slow,
]

UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
HOST = (advertise(UI, {"mimeTypes": [MIME]}), advertise("com.example/other", {"level": 2}))
"""What the scripted host declares: MCP Apps, and an extension the hub knows nothing of."""

MOUNT = "charts"
PAGE = "ui://charts/chart.html"
PUBLIC_PAGE = f"ui://{MOUNT}+charts/chart.html"

UPSTREAMS = [("stdio", "legacy"), ("stdio", "2026-07-28"), ("http", "legacy"), ("http", "2026-07-28")]
"""How the hub reaches the server: (transport, the era it speaks to the server)."""

HOSTS = ["legacy", "auto"]
"""The host's mode toward the hub (and toward the server directly): the handshake, or `server/discover`
(2026-07-28 with this hub and this server)."""


def dumped(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def stdio_params() -> StdioServerParameters:
    return StdioServerParameters(command=str(NODE), args=[str(SERVER)], cwd=str(NPM))


# -- the server over streamable HTTP, one process for the module ----------------------------------------


@asynccontextmanager
async def charts_over_http(workdir: Path) -> AsyncIterator[str]:
    """Run the server with `--http` (a free loopback port); yield its MCP URL."""
    command = [str(NODE), str(SERVER), "--http"]
    log = workdir / "charts.log"
    async with logging_until(command, log, r"^listening on (http://\S+)$", "the ext-apps server", cwd=NPM) as url:
        yield url[1]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def charts_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    async with charts_over_http(tmp_path_factory.mktemp("charts-http")) as url:
        yield url


# -- what a host sees: directly, and through a hub -------------------------------------------------------


@dataclass
class Seen:
    """What the scripted host saw of the server, by the names it was offered."""

    era: str
    extensions: dict[str, Any] | None
    tools: dict[str, dict[str, Any]]
    resources: dict[str, dict[str, Any]]
    page: dict[str, Any]
    """The page, read at the URI the `show_chart` tool names."""
    shown: dict[str, Any]
    refreshed: dict[str, Any]
    """`refresh_chart` called by the server's own name, as a page calls it."""
    ui_support: Any


async def host_session(client: Client, prefix: str = "") -> Seen:
    """List the tools, read the page `show_chart` names, call it, then call the app-only tool as a page does."""
    with anyio.fail_after(30):
        tools = {t.name: dumped(t) for t in (await client.list_tools()).tools}
        resources = {r.uri: dumped(r) for r in (await client.list_resources()).resources}
        uri = tools[f"{prefix}show_chart"]["_meta"]["ui"]["resourceUri"]
        page = dumped((await client.read_resource(uri)).contents[0])
        shown = dumped(await client.call_tool(f"{prefix}show_chart", {"series": "sales"}))
        refreshed = dumped(await client.call_tool("refresh_chart", {"series": "sales"}))
        support = await client.call_tool(f"{prefix}ui_support", {})
    capabilities = client.server_capabilities
    return Seen(
        era=client.session.protocol_version,
        extensions=capabilities.extensions,
        tools=tools,
        resources=resources,
        page=page,
        shown=shown,
        refreshed=refreshed,
        ui_support=json.loads(support.content[0].text)["ui"],  # type: ignore[union-attr]
    )


def upstream_table(upstream: tuple[str, str], url: str) -> dict[str, Any]:
    transport, era = upstream
    if transport == "stdio":
        return {"command": str(NODE), "args": [str(SERVER)], "cwd": str(NPM), "protocol": era}
    return {"url": url, "protocol": era}


@pytest.fixture(scope="module", params=UPSTREAMS, ids=["-".join(u) for u in UPSTREAMS])
def upstream(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
async def hub(
    upstream: tuple[str, str], charts_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Hub]:
    config = make_config(tmp_path_factory.mktemp("hub"), {MOUNT: upstream_table(upstream, charts_url)})
    async with running_hub(config) as hub:
        health = hub.health()
        assert health["status"] == "ok", health
        yield hub


@pytest.fixture(scope="module")
async def direct(upstream: tuple[str, str], charts_url: str) -> dict[str, Seen]:
    """What the host sees connected straight to the same server (over the same transport), in each of its
    modes: host mode -> what it saw."""
    transport, _ = upstream
    seen = {}
    for mode in HOSTS:
        target = stdio_params() if transport == "stdio" else charts_url
        async with Client(target, mode=mode, cache=None, extensions=HOST) as client:
            seen[mode] = await host_session(client)
    return seen


@pytest.mark.parametrize("host", HOSTS)
async def test_the_page_a_tool_names_is_the_servers_page(hub: Hub, direct: dict[str, Seen], host: str) -> None:
    async with hub_client(hub, host, extensions=HOST) as client:
        seen = await host_session(client, prefix=f"{MOUNT}_")
    native = direct[host]
    assert seen.era == native.era == ("2025-11-25" if host == "legacy" else "2026-07-28")
    # registerAppTool writes the page's URI under `_meta.ui.resourceUri` and the flat legacy key: both name
    # the URI the hub serves the page at, still a ui:// URI.
    assert native.tools["show_chart"]["_meta"] == {"ui": {"resourceUri": PAGE}, "ui/resourceUri": PAGE}
    assert seen.tools[f"{MOUNT}_show_chart"]["_meta"] == {
        "ui": {"resourceUri": PUBLIC_PAGE},
        "ui/resourceUri": PUBLIC_PAGE,
    }
    assert seen.resources[PUBLIC_PAGE] == {**native.resources[PAGE], "uri": PUBLIC_PAGE}
    assert seen.resources[PUBLIC_PAGE]["mimeType"] == MIME
    # Everything else of the tools is the server's, under the hub's names.
    for name, tool in native.tools.items():
        mapped = seen.tools[f"{MOUNT}_{name}"]
        assert {k: v for k, v in mapped.items() if k not in ("name", "_meta")} == {
            k: v for k, v in tool.items() if k not in ("name", "_meta")
        }
    # The page: the same bytes, MIME type and `_meta` (CSP, prefersBorder) as directly; its uri the hub's.
    assert seen.page == {**native.page, "uri": PUBLIC_PAGE}
    assert seen.page["mimeType"] == MIME
    assert seen.page["text"].encode() == native.page["text"].encode()
    assert seen.page["_meta"] == {"ui": {"csp": {"connectDomains": ["https://api.example.com"]}, "prefersBorder": True}}


@pytest.mark.parametrize("host", HOSTS)
async def test_the_tool_and_the_app_only_tool_answer_as_directly(hub: Hub, direct: dict[str, Seen], host: str) -> None:
    async with hub_client(hub, host, extensions=HOST) as client:
        seen = await host_session(client, prefix=f"{MOUNT}_")
        with anyio.fail_after(20):
            by_hub_name = dumped(await client.call_tool(f"{MOUNT}_refresh_chart", {"series": "sales"}))
            own_page = dumped((await client.read_resource(PAGE)).contents[0])  # a page reads its own URI
    native = direct[host]
    # The app-only tool stays listed, with its visibility (keeping it from the model is the host's part).
    assert seen.tools[f"{MOUNT}_refresh_chart"]["_meta"] == {
        "ui": {"resourceUri": PUBLIC_PAGE, "visibility": ["app"]},
        "ui/resourceUri": PUBLIC_PAGE,
    }

    def result(r: dict[str, Any]) -> dict[str, Any]:
        return {k: r.get(k) for k in ("content", "structuredContent", "isError")}

    assert result(seen.shown) == result(native.shown)
    assert seen.shown["structuredContent"] == {"series": "sales", "points": [1, 2, 3]}
    assert result(seen.refreshed) == result(native.refreshed)
    assert result(by_hub_name) == result(native.refreshed)
    assert seen.refreshed["content"] == [{"type": "text", "text": "refreshed sales"}]
    assert own_page["text"] == native.page["text"]


@pytest.mark.parametrize("host", HOSTS)
async def test_the_server_hears_the_hosts_mcp_apps_support(
    hub: Hub, direct: dict[str, Seen], upstream: tuple[str, str], host: str
) -> None:
    """ext-apps' `getUiCapability` finds MCP Apps through the hub: in the 2026-07-28 era the host's own
    declaration, on a shared handshake-era session the hub's (MCP Apps, the same MIME type). A handshake-era
    HTTP server built with `createMcpHandler` is stateless: no `initialize` reaches the instance that serves
    a call, so it hears nothing, through the hub or directly."""
    async with hub_client(hub, host, extensions=HOST) as client:
        with anyio.fail_after(20):
            support = await client.call_tool(f"{MOUNT}_ui_support", {})
    heard = json.loads(support.content[0].text)  # type: ignore[union-attr]
    transport, era = upstream
    assert heard["ui"] == (None if (transport, era) == ("http", "legacy") else {"mimeTypes": [MIME]})
    # Directly, in the era the hub speaks to the server, the server hears the same.
    assert direct["auto" if era == "2026-07-28" else "legacy"].ui_support == heard["ui"]
    if era == "2026-07-28":  # the host's own extensions, the one the hub knows nothing of included
        assert heard["extensions"] == {UI: {"mimeTypes": [MIME]}, "com.example/other": {"level": 2}}
    elif transport == "stdio":  # the shared session: what the hub carries
        assert heard["extensions"] == {UI: {"mimeTypes": [MIME]}}


async def test_the_hub_declares_mcp_apps_to_a_2026_host(hub: Hub, direct: dict[str, Seen]) -> None:
    """In `server/discover`, as the server declares it (ext-apps' server declares no settings)."""
    async with hub_client(hub, "auto", extensions=HOST) as client:
        era = client.session.protocol_version
        declared = client.server_capabilities.extensions
    assert era == "2026-07-28"
    assert declared is not None and declared[UI] == {}
    assert direct["auto"].extensions == {UI: {}}
    assert direct["legacy"].extensions == {UI: {}}  # the TypeScript server declares it in `initialize` too


async def test_the_hub_declares_mcp_apps_to_a_handshake_era_host(hub: Hub, direct: dict[str, Seen]) -> None:
    """In `initialize`, as the TypeScript server declares it there."""
    async with hub_client(hub, "legacy", extensions=HOST) as client:
        declared = client.server_capabilities.extensions
    assert declared is not None and declared[UI] == direct["legacy"].extensions[UI] == {}


@pytest.mark.parametrize("host", HOSTS)
async def test_over_the_hubs_http_endpoint(hub: Hub, direct: dict[str, Seen], host: str) -> None:
    """The host reaches the hub over streamable HTTP, as a remote host does."""
    app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
    async with serve_app(app) as base, Client(f"{base}/mcp", mode=host, cache=None, extensions=HOST) as client:
        seen = await host_session(client, prefix=f"{MOUNT}_")
    native = direct[host]
    assert seen.tools[f"{MOUNT}_show_chart"]["_meta"]["ui"] == {"resourceUri": PUBLIC_PAGE}
    assert seen.page == {**native.page, "uri": PUBLIC_PAGE}
    assert seen.shown["content"] == native.shown["content"]
    assert seen.refreshed["content"] == native.refreshed["content"]
