"""The merged catalog and routing, through the hub, with the SDK client and real stdio servers."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from tests.conftest import fixture_server, hub_client, make_config, running_hub, wait_for
from tests.servers.fixture import BASE_TOOLS

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]


@pytest.fixture
def two_mounts(tmp_path: Path):
    return make_config(tmp_path, {"alpha": fixture_server("alpha"), "beta": fixture_server("beta")})


@pytest.mark.parametrize("mode", MODES)
async def test_every_name_is_prefixed_by_its_mount(two_mounts, mode: str) -> None:
    async with running_hub(two_mounts) as hub, hub_client(hub, mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        resources = {r.uri for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}

    assert {"alpha_echo", "beta_echo", "alpha_fail", "beta_grow"} <= tools
    assert all(name.startswith(("alpha_", "beta_")) for name in tools)
    assert prompts == {"alpha_greet", "beta_greet"}
    assert "alpha+fixture://notes/1" in resources and "beta+fixture://blob" in resources
    assert templates == {"alpha+fixture://notes/{id}", "beta+fixture://notes/{id}"}


@pytest.mark.parametrize("mode", MODES)
async def test_tool_results_pass_through_untouched(two_mounts, mode: str) -> None:
    async with running_hub(two_mounts) as hub, hub_client(hub, mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        echo = await client.call_tool("beta_echo", {"text": "hi"})
        failed = await client.call_tool("alpha_fail", {"message": "nope"})

    tool = listed["alpha_echo"]
    assert tool.title == "Echo"
    assert tool.annotations is not None and tool.annotations.read_only_hint is True
    assert tool.icons and tool.icons[0].src == "https://example.com/echo.png"
    assert tool.output_schema is not None and "server" in tool.output_schema["properties"]
    assert tool.meta == {"example.com/owner": "tests"}

    assert echo.is_error is False
    assert echo.content[0].text == "beta: hi"  # type: ignore[union-attr]
    assert echo.content[0].annotations.priority == 0.5  # type: ignore[union-attr]
    assert echo.structured_content == {"text": "hi", "server": "beta"}
    assert echo.meta is not None and echo.meta["example.com/served-by"] == "beta"

    # A tool error is a result, delivered as the server sent it.
    assert failed.is_error is True
    assert failed.content[0].text == "nope"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_resources_prompts_and_completion_route_to_their_mount(two_mounts, mode: str) -> None:
    async with running_hub(two_mounts) as hub, hub_client(hub, mode) as client:
        note = await client.read_resource("beta+fixture://notes/2")
        templated = await client.read_resource("alpha+fixture://notes/1")
        blob = await client.read_resource("alpha+fixture://blob")
        prompt = await client.get_prompt("beta_greet", {"who": "ada"})
        linked = await client.call_tool("alpha_link", {})
        from mcp_types import PromptReference, ResourceTemplateReference

        by_prompt = await client.complete(PromptReference(name="alpha_greet"), {"name": "who", "value": "al"})
        by_template = await client.complete(
            ResourceTemplateReference(uri="beta+fixture://notes/{id}"), {"name": "id", "value": "1"}
        )

    assert note.contents[0].uri == "beta+fixture://notes/2"
    assert note.contents[0].text == "second note"  # type: ignore[union-attr]
    assert templated.contents[0].text == "first note"  # type: ignore[union-attr]
    assert blob.contents[0].blob == "AAEC"  # type: ignore[union-attr]
    assert prompt.messages[0].content.text == "Hello, ada, from beta"  # type: ignore[union-attr]
    assert prompt.messages[1].content.uri == "beta+fixture://notes/1"  # type: ignore[union-attr]
    # Links in results point at URIs the client can read back through the hub.
    assert [getattr(c, "uri", None) for c in linked.content] == ["alpha+fixture://notes/1", None]
    assert linked.content[1].resource.uri == "alpha+fixture://notes/2"  # type: ignore[union-attr]
    assert by_prompt.completion.values == ["alice", "albert"]
    # The server saw its own template URI, not the hub's.
    assert by_template.completion.values == ["1", "template:fixture://notes/{id}"]


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_names_are_invalid_params(two_mounts, mode: str) -> None:
    async with running_hub(two_mounts) as hub, hub_client(hub, mode) as client:
        for call in (
            client.call_tool("alpha_nope", {}),
            client.call_tool("gamma_echo", {}),
            client.call_tool("echo", {}),
            client.get_prompt("beta_nope"),
            client.read_resource("gamma+fixture://notes/1"),
            client.read_resource("fixture://notes/1"),
        ):
            with pytest.raises(MCPError) as caught:
                await call
            assert caught.value.code == INVALID_PARAMS
            assert "Unknown" in caught.value.message


async def test_errors_a_server_answers_pass_through(two_mounts) -> None:
    async with running_hub(two_mounts) as hub, hub_client(hub) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("alpha+fixture://notes/404")
    assert caught.value.code == -32002
    assert caught.value.message == "Resource not found: fixture://notes/404"


async def test_hub_pages_over_server_pages(tmp_path: Path) -> None:
    """250 generated tools served 40 a page upstream, 100 a page by the hub."""
    config = make_config(
        tmp_path,
        {"big": fixture_server("big", "--tools", "250", "--page-size", "40"), "small": fixture_server("small")},
        page_size=100,
    )
    async with running_hub(config) as hub, hub_client(hub) as client:
        pages = [await client.list_tools()]
        while pages[-1].next_cursor:
            pages.append(await client.list_tools(cursor=pages[-1].next_cursor))
        with pytest.raises(MCPError) as caught:
            await client.list_tools(cursor="not-a-cursor")

    names = [t.name for page in pages for t in page.tools]
    total = 250 + 2 * len(BASE_TOOLS)
    assert [len(page.tools) for page in pages] == [100, 100, total - 200]
    assert len(set(names)) == len(names) == total
    assert {f"big_tool_{i}" for i in range(250)} <= set(names)
    assert caught.value.code == INVALID_PARAMS
    assert "Invalid cursor" in caught.value.message


async def test_long_and_odd_native_names_get_short_valid_public_names(tmp_path: Path) -> None:
    long_mount = "m" * 32
    config = make_config(tmp_path, {long_mount: fixture_server("long", "--tools", "3")})
    async with running_hub(config) as hub, hub_client(hub) as client:
        await client.call_tool(f"{long_mount}_echo", {"text": "x"})
        await client.call_tool(f"{long_mount}_grow", {"name": "a.tool/with spaces and a very long name " * 2})

        async def grown() -> bool:
            return len((await client.list_tools()).tools) == 3 + len(BASE_TOOLS) + 1

        await wait_for(grown)
        tools = (await client.list_tools()).tools
        odd = next(t for t in tools if "spaces" in t.name)
        result = await client.call_tool(odd.name, {})

    assert all(len(t.name) <= 64 for t in tools)
    assert len(odd.name) == 64 and odd.name.startswith(f"{long_mount}_a-tool-with-spaces")
    assert result.content[0].text.startswith("long: a.tool/with spaces")  # type: ignore[union-attr]


async def test_an_unprefixed_single_mount_keeps_native_names(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"only": fixture_server("only", prefix=False)})
    async with running_hub(config) as hub, hub_client(hub) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        echo = await client.call_tool("echo", {"text": "direct"})
        note = await client.read_resource("fixture://notes/1")
    assert "echo" in tools and "grow" in tools
    assert echo.structured_content == {"text": "direct", "server": "only"}
    assert note.contents[0].uri == "fixture://notes/1"


@pytest.mark.parametrize(
    ("client_mode", "upstream_protocol"),
    [("legacy", "2026-07-28"), ("2026-07-28", "legacy"), ("legacy", "legacy"), ("2026-07-28", "2026-07-28")],
)
async def test_any_client_era_with_any_server_era(tmp_path: Path, client_mode: str, upstream_protocol: str) -> None:
    config = make_config(tmp_path, {"up": fixture_server("up", protocol=upstream_protocol)})
    async with running_hub(config) as hub, hub_client(hub, client_mode) as client:
        assert hub.upstreams["up"].protocol_version == (
            "2026-07-28" if upstream_protocol == "2026-07-28" else "2025-11-25"
        )
        echo = await client.call_tool("up_echo", {"text": "era"})
        failed = await client.call_tool("up_fail", {"message": "bad"})
        note = await client.read_resource("up+fixture://notes/1")
        prompt = await client.get_prompt("up_greet", {"who": "x"})
    assert echo.structured_content == {"text": "era", "server": "up"}
    assert failed.is_error is True
    assert note.contents[0].text == "first note"  # type: ignore[union-attr]
    assert prompt.messages[0].content.text == "Hello, x, from up"  # type: ignore[union-attr]


async def test_progress_reaches_the_client(two_mounts) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with running_hub(two_mounts) as hub, hub_client(hub) as client:
        result = await client.call_tool("alpha_slow", {"seconds": 0.2, "steps": 3}, progress_callback=on_progress)
    assert result.content[0].text == "done"  # type: ignore[union-attr]
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_paging_goes_on_through_the_listing_it_began_when_the_catalog_changes(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"a": fixture_server("a", "--tools", "30")}, page_size=10)
    async with running_hub(config) as hub, hub_client(hub) as client:
        first = await client.list_tools()
        before = hub.catalog.view("tools").revision
        await client.call_tool("a_grow", {"name": "late"})

        async def changed() -> bool:
            return hub.catalog.view("tools").revision != before

        await wait_for(changed)
        pages = [first]
        while pages[-1].next_cursor:
            pages.append(await client.list_tools(cursor=pages[-1].next_cursor))
        fresh = [await client.list_tools()]
        while fresh[-1].next_cursor:
            fresh.append(await client.list_tools(cursor=fresh[-1].next_cursor))
    names = [t.name for page in pages for t in page.tools]
    assert len(names) == len(set(names)) == 30 + len(BASE_TOOLS)  # the listing as it was
    assert "a_late" not in names
    assert "a_late" in {t.name for page in fresh for t in page.tools}  # a new listing is the new catalog


async def test_by_default_a_list_comes_whole_in_one_page(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"big": fixture_server("big", "--tools", "250", "--page-size", "40")})
    async with running_hub(config) as hub, hub_client(hub) as client:
        listed = await client.list_tools()
    assert listed.next_cursor is None
    assert len(listed.tools) == 250 + len(BASE_TOOLS)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_a_list_asked_again_after_the_catalog_changed_is_the_new_catalog(tmp_path: Path, mode: str) -> None:
    """Answers are kept per page; a changed catalog is a new listing, never an old answer."""
    config = make_config(tmp_path, {"a": fixture_server("a")})
    async with running_hub(config) as hub, hub_client(hub, mode) as client:
        before = [t.name for t in (await client.list_tools()).tools]
        again = [t.name for t in (await client.list_tools()).tools]
        revision = hub.catalog.view("tools").revision
        await client.call_tool("a_grow", {"name": "late"})

        async def changed() -> bool:
            return hub.catalog.view("tools").revision != revision

        await wait_for(changed)
        after = [t.name for t in (await client.list_tools()).tools]
    assert again == before and "a_late" not in before
    assert after == [*before, "a_late"]
