"""The console's dashboard: the hub's own metrics read in-process into rings (observe/dashboard.py, series.py)
and drawn as the overview and the pages per mount, tool and principal (admin/dashboard.py, charts.py).

Calls are made by the SDK's client over the hub's HTTP endpoint as alice and bob (their API keys), to the fixture
server over stdio; the console is read over HTTP, logged in. The browser walk is test_dashboard_browser.py, the
replicas' sum test_cluster_dashboard.py."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.admin import charts, console
from mcp_hub.config import load_config
from mcp_hub.hub import Hub
from mcp_hub.observe.series import BOUNDARIES, SLOTS, Cell, Rings, bucket_of, sparse
from mcp_hub.server.http import build_app
from tests.conftest import serve_app
from tests.harness.console import ADMIN_KEY, ALICE_KEY, BOB_KEY, console_config, logged_in

pytestmark = pytest.mark.anyio

KEYS = {"alice": ALICE_KEY, "bob": BOB_KEY}


@asynccontextmanager
async def dashboard_hub(tmp_path: Path, tail: str = "", policy: str | None = None) -> AsyncIterator[tuple[Hub, str]]:
    """The console's hub (tests/harness/console.py's; `policy`: its policy file instead) served on loopback."""
    path = console_config(tmp_path, tail=tail)
    if policy is not None:
        (tmp_path / "policies" / "policy.toml").write_text(policy, encoding="utf-8")
    config = load_config(path, environ={"ADMIN_KEY": ADMIN_KEY})
    hub = Hub(config)
    async with hub.running():
        await hub.wait_settled(20.0)
        app = build_app(
            hub.endpoint.server,
            host="127.0.0.1",
            path="/mcp",
            health=hub.health,
            api_keys=config.auth.api_keys,
            admin=console(hub, "127.0.0.1"),
        )
        async with serve_app(app) as base:
            yield hub, base


@asynccontextmanager
async def client_as(base: str, principal: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"X-API-Key": KEYS[principal]}, timeout=30) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), cache=None) as client,
    ):
        yield client


async def traffic(base: str) -> None:
    """alice: three echoes, one tool error, one slow call; bob: one echo, one call the policy denies him."""
    async with client_as(base, "alice") as alice:
        for text in ("a", "b", "c"):
            await alice.call_tool("srv_echo", {"text": text})
        await alice.call_tool("srv_fail", {"message": "no"})
        await alice.call_tool("srv_slow", {"seconds": 0.3, "steps": 1})
    async with client_as(base, "bob") as bob:
        await bob.call_tool("srv_echo", {"text": "b"})
        with pytest.raises(Exception, match="srv_fail"):
            await bob.call_tool("srv_fail", {"message": "no"})


@pytest.mark.slow  # some 2.5 s: a slow tool among the calls
async def test_the_overview_counts_calls_errors_latency_and_denials_by_mount_tool_and_principal(
    tmp_path: Path,
) -> None:
    async with dashboard_hub(tmp_path) as (hub, base):
        await traffic(base)
        assert hub.dashboard is not None
        hub.dashboard.collect()  # what the next tick would do
        # the dashboard alone measures the client requests: the requests to servers are neither measured nor traced
        assert hub.telemetry.request_duration is not None
        assert hub.telemetry.upstream_duration is None and not hub.telemetry.upstream
        async with httpx2.AsyncClient(timeout=10) as web:
            await logged_in(web, base)
            data = (await web.get(f"{base}/admin/dashboard/data.json")).json()
            overview = await web.get(f"{base}/admin/dashboard")
            tool = await web.get(f"{base}/admin/dashboard/tool/srv_echo")
            principal = await web.get(f"{base}/admin/dashboard/principal/bob")
            mount = await web.get(f"{base}/admin/dashboard/mount/srv")
            missing = await web.get(f"{base}/admin/dashboard/tool/nothing_here")
        async with httpx2.AsyncClient(timeout=10) as stranger:
            anonymous = await stranger.get(f"{base}/admin/dashboard/data.json")

    assert data["replicas"] == 1 and data["shared"] is False
    hub_total = data["hub"]
    assert hub_total["calls"] == 7 and hub_total["errors"] == 1  # bob's denial is a decision, not an error
    assert hub_total["decisions"] == {"denied": 1}
    assert 250 <= hub_total["p95_ms"] <= 1000  # the slow call (0.3 s), read off the buckets
    assert data["tools"]["srv_echo"]["calls"] == 4 and data["tools"]["srv_fail"]["errors"] == 1
    assert data["principals"]["alice"]["calls"] == 5 and data["principals"]["bob"]["decisions"] == {"denied": 1}
    assert data["mounts"]["srv"]["calls"] == 7 and "up" in data["mounts"]["srv"]["states"]
    assert sum(data["hub_calls_per_slot"]) == 7

    assert overview.status_code == 200
    csp = overview.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp  # the charts are SVG the server drew
    page = overview.text
    assert page.count("<svg") >= 4 and 'id="hub-calls"' in page and "<polyline" in page
    assert " style=" not in page and "<script>" not in page
    assert re.search(r'<tr data-tool="srv_echo">.*?<td class=calls>4</td>', page)
    assert re.search(r'<tr data-decision="denied"><td>denied</td><td class=count>1</td>', page)
    assert 'data-live="/admin/dashboard/events?minutes=60"' in page
    assert ALICE_KEY not in page and BOB_KEY not in page

    assert tool.status_code == 200 and re.search(r'<tr data-principal="alice">.*?<td class=calls>3</td>', tool.text)
    assert re.search(r'<tr data-tool="srv_fail">.*?<td class=calls>1</td>.*?denied 1', principal.text)
    assert "No budget of calls or cost applies" in principal.text
    assert re.search(r'<tr data-error="tool_error"><td>tool error .*?<td class=count>1</td>', mount.text)
    assert 'id="mount-state">up<' in mount.text and 'data-tool="srv_slow"' in mount.text
    assert re.search(r'<table id="pins">.*?<tr data-key="srv/echo">.*?pinned', mount.text)  # the harness pins
    assert 'id="hub-decisions"' in page
    assert missing.status_code == 200 and "No calls in this window." in missing.text
    assert anonymous.status_code == 401


@pytest.mark.slow  # the stream sends the page again every 2 s
async def test_the_live_part_follows_as_a_stream(tmp_path: Path) -> None:
    async with dashboard_hub(tmp_path) as (hub, base), httpx2.AsyncClient(timeout=10) as web:
        await logged_in(web, base)
        async with web.stream("GET", f"{base}/admin/dashboard/principal/alice/events") as stream:
            lines = stream.aiter_lines()
            first = await anext(line async for line in lines if line.startswith("data:"))
            assert "No calls in this window." in first
            await traffic(base)
            assert hub.dashboard is not None
            hub.dashboard.collect()
            seen = await anext(line async for line in lines if line.startswith("data:") and "srv_echo" in line)
    assert 'data-tool="srv_echo"' in seen


async def test_with_the_dashboard_off_the_hub_measures_nothing(tmp_path: Path) -> None:
    async with dashboard_hub(tmp_path, tail="dashboard = false\n") as (hub, base):
        assert hub.dashboard is None and not hub.telemetry.enabled
        async with httpx2.AsyncClient(timeout=10) as web:
            await logged_in(web, base)
            page = await web.get(f"{base}/admin/dashboard")
            data = await web.get(f"{base}/admin/dashboard/data.json")
    assert "The dashboard is off" in page.text and data.status_code == 404


def test_percentiles_come_from_the_summed_buckets() -> None:
    cell = Cell()
    for seconds in [0.004] * 90 + [0.2] * 10:
        counts = [0] * (len(BOUNDARIES) + 1)
        counts[bucket_of(seconds)] = 1
        cell.record(1, seconds, sparse(counts), errors=False)
    p50, p95 = cell.quantile(0.5), cell.quantile(0.95)
    assert p50 is not None and 0.003 <= p50 <= 0.005
    assert p95 is not None and 0.15 <= p95 <= 0.2
    other = Cell.from_json(cell.to_json())
    other.add(cell)
    assert other.calls == 200 and other.quantile(0.95) == p95
    assert Cell().quantile(0.5) is None


def test_a_ring_keeps_one_hour_and_sums_replicas() -> None:
    rings = Rings()
    for slot in range(1000, 1000 + SLOTS + 40):
        rings.cell(slot, ("hub",)).calls += 1
    assert len(list(rings)) == SLOTS and min(rings) == 1040
    other = Rings()
    other.merge_json(1399, rings.slot_json(1399))
    other.merge_json(1399, rings.slot_json(1399))
    other.merge_json(1399, [["not", "a", "cell"], 3, None])  # a replica's garbage is skipped
    assert other.total(("hub",), 1399, 1).calls == 2


GUARDED_POLICY = """
[principals]
alice = "all"
stdio = "all"

[profiles.all]
default = "allow"
budgets = [{ calls = 4, per = "day" }]

[[profiles.all.guards]]
id = "flag-secrets"
detect = ["secrets"]
action = "flag"
on = "arguments"

[[profiles.all.guards]]
id = "block-cards"
detect = ["card"]
action = "block"
on = "arguments"
"""


async def test_guardrail_hits_and_budget_refusals_are_decisions_and_the_principal_page_shows_the_budget(
    tmp_path: Path,
) -> None:
    async with dashboard_hub(tmp_path, policy=GUARDED_POLICY) as (hub, base):
        async with client_as(base, "alice") as alice:
            await alice.call_tool("srv_echo", {"text": "hello"})
            await alice.call_tool("srv_echo", {"text": f"the key is {BOB_KEY}"})  # one of the hub's own secrets
            blocked = await alice.call_tool("srv_echo", {"text": "card 4111111111111111"})
            await alice.call_tool("srv_echo", {"text": "fourth"})
            fifth = await alice.call_tool("srv_echo", {"text": "fifth"})  # refused as a tool error
        assert blocked.is_error and fifth.is_error and "budget" in str(fifth.content)
        assert hub.dashboard is not None
        hub.dashboard.collect()
        async with httpx2.AsyncClient(timeout=10) as web:
            await logged_in(web, base)
            data = (await web.get(f"{base}/admin/dashboard/data.json")).json()
            page = (await web.get(f"{base}/admin/dashboard/principal/alice")).text
            overview = (await web.get(f"{base}/admin/dashboard")).text

    assert data["principals"]["alice"]["decisions"] == {"flagged": 1, "blocked": 1, "over_budget": 1}
    assert data["principals"]["alice"]["calls"] == 5
    assert data["principals"]["alice"]["errors"] == 1  # the blocked call's tool error; the refusal is a decision
    assert re.search(r'<table id="budgets">.*?<td>4</td><td>4</td><td>0</td>', page)  # used 4 of 4, none left
    for shown in ("guard: flagged", "guard: blocked", "over budget"):
        assert f"<td>{shown}</td>" in overview
    assert BOB_KEY not in page and BOB_KEY not in overview


def test_charts_are_plain_svg_with_every_name_escaped() -> None:
    evil = '"><script>alert(1)</script>'
    line = charts.line_chart(evil, evil, {evil: [None, 1.0, 2.0, None, 0.5]}, 1_800_000_000, 10, "s", evil)
    band = charts.timeline(evil, evil, [({"up"}, 0), ({"down", "up"}, 1), (set(), 0)], 1_800_000_000, 10)
    for svg in (line, band):
        assert "<script" not in svg and " style=" not in svg and "href" not in svg
        assert "&lt;script&gt;" in svg
    assert line.count("<polyline") == 1 and line.count("<circle") == 1  # a gap splits the line; a lone point
    assert 'data-state="down"' in band and band.count('class="restart"') == 1
