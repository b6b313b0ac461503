"""Guardrails' large scans leave the event loop free: a result with more than `INLINE_SCAN` characters of text is
scanned in a worker thread, and another call's small result is guarded and answered meanwhile.

The guardrails link runs here on its own (with the hub's real detectors and a policy file's guards): the
test must know when the large scan has begun, which the detectors tell by a thread-safe event; the
hub-level numbers are in benchmarks/results/2026-11-25-guardrails.md."""

from __future__ import annotations

import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.to_thread
import pytest

from mcp_hub.chain.context import CallContext
from mcp_hub.chain.guardrails import INLINE_SCAN, Guardrails
from mcp_hub.guardrails import Detectors, Match
from mcp_hub.observe.audit_log import AuditLog
from mcp_hub.policy import parse_policies
from tests.servers.leaky import DATA, log_lines

pytestmark = pytest.mark.anyio

POLICY = """
[principals]
"*" = "agent"

[profiles.agent]
default = "allow"

[[profiles.agent.guards]]
detect = ["all"]
action = "redact"
on = "results"
"""


class Watched(Detectors):
    """The hub's detectors, telling (from any thread) when they begin on a large text."""

    def __init__(self) -> None:
        super().__init__()
        self.large = threading.Event()
        self.threads: dict[str, set[int]] = {"large": set(), "small": set()}

    def find(self, text: str, detectors: Collection[str]) -> list[Match]:
        if len(text) > INLINE_SCAN or text.startswith("key "):  # (not the keys of the large result's objects)
            self.threads["large" if len(text) > INLINE_SCAN else "small"].add(threading.get_ident())
        if len(text) > INLINE_SCAN:
            self.large.set()
        return super().find(text, detectors)


def call(tool: str) -> CallContext:
    return CallContext(
        method="tools/call",
        kind="tool",
        mount="leaky",
        native=tool,
        public=f"leaky_{tool}",
        params={"name": tool, "arguments": {}},
        principal="anyone",
        session=None,
        origin=cast(Any, None),
    )


def answer(text: str) -> Any:
    async def server(ctx: CallContext) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": text}]}

    return server


@pytest.mark.slow
async def test_a_small_result_is_guarded_while_a_large_one_is_scanned(tmp_path: Path) -> None:
    policy = parse_policies({"policy.toml": POLICY})
    detectors = Watched()
    with AuditLog(tmp_path / "audit.jsonl") as audit:
        link = Guardrails(lambda: policy, detectors, audit)
        order: list[str] = []
        large = log_lines(2_000_000) + DATA["aws"]

        async def large_call() -> None:
            result = await link(call("log"), answer(large))
            assert result["content"][0]["text"].endswith("[REDACTED:aws_access_key]")
            order.append("large")

        async def small_call() -> None:
            with anyio.fail_after(30):
                await anyio.to_thread.run_sync(detectors.large.wait)
            result = await link(call("leak"), answer(f"key {DATA['aws']}"))
            assert result["content"][0]["text"] == "key [REDACTED:aws_access_key]"
            order.append("small")

        async with anyio.create_task_group() as tg:
            tg.start_soon(small_call)
            tg.start_soon(large_call)
    assert order == ["small", "large"]
    # The large text was scanned off the event loop's thread, the small one on it (no thread hop).
    assert threading.get_ident() not in detectors.threads["large"]
    assert detectors.threads["small"] == {threading.get_ident()}
