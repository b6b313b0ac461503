"""A URL mount with no transport: streamable HTTP, or the legacy SSE transport if the server refuses it.

The MCP spec's backwards compatibility: POST the handshake to the URL; a 4xx answer means a server of
the 2024-11-05 HTTP+SSE transport, reached by a GET of the same URL. Real servers on loopback: the
fixture over the SDK's SSE server transport, and over streamable HTTP.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import IncomingMessage

from mcp_hub.config import ServerConfig, load_config
from mcp_hub.errors import UpstreamUnavailable
from mcp_hub.importer import import_client_config
from mcp_hub.upstream.connection import TransportChoice, connect
from mcp_hub.upstream.relay import InFlight
from tests.conftest import hub_client, make_config, running_hub, serve_app
from tests.servers.fixture import build_server, sse_app

pytestmark = pytest.mark.anyio


def recording(app: Any, seen: list[tuple[str, str]]) -> Any:
    """`app`, noting each HTTP request's method and path."""

    async def recorded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append((scope["method"], scope["path"]))
        await app(scope, receive, send)

    return recorded


async def _ignore(message: IncomingMessage) -> None:
    """Notifications are not what these tests look at."""


async def echo_over(config: ServerConfig, choice: TransportChoice) -> tuple[str, Any]:
    """Connect as a mount does, call echo once, and close: the transport used and the result."""
    with anyio.fail_after(20):
        async with connect(
            config, inflight=InFlight(config.name), message_handler=_ignore, on_broken=lambda _: None, choice=choice
        ) as connection:
            result = await connection.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            return connection.transport, result


async def test_an_sse_server_mounted_by_url_alone_is_found_and_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[str, str]] = []
    async with serve_app(recording(sse_app(build_server("old")), seen)) as upstream:
        config = make_config(tmp_path, {"old": {"url": f"{upstream}/sse"}})
        with caplog.at_level(logging.WARNING, logger="mcp_hub.upstream.connection"):
            async with running_hub(config) as hub, hub_client(hub) as client:
                health = hub.health()["servers"]["old"]
                tools = await client.list_tools()
                echo = await client.call_tool("old_echo", {"text": "sse"})
    assert (health["state"], health["transport"]) == ("up", "sse")
    assert "old_echo" in {tool.name for tool in tools.tools}
    assert echo.structured_content == {"text": "sse", "server": "old"}
    # The refused handshake (server/discover, then initialize), then the SSE stream; every later POST
    # went to the server's message endpoint.
    assert seen[:3] == [("POST", "/sse"), ("POST", "/sse"), ("GET", "/sse")]
    assert seen.count(("POST", "/sse")) == 2
    assert [r.getMessage() for r in caplog.records] == [
        "server 'old': refused streamable HTTP (HTTP 405); connected over the legacy SSE transport, "
        "which its later connections use"
    ]


async def test_a_mounts_found_transport_is_kept_for_its_next_connection() -> None:
    seen: list[tuple[str, str]] = []
    async with serve_app(recording(sse_app(build_server("old")), seen)) as upstream:
        config = ServerConfig(name="old", url=f"{upstream}/sse")
        choice = TransportChoice(config)
        assert choice.kind == "auto"
        first = await echo_over(config, choice)
        probes = seen.count(("POST", "/sse"))
        second = await echo_over(config, choice)
    assert first[0] == second[0] == choice.kind == "sse"
    assert first[1]["structuredContent"] == second[1]["structuredContent"] == {"text": "hi", "server": "old"}
    assert probes > 0 and seen.count(("POST", "/sse")) == probes, "the second connection probed again"
    assert seen.count(("GET", "/sse")) == 2


@pytest.mark.parametrize("transport", ["sse"])
async def test_an_explicit_sse_transport_is_not_probed(tmp_path: Path, transport: str) -> None:
    seen: list[tuple[str, str]] = []
    async with serve_app(recording(sse_app(build_server("old")), seen)) as upstream:
        config = make_config(tmp_path, {"old": {"url": f"{upstream}/sse", "transport": transport}})
        async with running_hub(config) as hub, hub_client(hub) as client:
            echo = await client.call_tool("old_echo", {"text": "sse"})
            health = hub.health()["servers"]["old"]
    assert (health["state"], health["transport"]) == ("up", "sse")
    assert echo.structured_content == {"text": "sse", "server": "old"}
    assert ("POST", "/sse") not in seen and seen[0] == ("GET", "/sse")


@pytest.mark.parametrize("transport", [None, "auto", "http", "streamable-http"])
async def test_a_streamable_http_server_is_not_taken_for_sse(
    tmp_path: Path, transport: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[str, str]] = []
    app = build_server("remote").streamable_http_app(stateless_http=False)
    async with serve_app(recording(app, seen)) as upstream:
        settings = {"url": f"{upstream}/mcp"} | ({"transport": transport} if transport else {})
        config = make_config(tmp_path, {"remote": settings})
        with caplog.at_level(logging.WARNING, logger="mcp_hub.upstream.connection"):
            async with running_hub(config) as hub, hub_client(hub) as client:
                echo = await client.call_tool("remote_echo", {"text": "http"})
                health = hub.health()["servers"]["remote"]
    assert (health["state"], health["transport"]) == ("up", "streamable-http")
    assert echo.structured_content == {"text": "http", "server": "remote"}
    assert seen[0] == ("POST", "/mcp")
    assert not caplog.records


async def test_an_explicit_streamable_http_transport_does_not_fall_back() -> None:
    seen: list[tuple[str, str]] = []
    async with serve_app(recording(sse_app(build_server("old")), seen)) as upstream:
        config = ServerConfig(name="old", url=f"{upstream}/sse", transport="streamable-http")
        with pytest.raises(Exception) as caught:
            await echo_over(config, TransportChoice(config))
    assert not isinstance(caught.value, UpstreamUnavailable)
    assert ("GET", "/sse") not in seen


async def test_a_url_that_is_neither_names_both_failures() -> None:
    seen: list[tuple[str, str]] = []
    async with serve_app(recording(sse_app(build_server("old")), seen)) as upstream:
        config = ServerConfig(name="old", url=f"{upstream}/nowhere")
        choice = TransportChoice(config)
        with pytest.raises(UpstreamUnavailable) as caught:
            await echo_over(config, choice)
    assert "refused streamable HTTP (HTTP 404" in str(caught.value)
    assert "the legacy SSE transport failed too" in str(caught.value) and "404" in str(caught.value)
    assert choice.kind == "auto", "a failed probe is not remembered"
    assert seen[-1] == ("GET", "/nowhere")


async def test_a_server_that_accepts_the_handshake_is_not_probed_again() -> None:
    app = build_server("remote").streamable_http_app(stateless_http=False)
    async with serve_app(app) as upstream:
        config = ServerConfig(name="remote", url=f"{upstream}/mcp")
        choice = TransportChoice(config)
        kind, result = await echo_over(config, choice)
    assert kind == choice.kind == "streamable-http"
    assert types.CallToolResult.model_validate(result).structured_content == {"text": "hi", "server": "remote"}


@pytest.mark.slow
async def test_an_imported_sse_server_mounts_whether_or_not_the_file_names_its_transport(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    async with serve_app(recording(sse_app(build_server("old")), seen)) as upstream:
        client_file = {
            "mcpServers": {
                "named": {"url": f"{upstream}/sse", "transport": "sse"},  # FastMCP
                "unnamed": {"url": f"{upstream}/sse"},  # Cursor
            }
        }
        hub_toml = tmp_path / "hub.toml"
        hub_toml.write_text(import_client_config(json.dumps(client_file), "mcp.json").as_string(), encoding="utf-8")
        async with running_hub(load_config(hub_toml)) as hub, hub_client(hub) as client:
            health = hub.health()["servers"]
            named = await client.call_tool("named_echo", {"text": "a"})
            unnamed = await client.call_tool("unnamed_echo", {"text": "b"})
    assert {name: (report["state"], report["transport"]) for name, report in health.items()} == {
        "named": ("up", "sse"),
        "unnamed": ("up", "sse"),
    }
    assert (named.structured_content, unnamed.structured_content) == (
        {"text": "a", "server": "old"},
        {"text": "b", "server": "old"},
    )
