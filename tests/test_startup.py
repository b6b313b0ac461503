"""The first moments of a hub: a client that lists once, right after `initialize`, sees every server that is
going to answer, and a call to a server still starting waits for it, both within `[hub] startup_grace`."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from mcp_hub.hub import Hub
from tests.conftest import fixture_server, hub_client, hub_command, hub_environment, make_config, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
"""Not `real_processes`: what is tested is how the hub waits for its servers (whose lateness the fixture server's
`--start-delay` makes), not their processes; the hub and its servers are forks of preloaded processes."""

ERAS = ["legacy", "2026-07-28"]


def _stdio_hub(config: Path) -> StdioServerParameters:
    command, *args = hub_command("serve", "--config", str(config))
    return StdioServerParameters(
        command=command,
        args=args,
        cwd=str(config.parent),
        env=hub_environment(),  # the session's state folder: no catalog snapshot of an earlier run
    )


@pytest.mark.parametrize("mode", ERAS)
async def test_the_first_list_over_stdio_holds_every_server(tmp_path: Path, mode: str) -> None:
    config = write_config(
        tmp_path / "hub.toml",
        {"early": fixture_server("early"), "late": fixture_server("late", "--start-delay", "1.5")},
    )
    async with Client(_stdio_hub(config), mode=mode, cache=None) as client:
        with anyio.fail_after(20):
            tools = {tool.name for tool in (await client.list_tools()).tools}
            prompts = (await client.list_prompts()).prompts
            resources = (await client.list_resources()).resources
    assert {"early_echo", "late_echo"} <= tools
    assert {p.name for p in prompts} >= {"early_greet", "late_greet"}
    assert any(str(r.uri).startswith("late+") for r in resources)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_to_a_server_still_starting_waits_for_it(tmp_path: Path, mode: str) -> None:
    config = make_config(tmp_path, {"late": fixture_server("late", "--start-delay", "1")})
    hub = Hub(config)
    async with hub.running(), hub_client(hub, mode=mode) as client:
        assert not hub.upstreams["late"].settled.is_set()
        with anyio.fail_after(20):
            result = await client.call_tool("late_echo", {"text": "early bird"})
    assert result.structured_content == {"text": "early bird", "server": "late"}


async def test_the_grace_bounds_the_wait_for_a_server_that_hangs(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        {"up": fixture_server("up"), "stuck": fixture_server("stuck", "--hang-on-start", connect_timeout=60.0)},
        startup_grace=1.0,
    )
    hub = Hub(config)
    async with hub.running(), hub_client(hub) as client:
        with anyio.fail_after(20):
            await hub.upstreams["up"].settled.wait()
        with anyio.fail_after(15):  # the grace, not the stuck server's 60 s connect_timeout
            tools = {tool.name for tool in (await client.list_tools()).tools}
            with pytest.raises(MCPError) as caught:
                await client.call_tool("stuck_echo", {"text": "anyone?"})
        assert not hub.upstreams["stuck"].settled.is_set()
    assert "up_echo" in tools and not any(name.startswith("stuck_") for name in tools)
    assert caught.value.code == CONNECTION_CLOSED
    assert caught.value.message == "Server 'stuck' is not connected (starting)"


async def test_no_grace_answers_at_once_with_what_has_arrived(tmp_path: Path) -> None:
    # Late by a second, far more than the list takes; then it sees its stdin closed and exits, and the hub's
    # shutdown need not wait out the grace a server that does not exit is given before it is terminated.
    config = make_config(tmp_path, {"late": fixture_server("late", "--start-delay", "1")}, startup_grace=0)
    hub = Hub(config)
    async with hub.running(), hub_client(hub) as client:
        with anyio.fail_after(10):
            tools = (await client.list_tools()).tools
    assert tools == []
