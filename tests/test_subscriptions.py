"""Resource subscriptions and change events, both eras; the capabilities the hub advertises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
from mcp.shared.exceptions import MCPError

from tests.conftest import fixture_server, hub_client, make_config, module_server, running_hub

pytestmark = pytest.mark.anyio

NOTE_1 = "a+fixture://notes/1"


class Updates:
    """The `resources/updated` URIs one handshake-era client received."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self.arrived.set()


async def subscribe(client: Client, uri: str, method: str = "resources/subscribe") -> None:
    request = types.Request[dict[str, Any], str](method=method, params={"uri": uri})
    await client.session.send_request(request, types.EmptyResult)  # type: ignore[arg-type]


async def touch(client: Client, key: str = "1") -> str:
    result = await client.call_tool("a_touch", {"key": key})
    return result.content[0].text  # type: ignore[union-attr]


async def test_a_subscribed_client_hears_of_changes_and_no_one_else(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a", protocol="legacy")})
    mine, theirs = Updates(), Updates()
    async with (
        running_hub(config) as hub,
        hub_client(hub, message_handler=mine) as client,
        hub_client(hub, message_handler=theirs) as other,
    ):
        assert await touch(client) == "touched"  # no one subscribed: the server was not asked
        await subscribe(client, NOTE_1)
        assert await touch(other) == "subscribed"
        with anyio.fail_after(10):
            await mine.arrived.wait()
        assert mine.uris == [NOTE_1]
        assert theirs.uris == []
        await subscribe(client, NOTE_1, "resources/unsubscribe")
        assert await touch(client) == "touched"


async def test_the_server_is_asked_once_and_released_with_the_last_subscriber(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a", protocol="legacy")})
    async with running_hub(config) as hub, hub_client(hub) as first:
        async with hub_client(hub) as second:
            await subscribe(first, NOTE_1)
            await subscribe(second, NOTE_1)
            await subscribe(first, NOTE_1, "resources/unsubscribe")
            assert await touch(first) == "subscribed"  # the second client still holds it
        # The second client left: its subscription went with it.
        with anyio.fail_after(10):
            while await touch(first) != "touched":
                await anyio.sleep(0.05)


async def test_subscribing_to_an_unknown_resource_is_an_error(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a", protocol="legacy")})
    async with running_hub(config) as hub, hub_client(hub) as client:
        with pytest.raises(MCPError):
            await subscribe(client, "nowhere+fixture://notes/1")


@pytest.mark.slow
@pytest.mark.parametrize("server_era", ["legacy", "2026-07-28"])
async def test_a_2026_client_listens_for_resource_updates(tmp_path: Path, server_era: str) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a", protocol=server_era)})
    async with running_hub(config) as hub, hub_client(hub, "2026-07-28") as client:
        async with client.listen(resource_subscriptions=[NOTE_1, "nowhere+fixture://notes/1"]) as subscription:
            assert subscription.honored.resource_subscriptions == [NOTE_1]
            event = None
            with anyio.fail_after(10):
                # The hub subscribes upstream as the stream opens; touch until the server has heard.
                while event is None:
                    await touch(client)
                    with anyio.move_on_after(0.5):
                        event = await subscription.__anext__()
        assert event == ResourceUpdated(uri=NOTE_1)


async def test_a_2026_client_hears_that_the_tools_changed(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a")})
    async with running_hub(config) as hub, hub_client(hub, "2026-07-28") as client:
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("a_grow", {"name": "new_tool"})
            with anyio.fail_after(10):
                event = await subscription.__anext__()
        assert isinstance(event, ToolsListChanged)
        assert "a_new_tool" in {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.slow
async def test_capabilities_follow_what_the_mounts_offer(tmp_path: Path) -> None:
    time_server = module_server("mcp_server_time")
    config = make_config(tmp_path, {"clock": time_server})
    async with running_hub(config) as hub, hub_client(hub) as client:
        caps = client.session.server_capabilities
        assert caps is not None and caps.tools is not None
        assert caps.completions is None  # the time server completes nothing
    config = make_config(tmp_path, {"tools": fixture_server("tools", "--tools-only")})
    async with running_hub(config) as hub, hub_client(hub) as client:
        caps = client.session.server_capabilities
        assert caps is not None and caps.tools is not None
        assert caps.prompts is None and caps.resources is None and caps.completions is None
    config = make_config(tmp_path, {"a": fixture_server("a", protocol="legacy")})
    async with running_hub(config) as hub, hub_client(hub) as client:
        caps = client.session.server_capabilities
        assert caps is not None and caps.completions is not None and caps.logging is not None
        assert caps.resources is not None and caps.resources.subscribe
        assert caps.tools is not None and caps.prompts is not None
