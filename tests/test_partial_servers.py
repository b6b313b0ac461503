"""Servers as they are: ones that implement only part of what they offer, and ones whose lists are malformed.

Each upstream is a real stdio process: `tests/servers/partial.py` (the SDK's
low-level `Server` without a resource-templates handler; with `--refuse`, one
that answers ping, logging/setLevel, resources/subscribe and completion with
-32601) and `tests/servers/sloppy.py` (JSON-RPC by hand, with malformed items).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import ResourceTemplateReference

from mcp_hub.upstream import State, supervisor
from tests.conftest import ROOT, hub_client, make_config, running_hub, script_server, wait_for

PARTIAL = str(ROOT / "tests" / "servers" / "partial.py")
SLOPPY = str(ROOT / "tests" / "servers" / "sloppy.py")


def partial_server(*options: str, **settings: Any) -> dict[str, Any]:
    return script_server(PARTIAL, *options, connect_timeout=30, **settings)


def sloppy_server(**settings: Any) -> dict[str, Any]:
    return script_server(SLOPPY, connect_timeout=30, **settings)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_server_without_a_templates_handler_mounts(tmp_path: Path, protocol: str) -> None:
    config = make_config(tmp_path, {"p": partial_server(protocol=protocol)})
    async with running_hub(config, settle=40) as hub:
        upstream = hub.upstreams["p"]
        assert upstream.state == State.UP, upstream.last_error
        assert upstream.restarts == 0
        health = hub.health()["servers"]["p"]
        assert health["refused"] == {"resources/templates/list": "Method not found (-32601)"}
        assert (health["tools"], health["resources"], health["resource_templates"]) == (1, 1, 0)
        async with hub_client(hub) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["p_echo"]
            assert [str(r.uri) for r in (await client.list_resources()).resources] == ["p+partial://readme"]
            assert (await client.list_resource_templates()).resource_templates == []
            result = await client.call_tool("p_echo", {"text": "hi"})
            assert result.content[0].text == "partial: hi"  # type: ignore[union-attr]


@pytest.mark.slow
async def test_a_refused_list_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = make_config(tmp_path, {"p": partial_server(protocol="legacy")})
    with caplog.at_level(logging.INFO, logger="mcp_hub"):
        async with running_hub(config, settle=40) as hub:
            upstream = hub.upstreams["p"]
            assert upstream.state == State.UP, upstream.last_error
            await hub._on_listing(upstream, frozenset({"resource_templates"}))  # as after list_changed
            await hub._on_listing(upstream, frozenset({"resource_templates"}))
            assert upstream.state == State.UP and upstream.restarts == 0
    refusals = [r for r in caplog.records if "refused resources/templates/list" in r.getMessage()]
    assert len(refusals) == 1
    assert refusals[0].levelno == logging.INFO


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging/setLevel
async def test_optional_requests_a_server_refuses_leave_it_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "_HEALTH_INTERVAL", 0.2)  # ping soon
    config = make_config(tmp_path, {"r": partial_server("--refuse", protocol="legacy")})
    async with running_hub(config, settle=40) as hub:
        upstream = hub.upstreams["r"]
        assert upstream.state == State.UP, upstream.last_error
        async with hub_client(hub) as client:
            await client.set_logging_level("debug")
            await client.subscribe_resource("r+partial://readme")
            completion = await client.complete(
                ResourceTemplateReference(type="ref/resource", uri="r+partial://readme"), {"name": "x", "value": ""}
            )
            assert completion.completion.values == []

            async def refused_all() -> bool:
                return {"ping", "logging/setLevel", "resources/subscribe", "completion/complete"} <= set(
                    hub.health()["servers"]["r"]["refused"]
                )

            await wait_for(refused_all)
            result = await client.call_tool("r_echo", {"text": "still here"})
            assert result.content[0].text == "partial: still here"  # type: ignore[union-attr]
        refused = hub.health()["servers"]["r"]["refused"]
        assert refused["ping"] == "Method not found (-32601)"
        assert refused["completion/complete"] == "Method not found (-32601)"
        assert upstream.state == State.UP and upstream.restarts == 0


async def test_a_list_that_fails_is_asked_for_again_and_the_rest_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "_HEALTH_INTERVAL", 0.2)  # the next health check comes soon
    config = make_config(tmp_path, {"f": partial_server("--flaky-prompts", protocol="legacy")})
    async with running_hub(config, settle=40) as hub:
        upstream = hub.upstreams["f"]
        assert upstream.state == State.UP, upstream.last_error
        async with hub_client(hub) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["f_echo"]

            async def prompts_listed() -> bool:
                return [p.name for p in (await client.list_prompts()).prompts] == ["f_greet"]

            await wait_for(prompts_listed)
        assert hub.health()["servers"]["f"]["refused"] == {"resources/templates/list": "Method not found (-32601)"}
        assert upstream.restarts == 0


async def test_completion_from_a_server_that_offers_none_is_empty(tmp_path: Path) -> None:
    """The hub offers completions when any mount does; a prompt of a mount without them completes to nothing."""
    config = make_config(
        tmp_path,
        {"r": partial_server("--refuse", protocol="legacy"), "s": sloppy_server(protocol="legacy")},
    )
    async with running_hub(config, settle=40) as hub:
        assert hub.upstreams["s"].state == State.UP, hub.upstreams["s"].last_error
        async with hub_client(hub) as client:
            with anyio.fail_after(10):
                completion = await client.complete(
                    ResourceTemplateReference(type="ref/resource", uri="s+sloppy://readme"),
                    {"name": "x", "value": ""},
                )
            assert completion.completion.values == []
            assert "completion/complete" not in hub.health()["servers"]["s"]["refused"]


@pytest.mark.slow
async def test_malformed_items_are_skipped_and_the_rest_serves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, {"s": sloppy_server()})
    with caplog.at_level(logging.WARNING, logger="mcp_hub"):
        async with running_hub(config, settle=40) as hub:
            assert hub.upstreams["s"].state == State.UP, hub.upstreams["s"].last_error
            async with hub_client(hub) as client:
                tools = (await client.list_tools()).tools
                assert [t.name for t in tools] == ["s_echo", "s_spare"]
                assert tools[0].description == "Echo the text back."  # the first echo, not the second
                resources = (await client.list_resources()).resources
                assert [str(r.uri) for r in resources] == ["s+sloppy://readme"]
                result = await client.call_tool("s_spare", {"text": "hi"})
                assert result.content[0].text == "sloppy spare: hi"  # type: ignore[union-attr]
            skipped = hub.health()["servers"]["s"]["skipped"]
    assert skipped == [
        "tool (item 2): name: Field required",
        "tool 'stringly' (item 3): inputSchema: Input should be a valid dictionary",
        "tool 'echo' (item 4): a second tool of the same name (the first is served)",
        "resource (item 2): uri: Field required",
    ]
    warnings = [r.getMessage() for r in caplog.records if r.name == "mcp_hub.catalog"]
    assert "server 's': skipped tool 'stringly' (item 3): inputSchema: Input should be a valid dictionary" in warnings
    assert len(warnings) == 4
