"""Step-up: an OAuth caller whose token lacks a scope a policy rule asks for the item it calls is answered
HTTP 403 `insufficient_scope`, with the scopes to ask for in the challenge (RFC 6750 §3.1, MCP authorization's
scope challenge), so that its client gets a token that has them; without that rule's scope, the item stays
hidden as before. A real hub over HTTP, a real issuer (tests/servers/authorization.py), the fixture server."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.config import load_config
from mcp_hub.policy import parse_policies
from mcp_hub.policy.principal import Principal, groups_of, scopes_of
from mcp_hub.server.http import build_app
from tests.conftest import fixture_server, free_port, running_hub, serve_app, write_config
from tests.harness.oauth import ACCEPT, POLICY, challenge_of
from tests.servers.authorization import AuthorizationServer

pytestmark = pytest.mark.anyio

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "srv_delete_note", "arguments": {}}}
KEY = "k" * 32


@asynccontextmanager
async def step_up_hub(tmp_path: Path) -> AsyncIterator[tuple[AuthorizationServer, str, str]]:
    issuer_port, hub_port = free_port(), free_port()
    issuer = AuthorizationServer(f"http://127.0.0.1:{issuer_port}")
    resource = f"http://127.0.0.1:{hub_port}/mcp"
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "hub.toml").write_text(textwrap.dedent(POLICY), encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n')
        file.write(f'\n[auth]\napi_keys = {{ carol = "{KEY}" }}\n')
        file.write(f'[auth.oauth]\nissuer = "{issuer.issuer}"\nresource = "{resource}"\nscopes_required = ["mcp"]\n')
    loaded = load_config(config)
    async with serve_app(issuer.app(), issuer_port), running_hub(loaded) as hub:
        app = build_app(
            hub.endpoint.server,
            host="127.0.0.1",
            path="/mcp",
            health=hub.health,
            api_keys=loaded.auth.api_keys,
            oauth=loaded.auth.oauth,
            step_up=hub.scopes_wanted,
        )
        async with serve_app(app, hub_port) as base:
            yield issuer, resource, base


async def _post(base: str, credential: str, body: Any, **headers: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        sent = {**ACCEPT, "Authorization": f"Bearer {credential}", **headers}
        return await http.post(f"{base}/mcp", json=body, headers=sent)


@pytest.mark.slow
async def test_a_token_without_a_rules_scope_is_asked_for_it(tmp_path: Path) -> None:
    async with step_up_hub(tmp_path) as (issuer, resource, base):
        operator = issuer.mint(resource, sub="dave", scope="mcp hub:admin")
        refused = await _post(base, operator, CALL)  # a handshake-era request: the body names the tool
        modern = await _post(
            base,
            operator,
            CALL,
            **{"Mcp-Method": "tools/call", "Mcp-Name": "srv_delete_note", "MCP-Protocol-Version": "2026-07-28"},
        )
        writer = await _post(base, issuer.mint(resource, sub="dave", scope="mcp hub:admin notes:write"), CALL)
        other_tool = await _post(base, operator, {**CALL, "params": {"name": "srv_echo", "arguments": {"text": "x"}}})
        reader = await _post(base, issuer.mint(resource, sub="dave", scope="mcp hub:read"), CALL)
        by_key = await _post(base, KEY, CALL)
    for response in (refused, modern):
        assert response.status_code == 403, response.text
        challenge = challenge_of(response)
        assert challenge["error"] == "insufficient_scope"
        assert set(challenge["scope"].split()) == {"mcp", "hub:admin", "notes:write"}
        assert "resource_metadata" in challenge
    assert writer.status_code != 403
    assert other_tool.status_code != 403
    assert reader.status_code == 403  # hub:admin selects the operator profile, whose rule then needs notes:write
    assert set(challenge_of(reader)["scope"].split()) == {"mcp", "hub:read", "hub:admin", "notes:write"}
    assert by_key.status_code != 403  # an API key carries no scopes to ask for


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_requests_read_for_the_check_reach_the_hub_whole(tmp_path: Path, mode: str) -> None:
    async with step_up_hub(tmp_path) as (issuer, resource, base):
        token = issuer.mint(resource, sub="dave", scope="mcp hub:admin notes:write")
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode, cache=None) as client,
        ):
            result = await client.call_tool("srv_echo", {"text": "whole"})
            assert not result.is_error and "whole" in str(result.content)
            assert "srv_delete_note" in {tool.name for tool in (await client.list_tools()).tools}


def _call(tool: str) -> dict[str, Any]:
    return {**CALL, "params": {"name": tool, "arguments": {}}}


@pytest.mark.slow
async def test_a_token_whose_scopes_select_a_profile_without_the_tool_is_asked_for_the_one_that_has_it(
    tmp_path: Path,
) -> None:
    """dave's token carries hub:read, which selects the reader profile: srv_pid is hidden from it. A token with
    hub:admin would select the operator profile, which allows it: the call is answered 403 insufficient_scope,
    naming hub:admin (with the scopes the token has, as a step-up asks), not as a tool that does not exist."""
    async with step_up_hub(tmp_path) as (issuer, resource, base):
        reader = issuer.mint(resource, sub="dave", scope="mcp hub:read")
        handshake = await _post(base, reader, _call("srv_pid"))
        modern = await _post(
            base,
            reader,
            _call("srv_pid"),
            **{"Mcp-Method": "tools/call", "Mcp-Name": "srv_pid", "MCP-Protocol-Version": "2026-07-28"},
        )
        operator = issuer.mint(resource, sub="dave", scope="mcp hub:read hub:admin")
        stepped_up = await _post(base, operator, _call("srv_pid"))
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {operator}"}, timeout=30) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), cache=None) as client,
        ):
            assert not (await client.call_tool("srv_pid", {})).is_error  # the scope named does let dave call it
        nobody_has_it = await _post(base, reader, _call("srv_touch"))
        named = await _post(base, issuer.mint(resource, sub="hub-client", scope="mcp hub:read"), _call("srv_pid"))
    for response in (handshake, modern):
        assert response.status_code == 403, response.text
        challenge = challenge_of(response)
        assert challenge["error"] == "insufficient_scope"
        assert set(challenge["scope"].split()) == {"mcp", "hub:read", "hub:admin"}
    assert stepped_up.status_code != 403
    assert nobody_has_it.status_code != 403  # no profile allows srv_touch: no scope would help
    assert named.status_code != 403  # hub-client's own [principals] entry picks its profile, whatever its scopes


STEP_UP_POLICY = """
[principals]
carol = "reader"

[scopes]
"tier:gold" = "gold"
"tier:silver" = "silver"
"tier:bronze" = "bronze"
"tier:lead" = "nobody"

[groups]
ops = "silver"

[profiles.nobody]

[profiles.bronze]
[[profiles.bronze.rules]]
id = "no-reports"
effect = "deny"
tools = ["srv/report"]

[profiles.silver]
[[profiles.silver.rules]]
id = "report"
effect = "allow"
tools = ["srv/report"]
[[profiles.silver.rules]]
id = "wipe-by-ops"
effect = "allow"
tools = ["srv/wipe"]
scopes = ["wipe"]

[profiles.gold]
[[profiles.gold.rules]]
id = "all"
effect = "allow"
tools = ["srv/report", "srv/export"]

[profiles.reader]
"""


@pytest.mark.parametrize(
    ("principal", "tool", "wanted"),
    [
        # bronze denies report (a deny rule); silver and gold allow it: asked for silver's, the nearer one
        (Principal("eve", scopes={"tier:bronze"}), "report", ("tier:silver",)),
        # no [scopes] entry held, no "*": no profile at all; of the entries that allow it, the last written
        # (entries are written strongest first: the first a token carries wins): the smallest step
        (Principal("eve", scopes={"other"}), "report", ("tier:silver",)),
        # silver by group; gold (a scope) would come first and allow export
        (Principal("eve", groups={"ops"}), "export", ("tier:gold",)),
        # silver by scope; wipe needs silver's rule's scope: asked for that, in the same profile
        (Principal("eve", scopes={"tier:silver"}), "wipe", ("wipe",)),
        # bronze; wipe: silver with its rule's scope would allow it
        (Principal("eve", scopes={"tier:bronze"}), "wipe", ("tier:silver", "wipe")),
        # gold already: silver is written after gold, so adding it changes nothing
        (Principal("eve", scopes={"tier:gold"}), "wipe", ()),
        # allowed already: nothing to ask
        (Principal("eve", scopes={"tier:silver"}), "report", ()),
        # no profile allows it
        (Principal("eve", scopes={"tier:bronze"}), "nothing", ()),
        # its own [principals] entry: scopes never change its profile
        (Principal("carol", scopes={"tier:bronze"}), "report", ()),
        # an API key's principal carries no scopes to add to
        ("eve", "report", ()),
    ],
)
def test_the_scopes_asked_for_are_those_that_would_let_the_caller_use_the_item(
    principal: str, tool: str, wanted: tuple[str, ...]
) -> None:
    policy = parse_policies({"p.toml": STEP_UP_POLICY})
    assert policy.scopes_wanted(principal, "tool", "srv", tool) == wanted
    if wanted:  # and a token with them may use it
        held = Principal("eve", scopes={*scopes_of(principal), *wanted}, groups=groups_of(principal))
        assert policy.visible(held, "tool", "srv", tool)
