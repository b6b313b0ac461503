"""A server's log messages reach the client whose call they came during, at that client's level."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import fixture_server, hub_client, make_config, running_hub, serve_app

pytestmark = pytest.mark.anyio


class Logs:
    """What one client received: (level, logger, data)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, Any]] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.seen.append((params.level, params.logger, params.data))

    @property
    def levels(self) -> list[str]:
        return [level for level, _, _ in self.seen]


async def set_level(client: Client, level: types.LoggingLevel) -> None:
    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
    await client.session.send_request(request, types.EmptyResult)


@asynccontextmanager
async def http_client(hub: Hub, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
    app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
    async with serve_app(app) as base, Client(streamable_http_client(f"{base}/mcp"), mode=mode, **options) as client:
        yield client


@pytest.mark.parametrize("server_era", ["legacy", "2026-07-28"])
async def test_a_calls_log_messages_reach_its_client_before_the_result(tmp_path: Path, server_era: str) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a", protocol=server_era)})
    logs = Logs()
    async with running_hub(config) as hub, hub_client(hub, logging_callback=logs) as client:
        if server_era != "legacy":
            # A 2026-07-28 server sends log messages only to requests that ask for them.
            await set_level(client, "debug")
        result = await client.call_tool("a_log", {"text": "hi"})
        assert not result.is_error
        # Delivered before the result: the list is complete the moment the call returns.
        assert logs.seen == [
            ("debug", "a.fixture", "debug: hi"),
            ("info", "a.fixture", "info: hi"),
            ("warning", "a.fixture", "warning: hi"),
        ]


async def test_each_client_gets_its_own_level(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a")})
    quiet, chatty = Logs(), Logs()
    async with (
        running_hub(config) as hub,
        hub_client(hub, logging_callback=quiet) as first,
        hub_client(hub, logging_callback=chatty) as second,
    ):
        await set_level(first, "warning")
        await first.call_tool("a_log", {"text": "x"})
        assert quiet.levels == ["warning"]
        # The server was asked for warnings only; the chatty client asks for more.
        await set_level(second, "debug")
        await second.call_tool("a_log", {"text": "y"})
        assert chatty.levels == ["debug", "info", "warning"]
        # The server now sends everything; the quiet client still gets its share only.
        await first.call_tool("a_log", {"text": "z"})
        assert quiet.levels == ["warning", "warning"]
        # No client heard the other's call.
        assert all("x" in data or "z" in data for _, _, data in quiet.seen)
        assert all("y" in data for _, _, data in chatty.seen)


async def test_an_unprefixed_mount_keeps_the_servers_logger_name(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a", prefix=False)})
    logs = Logs()
    async with running_hub(config) as hub, hub_client(hub, logging_callback=logs) as client:
        await client.call_tool("log", {"text": "hi"})
        assert {logger for _, logger, _ in logs.seen} == {"fixture"}


@pytest.mark.parametrize("client_mode", ["legacy", "2026-07-28"])
async def test_log_messages_ride_the_calls_stream_over_http(tmp_path: Path, client_mode: str) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a")})
    logs = Logs()
    options: dict[str, Any] = {"logging_callback": logs}
    if client_mode != "legacy":
        options["log_level"] = "info"  # the 2026-07-28 opt-in, with each request
    async with running_hub(config) as hub, http_client(hub, client_mode, **options) as client:
        await client.call_tool("a_log", {"text": "hi"})
        expected = ["debug", "info", "warning"] if client_mode == "legacy" else ["info", "warning"]
        assert logs.levels == expected


@pytest.mark.slow
async def test_a_2026_client_that_did_not_ask_gets_no_log_messages(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a")})
    logs = Logs()
    async with running_hub(config) as hub, hub_client(hub, "2026-07-28", logging_callback=logs) as client:
        result = await client.call_tool("a_log", {"text": "hi"})
        assert not result.is_error and logs.seen == []
