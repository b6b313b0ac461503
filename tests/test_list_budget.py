"""Tool lists within a budget (mcp_hub/results/listing.py, applied in server/listing.py).

The real 112-tool corpus (tests/data/tool_corpus.json, 14 servers' own `tools/list` answers) is served by an SDK
low-level server over streamable HTTP and mounted in a hub, whose endpoints list it to SDK clients in-process:
the hub's endpoint and curated endpoints, each with its own `max_list_tokens`, or none.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from mcp_hub.config import load_config
from mcp_hub.hub import Hub
from mcp_hub.results import listing
from mcp_hub.results.listing import MARKER, fit, list_size
from mcp_hub.results.tokens import tokens
from tests.conftest import running_hub, serve_app, write_config

pytestmark = pytest.mark.anyio

CORPUS = json.loads((Path(__file__).parent / "data" / "tool_corpus.json").read_text(encoding="utf-8"))
TOOLS = [
    {**tool, "name": f"{mount}_{tool['name']}"}
    for mount, server in CORPUS["servers"].items()
    for tool in server["tools"]
]
"""The corpus's 112 tools, named apart (two servers may name a tool alike)."""
ENDPOINTS = {"roomy": 20_000, "small": 14_000, "tiny": 10_000, "whole": None}
"""Curated endpoints of the corpus hub and their `max_list_tokens` (the corpus lists ~17,000 tokens whole)."""


def corpus_server() -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        return types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in TOOLS])

    return Server("corpus", version="1.0.0", on_list_tools=list_tools)


@asynccontextmanager
async def corpus_hub(tmp_path: Path, results: dict[str, Any]) -> AsyncIterator[Hub]:
    """A hub mounting the corpus server as `corpus`, with `[results]` and the curated endpoints of `ENDPOINTS`."""
    async with serve_app(corpus_server().streamable_http_app()) as base:
        path = write_config(tmp_path / "hub.toml", {"corpus": {"url": f"{base}/mcp"}}, results=results)
        with path.open("a", encoding="utf-8") as file:
            for name, budget in ENDPOINTS.items():
                file.write(f'\n[endpoints.{name}]\nservers = ["corpus"]\n')
                if budget is not None:
                    file.write(f"max_list_tokens = {budget}\n")
        async with running_hub(load_config(path)) as hub:
            yield hub


async def listed(server: Any) -> list[dict[str, Any]]:
    """The tools an SDK client is listed by `server`, as the JSON it received (every page)."""
    async with Client(server, mode="2026-07-28", cache=None) as client:
        tools: list[types.Tool] = []
        cursor = None
        while True:
            result = await client.list_tools(cursor=cursor)
            tools += result.tools
            if not (cursor := result.next_cursor):
                break
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


def assert_same_tools(shortened: list[dict[str, Any]], whole: list[dict[str, Any]]) -> None:
    """Every tool is there, in order, with a valid schema of the same properties and `required`; only
    descriptions differ."""
    assert [tool["name"] for tool in shortened] == [tool["name"] for tool in whole]
    for short, tool in zip(shortened, whole, strict=True):
        jsonschema.Draft202012Validator.check_schema(short["inputSchema"])
        assert short["inputSchema"].get("properties", {}).keys() == tool["inputSchema"].get("properties", {}).keys()
        assert short["inputSchema"].get("required") == tool["inputSchema"].get("required")
        assert _without_descriptions(short) == _without_descriptions(tool)


def _without_descriptions(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_descriptions(v) for k, v in value.items() if not (k == "description" and isinstance(v, str))
        }
    if isinstance(value, list):
        return [_without_descriptions(v) for v in value]
    return value


@pytest.mark.slow
async def test_each_endpoint_s_cap_applies_to_its_own_list_and_the_corpus_fits(tmp_path: Path) -> None:
    async with corpus_hub(tmp_path, {"max_result_tokens": 0}) as hub:
        whole = await listed(hub.endpoint.server)
        lists = {name: await listed(hub.endpoints[name].server) for name in ENDPOINTS}
    assert len(whole) == len(TOOLS) and lists["whole"] == whole  # no cap anywhere: as the server said
    size = list_size(whole)
    assert 14_000 < size < 20_000
    assert lists["roomy"] == whole  # under its cap: nothing changes
    small = lists["small"]
    assert list_size(small) <= 14_000  # counted with the result budget's counter
    assert_same_tools(small, whole)
    assert any(MARKER in tool.get("description", "") for tool in small)  # schemas' descriptions were not enough
    tiny = lists["tiny"]  # cannot fit: at its smallest, still every tool, every marker visible
    assert_same_tools(tiny, whole)
    assert list_size(tiny) < list_size(small)
    shortened = [
        tool
        for tool, original in zip(tiny, whole, strict=True)
        if tool.get("description") != original.get("description")
    ]
    assert shortened and all(tool["description"].endswith(MARKER) for tool in shortened)


async def test_the_hub_s_cap_shortens_schemas_first_then_descriptions_with_a_marker(tmp_path: Path) -> None:
    async with corpus_hub(tmp_path, {"max_result_tokens": 0, "max_list_tokens": 16_000}) as hub:
        schemas_only = await listed(hub.endpoint.server)
        inherited = await listed(hub.endpoints["whole"].server)  # no cap of its own: as `[results]` says
        whole = await listed(hub.endpoints["roomy"].server)  # its own cap, 20,000: the list as the server said
    assert list_size(whole) > 16_000 >= list_size(schemas_only)
    assert inherited == schemas_only
    assert_same_tools(schemas_only, whole)
    assert not any(MARKER in tool.get("description", "") for tool in schemas_only)  # step 1 was enough
    assert [tool.get("description") for tool in schemas_only] == [tool.get("description") for tool in whole]


async def test_a_list_that_cannot_fit_is_served_smallest_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    fits: list[int] = []
    real = listing.fit
    monkeypatch.setattr(
        listing, "fit", lambda items, budget, counter=None: fits.append(budget) or real(items, budget, counter)
    )
    caplog.set_level(logging.WARNING, logger="mcp_hub.results")
    async with corpus_hub(tmp_path, {"max_result_tokens": 0}) as hub:
        first = await listed(hub.endpoints["tiny"].server)
        again = await listed(hub.endpoints["tiny"].server)
    assert first == again and list_size(first) > 10_000
    assert fits == [10_000]  # shortened once for the listing, not on each tools/list
    warnings = [r.getMessage() for r in caplog.records if r.name == "mcp_hub.results"]
    assert len(warnings) == 1
    assert "endpoint tiny" in warnings[0] and "[search] enabled = true" in warnings[0]


def test_shortening_is_deterministic_and_within_budget_with_either_counter() -> None:
    from mcp_hub.results.tokens import BYTES

    for counter in (tokens(), BYTES):
        whole = list_size(TOOLS, counter)
        budget = whole * 8 // 10
        first, second = fit(TOOLS, budget, counter), fit(TOOLS, budget, counter)
        assert first.items == second.items and first.fits and first.before == whole
        assert list_size(first.items, counter) == first.after <= budget
        assert fit(TOOLS, whole, counter).items == tuple(TOOLS)  # at the cap: as it is
        assert fit(TOOLS, 0, counter).items == tuple(TOOLS)  # 0: no cap
