"""Which lists changed, told to clients at most once a window: the first change at once, those that follow within
the window together when it ends, nothing left untold."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import anyio
import pytest
from mcp_types import ToolListChangedNotification

from mcp_hub.server.announcements import Announcements
from tests.conftest import fixture_server, hub_client, make_config, running_hub, wait_for

pytestmark = pytest.mark.anyio


class Told:
    def __init__(self) -> None:
        self.announced: list[tuple[set[str], bool]] = []

    async def __call__(self, kinds: Collection[str], policy: bool) -> None:
        self.announced.append((set(kinds), policy))


async def test_a_change_is_told_at_once_and_those_within_the_window_together_after_it() -> None:
    told = Told()
    announcements = Announcements(told, window=0.3)
    async with anyio.create_task_group() as tg:
        tg.start_soon(announcements.run)
        await anyio.sleep(0)
        await announcements.changed({"tools"})
        await wait_for(lambda: told.announced == [({"tools"}, False)])
        await announcements.changed({"prompts"})
        await announcements.changed({"resource_templates", "tools"}, policy=True)
        await anyio.sleep(0.05)
        assert len(told.announced) == 1  # within the window: gathered
        await wait_for(lambda: len(told.announced) == 2)
        assert told.announced[1] == ({"prompts", "resource_templates", "tools"}, True)
        tg.cancel_scope.cancel()


async def test_without_the_hub_running_a_change_is_told_at_once() -> None:
    told = Told()
    announcements = Announcements(told, window=60)
    await announcements.changed({"tools"})
    await announcements.changed({"prompts"}, policy=True)
    assert told.announced == [({"tools"}, False), ({"prompts"}, True)]


async def test_servers_changing_their_tools_together_are_told_to_a_client_once_or_twice(tmp_path: Path) -> None:
    """Five servers add a tool each, one after the other: a client hears tools/list_changed once or twice (once
    per change before), and the list it takes after the last notification has every new tool."""
    names = [f"s{n}" for n in range(5)]
    config = make_config(tmp_path, {name: fixture_server(name) for name in names})
    heard: list[object] = []

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            heard.append(message)

    async with running_hub(config) as hub, hub_client(hub, message_handler=on_message) as client:
        for name in names:
            await client.call_tool(f"{name}_grow", {"name": "fresh"})
        wanted = {f"{name}_fresh" for name in names}
        seen = 0
        with anyio.fail_after(15):
            while True:
                await wait_for(lambda seen=seen: len(heard) > seen)
                seen = len(heard)
                listed = {tool.name for tool in (await client.list_tools()).tools}
                if wanted <= listed:
                    break
        await anyio.sleep(1.0)  # a window and more: nothing more is told
    assert 1 <= len(heard) <= 3


async def test_a_failed_announcement_leaves_the_next_to_be_told(caplog: pytest.LogCaptureFixture) -> None:
    told = Told()
    failing = True

    async def send(kinds: Collection[str], policy: bool) -> None:
        if failing:
            raise RuntimeError("an endpoint could not be told")
        await told(kinds, policy)

    announcements = Announcements(send, window=0.01)
    async with anyio.create_task_group() as tg:
        tg.start_soon(announcements.run)
        await anyio.sleep(0)
        await announcements.changed({"tools"})
        await wait_for(lambda: "telling clients that tools changed failed" in caplog.text)
        failing = False
        await announcements.changed({"prompts"})
        await wait_for(lambda: told.announced == [({"prompts"}, False)])
        tg.cancel_scope.cancel()


async def test_told_returns_once_the_gathered_changes_are_told() -> None:
    told = Told()
    announcements = Announcements(told, window=0.2)
    await announcements.told()  # nothing to tell
    async with anyio.create_task_group() as tg:
        tg.start_soon(announcements.run)
        await anyio.sleep(0)
        await announcements.changed({"tools"})
        await wait_for(lambda: len(told.announced) == 1)
        await announcements.changed({"prompts"})  # within the window: told when it ends
        with anyio.fail_after(10):
            await announcements.told()
        assert told.announced == [({"tools"}, False), ({"prompts"}, False)]
        tg.cancel_scope.cancel()


async def test_a_settled_hub_has_told_what_its_servers_first_listed(tmp_path: Path) -> None:
    """`wait_settled` returns once the changes of the servers' first listings have been told: a client that
    arrives then hears of no change it did not see in its first list."""
    names = [f"s{n}" for n in range(6)]
    heard: list[object] = []

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            heard.append(message)

    async with (
        running_hub(make_config(tmp_path, {name: fixture_server(name) for name in names})) as hub,
        hub_client(hub, message_handler=on_message) as client,
    ):
        assert {f"{name}_echo" for name in names} <= {tool.name for tool in (await client.list_tools()).tools}
        await anyio.sleep(0.5)  # two windows and more
    assert heard == []
