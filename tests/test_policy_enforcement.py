"""The policy enforced by a running hub: lists, calls, arguments, confirmation, rate limits, reload, audit."""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolListChangedNotification

from mcp_hub.config import load_config
from mcp_hub.hub import Hub
from mcp_hub.policy import store
from mcp_hub.server.http import build_app
from tests.conftest import fixture_server, hub_client, running_hub, serve_app, wait_for, write_config

pytestmark = pytest.mark.anyio

PROFILES = """
[principals]
stdio = "operator"
ci-bot = "reader"

[profiles.reader]
default = "deny"
[[profiles.reader.rules]]
id = "read"
effect = "allow"
tools = ["srv/echo", "srv/read_file"]
resources = ["srv/fixture://notes/*"]

[profiles.operator]
default = "deny"
extends = ["reader"]
[[profiles.operator.rules]]
id = "files"
effect = "allow"
tools = ["srv/read_file"]
[profiles.operator.rules.arguments.path]
path_within = ["{root}"]
[[profiles.operator.rules]]
id = "destructive"
effect = "confirm"
tools = ["srv/delete_*"]
reason = "destructive"
[[profiles.operator.rules]]
id = "slow-down"
effect = "allow"
tools = ["srv/pid"]
rate = "2/second"
[[profiles.operator.rules]]
id = "no-crash"
effect = "deny"
tools = ["srv/crash"]

[confirmation]
timeout = 5
when_unsupported = "deny"

[audit]
mask_arguments = ["*secret*"]
"""


def setup(tmp_path: Path, **servers: Any) -> tuple[Path, Path]:
    """A hub.toml with a policies/ folder and an audit file; returns (config, audit file)."""
    root = tmp_path / "docs"
    (root / "inner").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "escape").symlink_to(tmp_path / "outside")
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "hub.toml").write_text(textwrap.dedent(PROFILES).replace("{root}", str(root)), encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", servers or {"srv": fixture_server("srv")})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n\n[audit]\nfile = "logs/audit.jsonl"\n')
    return config, tmp_path / "logs" / "audit.jsonl"


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class Person:
    def __init__(self, action: str = "accept", confirm: bool = True) -> None:
        self.action = action
        self.confirm = confirm
        self.messages: list[str] = []

    async def elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        self.messages.append(params.message)
        content = {"confirm": self.confirm} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


async def _refusal(call: Any) -> tuple[int, str]:
    with pytest.raises(MCPError) as caught:
        await call
    return caught.value.code, caught.value.message


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_hidden_items_are_neither_listed_nor_callable(tmp_path: Path, mode: str) -> None:
    config, _ = setup(tmp_path)
    async with running_hub(load_config(config)) as hub, hub_client(hub, mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        resources = {r.uri for r in (await client.list_resources()).resources}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        errors = [await _refusal(client.call_tool(name, {})) for name in ("srv_crash", "srv_grow", "srv_no_such_tool")]
        prompt_errors = [await _refusal(client.get_prompt(name, {"who": "x"})) for name in ("srv_greet", "srv_nope")]
        hidden_resource = await _refusal(client.read_resource("srv+fixture://blob"))
        forged: list[tuple[int, str]] = []
        if mode == "2026-07-28":
            # A requestState presented with a hidden name says nothing a made-up name would not.
            for name in ("srv_crash", "srv_no_such_tool"):
                probe = client.call_tool(name, {}, input_responses={}, request_state="mcp-hub.1.x")
                forged.append(await _refusal(probe))
    assert tools == {"srv_echo", "srv_read_file", "srv_delete_note", "srv_pid"}
    assert resources == {"srv+fixture://notes/1", "srv+fixture://notes/2"}
    assert prompts == set()
    # Denied, not allowed, and absent answer alike: no existence leak.
    assert errors == [
        (INVALID_PARAMS, "Unknown tool: srv_crash"),
        (INVALID_PARAMS, "Unknown tool: srv_grow"),
        (INVALID_PARAMS, "Unknown tool: srv_no_such_tool"),
    ]
    assert prompt_errors == [
        (INVALID_PARAMS, "Unknown prompt: srv_greet"),
        (INVALID_PARAMS, "Unknown prompt: srv_nope"),
    ]
    assert hidden_resource == (INVALID_PARAMS, "Unknown resource: srv+fixture://blob")
    if mode == "2026-07-28":
        assert forged == [
            (INVALID_PARAMS, "Unknown tool: srv_crash"),
            (INVALID_PARAMS, "Unknown tool: srv_no_such_tool"),
        ]


@pytest.mark.parametrize(
    "path",
    [
        "{tmp}/docs/../outside/x",
        "{tmp}/docs/inner/../../outside/x",
        "{tmp}/outside/x",
        "{tmp}/docs2/x",
        "{tmp}/docs/%2e%2e/outside/x",
        "{tmp}/docs/%252e%252e/outside/x",
        "{tmp}/docs/escape/secret",
        "{tmp}/docs/\uff0e\uff0e/outside/x",  # FULLWIDTH FULL STOPs: ".." to a server that normalizes (NFKC)
        "{tmp}/docs/\u2024\u2024/outside/x",  # ONE DOT LEADERs
        "{tmp}/docs/..\uff0f..\uff0foutside/x",  # FULLWIDTH SOLIDUS
        "file://{tmp}/outside/x",
        "file%3a//{tmp}/outside/x",
        "~/x",
        "inner/notes.txt",
        "../outside/x",
    ],
)
async def test_argument_escapes_are_refused_naming_the_rule(tmp_path: Path, path: str) -> None:
    config, _ = setup(tmp_path)
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        refused = await client.call_tool("srv_read_file", {"path": path.replace("{tmp}", str(tmp_path))})
        inside = str(tmp_path / "docs" / "inner" / "notes.txt")
        allowed = await client.call_tool("srv_read_file", {"path": inside})
    assert refused.is_error is True
    assert "files" in refused.content[0].text  # type: ignore[union-attr]
    assert "path" in refused.content[0].text  # type: ignore[union-attr]
    assert allowed.is_error is not True
    assert allowed.content[0].text == f"would read {inside}"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("action", "confirm", "expected"),
    [("accept", True, "deleted k"), ("accept", False, None), ("decline", False, None), ("cancel", False, None)],
)
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_confirmation(tmp_path: Path, action: str, confirm: bool, expected: str | None, mode: str) -> None:
    """A handshake-era client is asked with elicitation/create; a 2026-07-28 one in an input_required result."""
    config, audit = setup(tmp_path)
    person = Person(action, confirm)
    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, mode, elicitation_callback=person.elicitation) as client,
    ):
        result = await client.call_tool("srv_delete_note", {"key": "k", "secret_token": "hunter2"})
    assert len(person.messages) == 1
    assert "srv_delete_note" in person.messages[0] and "destructive" in person.messages[0]
    assert "hunter2" not in person.messages[0]
    if expected is None:
        assert result.is_error is True
        assert "Not confirmed" in result.content[0].text  # type: ignore[union-attr]
    else:
        assert result.content[0].text == expected  # type: ignore[union-attr]
    (line,) = audit_lines(audit)
    assert line["outcome"] == ("confirmed" if expected else "declined")
    assert line["arguments"] == {"key": "k", "secret_token": "***"}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_confirmation_without_elicitation_is_refused(tmp_path: Path, mode: str) -> None:
    config, _ = setup(tmp_path)
    async with running_hub(load_config(config)) as hub, hub_client(hub, mode) as client:
        result = await client.call_tool("srv_delete_note", {"key": "k"})
    assert result.is_error is True
    assert "cannot ask" in result.content[0].text  # type: ignore[union-attr]
    assert "elicitation" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.slow
async def test_confirmation_unanswered_within_the_timeout_is_refused(tmp_path: Path) -> None:
    config, audit = setup(tmp_path)
    policy_file = tmp_path / "policies" / "hub.toml"
    policy_file.write_text(policy_file.read_text(encoding="utf-8").replace("timeout = 5", "timeout = 0.5"))
    asked = anyio.Event()

    async def away(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        asked.set()
        await anyio.sleep_forever()

    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, elicitation_callback=away) as client,
    ):
        with anyio.fail_after(10):
            result = await client.call_tool("srv_delete_note", {"key": "k"})
    assert asked.is_set()
    assert result.is_error is True
    assert result.content[0].text == "No confirmation within 0.5s (policy rule destructive)"  # type: ignore[union-attr]
    (line,) = audit_lines(audit)
    assert (line["outcome"], line["rule"]) == ("declined", "destructive")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_confirmation_a_client_cannot_ask_for_is_let_through_when_configured(tmp_path: Path, mode: str) -> None:
    config, audit = setup(tmp_path)
    policy_file = tmp_path / "policies" / "hub.toml"
    text = policy_file.read_text(encoding="utf-8")
    policy_file.write_text(text.replace('when_unsupported = "deny"', 'when_unsupported = "allow"'))
    async with running_hub(load_config(config)) as hub, hub_client(hub, mode) as client:
        result = await client.call_tool("srv_delete_note", {"key": "k"})
    assert result.is_error is not True
    assert result.content[0].text == "deleted k"  # type: ignore[union-attr]
    (line,) = audit_lines(audit)
    assert line["outcome"] == "allowed" and line["reason"].startswith("unconfirmed")


@pytest.mark.slow
async def test_rate_limit_trips_and_recovers(tmp_path: Path) -> None:
    config, audit = setup(tmp_path)
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:
        results = [await client.call_tool("srv_pid", {}) for _ in range(3)]
        assert [r.is_error is True for r in results] == [False, False, True]
        assert "retry in" in results[2].content[0].text  # type: ignore[union-attr]

        async def recovered() -> bool:
            return (await client.call_tool("srv_pid", {})).is_error is not True

        await wait_for(recovered, timeout=5, interval=0.2)
    assert [line["outcome"] for line in audit_lines(audit)][:3] == ["allowed", "allowed", "rate_limited"]


async def test_policy_edits_apply_live_and_a_broken_edit_keeps_the_last_good_policy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "POLL_INTERVAL", 0.1)  # edits are seen within a tenth of a second, not a second
    config, _ = setup(tmp_path)
    policy_file = tmp_path / "policies" / "hub.toml"
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    async with running_hub(load_config(config)) as hub, hub_client(hub, message_handler=on_message) as client:
        revision = hub.policy().revision
        good = policy_file.read_text(encoding="utf-8")
        policy_file.write_text(good + '\n[profiles.broken\nx = "', encoding="utf-8")
        await wait_for(lambda: hub.policy.last_error is not None)
        assert "hub.toml" in (hub.policy.last_error or "")
        logged = [r.getMessage() for r in caplog.records if r.name == "mcp_hub.policy"]
        assert any("hub.toml" in message and "line" in message for message in logged), logged
        assert hub.policy().revision == revision
        assert "srv_echo" in {t.name for t in (await client.list_tools()).tools}

        policy_file.write_text(good.replace('tools = ["srv/echo", "srv/read_file"]', 'tools = ["srv/read_file"]'))
        with anyio.fail_after(10):
            await changed.wait()
        tools = {t.name for t in (await client.list_tools()).tools}
    assert hub.policy().revision != revision
    assert "srv_echo" not in tools and "srv_read_file" in tools


async def test_every_call_leaves_exactly_one_audit_line_under_concurrency(tmp_path: Path) -> None:
    config, audit = setup(tmp_path)
    async with running_hub(load_config(config)) as hub, hub_client(hub) as client:

        async def call(index: int) -> None:
            name = "srv_echo" if index % 4 else "srv_crash"  # every fourth one denied
            with contextlib.suppress(MCPError):
                await client.call_tool(name, {"text": str(index)})

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for index in range(100):
                    tg.start_soon(call, index)
    lines = audit_lines(audit)
    assert len(lines) == 100
    assert len({line["decision_id"] for line in lines}) == 100
    assert sum(line["outcome"] == "denied" for line in lines) == 25
    assert sum(line["outcome"] == "allowed" for line in lines) == 75
    first = lines[0]
    assert list(first) == [
        "time",
        "decision_id",
        "principal",
        "session",
        "method",
        "mount",
        "name",
        "via",
        "arguments",
        "outcome",
        "rule",
        "reason",
        "latency_ms",
        "policy_revision",
        "issuer",
        "subject",
        "client_id",
        "results",
        "cost",
        "cut",
        "client_address",
    ]
    assert first["principal"] == "stdio" and first["mount"] == "srv"
    assert first["issuer"] is first["subject"] is first["client_id"] is None  # no access token over stdio
    assert first["client_address"] is None  # no network address over stdio


async def test_http_clients_are_who_their_api_key_says(tmp_path: Path) -> None:
    config, _ = setup(tmp_path)
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[auth]\napi_keys = { ci-bot = "${HUB_TEST_CI_KEY}" }\n')
    key = "k" * 32
    hub = Hub(load_config(config, environ={"HUB_TEST_CI_KEY": key}))
    async with hub.running():
        await hub.wait_settled(20)
        app = build_app(
            hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, api_keys=hub.config.auth.api_keys
        )
        async with serve_app(app) as base:
            import httpx2

            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
                from mcp.client.streamable_http import streamable_http_client

                async with Client(streamable_http_client(f"{base}/mcp", http_client=http), cache=None) as client:
                    tools = {t.name for t in (await client.list_tools()).tools}
            async with httpx2.AsyncClient() as http:
                missing = await http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
                wrong = await http.post(
                    f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"X-API-Key": "x" * 32}
                )
    assert tools == {"srv_echo", "srv_read_file"}  # the reader profile
    assert missing.status_code == wrong.status_code == 401
    assert "API key" in missing.json()["message"]


async def test_http_clients_without_api_keys_are_the_principal_anonymous(tmp_path: Path) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    config, _ = setup(tmp_path)
    policy_file = tmp_path / "policies" / "hub.toml"
    policy_file.write_text(policy_file.read_text(encoding="utf-8").replace('ci-bot = "reader"', 'anonymous = "reader"'))
    async with running_hub(load_config(config)) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with (
            serve_app(app) as base,
            httpx2.AsyncClient() as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), cache=None) as client,
        ):
            tools = {t.name for t in (await client.list_tools()).tools}
    assert tools == {"srv_echo", "srv_read_file"}  # the reader profile, not stdio's operator


@pytest.mark.slow
async def test_each_principal_lists_what_it_may_see_however_often_lists_are_asked(tmp_path: Path) -> None:
    """Answers kept for one principal's listing are never another principal's."""
    config, _ = setup(tmp_path)
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[auth]\napi_keys = { ci-bot = "${HUB_TEST_CI_KEY}" }\n')
    key = "k" * 32
    hub = Hub(load_config(config, environ={"HUB_TEST_CI_KEY": key}))
    listed: list[set[str]] = []
    async with hub.running():
        await hub.wait_settled(20)
        app = build_app(
            hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, api_keys=hub.config.auth.api_keys
        )
        async with (
            serve_app(app) as base,
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy", cache=None) as ci_bot,
            hub_client(hub, "legacy") as local,
        ):
            for client in (local, ci_bot, local, ci_bot):
                listed.append({t.name for t in (await client.list_tools()).tools})
    operator = {"srv_echo", "srv_read_file", "srv_delete_note", "srv_pid"}
    reader = {"srv_echo", "srv_read_file"}
    assert listed == [operator, reader, operator, reader]
