"""Confirmations a person can trust: what they read is what runs.

End to end through a running hub, with real servers (the fixture server, and `names.py`, a
server whose tool names would deceive) and the SDK's real clients, in both protocol eras.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_hub.config import load_config
from tests.conftest import fixture_server, hub_client, running_hub, script_server, wait_for, write_config

pytestmark = pytest.mark.anyio

NAMES = Path(__file__).parent / "servers" / "names.py"
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "invoice\u202efdp.exe" reads as "invoiceexe.pdf"

POLICY = """
[principals]
"*" = "operator"

[profiles.operator]
default = "allow"
[[profiles.operator.rules]]
id = "destructive"
effect = "confirm"
tools = ["srv/delete_*", "names/*"]
resources = ["names/*"]
reason = "destructive"

[confirmation]
timeout = 10

[audit]
mask_arguments = ["*secret*"]
"""


def setup(tmp_path: Path) -> tuple[Path, Path]:
    """A hub with the fixture server ("srv") and a server of deceiving names ("names": its tools' names
    reach clients made plain, its resources' URIs as they are); a policy that asks before deleting and
    before reading those resources; an audit file. Returns (config, audit file)."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "hub.toml").write_text(textwrap.dedent(POLICY), encoding="utf-8")
    deceiving = [json.dumps(f"delete{RLO}fdp.exe"), json.dumps("delete\u200bnote")]
    servers = {"srv": fixture_server("srv"), "names": script_server(str(NAMES), *deceiving)}
    config = write_config(tmp_path / "hub.toml", servers)
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n\n[audit]\nfile = "logs/audit.jsonl"\n')
    return config, tmp_path / "logs" / "audit.jsonl"


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def audited(path: Path, count: int) -> list[dict[str, Any]]:
    """The audit file's lines, once it has `count` of them (its writer thread writes them shortly)."""

    async def written() -> bool:
        return path.exists() and len(audit_lines(path)) >= count

    await wait_for(written, timeout=10)
    return audit_lines(path)


class Person:
    """Reads each question, and answers yes."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    async def elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        self.messages.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_question_shows_deceiving_characters_escaped_and_other_text_as_it_is(
    tmp_path: Path, mode: str
) -> None:
    config, audit = setup(tmp_path)
    person = Person()
    key = f"invoice{RLO}fdp.exe in 日本, café"
    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, mode, elicitation_callback=person.elicitation) as client,
    ):
        deleted = await client.call_tool("srv_delete_note", {"key": key, "secret": "x\u2028y"})
        (tool,) = [t.name for t in (await client.list_tools()).tools if t.name.startswith("names_delete-fdp")]
        ran = await client.call_tool(tool, {"note": "a\x9b2Jb"})
        uris = [str(r.uri) for r in (await client.list_resources()).resources if str(r.uri).startswith("names+")]
        read = [await client.read_resource(uri) for uri in uris]
    assert deleted.content[0].text == f"deleted {key}"  # type: ignore[union-attr]
    assert ran.content[0].text == f'ran delete{RLO}fdp.exe {{"note": "a\\u009b2Jb"}}'  # type: ignore[union-attr]
    # A server's resource URIs reach the client as the server wrote them.
    assert uris == [f"names+note://delete{RLO}fdp.exe", "names+note://delete\u200bnote"]
    assert [r.contents[0].text for r in read] == [f"read {uri.removeprefix('names+')}" for uri in uris]  # type: ignore[union-attr]
    first, second, *reads = person.messages
    assert '"key": "invoice\\u202efdp.exe in 日本, café"' in first
    assert '"secret": "***"' in first  # masked as before
    assert '{"note": "a\\u009b2Jb"}' in second
    assert [message.split("'")[1] for message in reads] == [
        "names+note://delete\\u202efdp.exe",
        "names+note://delete\\u200bnote",
    ]
    for message in person.messages:
        assert not {RLO, "\u200b", "\x9b", "\u2028"} & set(message), message
    # The audit log: the same values, escaped the same way in the file.
    text = audit.read_text(encoding="utf-8")
    assert not {RLO, "\u200b", "\x9b"} & set(text) and "日本, café" in text
    lines = audit_lines(audit)
    assert [line["outcome"] for line in lines] == ["confirmed"] * 4
    assert lines[0]["arguments"]["key"] == key and lines[2]["name"] == f"note://delete{RLO}fdp.exe"


async def ask(client: Any, name: str, arguments: dict[str, Any]) -> tuple[str, str]:
    """Call, and get asked: (the question's key, the requestState)."""
    first = await client.session.call_tool(name, arguments, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult) and first.input_requests, first
    assert first.request_state is not None
    (key,) = first.input_requests
    return key, first.request_state


YES = {"action": "accept", "content": {"confirm": True}}


@pytest.mark.parametrize(
    ("name", "other"),
    [
        ("srv_delete_note", {"key": "b"}),  # another file than the one confirmed
        ("srv_delete_note", {"key": "a", "also": "b"}),  # an argument more
        ("srv_delete_note", {}),  # the arguments left out
        ("srv_delete_note", {"key": ["a"]}),  # the same text, another JSON value
        ("srv_echo", {"key": "a"}),  # another tool
    ],
)
@pytest.mark.slow
async def test_a_retry_for_another_call_than_the_one_confirmed_is_refused_audited_and_runs_nothing(
    tmp_path: Path, name: str, other: dict[str, Any]
) -> None:
    """The person confirmed deleting "a"; a retry naming another file (or tool) with that answer and that
    requestState gets nothing: an invalid-params error, a line in the audit log, and no call. The call
    that was confirmed still waits for its own retry."""
    config, audit = setup(tmp_path)
    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, "2026-07-28", elicitation_callback=Person().elicitation) as client,
    ):
        with anyio.fail_after(20):
            key, state = await ask(client, "srv_delete_note", {"key": "a"})
            with pytest.raises(MCPError) as caught:
                await client.session.call_tool(name, other, input_responses={key: YES}, request_state=state)
            assert caught.value.code == INVALID_PARAMS
            assert "requestState is not valid for this request" in caught.value.message
            (refused,) = await audited(audit, 1)  # nothing else ran, or was decided
            # The confirmed call, retried as it was made, runs as confirmed.
            done = await client.session.call_tool(
                "srv_delete_note", {"key": "a"}, input_responses={key: YES}, request_state=state
            )
    assert done.content[0].text == "deleted a"  # type: ignore[union-attr]
    assert refused["outcome"] == "refused"
    assert refused["name"] == name.removeprefix("srv_") and refused["arguments"] == other
    assert "requestState" in refused["reason"]
    confirmed = audit_lines(audit)[1]
    assert (confirmed["outcome"], confirmed["arguments"]) == ("confirmed", {"key": "a"})


async def test_a_retry_with_the_same_arguments_in_another_order_is_the_same_call(tmp_path: Path) -> None:
    config, audit = setup(tmp_path)
    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, "2026-07-28", elicitation_callback=Person().elicitation) as client,
    ):
        with anyio.fail_after(20):
            (tool,) = [t.name for t in (await client.list_tools()).tools if t.name.startswith("names_delete-fdp")]
            key, state = await ask(client, tool, {"a": 1, "b": {"c": True, "d": "é"}})
            done = await client.session.call_tool(
                tool, {"b": {"d": "é", "c": True}, "a": 1}, input_responses={key: YES}, request_state=state
            )
    assert done.content[0].text == f'ran delete{RLO}fdp.exe {{"a": 1, "b": {{"c": true, "d": "\\u00e9"}}}}'  # type: ignore[union-attr]
    assert [line["outcome"] for line in audit_lines(audit)] == ["confirmed"]


@pytest.mark.slow
async def test_a_handshake_era_confirmation_answers_for_its_own_call(tmp_path: Path) -> None:
    """Handshake era: the question goes out inside the call, as a request of its own, and the call runs with
    the arguments it was asked about; there is no retry to carry other ones. Two calls at once, one person
    who allows only deleting "a": "a" is deleted, "b" is not."""
    config, audit = setup(tmp_path)

    async def only_a(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        return types.ElicitResult(action="accept", content={"confirm": '"key": "a"' in params.message})

    results: dict[str, Any] = {}
    async with (
        running_hub(load_config(config)) as hub,
        hub_client(hub, "legacy", elicitation_callback=only_a) as client,
    ):

        async def delete(key: str) -> None:
            results[key] = await client.call_tool("srv_delete_note", {"key": key})

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(delete, "a")
                tg.start_soon(delete, "b")
    assert results["a"].content[0].text == "deleted a"
    assert results["b"].is_error is True and "Not confirmed" in results["b"].content[0].text
    outcomes = {line["arguments"]["key"]: line["outcome"] for line in audit_lines(audit)}
    assert outcomes == {"a": "confirmed", "b": "declined"}


async def test_a_call_waiting_for_its_confirmation_ends_when_the_hub_stops(tmp_path: Path) -> None:
    """A parked call runs in a task of the hub's parking lot; stopping the hub cancels it, and the lot closes
    only once it has ended (nothing of it is left waiting)."""
    config, _audit = setup(tmp_path)
    with anyio.fail_after(20):
        async with running_hub(load_config(config)) as hub:
            lot = hub.endpoint.parking
            async with hub_client(hub, "2026-07-28", elicitation_callback=Person().elicitation) as client:
                await ask(client, "srv_delete_note", {"key": "a"})
                assert lot.open and len(lot._parked) == 1  # pyright: ignore[reportPrivateUsage]
        assert not lot.open
        assert lot._parked == {}  # pyright: ignore[reportPrivateUsage]
