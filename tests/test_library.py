"""The hub as a library (mcp_hub/library/): HubClient in front of a real hub with real servers (the
fixture server and PyPI's mcp-server-time as stdio children), its tools in each provider's format, a
provider-shaped tool call made through the hub's policy and audit, and an agent loop driven by the
`openai` SDK against a scripted OpenAI-compatible model served on loopback (no provider is called)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.types import ToolParam, ToolResultBlockParam
from google.genai import types as genai
from mcp import types
from mcp.shared.exceptions import MCPError
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionToolMessageParam, ChatCompletionToolParam
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_hub.config import load_config
from mcp_hub.hub import Hub
from mcp_hub.library import HubClient
from mcp_hub.providers import openai
from mcp_hub.server.http import build_app
from tests.conftest import EVERYTHING, fixture_server, module_server, serve_app, wait_for, write_config
from tests.harness.cli import mcp_hub

pytestmark = pytest.mark.anyio

POLICY = """
[principals]
stdio = "developer"
ci-bot = "developer"

[profiles.developer]
default = "deny"
[[profiles.developer.rules]]
id = "clock"
effect = "allow"
tools = ["time/*", "srv/echo"]
[[profiles.developer.rules]]
id = "files"
effect = "allow"
tools = ["srv/read_file"]
[profiles.developer.rules.arguments.path]
path_within = ["{root}"]
"""


def setup(tmp_path: Path) -> tuple[Path, Path]:
    """A hub.toml mounting the fixture server and mcp-server-time, with a policy and an audit file."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "hub.toml").write_text(
        textwrap.dedent(POLICY).replace("{root}", str(tmp_path / "docs")), encoding="utf-8"
    )
    time_server = module_server("mcp_server_time", "--local-timezone", "UTC")
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv"), "time": time_server})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n\n[audit]\nfile = "audit.jsonl"\n')
    return config, tmp_path / "audit.jsonl"


def audit_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


TIME_CALL = {"timezone": "Asia/Tokyo"}


@pytest.mark.slow
async def test_provider_calls_go_through_the_hubs_policy_and_audit(tmp_path: Path) -> None:
    config, audit = setup(tmp_path)
    outside = str(tmp_path / "secret.txt")
    with anyio.fail_after(60):
        async with HubClient.from_config(config) as hub:
            names = {tool.name for tool in await hub.tools()}
            assert {"time_get_current_time", "time_convert_time", "srv_echo", "srv_read_file"} == names

            chat = await hub.definitions("openai")
            for entry in chat:
                TypeAdapter(ChatCompletionToolParam).validate_python(entry, strict=True)
            for entry in await hub.definitions("anthropic"):
                TypeAdapter(ToolParam).validate_python(entry, strict=True)
            genai.Tool.model_validate((await hub.definitions("gemini"))[0])

            arguments = json.dumps(TIME_CALL)
            message = await hub.answer(
                "openai",
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "time_get_current_time", "arguments": arguments},
                },
            )
            TypeAdapter(ChatCompletionToolMessageParam).validate_python(message, strict=True)
            assert message["tool_call_id"] == "call_1" and '"timezone": "Asia/Tokyo"' in message["content"]

            flat = await hub.answer(
                "openai-responses",
                {"type": "function_call", "call_id": "fc_1", "name": "srv_echo", "arguments": '{"text": "hi"}'},
            )
            assert flat == {
                "type": "function_call_output",
                "call_id": "fc_1",
                "output": 'srv: hi\n{"text": "hi", "server": "srv"}',
            }

            block = await hub.answer(
                "anthropic", {"type": "tool_use", "id": "toolu_1", "name": "time_get_current_time", "input": TIME_CALL}
            )
            TypeAdapter(ToolResultBlockParam).validate_python(block, strict=True)
            assert "is_error" not in block and "Asia/Tokyo" in block["content"][0]["text"]

            part = await hub.answer("gemini", genai.FunctionCall(name="time_get_current_time", args=TIME_CALL, id="g1"))
            genai.Part.model_validate(part)
            response = part["functionResponse"]
            assert response["name"] == "time_get_current_time" and response["id"] == "g1"
            assert response["response"]["output"]["timezone"] == "Asia/Tokyo"  # structured content, as JSON

            # the policy refuses an argument: an error result the model reads, in each provider's shape
            refused = await hub.answer(
                "anthropic", {"type": "tool_use", "id": "toolu_2", "name": "srv_read_file", "input": {"path": outside}}
            )
            assert refused["is_error"] is True and "files" in refused["content"][0]["text"]
            denied = await hub.answer("gemini", {"name": "srv_read_file", "args": {"path": outside}})
            assert "error" in denied["functionResponse"]["response"]
            # a tool the policy hides is unknown, as over the wire
            hidden = await hub.answer(
                "openai", {"id": "call_2", "type": "function", "function": {"name": "srv_crash", "arguments": "{}"}}
            )
            assert hidden["content"] == f"{openai.ERROR_MARK}Unknown tool: srv_crash"
            broken = await hub.answer(
                "openai", {"id": "call_3", "type": "function", "function": {"name": "srv_echo", "arguments": "{"}}
            )
            assert broken["content"].startswith(f"{openai.ERROR_MARK}the arguments of srv_echo are not valid JSON")

    lines = audit_lines(audit)
    calls = [(line["principal"], line["name"], line["outcome"]) for line in lines if line["method"] == "tools/call"]
    assert calls.count(("stdio", "get_current_time", "allowed")) == 3
    assert ("stdio", "echo", "allowed") in calls
    assert [c for c in calls if c[1] == "read_file" and c[2] != "allowed"] and len(
        [c for c in calls if c[1] == "read_file"]
    ) == 2


@pytest.mark.slow
async def test_a_served_hub_by_url_as_the_principal_of_its_api_key(tmp_path: Path) -> None:
    config_path, audit = setup(tmp_path)
    with config_path.open("a", encoding="utf-8") as file:
        file.write('\n[auth]\napi_keys = { ci-bot = "${CI_KEY}" }\n')
    config = load_config(config_path, environ={"CI_KEY": "c" * 32})
    with anyio.fail_after(60):
        async with Hub(config).running() as served:
            app = build_app(
                served.endpoint.server,
                host="127.0.0.1",
                path="/mcp",
                health=served.health,
                api_keys=config.auth.api_keys,
            )
            async with serve_app(app) as base, HubClient.connect(f"{base}/mcp", api_key="c" * 32) as hub:
                assert "time_get_current_time" in {t["function"]["name"] for t in await hub.definitions("openai")}
                block = await hub.answer(
                    "anthropic", {"type": "tool_use", "id": "t1", "name": "time_get_current_time", "input": TIME_CALL}
                )
                assert "Asia/Tokyo" in block["content"][0]["text"]

            async def audited() -> bool:
                return any(line["principal"] == "ci-bot" for line in audit_lines(audit))

            await wait_for(audited)


def scripted_model(seen: list[dict[str, Any]]) -> Starlette:
    """An OpenAI-compatible chat completions endpoint that asks for one tool call, then answers with what
    the tool said: a stand-in for a model, speaking OpenAI's wire format."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
        if tool_messages:
            message: dict[str, Any] = {"role": "assistant", "content": f"The tool said: {tool_messages[-1]['content']}"}
            finish = "stop"
        else:
            tool = next(t for t in body["tools"] if t["function"]["name"] == "time_get_current_time")
            call = {"name": tool["function"]["name"], "arguments": json.dumps(TIME_CALL)}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_9", "type": "function", "function": call}],
            }
            finish = "tool_calls"
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            }
        )

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


async def test_an_agent_loop_against_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    """The README's loop, as written there, against a scripted model."""
    config, audit = setup(tmp_path)
    seen: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        async with serve_app(scripted_model(seen)) as base, HubClient.from_config(config) as hub:
            model = AsyncOpenAI(base_url=f"{base}/v1", api_key="unused")
            messages: list[Any] = [{"role": "user", "content": "What time is it in Tokyo?"}]
            tools = await hub.definitions("openai")
            while True:
                reply = (
                    (await model.chat.completions.create(model="local", messages=messages, tools=tools))
                    .choices[0]
                    .message
                )
                messages.append(reply.model_dump(exclude_none=True))
                if not reply.tool_calls:
                    break
                for call in reply.tool_calls:
                    messages.append(await hub.answer("openai", call))
            await model.close()
    assert len(seen) == 2 and seen[1]["messages"][-1]["role"] == "tool"
    assert reply.content is not None and '"timezone": "Asia/Tokyo"' in reply.content
    assert [line["name"] for line in audit_lines(audit) if line["method"] == "tools/call"] == ["get_current_time"]


CLOCK_ONLY = """
[profiles.clock]
default = "deny"
[[profiles.clock.rules]]
id = "t"
effect = "allow"
tools = ["time/*"]
"""


@pytest.mark.slow
def test_tools_format_exports_what_a_principal_may_see(tmp_path: Path) -> None:
    """`mcp-hub tools --format`: the catalog a principal may see as a provider's tool definitions."""
    config, _ = setup(tmp_path)
    (tmp_path / "policies" / "hub.toml").write_text(
        textwrap.dedent(POLICY).replace('ci-bot = "developer"', 'ci-bot = "clock"').replace("{root}", str(tmp_path))
        + CLOCK_ONLY,
        encoding="utf-8",
    )
    result = mcp_hub("tools", "--config", str(config), "--format", "anthropic", "--principal", "ci-bot")
    assert result.returncode == 0, result.stderr
    exported = json.loads(result.stdout)
    assert [tool["name"] for tool in exported] == ["time_get_current_time", "time_convert_time"]
    for tool in exported:
        TypeAdapter(ToolParam).validate_python(tool, strict=True)
    result = mcp_hub("tools", "--config", str(config), "--format", "gemini")  # the local user: "stdio"
    assert result.returncode == 0, result.stderr
    (tool,) = json.loads(result.stdout)
    names = {declaration["name"] for declaration in tool["function_declarations"]}
    assert names == {"time_get_current_time", "time_convert_time", "srv_echo", "srv_read_file"}


CONFIRMING = """
[principals]
stdio = "agent"

[profiles.agent]
default = "allow"
[[profiles.agent.rules]]
id = "destructive"
effect = "confirm"
tools = ["srv/delete_*"]
reason = "destructive"

[confirmation]
timeout = 5
when_unsupported = "deny"
"""


@pytest.mark.slow
async def test_images_structured_content_and_confirmation_from_real_servers(tmp_path: Path) -> None:
    """npm's server-everything (its image, its structured content, its tools' schemas) and the fixture
    server's confirmed tool, through HubClient in each provider's shape."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "hub.toml").write_text(CONFIRMING, encoding="utf-8")
    servers = {"everything": {"command": str(EVERYTHING), "args": ["stdio"]}, "srv": fixture_server("srv")}
    config = write_config(tmp_path / "hub.toml", servers)
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n')
    asked: list[str] = []

    async def confirm(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    with anyio.fail_after(60):
        async with HubClient.from_config(config, elicitation_callback=confirm) as hub:
            for entry in await hub.definitions("openai"):
                TypeAdapter(ChatCompletionToolParam).validate_python(entry, strict=True)
            for entry in await hub.definitions("anthropic"):
                TypeAdapter(ToolParam).validate_python(entry, strict=True)
            (gemini_tools,) = await hub.definitions("gemini")
            genai.Tool.model_validate(gemini_tools)

            image = {"type": "tool_use", "id": "t1", "name": "everything_get-tiny-image", "input": {}}
            block = await hub.answer("anthropic", image)
            TypeAdapter(ToolResultBlockParam).validate_python(block, strict=True)
            (picture,) = [part for part in block["content"] if part["type"] == "image"]
            assert picture["source"]["media_type"] == "image/png" and picture["source"]["data"]
            message = await hub.answer(
                "openai",
                {"id": "c1", "type": "function", "function": {"name": "everything_get-tiny-image", "arguments": "{}"}},
            )
            assert "[image (image/png), not shown]" in message["content"]

            weather = {"name": "everything_get-structured-content", "args": {"location": "Chicago"}}
            part = await hub.answer("gemini", weather)
            assert isinstance(part["functionResponse"]["response"]["output"], dict)

            deleted = await hub.answer(
                "anthropic", {"type": "tool_use", "id": "t2", "name": "srv_delete_note", "input": {"key": "k"}}
            )
            assert deleted["content"] == [{"type": "text", "text": "deleted k"}] and len(asked) == 1


@pytest.mark.slow
async def test_an_in_process_hub_as_a_named_principal(tmp_path: Path) -> None:
    """`from_config(..., principal=P)`: P's tools only, P's calls audited as P's; a tool P may not see is unknown."""
    config, audit = setup(tmp_path)
    (tmp_path / "policies" / "hub.toml").write_text(
        textwrap.dedent(POLICY).replace('ci-bot = "developer"', 'ci-bot = "clock"').replace("{root}", str(tmp_path))
        + CLOCK_ONLY,
        encoding="utf-8",
    )
    # the hub's error leaves the block as itself, not wrapped in the hub's task groups' exception groups
    with anyio.fail_after(60), pytest.raises(MCPError, match="Unknown tool: srv_echo"):
        async with HubClient.from_config(config, principal="ci-bot") as hub:
            assert {tool.name for tool in await hub.tools()} == {"time_get_current_time", "time_convert_time"}
            block = await hub.answer(
                "anthropic", {"type": "tool_use", "id": "t1", "name": "time_get_current_time", "input": TIME_CALL}
            )
            assert "Asia/Tokyo" in block["content"][0]["text"]
            await hub.call("srv_echo", {"text": "hi"})  # hidden from ci-bot: unknown
    calls = [(line["principal"], line["name"]) for line in audit_lines(audit) if line["method"] == "tools/call"]
    assert ("ci-bot", "get_current_time") in calls and all(principal == "ci-bot" for principal, _ in calls)
