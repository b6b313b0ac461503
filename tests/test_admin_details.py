"""What the console and /healthz show of a mount that fails, of a tool's title and icons, and how the audit page
filters by tool: over HTTP, against a hub served in-process with real stdio servers (the browser: see
test_admin_browser.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.admin.audit_view import Filters
from mcp_hub.admin.icons import drawn, icons
from mcp_hub.upstream import State, supervisor
from tests.conftest import fixture_server, wait_for
from tests.harness.console import ALICE_KEY, MOUNT_TOKEN, console_hub, logged_in
from tests.servers.fixture import ECHO_ICON

pytestmark = pytest.mark.anyio

URL_PASSWORD = "hunter2-not-for-anyone"
SAID = f"bad: cannot sign in with $API_TOKEN at postgres://hub:{URL_PASSWORD}@db.example/app"
"""What the failing server writes to stderr before it exits: its own secret (a configured one), and a password in a
URL (one the hub knows only by its form)."""


def _failing_servers() -> dict[str, dict[str, object]]:
    return {"bad": fixture_server("bad", "--say", SAID, "--exit-on-start", env={"API_TOKEN": MOUNT_TOKEN})}


def _row(html: str, mount: str) -> str:
    found = re.search(rf'<tr id="mount-{mount}">.*?</tr>', html, re.S)
    assert found, f"no row for {mount}"
    return found.group(0)


@pytest.mark.slow
async def test_a_mount_failing_to_start_shows_its_restarts_its_attempts_and_its_masked_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "_BACKOFF_FIRST", 0.2)  # a fifth of a second, not half: a shorter test
    async with console_hub(tmp_path, servers=_failing_servers()) as (hub, base), httpx2.AsyncClient(timeout=30) as web:
        upstream = hub.upstreams["bad"]
        await wait_for(lambda: upstream.failures >= 3 and upstream.state == State.DOWN)
        healthz = (await web.get(f"{base}/healthz")).json()["servers"]["bad"]
        await logged_in(web, base)
        row = _row((await web.get(f"{base}/admin/status")).text, "bad")
        await wait_for(lambda: upstream.failures > healthz["failures"] and upstream.restarts > healthz["restarts"])
        later = (await web.get(f"{base}/healthz")).json()["servers"]["bad"]
    # Each attempt counts as it begins: the restarts rise while the server never comes up.
    assert healthz["failures"] >= 3
    if healthz["state"] == "down":  # backing off: the next attempt has not begun yet
        assert healthz["restarts"] == healthz["failures"] - 1 and 0 <= healthz["next_attempt_in"] <= 30
    else:  # the next attempt began as the page was asked for
        assert healthz["state"] == "starting" and healthz["restarts"] == healthz["failures"]
        assert healthz["next_attempt_in"] is None
    assert later["restarts"] > healthz["restarts"] and later["failures"] > healthz["failures"]
    assert healthz["last_error"] == "Connection closed: the server exited with status 3"
    assert "stderr_tail" not in healthz  # /healthz answers anyone: the server's words only where it says so
    # The console: the count, the failing state, how it ended and what the server said, its secrets masked.
    restarts = re.search(r'class="restarts">(\d+)</td>', row)
    assert restarts and int(restarts.group(1)) >= 2
    failing = re.search(
        r'<div class="failing">failing: (\d+) attempts in a row(; next try in \d+ s|; trying again now)</div>', row
    )
    assert failing and int(failing.group(1)) >= 3, row
    assert "the server exited with status 3" in row
    tail = re.search(r'<pre class="stderr-tail">(.*?)</pre>', row, re.S)
    assert tail, row
    said = "bad: cannot sign in with [REDACTED:configured_secret] at postgres://hub:[REDACTED:url_password]@"
    assert tail.group(1).startswith(said) and tail.group(1).endswith("\nfixture: refusing to start"), tail.group(1)
    assert tail.group(1).count("refusing") == 1  # the last attempt's lines: the same at each attempt, shown once
    assert MOUNT_TOKEN not in row and URL_PASSWORD not in row


@pytest.mark.slow
async def test_healthz_shows_the_masked_stderr_when_the_setting_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "_BACKOFF_FIRST", 0.2)
    servers = _failing_servers()
    async with (
        console_hub(tmp_path, servers=servers, tail="\n[http]\nhealth_stderr = true\n") as (hub, base),
        httpx2.AsyncClient(timeout=30) as web,
    ):
        await wait_for(lambda: hub.upstreams["bad"].failures >= 2)
        answer = await web.get(f"{base}/healthz")
    report = answer.json()["servers"]
    line, last = report["bad"]["stderr_tail"]
    assert last == "fixture: refusing to start"
    assert line.startswith("bad: cannot sign in with [REDACTED:configured_secret] at postgres://hub:[REDACTED:")
    assert MOUNT_TOKEN not in answer.text and URL_PASSWORD not in answer.text
    assert "stderr_tail" not in report["srv"]  # up: nothing to explain


async def test_the_catalog_shows_titles_and_draws_only_icons_given_as_data(tmp_path: Path) -> None:
    async with console_hub(tmp_path) as (_, base), httpx2.AsyncClient(timeout=30) as web:
        await logged_in(web, base)
        answer = await web.get(f"{base}/admin/catalog?q=echo")
        by_title = await web.get(f"{base}/admin/catalog?q=Echo")
    csp = answer.headers["content-security-policy"]
    assert "img-src 'self' data:;" in csp and "default-src 'none'" in csp
    row = re.search(r'<tr class="item" data-name="srv_echo">.*?</tr>', answer.text, re.S)
    assert row, answer.text
    assert '<code>srv_echo</code> <span class="title">Echo</span>' in row.group(0)
    # The icon given as data is drawn; the one given by URL is shown as its text, neither fetched nor linked.
    assert re.findall(r'<img [^>]*src="([^"]*)"', answer.text) == [ECHO_ICON]
    assert '<code class="icon-src" title="an icon, not loaded by the console">https://example.com/echo.png</code>' in (
        row.group(0)
    )
    assert 'href="https://example.com' not in answer.text
    assert 'data-name="srv_echo"' in by_title.text  # a search finds a tool by its title too


@pytest.mark.parametrize(
    ("src", "shown"),
    [
        (ECHO_ICON, True),
        ("data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=", True),
        ("data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E", True),
        ("https://example.com/icon.png", False),
        ("http://127.0.0.1:8765/admin/logout", False),
        ("javascript:alert(1)", False),
        ("data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", False),
        ('data:image/png;base64,AAAA"><script>alert(1)</script>', False),
        ("data:image/png;base64," + "A" * 70_000, False),
    ],
)
def test_only_an_images_data_uri_is_drawn(src: str, shown: bool) -> None:
    assert drawn(src) is shown
    pictures, texts = icons([{"src": src}])
    assert bool(pictures) is shown and bool(texts) is not shown
    assert "<script" not in pictures + texts  # escaped, whatever it was


def test_icons_that_are_not_a_list_of_icons_show_nothing() -> None:
    for value in (None, "https://example.com/a.png", [1, "x", {"src": 3}, {"mimeType": "image/png"}], {}):
        assert icons(value) == ("", "")


def test_a_tool_filter_reads_a_public_name_and_else_the_servers_own() -> None:
    def resolve(public: str) -> tuple[str, str] | None:
        return {"srv_echo": ("srv", "echo"), "two_echo": ("two", "echo")}.get(public)

    lines = [{"mount": "srv", "name": "echo"}, {"mount": "two", "name": "echo"}, {"mount": "srv", "name": "fail"}]

    def kept(tool: str) -> list[dict[str, str]]:
        filters = Filters.of({"tool": tool}, resolve)
        return [line for line in lines if filters.admit(line)]

    assert kept("srv_echo") == [lines[0]]
    assert kept("two_echo") == [lines[1]]
    assert kept("echo") == lines[:2]  # no public name: the server's own, on any mount
    assert kept("srv_nothing") == []
    assert Filters.of({"tool": "srv_echo"}, resolve).query() == {"tool": "srv_echo"}


@pytest.mark.slow
async def test_the_audit_page_filters_by_the_public_name_of_a_tool(tmp_path: Path) -> None:
    servers = {"two": fixture_server("two")}
    async with (
        console_hub(tmp_path, servers=servers) as (_, base),
        httpx2.AsyncClient(timeout=30) as web,
        httpx2.AsyncClient(headers={"X-API-Key": ALICE_KEY}, timeout=30) as mcp,
    ):
        transport = streamable_http_client(f"{base}/mcp", http_client=mcp)
        async with Client(transport, mode="2026-07-28", cache=None) as client:
            for tool in ("srv_echo", "two_echo", "two_echo"):
                await client.call_tool(tool, {"text": "x"})
            await client.call_tool("srv_fail", {"message": "no"})
        await logged_in(web, base)
        audit = tmp_path / "audit.jsonl"
        await wait_for(lambda: audit.exists() and len(audit.read_text(encoding="utf-8").splitlines()) >= 4)

        async def shown(tool: str) -> list[tuple[str, str]]:
            page = (await web.get(f"{base}/admin/audit", params={"tool": tool})).text
            return re.findall(r"<td class=mount>([^<]*)</td><td class=name>([^<]*)</td>", page)

        assert await shown("two_echo") == [("two", "echo"), ("two", "echo")]
        assert await shown("srv_echo") == [("srv", "echo")]
        assert sorted(await shown("echo")) == [("srv", "echo"), ("two", "echo"), ("two", "echo")]
        assert await shown("srv_fail") == [("srv", "fail")]
        assert await shown("srv_none") == []
        lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert {(line["mount"], line["name"]) for line in lines} >= {("srv", "echo"), ("two", "echo"), ("srv", "fail")}
