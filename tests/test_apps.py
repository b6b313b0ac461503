"""MCP Apps (`io.modelcontextprotocol/ui`) through the hub: a tool's page is read at the URI the tool names,
a page's calls by its server's own tool names reach that server, and extensions are declared both ways.

The server is tests/servers/apps.py (the SDK's `MCPServer` with its `Apps` extension) as a stdio child;
the host is the SDK's client declaring the extension, compared with the same client connected directly."""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client import advertise
from mcp.shared.exceptions import MCPError

from mcp_hub.catalog import naming
from mcp_hub.config import load_config
from mcp_hub.server.http import build_app
from mcp_hub.server.hub_server import merged_extensions
from tests.conftest import (
    ROOT,
    fixture_server,
    hub_client,
    hub_command,
    hub_environment,
    make_config,
    running_hub,
    script_server,
    serve_app,
    write_config,
)

pytestmark = pytest.mark.anyio

APPS = str(ROOT / "tests" / "servers" / "apps.py")
UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
HOST = (advertise(UI, {"mimeTypes": [MIME]}), advertise("com.example/other", {"level": 2}))
"""What the scripted host declares: MCP Apps, and an extension the hub knows nothing of."""
PAGE = "ui://demo/app.html"
PUBLIC_PAGE = "ui://apps+demo/app.html"

ERAS = [("legacy", "legacy"), ("2026-07-28", "2026-07-28"), ("legacy", "2026-07-28"), ("2026-07-28", "legacy")]
"""(the server's era toward the hub, the host's era toward the hub)."""


def apps_server(protocol: str) -> dict[str, Any]:
    return script_server(APPS, protocol=protocol)


@asynccontextmanager
async def direct(protocol: str) -> AsyncIterator[Client]:
    server = script_server(APPS)
    params = StdioServerParameters(command=server["command"], args=server["args"])
    async with Client(params, mode=protocol, cache=None, extensions=HOST) as client:
        yield client


@asynccontextmanager
async def through_hub(tmp_path: Path, server_era: str, host_era: str, **more: Any) -> AsyncIterator[Client]:
    config = make_config(tmp_path, {"apps": apps_server(server_era), **more})
    async with running_hub(config) as hub, hub_client(hub, host_era, extensions=HOST) as client:
        yield client


def dumped(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


@pytest.mark.slow
@pytest.mark.parametrize(("server_era", "host_era"), ERAS)
async def test_the_page_a_tool_names_is_read_through_the_hub(tmp_path: Path, server_era: str, host_era: str) -> None:
    async with direct(server_era) as server:
        native_tools = {t.name: dumped(t) for t in (await server.list_tools()).tools}
        native_page = dumped((await server.read_resource(PAGE)).contents[0])
    async with through_hub(tmp_path, server_era, host_era) as host:
        with anyio.fail_after(20):
            tools = {t.name: dumped(t) for t in (await host.list_tools()).tools}
            uri = tools["apps_show_chart"]["_meta"]["ui"]["resourceUri"]
            page = dumped((await host.read_resource(uri)).contents[0])
            listed = {r.uri for r in (await host.list_resources()).resources}
    # The tool names the page by the URI the hub serves it at, still a ui:// URI (hosts require the scheme).
    assert uri == PUBLIC_PAGE
    assert PUBLIC_PAGE in listed
    assert tools["apps_show_chart"]["_meta"] == {"ui": {"resourceUri": PUBLIC_PAGE}}
    # The app-only tool stays listed, with its visibility; nothing else of the tools changes but names.
    assert tools["apps_refresh_chart"]["_meta"] == {"ui": {"resourceUri": PUBLIC_PAGE, "visibility": ["app"]}}
    assert tools["apps_show_chart"]["inputSchema"] == native_tools["show_chart"]["inputSchema"]
    # The page as the server sends it, its CSP domains and permissions untouched; its uri the hub's.
    assert page == {**native_page, "uri": PUBLIC_PAGE}
    assert page["mimeType"] == MIME
    assert page["_meta"]["ui"]["csp"]["connectDomains"] == ["https://api.example.com"]


@pytest.mark.slow
@pytest.mark.parametrize(("server_era", "host_era"), ERAS[:2])
async def test_a_tool_result_names_its_page_by_the_hubs_uri(tmp_path: Path, server_era: str, host_era: str) -> None:
    async with direct(server_era) as server:
        native = dumped(await server.call_tool("show_chart", {"series": "x"}))
    async with through_hub(tmp_path, server_era, host_era) as host:
        with anyio.fail_after(20):
            result = dumped(await host.call_tool("apps_show_chart", {"series": "x"}))
            page = await host.read_resource(result["_meta"]["ui"]["resourceUri"])
    assert result["_meta"]["ui"] == {"resourceUri": PUBLIC_PAGE}
    assert result["_meta"]["ui/resourceUri"] == PUBLIC_PAGE  # the deprecated flat key too
    assert result["_meta"]["source"] == "demo"
    assert result["content"] == native["content"]
    assert result["structuredContent"] == native["structuredContent"]
    assert page.contents[0].text.startswith("<!DOCTYPE html>")  # type: ignore[union-attr]


@pytest.mark.parametrize(("server_era", "host_era"), ERAS[:2])
async def test_a_page_calls_its_servers_tools_by_their_own_names(
    tmp_path: Path, server_era: str, host_era: str
) -> None:
    async with through_hub(tmp_path, server_era, host_era) as host:
        with anyio.fail_after(20):
            refreshed = await host.call_tool("refresh_chart", {"series": "x"})
            shown = await host.call_tool("show_chart", {"series": "y"})
            public = await host.call_tool("apps_refresh_chart", {"series": "z"})
            page = await host.read_resource(PAGE)  # a page reading its server's resource by its own URI
            with pytest.raises(MCPError) as model_only:
                await host.call_tool("model_only", {})
            assert (await host.call_tool("apps_model_only", {})).content[0].text == "for the model"  # type: ignore[union-attr]
    assert refreshed.content[0].text == "refreshed x"  # type: ignore[union-attr]
    assert shown.content[0].text.startswith("chart of y")  # type: ignore[union-attr]
    assert shown.meta is not None and shown.meta["ui"] == {"resourceUri": PUBLIC_PAGE}
    assert public.content[0].text == "refreshed z"  # type: ignore[union-attr]
    assert page.contents[0].text.startswith("<!DOCTYPE html>")  # type: ignore[union-attr]
    # A tool whose visibility leaves out "app" is not a page's to call: unknown by its server's name.
    assert "Unknown tool" in model_only.value.message or "unknown tool" in model_only.value.message.lower()


async def test_only_a_name_one_page_serving_mount_offers_is_taken_for_its_own(tmp_path: Path) -> None:
    """A server's own name reaches a tool of a mount that serves pages, when it is the only one of that name."""
    async with through_hub(tmp_path, "legacy", "legacy", srv=fixture_server("srv")) as host:
        with anyio.fail_after(20):
            refreshed = await host.call_tool("refresh_chart", {"series": "x"})
            with pytest.raises(MCPError) as not_a_page_server:
                await host.call_tool("echo", {"text": "hi"})
    assert refreshed.content[0].text == "refreshed x"  # type: ignore[union-attr]
    assert "echo" in not_a_page_server.value.message
    async with through_hub(tmp_path, "legacy", "legacy", more=apps_server("legacy")) as host:
        with anyio.fail_after(20):
            with pytest.raises(MCPError) as ambiguous:
                await host.call_tool("refresh_chart", {"series": "x"})
            more = await host.call_tool("more_refresh_chart", {"series": "x"})
    assert "refresh_chart" in ambiguous.value.message
    assert more.content[0].text == "refreshed x"  # type: ignore[union-attr]


POLICY = """
[principals]
stdio = "host"

[profiles.host]
default = "deny"
[[profiles.host.rules]]
id = "charts"
effect = "allow"
tools = ["apps/show_chart"]
"""


async def test_a_pages_call_is_under_policy_and_audited(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "hub.toml").write_text(textwrap.dedent(POLICY), encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"apps": apps_server("legacy")})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n\n[audit]\nfile = "audit.jsonl"\n')
    async with running_hub(load_config(config)) as hub, hub_client(hub, extensions=HOST) as host:
        with anyio.fail_after(20):
            assert {t.name for t in (await host.list_tools()).tools} == {"apps_show_chart"}
            shown = await host.call_tool("show_chart", {"series": "x"})
            await host.call_tool("apps_show_chart", {"series": "y"})  # by the hub's name: the host's own call
            with pytest.raises(MCPError) as denied:
                await host.call_tool("refresh_chart", {"series": "x"})
            with pytest.raises(MCPError) as unknown:
                await host.call_tool("no_such_tool", {})
    assert shown.content[0].text.startswith("chart of x")  # type: ignore[union-attr]
    # Hidden by policy answers exactly as a name nothing offers.
    assert denied.value.code == unknown.value.code
    assert denied.value.message == unknown.value.message.replace("no_such_tool", "refresh_chart")
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(line["mount"], line["name"], line["via"], line["outcome"]) for line in lines] == [
        ("apps", "show_chart", "app", "allowed"),
        ("apps", "show_chart", None, "allowed"),
        ("apps", "refresh_chart", "app", "denied"),
    ]


# -- extensions ------------------------------------------------------------------------------------------


async def test_the_hub_declares_the_extensions_its_mounts_offer(tmp_path: Path) -> None:
    """In `server/discover` (the SDK's handshake-era surface has no `extensions` in `initialize`)."""
    async with through_hub(tmp_path, "2026-07-28", "auto") as host:
        assert host.session.protocol_version == "2026-07-28"
        declared = host.server_capabilities.extensions
    assert declared is not None and UI in declared


async def test_over_http_a_2026_host_hears_the_extensions_and_reads_the_page(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"apps": apps_server("2026-07-28")})
    async with running_hub(config) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(app) as base, Client(f"{base}/mcp", cache=None, extensions=HOST) as host:
            with anyio.fail_after(20):
                declared = host.server_capabilities.extensions or {}
                tool = next(t for t in (await host.list_tools()).tools if t.name == "apps_show_chart")
                assert tool.meta is not None
                page = await host.read_resource(tool.meta["ui"]["resourceUri"])
                refreshed = await host.call_tool("refresh_chart", {"series": "x"})
            era = host.session.protocol_version
    assert era == "2026-07-28"
    assert declared[UI] == {}  # as the server declared it (the SDK's `Apps` declares no settings)
    assert page.contents[0].text.startswith("<!DOCTYPE html>")  # type: ignore[union-attr]
    assert refreshed.content[0].text == "refreshed x"  # type: ignore[union-attr]


@pytest.mark.parametrize("host_era", ["legacy", "2026-07-28"])
async def test_a_2026_server_hears_the_extensions_of_the_host_it_serves(tmp_path: Path, host_era: str) -> None:
    async with through_hub(tmp_path, "2026-07-28", host_era) as host:
        with anyio.fail_after(20):
            heard = (await host.call_tool("apps_heard_extensions", {})).structured_content
    assert heard == {"extensions": {UI: {"mimeTypes": [MIME]}, "com.example/other": {"level": 2}}}


async def test_a_handshake_era_server_hears_that_the_hub_relays_mcp_apps(tmp_path: Path) -> None:
    """One session serves every client, so it hears what the hub can carry: MCP Apps."""
    async with through_hub(tmp_path, "legacy", "legacy") as host:
        with anyio.fail_after(20):
            heard = (await host.call_tool("apps_heard_extensions", {})).structured_content
            shown = await host.call_tool("apps_show_chart", {"series": "x"})
    assert heard == {"extensions": {UI: {"mimeTypes": [MIME]}}}
    assert shown.content[0].text == "chart of x (apps: True)"  # type: ignore[union-attr]


# -- the pure mapping (naming.py) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mount", "uri", "public"),
    [
        ("apps", "ui://demo/app.html", "ui://apps+demo/app.html"),
        ("apps", "ui://", "ui://apps+"),
        ("apps", "ui://a+b/c", "ui://apps+a+b/c"),
    ],
)
def test_a_page_uri_keeps_its_scheme_and_reads_back(mount: str, uri: str, public: str) -> None:
    assert naming.public_uri(mount, uri) == public
    assert naming.split_uri(public, {mount, "other"}) == (mount, uri)
    assert naming.split_uri(public, {"other"}) is None
    assert naming.split_uri(f"{mount}+{uri}", {mount}) == (mount, uri)  # the plain form is read too
    assert naming.public_uri(mount, "uix://demo") == f"{mount}+uix://demo"  # any other scheme: as before


def test_only_page_references_in_meta_are_mapped() -> None:
    meta = {"ui": {"resourceUri": PAGE, "visibility": ["app"]}, "ui/resourceUri": PAGE, "other": PAGE}
    mapped = naming.map_ui_references(meta, lambda uri: f"<{uri}>")
    assert mapped == {
        "ui": {"resourceUri": f"<{PAGE}>", "visibility": ["app"]},
        "ui/resourceUri": f"<{PAGE}>",
        "other": PAGE,
    }
    assert meta["ui"]["resourceUri"] == PAGE  # the server's own listing is not changed
    assert naming.map_ui_references({"ui": {"visibility": ["app"]}, "x": 1}, str) is None
    assert naming.map_ui_references({"ui": "odd", "ui/resourceUri": 3}, str) is None


@pytest.mark.parametrize(
    ("meta", "callable_by_pages"),
    [
        (None, True),
        ({}, True),
        ({"ui": {"resourceUri": PAGE}}, True),
        ({"ui": {"visibility": ["app"]}}, True),
        ({"ui": {"visibility": ["model", "app"]}}, True),
        ({"ui": {"visibility": ["model"]}}, False),
        ({"ui": {"visibility": []}}, False),
    ],
)
def test_a_page_may_call_what_its_visibility_allows(meta: Any, callable_by_pages: bool) -> None:
    assert naming.app_may_call(meta) is callable_by_pages


def test_extensions_of_several_servers_merge() -> None:
    merged = merged_extensions(
        [
            {UI: {"mimeTypes": [MIME]}, "com.example/a": {"n": 1, "deep": {"k": [1]}}},
            None,
            {UI: {"mimeTypes": ["text/other", MIME]}, "com.example/a": {"n": 2, "deep": {"k": [2]}}, "b/c": {}},
        ]
    )
    assert merged == {
        UI: {"mimeTypes": [MIME, "text/other"]},
        "com.example/a": {"n": 1, "deep": {"k": [1, 2]}},
        "b/c": {},
    }


async def test_a_clients_own_session_declares_that_clients_extensions(tmp_path: Path) -> None:
    """With `isolation = "per-client"` a handshake-era session is one client's: it declares what that client did."""
    async with through_hub(
        tmp_path, "legacy", "legacy", own={**apps_server("legacy"), "isolation": "per-client"}
    ) as host:
        with anyio.fail_after(20):
            heard = (await host.call_tool("own_heard_extensions", {})).structured_content
    assert heard == {"extensions": {UI: {"mimeTypes": [MIME]}, "com.example/other": {"level": 2}}}


@pytest.mark.slow
@pytest.mark.parametrize("host_era", ["legacy", "auto"])
async def test_over_stdio_a_host_renders_and_drives_a_page(tmp_path: Path, host_era: str) -> None:
    """`mcp-hub serve` over stdio, as a desktop host runs it: the page the tool names, then the page's calls."""
    config = write_config(tmp_path / "hub.toml", {"apps": apps_server("2026-07-28")})
    command = hub_command("serve", "--config", str(config))
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        cwd=str(tmp_path),
        env=hub_environment(),
    )
    async with Client(params, mode=host_era, cache=None, extensions=HOST) as host:
        with anyio.fail_after(30):
            tool = next(t for t in (await host.list_tools()).tools if t.name == "apps_show_chart")
            assert tool.meta is not None
            page = await host.read_resource(tool.meta["ui"]["resourceUri"])
            refreshed = await host.call_tool("refresh_chart", {"series": "x"})
            heard = (await host.call_tool("apps_heard_extensions", {})).structured_content
        declared = host.server_capabilities.extensions or {}
    assert UI in declared  # in `initialize` (handshake era), in `server/discover` (2026-07-28)
    assert page.contents[0].text.startswith("<!DOCTYPE html>")  # type: ignore[union-attr]
    assert refreshed.content[0].text == "refreshed x"  # type: ignore[union-attr]
    assert heard == {"extensions": {UI: {"mimeTypes": [MIME]}, "com.example/other": {"level": 2}}}
