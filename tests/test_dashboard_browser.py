"""The console's dashboard in a real browser (headless Chromium through Selenium, as test_admin_browser.py drives
it), against `mcp-hub serve --transport http` as a child process: traffic made by the SDK's client (calls, tool
errors, a slow tool, a denial, a server that crashes mid-call) shows on the overview's live charts within seconds,
and the pages per mount, tool and principal show it too. Screenshots go to docs/console/dashboard-*.png."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.test_admin_browser import (  # noqa: F401  (browser, hub: the fixtures)
    RunningHub,
    WebDriver,
    browser,
    hub,
    log_in,
    mcp_as,
    screenshot,
    text_of,
    wait,
)

pytestmark = pytest.mark.slow

SHOWN_WITHIN = 12.0
"""Seconds the overview may take to show a call (a collection every 2 s, the page redrawn every 2 s)."""


def _number(driver: WebDriver, selector: str) -> int:
    text = text_of(driver, selector) or ""
    found = re.search(r"\d+", text)
    return int(found.group()) if found else -1


def _refused(call: Callable[..., Any], *args: Any) -> str:
    """What a call that fails raised (the client's error, out of the task groups it crossed)."""
    try:
        call(*args)
    except BaseException as exc:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        return str(exc) or type(exc).__name__
    raise AssertionError(f"{args} succeeded")


def test_the_overview_shows_calls_errors_latency_denials_and_a_crash_within_seconds(
    browser: WebDriver,  # noqa: F811
    hub: RunningHub,  # noqa: F811
) -> None:
    log_in(browser, hub)
    browser.get(f"{hub.base}/admin/dashboard?minutes=5")
    wait(
        browser,
        lambda b: b.find_element(By.ID, "dashboard-live").get_attribute("data-connected") == "yes",
        "the live stream",
    )
    assert _number(browser, "#head-calls") == 0

    with mcp_as(hub, "alice") as alice, mcp_as(hub, "bob") as bob:
        for text in "abcdef":
            alice("call_tool", "srv_echo", {"text": text})
        alice("call_tool", "srv_fail", {"message": "no"})
        alice("call_tool", "srv_fail", {"message": "no again"})
        alice("call_tool", "srv_slow", {"seconds": 1.2, "steps": 2})
        assert "srv_fail" in _refused(bob, "call_tool", "srv_fail", {"message": "denied to bob"})
        assert _refused(alice, "call_tool", "srv_crash", {})  # the server exits mid-call
        made = time.monotonic()
        # 11 calls: 6 echoes, 2 tool errors, 1 slow, bob's denied one, the crashed one (an error)
        wait(browser, lambda b: _number(b, "#head-calls") == 11, "the overview to count every call")
        shown = time.monotonic() - made
        assert shown < SHOWN_WITHIN, f"the overview took {shown:.1f} s"
        print(f"\nthe overview showed the calls {shown:.1f} s after the last one")
        wait(browser, lambda b: text_of(b, "#head-errors") == "27.3 %", "the error rate (3 of 11)")
        wait(browser, lambda b: "s" in (text_of(b, "#head-p95") or "") and "ms" not in text_of(b, "#head-p95"), "p95")
        wait(browser, lambda b: _number(b, '#tools tr[data-tool="srv_echo"] .calls') == 6, "the busiest tool")
        wait(browser, lambda b: _number(b, '#decisions tr[data-decision="denied"] .count') == 1, "bob's denial")
        # the crash: the mount's timeline shows it down or restarting, and the restart marked
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#timeline-srv .restart"), "the restart marked")
        states = {r.get_attribute("data-state") for r in browser.find_elements(By.CSS_SELECTOR, "#timeline-srv rect")}
        assert states & {"down", "starting", "restarting"}, states
        assert browser.find_elements(By.CSS_SELECTOR, "#hub-calls polyline")
        alice("call_tool", "srv_echo", {"text": "after the restart"})
    wait(browser, lambda b: _number(b, "#head-calls") == 12, "the call after the restart")
    screenshot(browser, "dashboard-overview")

    browser.get(f"{hub.base}/admin/dashboard/tool/srv_echo?minutes=5")
    wait(browser, lambda b: _number(b, '#cross tr[data-principal="alice"] .calls') == 7, "alice on the tool page")
    assert _number(browser, '#cross tr[data-principal="bob"] .calls') == -1  # bob never called it
    screenshot(browser, "dashboard-tool")

    browser.get(f"{hub.base}/admin/dashboard/principal/bob?minutes=5")
    wait(browser, lambda b: "denied 1" in (text_of(b, '#cross tr[data-tool="srv_fail"]') or ""), "bob's denial")
    screenshot(browser, "dashboard-principal")

    browser.get(f"{hub.base}/admin/dashboard/mount/srv?minutes=5")
    wait(browser, lambda b: text_of(b, "#mount-state") == "up", "the mount's state")
    assert _number(browser, '#tools tr[data-tool="srv_slow"] .calls') == 1
    assert browser.find_elements(By.CSS_SELECTOR, "#timeline-srv .restart")
    assert _number(browser, 'tr[data-error="tool_error"] .count') == 2
    assert _number(browser, 'tr[data-error="-32000"] .count') == 1  # the crash: the server went away mid-call
    screenshot(browser, "dashboard-mount")
