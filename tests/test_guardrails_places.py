"""Guardrails on every place a value travels, not only a call's argument values and results: object keys, a
resource URI (a template's expansion too), prompt arguments, completion arguments, and the questions a server asks
the client of a call (elicitation, sampling) and the client's answers, in both eras.

A real hub in front of tests/servers/leaky.py, which notes every request it receives and every answer to its
questions (`LEAKY_RECORD`): no byte of the secret may reach it, nor the audit log, nor the client, wherever a
guard redacts or blocks; the SDK's client."""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import SpanKind

from mcp_hub.config import load_config
from tests.conftest import hub_client, running_hub, script_server, write_config
from tests.harness.telemetry import finished, observed
from tests.servers.leaky import DATA

pytestmark = pytest.mark.anyio

LEAKY = str(Path(__file__).parent / "servers" / "leaky.py")
KEY = DATA["aws"]
OTHER_KEY = "AKIAI44QH8DHBEXAMPLE"  # AWS's other documented example key
MARKER = "[REDACTED:aws_access_key]"
ERAS = ["legacy", "2026-07-28"]


class Places:
    """A hub mounting the leaky server as `leaky`, with the given guards; where the secret must not be."""

    def __init__(self, tmp_path: Path, guards: str, upstream: str = "auto", **hub: Any) -> None:
        policies = tmp_path / "policies"
        policies.mkdir()
        policy = '[principals]\nstdio = "agent"\n\n[profiles.agent]\ndefault = "allow"\n\n' + textwrap.dedent(guards)
        (policies / "policy.toml").write_text(policy, encoding="utf-8")
        self.record = tmp_path / "received.jsonl"
        self.audit = tmp_path / "audit.jsonl"
        server = script_server(LEAKY)
        server["env"] = {"LEAKY_RECORD": str(self.record)}
        server["protocol"] = upstream  # the era the hub speaks to the server
        self.config = write_config(tmp_path / "hub.toml", {"leaky": server}, **hub)
        with self.config.open("a", encoding="utf-8") as file:
            file.write('\n[policy]\ndir = "policies"\nreload = false\n\n[audit]\nfile = "audit.jsonl"\n')

    def received(self, method: str | None = None) -> list[Any]:
        """What reached the server (of one method)."""
        if not self.record.exists():
            return []
        lines = [json.loads(line) for line in self.record.read_text(encoding="utf-8").splitlines()]
        return [line["received"] for line in lines if method is None or line["method"] == method]

    def audit_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.read_text(encoding="utf-8").splitlines()]

    def assert_kept_from_server_and_audit(self, *secrets: str) -> None:
        """No byte of any secret reached the server, nor the audit log."""
        for secret in secrets:
            for path in (self.record, self.audit):
                text = path.read_text(encoding="utf-8") if path.exists() else ""
                assert secret not in text, path.name


def guard(action: str, on: str, detect: str = '["secrets"]') -> str:
    return f'[[profiles.agent.guards]]\nid = "{action}-{on}"\ndetect = {detect}\naction = "{action}"\non = "{on}"\n'


def text_of(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


# -- object keys -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_a_secret_as_an_object_key_is_redacted_and_no_value_is_lost(tmp_path: Path, mode: str) -> None:
    """Two keys that redact to the same marker keep both values: the second is numbered `#2`."""
    places = Places(tmp_path, guard("redact", "arguments"))
    arguments = {"text": "hi", "labels": {KEY: 1, OTHER_KEY: 2, "plain": 3}}
    async with running_hub(load_config(places.config)) as hub, hub_client(hub, mode) as client:
        result = await client.call_tool("leaky_echo", arguments)
    redacted = {"text": "hi", "labels": {MARKER: 1, f"{MARKER}#2": 2, "plain": 3}}
    assert text_of(result) == f"received {json.dumps(redacted)}"
    (sent,) = [r for r in places.received("tools/call") if r["name"] == "echo"]
    assert sent["arguments"] == redacted
    call = next(line for line in places.audit_lines() if line["arguments"] is not None)
    assert call["arguments"] == redacted
    reasons = [line["reason"] for line in places.audit_lines() if line["rule"] == "redact-arguments"]
    assert reasons == ["secrets found aws_access_key x2 in the arguments"]
    places.assert_kept_from_server_and_audit(KEY, OTHER_KEY)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_secret_as_an_object_key_is_blocked(tmp_path: Path, mode: str) -> None:
    places = Places(tmp_path, guard("block", "arguments"))
    async with running_hub(load_config(places.config)) as hub, hub_client(hub, mode) as client:
        result = await client.call_tool("leaky_echo", {"text": "hi", "labels": {KEY: 1}})
    assert result.is_error is True
    assert text_of(result) == "Blocked by guard block-arguments: the arguments held aws_access_key"
    assert [r for r in places.received("tools/call") if r["name"] == "echo"] == []
    assert {line["outcome"] for line in places.audit_lines()} == {"blocked"}
    places.assert_kept_from_server_and_audit(KEY)


# -- resource URIs ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("action", ["block", "redact"])
async def test_a_read_whose_uri_holds_a_secret_is_refused(tmp_path: Path, mode: str, action: str) -> None:
    """A template's expansion with a secret in it: the read is refused under a guard that blocks or redacts (a
    redacted URI would name another resource), and the audit line names the URI redacted."""
    places = Places(tmp_path, guard(action, "arguments"))
    async with running_hub(load_config(places.config)) as hub, hub_client(hub, mode) as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource(f"leaky+leaky://notes/{KEY}")
        plain = await client.read_resource("leaky+leaky://notes/groceries")
    note = "" if action == "block" else " (a URI is not redacted: it would name another resource)"
    assert refused.value.error.code == types.INVALID_PARAMS
    assert refused.value.message == f"Blocked by guard {action}-arguments: the resource URI held aws_access_key{note}"
    assert plain.contents[0].text == "a note"  # type: ignore[union-attr]
    assert [r["uri"] for r in places.received("resources/read")] == ["leaky://notes/groceries"]
    lines = places.audit_lines()
    assert [(line["name"], line["outcome"], line["reason"]) for line in lines if line["outcome"] != "allowed"] == [
        (f"leaky://notes/{MARKER}", "blocked", "secrets found aws_access_key x1 in the resource URI"),
        (f"leaky://notes/{MARKER}", "blocked", refused.value.message),
    ]
    places.assert_kept_from_server_and_audit(KEY)


@pytest.mark.parametrize("action", ["block", "redact"])
async def test_a_subscription_whose_uri_holds_a_secret_is_refused(tmp_path: Path, action: str) -> None:
    """A handshake-era client's `resources/subscribe`, to a handshake-era server (which is sent the same)."""
    places = Places(tmp_path, guard(action, "arguments"), "legacy")

    async def subscribe(client: Any, uri: str) -> None:
        request = types.Request[dict[str, Any], str](method="resources/subscribe", params={"uri": uri})
        await client.session.send_request(request, types.EmptyResult)

    async with running_hub(load_config(places.config)) as hub, hub_client(hub) as client:
        with pytest.raises(MCPError) as refused:
            await subscribe(client, f"leaky+leaky://notes/{KEY}")
        await subscribe(client, "leaky+leaky://notes/groceries")
    assert refused.value.message.startswith(
        f"Blocked by guard {action}-arguments: the resource URI held aws_access_key"
    )
    assert [r["uri"] for r in places.received("resources/subscribe")] == ["leaky://notes/groceries"]
    assert [(line["method"], line["name"], line["outcome"]) for line in places.audit_lines()] == [
        ("resources/subscribe", f"leaky://notes/{MARKER}", "blocked")
    ]
    places.assert_kept_from_server_and_audit(KEY)


async def test_a_listen_filters_uri_holding_a_secret_is_left_out(tmp_path: Path) -> None:
    """A 2026-07-28 client's `subscriptions/listen`: a URI a guard refuses is left out of the honored filter."""
    places = Places(tmp_path, guard("block", "arguments"), "legacy")
    wanted = [f"leaky+leaky://notes/{KEY}", "leaky+leaky://notes/groceries"]
    async with (
        running_hub(load_config(places.config)) as hub,
        hub_client(hub, "2026-07-28") as client,
        client.listen(resource_subscriptions=wanted) as subscription,
    ):
        assert subscription.honored.resource_subscriptions == ["leaky+leaky://notes/groceries"]
    assert [r["uri"] for r in places.received("resources/subscribe")] == ["leaky://notes/groceries"]
    places.assert_kept_from_server_and_audit(KEY)


async def test_a_flagged_uri_is_read_and_audited_redacted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Under a guard that only flags, the read goes on; the audit line, the access log, the spans (the hub's and
    that of its request to the server) show the URI redacted all the same."""
    caplog.set_level(logging.INFO, logger="mcp_hub.access")
    places = Places(tmp_path, guard("flag", "arguments"), access_log=True)
    async with observed(load_config(places.config)) as (hub, spans, _), hub_client(hub) as client:
        read = await client.read_resource(f"leaky+leaky://notes/{KEY}")
        with pytest.raises(MCPError) as missing:  # the server's error quotes the URI
            await client.read_resource(f"leaky+leaky://missing/{KEY}")
        exported = finished(hub, spans)
    assert read.contents[0].text == "a note"  # type: ignore[union-attr]
    assert KEY in missing.value.message  # (the client's own URI, as the server says it)
    assert [line["name"] for line in places.audit_lines()] == [f"leaky://notes/{MARKER}"] * 2 + [
        f"leaky://missing/{MARKER}"
    ] * 2
    assert places.audit_lines()[-1]["reason"] == f"no such resource: leaky://missing/{MARKER}"
    assert KEY not in places.audit.read_text(encoding="utf-8")
    span = next(s for s in exported if s.kind == SpanKind.SERVER and s.name == "resources/read")
    assert span.attributes is not None
    assert span.attributes["mcp.resource.uri"] == f"leaky+leaky://notes/{MARKER}"
    assert span.attributes["mcp_hub.native_name"] == f"leaky://notes/{MARKER}"
    assert [(s.name, s.kind, k) for s in exported for k, v in (s.attributes or {}).items() if KEY in str(v)] == []
    assert [(s.name, s.kind) for s in exported if KEY in str(s.status.description)] == []
    assert sum(s.status.description is not None and MARKER in s.status.description for s in exported) == 2
    access = [r.getMessage() for r in caplog.records if r.name == "mcp_hub.access" and "resources/read" in r.msg]
    assert len(access) == 2 and f"name=leaky+leaky://notes/{MARKER} " in access[0]
    assert all(KEY not in line for line in access)


# -- prompt and completion arguments ------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_prompt_arguments_are_guarded(tmp_path: Path, mode: str) -> None:
    places = Places(tmp_path, guard("redact", "arguments") + guard("block", "arguments", '["email"]'))
    async with running_hub(load_config(places.config)) as hub, hub_client(hub, mode) as client:
        await client.get_prompt("leaky_greet", {"name": f"key {KEY}"})
        with pytest.raises(MCPError) as blocked:
            await client.get_prompt("leaky_greet", {"name": DATA["email"]})
    assert [r["arguments"] for r in places.received("prompts/get")] == [{"name": f"key {MARKER}"}]
    assert blocked.value.message == "Blocked by guard block-arguments: the arguments held email"
    places.assert_kept_from_server_and_audit(KEY, DATA["email"])


@pytest.mark.parametrize("mode", ERAS)
async def test_completion_arguments_are_guarded(tmp_path: Path, mode: str) -> None:
    """The value completed and the context's arguments, of a prompt and of a resource template."""
    places = Places(tmp_path, guard("redact", "arguments") + guard("block", "arguments", '["email"]'))
    prompt = types.PromptReference(type="ref/prompt", name="leaky_greet")
    template = types.ResourceTemplateReference(type="ref/resource", uri="leaky+leaky://notes/{name}")
    async with running_hub(load_config(places.config)) as hub, hub_client(hub, mode) as client:
        done = await client.complete(prompt, {"name": "name", "value": f"AK {KEY}"}, {"other": KEY})
        await client.complete(template, {"name": "name", "value": KEY})
        with pytest.raises(MCPError) as blocked:
            await client.complete(prompt, {"name": "name", "value": "a"}, {"other": DATA["email"]})
    assert done.completion.values == ["one", "two"]
    received = places.received("completion/complete")
    assert [(r["argument"], r.get("context")) for r in received] == [
        ({"name": "name", "value": f"AK {MARKER}"}, {"arguments": {"other": MARKER}}),
        ({"name": "name", "value": MARKER}, None),
    ]
    assert received[1]["ref"]["uri"] == "leaky://notes/{name}"
    assert blocked.value.message == "Blocked by guard block-arguments: the arguments held email"
    lines = places.audit_lines()
    assert [(line["method"], line["name"], line["outcome"], line["reason"]) for line in lines] == [
        ("completion/complete", "greet", "redacted", "secrets found aws_access_key x2 in the arguments"),
        ("completion/complete", "leaky://notes/{name}", "redacted", "secrets found aws_access_key x1 in the arguments"),
        ("completion/complete", "greet", "blocked", "email found email x1 in the arguments"),
    ]
    places.assert_kept_from_server_and_audit(KEY, DATA["email"])


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("action", ["redact", "block"])
async def test_the_values_a_completion_suggests_are_guarded(tmp_path: Path, mode: str, action: str) -> None:
    places = Places(tmp_path, guard(action, "results"))
    prompt = types.PromptReference(type="ref/prompt", name="leaky_greet")
    async with running_hub(load_config(places.config)) as hub, hub_client(hub, mode) as client:
        plain = await client.complete(prompt, {"name": "name", "value": "o"})
        if action == "redact":
            done = await client.complete(prompt, {"name": "name", "value": "aws"})
            assert done.completion.values == [MARKER]
        else:
            with pytest.raises(MCPError) as blocked:
                await client.complete(prompt, {"name": "name", "value": "aws"})
            assert blocked.value.message == "Blocked by guard block-results: the result held aws_access_key"
    assert plain.completion.values == ["one", "two"]
    reasons = [(line["method"], line["reason"]) for line in places.audit_lines()]
    assert reasons == [("completion/complete", "secrets found aws_access_key x1 in the results")]
    places.assert_kept_from_server_and_audit(KEY)


# -- a server's questions and the client's answers -------------------------------------------


class Person:
    """The client's side: answers every elicitation with `answer`, every sampling request with `answer` too,
    and notes what it was asked."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": self.answer})

    async def sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        self.asked.append(params.messages[0].content.text)  # type: ignore[union-attr]
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=self.answer), model="person"
        )


UPSTREAMS = ["auto", "legacy"]
"""The era the hub speaks to the server: a 2026-07-28 server asks in `input_required` rounds (the hub asks a
handshake-era client itself), a handshake-era one with requests mid-call."""


async def ask(places: Places, mode: str, person: Person, tool: str, question: str) -> str:
    """What the call answered: its text, a tool error's text, or a JSON-RPC error's message."""
    async with (
        running_hub(load_config(places.config)) as hub,
        hub_client(hub, mode, elicitation_callback=person.elicitation, sampling_callback=person.sampling) as client,
    ):
        field = "question" if tool == "ask" else "prompt"
        try:
            result = await client.call_tool(f"leaky_{tool}", {field: question})
        except MCPError as exc:
            return f"error: {exc.message}"
    return ("tool error: " if result.is_error else "") + text_of(result)


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("tool", ["ask", "sample"])
async def test_an_answer_to_a_servers_question_is_redacted(tmp_path: Path, mode: str, upstream: str, tool: str) -> None:
    places = Places(tmp_path, guard("redact", "arguments"), upstream)
    person = Person(f"mine is {KEY}")
    answered = await ask(places, mode, person, tool, "Your key?")
    method = "elicitation/create" if tool == "ask" else "sampling/createMessage"
    (answer,) = places.received(f"answer to {method}")
    if tool == "ask":
        assert answer == {"action": "accept", "content": {"answer": f"mine is {MARKER}"}}
    else:
        assert answer["content"] == {"type": "text", "text": f"mine is {MARKER}"}
    assert answered.startswith("answered {") and KEY not in answered
    assert person.asked == ["Your key?"]
    reasons = [line["reason"] for line in places.audit_lines() if line["rule"] == "redact-arguments"]
    assert len(reasons) == 1 and reasons[0].startswith("secrets found aws_access_key x1 in the answer")
    places.assert_kept_from_server_and_audit(KEY)


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("mode", ERAS)
async def test_an_answer_to_a_servers_question_is_blocked(tmp_path: Path, mode: str, upstream: str) -> None:
    """The server gets the guard's error in place of the answer (a handshake-era server, mid-call), or the call
    ends with it (a 2026-07-28 server's question the hub asked a handshake-era client), or the retry that carries
    the answer is blocked as a call's arguments are (a 2026-07-28 client)."""
    places = Places(tmp_path, guard("block", "arguments"), upstream)
    answered = await ask(places, mode, Person(f"mine is {KEY}"), "ask", "Your key?")
    assert places.received("answer to elicitation/create") == []
    assert "Blocked by guard block-arguments: the answer" in answered and "held aws_access_key" in answered
    assert KEY not in answered
    assert "blocked" in {line["outcome"] for line in places.audit_lines()}
    places.assert_kept_from_server_and_audit(KEY)


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("tool", ["ask", "sample"])
async def test_a_servers_question_is_redacted_on_its_way_to_the_client(
    tmp_path: Path, mode: str, upstream: str, tool: str
) -> None:
    """An elicitation's message, a sampling request's messages: guarded as results, on their way to the person
    or the model (a 2026-07-28 server's question reaching a 2026-07-28 client is in the call's result)."""
    places = Places(tmp_path, guard("redact", "results"), upstream)
    person = Person("no")
    answered = await ask(places, mode, person, tool, f"Shall I use {KEY}?")
    assert person.asked == [f"Shall I use {MARKER}?"]
    assert answered.startswith("answered {")
    method = "elicitation/create" if tool == "ask" else "sampling/createMessage"
    where = "results" if (mode, upstream) == ("2026-07-28", "auto") else f"{method} question"
    reasons = [line["reason"] for line in places.audit_lines() if line["rule"] == "redact-results"]
    assert reasons == [f"secrets found aws_access_key x1 in the {where}"]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_servers_roots_question_and_the_clients_answer_pass_the_guards_as_they_are(
    tmp_path: Path, mode: str
) -> None:
    """`roots/list` is not guarded (the client's folders, which the mount's `roots` governs): its answer reaches a
    handshake-era server as the client gave it, where an elicitation's answer with the same text is redacted."""
    places = Places(tmp_path, guard("redact", "arguments"), "legacy")
    root = {"uri": "file:///home/ada/keys", "name": f"where {KEY} is kept"}

    async def roots(context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root.model_validate(root)])

    async with (
        running_hub(load_config(places.config)) as hub,
        hub_client(hub, mode, list_roots_callback=roots) as client,
    ):
        result = await client.call_tool("leaky_roots", {})
    assert result.is_error is not True and KEY in text_of(result)
    assert places.received("answer to roots/list") == [{"roots": [root]}]
    assert not [line for line in places.audit_lines() if line["rule"] == "redact-arguments"]


@pytest.mark.slow
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("mode", ERAS)
async def test_a_servers_question_is_blocked_on_its_way_to_the_client(tmp_path: Path, mode: str, upstream: str) -> None:
    places = Places(tmp_path, guard("block", "results"), upstream)
    person = Person("no")
    answered = await ask(places, mode, person, "ask", f"Shall I use {KEY}?")
    assert person.asked == []
    assert "Blocked by guard block-results: the" in answered and KEY not in answered
    assert "blocked" in {line["outcome"] for line in places.audit_lines()}
