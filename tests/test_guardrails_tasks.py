"""Guardrails on tasks (SEP-2663): a task's result, fetched with `tasks/get`, and its status message pass the
guards on results of the call that created the task, with the audit lines a call's result would leave.

The server is `tests/servers/tasks_server.py` (a stdio child), whose `slow_compute` task says
"computing <label>" while it works and answers "computed <label>" (and a resource link named
`<label>`); the label is an AWS access key. The client is the SDK's, declaring the tasks extension."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp.client.extension import advertise
from mcp.shared.exceptions import MCPError

from mcp_hub.config import load_config
from tests.conftest import ROOT, hub_client, running_hub, script_server, write_config
from tests.harness.tasks import call, follow, settled
from tests.servers.leaky import DATA
from tests.servers.tasks_server import TASKS

pytestmark = pytest.mark.anyio

SERVER = str(ROOT / "tests" / "servers" / "tasks_server.py")
KEY = DATA["aws"]
MARKER = "[REDACTED:aws_access_key]"


def setup(tmp_path: Path, action: str | None, on: str = "results") -> tuple[Path, Path]:
    """The hub mounting the tasks server as `work`, its policy guarding `on` with `action` (None: no guard); what
    `tasks/update`s bring the server is noted in `updates.jsonl`."""
    policies = tmp_path / "policies"
    policies.mkdir()
    policy = '[principals]\nstdio = "agent"\n\n[profiles.agent]\ndefault = "allow"\n'
    if action is not None:
        policy += textwrap.dedent(f"""
            [[profiles.agent.guards]]
            id = "{action}-{on}"
            detect = ["secrets"]
            action = "{action}"
            on = "{on}"
            """)
    (policies / "policy.toml").write_text(policy, encoding="utf-8")
    server = script_server(SERVER, env={"TASKS_RECORD": str(tmp_path / "updates.jsonl")})
    config = write_config(tmp_path / "hub.toml", {"work": server})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\nreload = false\n\n[audit]\nfile = "audit.jsonl"\n')
    return config, tmp_path / "audit.jsonl"


async def run_tasks(config: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A working task's `tasks/get` answer, and a completed task's."""
    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, "2026-07-28", extensions=[advertise(TASKS)]) as client,
    ):
        working = await call(client, "work_slow_compute", seconds=600, label=KEY)
        status = await follow(client, "tasks/get", working["taskId"])
        await follow(client, "tasks/cancel", working["taskId"])
        quick = await call(client, "work_slow_compute", seconds=0, label=KEY)
        done = await settled(client, quick["taskId"])
    return status, done


def guard_lines(audit: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line["rule"] in ("redact-results", "block-results") and line["arguments"] is None]


@pytest.mark.slow
async def test_without_guards_a_tasks_result_passes_unchanged(tmp_path: Path) -> None:
    status, done = await run_tasks(setup(tmp_path, None)[0])
    assert status["statusMessage"] == f"computing {KEY}"
    assert done["result"]["content"][0]["text"] == f"computed {KEY}"


@pytest.mark.slow
async def test_redact_replaces_a_secret_in_a_tasks_result_and_status_message(tmp_path: Path) -> None:
    config, audit = setup(tmp_path, "redact")
    status, done = await run_tasks(config)
    assert status["status"] == "working"
    assert status["statusMessage"] == f"computing {MARKER}"
    assert done["status"] == "completed"
    assert done["result"]["content"] == [
        {"type": "text", "text": f"computed {MARKER}"},
        {"type": "resource_link", "uri": f"work+note://{KEY}", "name": MARKER},  # a URI is the protocol's
    ]
    lines = guard_lines(audit)
    assert [(line["method"], line["name"], line["outcome"], line["reason"]) for line in lines] == [
        ("tools/call", "slow_compute", "redacted", "secrets found aws_access_key x1 in the status message"),
        ("tools/call", "slow_compute", "redacted", "secrets found aws_access_key x2 in the results"),
    ]
    assert all(KEY not in json.dumps(line) for line in lines)  # (the call's own line shows its arguments)


async def test_block_replaces_a_tasks_result_with_a_tool_error(tmp_path: Path) -> None:
    config, audit = setup(tmp_path, "block")
    status, done = await run_tasks(config)
    assert status["statusMessage"] == f"computing {MARKER}"  # a message cannot be refused: it is redacted
    assert done["status"] == "completed"
    assert done["result"] == {
        "content": [{"type": "text", "text": "Blocked by guard block-results: the result held aws_access_key"}],
        "isError": True,
    }
    lines = guard_lines(audit)
    assert [(line["name"], line["outcome"], line["reason"].rsplit(" in ", 1)[1]) for line in lines] == [
        ("slow_compute", "blocked", "the status message"),
        ("slow_compute", "blocked", "the results"),
    ]
    assert all(KEY not in json.dumps(line) for line in lines)  # (the call's own line shows its arguments)


async def test_a_servers_task_id_is_the_protocols_and_not_scanned(tmp_path: Path) -> None:
    """A task id of random bytes looks like a secret (high entropy): redacted, the task could not be followed."""
    config, audit = setup(tmp_path, "redact")
    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, "2026-07-28", extensions=[advertise(TASKS)]) as client,
    ):
        handle = await call(client, "work_slow_compute", seconds=0, label="plain", opaque=True)
        done = await settled(client, handle["taskId"])
    assert done["result"]["content"][0] == {"type": "text", "text": "computed plain"}
    assert guard_lines(audit) == []


@pytest.mark.parametrize("action", ["redact", "block"])
async def test_a_failed_tasks_error_and_a_tasks_questions_are_guarded_as_messages(tmp_path: Path, action: str) -> None:
    """A failed task's `error` and an `input_required` task's `inputRequests` reach the client beside the result:
    a secret in them is redacted, whether its guard redacts or blocks (the task's answer cannot be refused)."""
    config, audit = setup(tmp_path, action)
    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, "2026-07-28", extensions=[advertise(TASKS)]) as client,
    ):
        failed = await settled(client, (await call(client, "work_protocol_error_job", label=KEY))["taskId"])
        asking = await call(client, "work_confirm_delete", filename=KEY)
        questions = await follow(client, "tasks/get", asking["taskId"])
        await follow(client, "tasks/cancel", asking["taskId"])
    assert failed["status"] == "failed"
    assert failed["error"]["message"] == f"the job crashed on {MARKER}"
    assert questions["status"] == "input_required"
    assert questions["inputRequests"]["confirm"]["params"]["message"] == f"Delete {MARKER}?"
    assert questions["inputRequests"]["confirm"]["params"]["requestedSchema"]["properties"]["confirm"] == {
        "type": "boolean"
    }
    lines = guard_lines(audit)
    assert [(line["name"], line["reason"].rsplit(" in ", 1)[1]) for line in lines] == [
        ("protocol_error_job", "the task's error"),
        ("confirm_delete", "the input requests"),
    ]
    assert all(KEY not in json.dumps(line) for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize("action", ["redact", "block"])
async def test_the_answers_a_tasks_update_brings_are_guarded_as_the_calls_arguments(
    tmp_path: Path, action: str
) -> None:
    """A `tasks/update` answers the task's questions on their way to the server: a secret in them is redacted, or
    the update refused, as in the arguments of the call that created the task."""
    config, audit = setup(tmp_path, action, "arguments")
    answer = {"confirm": {"action": "accept", "content": {"confirm": True, "note": f"use {KEY}"}}}
    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, "2026-07-28", extensions=[advertise(TASKS)]) as client,
    ):
        asking = await call(client, "work_confirm_delete", filename="notes.txt")
        if action == "block":
            with pytest.raises(MCPError) as blocked:
                await follow(client, "tasks/update", asking["taskId"], inputResponses=answer)
            assert blocked.value.message == "Blocked by guard block-arguments: the answers held aws_access_key"
        else:
            await follow(client, "tasks/update", asking["taskId"], inputResponses=answer)
            assert (await settled(client, asking["taskId"]))["status"] == "completed"
    updates = tmp_path / "updates.jsonl"
    received = (
        [json.loads(line) for line in updates.read_text(encoding="utf-8").splitlines()] if updates.exists() else []
    )
    if action == "block":
        assert received == []
    else:
        assert received == [{"confirm": {"action": "accept", "content": {"confirm": True, "note": f"use {MARKER}"}}}]
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert [
        (line["name"], line["outcome"], line["reason"]) for line in lines if line["rule"] == f"{action}-arguments"
    ] == [("confirm_delete", f"{action}ed", "secrets found aws_access_key x1 in the answers")]
    assert KEY not in audit.read_text(encoding="utf-8")
