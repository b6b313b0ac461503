"""Server cards (SEP-2127, draft): the hub's card at `/mcp/server-card`, each curated endpoint's at
`/mcp/NAME/server-card`, and the MCP Catalog of them at `/.well-known/mcp/catalog.json`.

The hub runs with an in-process server (the fixture over streamable HTTP), API keys and a curated endpoint, and
serves HTTP on loopback; an HTTP client reads the catalog, follows it to each card, checks each card against the
shape the draft's schema gives (required fields, patterns, lengths), and the SDK's client connects to the URL a
card names, with the header it names, and lists the tools there.
"""

from __future__ import annotations

import textwrap
import tomllib
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.cli import main
from mcp_hub.config import load_config, parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.hub import Hub
from tests.conftest import KEYS, hub_client, running_hub, serve_app, write_config
from tests.servers.skills import DATA, build_server

pytestmark = pytest.mark.anyio

CARD_SHAPE: dict[str, Any] = {
    "type": "object",
    "required": ["$schema", "name", "version", "description"],
    "properties": {
        "$schema": {"const": "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json"},
        "name": {"type": "string", "pattern": r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$", "minLength": 3, "maxLength": 200},
        "version": {"type": "string", "maxLength": 255},
        "description": {"type": "string", "minLength": 1, "maxLength": 100},
        "title": {"type": "string", "minLength": 1, "maxLength": 100},
        "remotes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "url"],
                "properties": {
                    "type": {"enum": ["streamable-http", "sse"]},
                    "url": {"type": "string", "pattern": r"^https?://[^\s]+$"},
                    "headers": {"type": "array", "items": {"type": "object", "required": ["name"]}},
                    "supportedProtocolVersions": {"type": "array", "items": {"type": "string"}},
                },
                "additionalProperties": False,
            },
        },
        "_meta": {"type": "object"},
    },
    "additionalProperties": False,
}
"""What the draft's schema (experimental-ext-server-card, schema.ts) requires of the fields the hub writes."""

HUB = """
[auth]
api_keys = { alice = "${ALICE_KEY}" }

[endpoints.docs]
servers = ["skills"]
description = "The team's skills, and nothing else"

[endpoints.ops]
"""


@pytest.mark.slow  # ~0.35 s: a hub, a server and a client over HTTP
async def test_the_catalog_leads_to_each_card_and_a_card_to_a_working_connection(tmp_path: Path) -> None:
    async with serve_app(build_server(DATA / "docs").streamable_http_app()) as upstream:
        path = write_config(tmp_path / "hub.toml", {"skills": {"url": f"{upstream}/mcp"}}, name="team hub")
        with path.open("a", encoding="utf-8") as file:
            file.write(textwrap.dedent(HUB))
        config = load_config(path, environ={"ALICE_KEY": KEYS["alice"]})
        async with running_hub(config) as hub, serve_app(hub.http_app("127.0.0.1")) as base:
            async with httpx2.AsyncClient(timeout=10) as http:  # no credentials: cards are public
                catalog = await http.get(f"{base}/.well-known/mcp/catalog.json")
                cards = {}
                for entry in catalog.json()["entries"]:
                    answer = await http.get(entry["url"], headers={"Accept": "application/mcp-server-card+json"})
                    assert answer.status_code == 200
                    assert answer.headers["content-type"] == "application/mcp-server-card+json"
                    assert answer.headers["access-control-allow-origin"] == "*"
                    assert answer.headers["cache-control"] == "public, max-age=3600"
                    cards[entry["identifier"]] = answer.json()
                unauthenticated = await http.post(f"{base}/mcp", json={})
            assert catalog.status_code == 200 and catalog.headers["access-control-allow-origin"] == "*"
            assert [(e["displayName"], e["type"], e["url"]) for e in catalog.json()["entries"]] == [
                ("team hub", "application/mcp-server-card+json", f"{base}/mcp/server-card"),
                ("team hub: docs", "application/mcp-server-card+json", f"{base}/mcp/docs/server-card"),
                ("team hub: ops", "application/mcp-server-card+json", f"{base}/mcp/ops/server-card"),
            ]
            assert list(cards) == [
                "urn:air:127.0.0.1:team-hub",
                "urn:air:127.0.0.1:team-hub-docs",
                "urn:air:127.0.0.1:team-hub-ops",
            ]
            for card in cards.values():
                jsonschema.validate(card, CARD_SHAPE)
            own, docs, ops = cards.values()
            assert own["name"] == "127.0.0.1/team-hub" and docs["name"] == "127.0.0.1/team-hub-docs"
            assert own["description"] == "One MCP endpoint in front of the MCP servers this hub mounts"
            assert docs["description"] == "The team's skills, and nothing else"
            assert ops["description"] == "Endpoint ops of team hub"
            assert [r["url"] for c in cards.values() for r in c["remotes"]] == [
                f"{base}/mcp",
                f"{base}/mcp/docs",
                f"{base}/mcp/ops",
            ]
            remote = docs["remotes"][0]
            assert remote["headers"] == [
                {"name": "X-API-Key", "description": "An API key of this hub", "isRequired": True, "isSecret": True}
            ]
            assert (
                "2025-11-25" in remote["supportedProtocolVersions"]
                and "2026-07-28" in remote["supportedProtocolVersions"]
            )
            assert "io.github.mcp-hub/experimental" in docs["_meta"]
            assert unauthenticated.status_code == 401  # the endpoint itself still wants its key
            # What a client does with a card: connect where it says, with the header it names.
            header = {remote["headers"][0]["name"]: KEYS["alice"]}
            async with httpx2.AsyncClient(headers=header, timeout=30) as http:
                transport = streamable_http_client(remote["url"], http_client=http)
                async with Client(transport, mode="2026-07-28", cache=None) as client:
                    assert [t.name for t in (await client.list_tools()).tools] == ["skills_skill_count"]


async def test_cards_are_off_with_server_cards_false(tmp_path: Path) -> None:
    path = write_config(tmp_path / "hub.toml", {})
    with path.open("a", encoding="utf-8") as file:
        file.write("\n[http]\nserver_cards = false\n")
    async with (
        running_hub(load_config(path)) as hub,
        serve_app(hub.http_app("127.0.0.1")) as base,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        card = await http.get(f"{base}/mcp/server-card")
        catalog = await http.get(f"{base}/.well-known/mcp/catalog.json")
    assert card.status_code == 404 and card.json()["error"] == "unknown_endpoint"
    assert catalog.status_code == 404


def test_card_settings_are_checked_naming_file_key_and_fix() -> None:
    cases = {
        "[endpoints.server-card]\n": ("endpoints.server-card", "where the hub's server card is served"),
        f'[hub]\ndescription = "{"x" * 101}"\n': ("hub.description", "100"),
        f'[endpoints.docs]\ndescription = "{"x" * 101}"\n': ("endpoints.docs.description", "100"),
        '[http]\nserver_cards = "yes"\n': ("http.server_cards", "remove the quotes"),
    }
    for table, (key, reason) in cases.items():
        with pytest.raises(ConfigError) as caught:
            parse_config(table, file="my-hub.toml")
        assert (caught.value.file, caught.value.key) == ("my-hub.toml", key), table
        assert reason in caught.value.reason, (table, caught.value.reason)
    assert Hub(parse_config("[endpoints.docs]\n", file="my-hub.toml"))._cards() is not None


def add(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`mcp-hub add ARGS` in this process: (exit code, stderr). Run in a thread: the CLI is synchronous."""
    with pytest.raises(SystemExit) as exit:
        main(["add", *args])
    return int(exit.value.code or 0), capsys.readouterr().err


@pytest.mark.slow  # ~0.6 s: two hubs, a server and the CLI over HTTP
async def test_add_turns_a_hubs_card_into_a_table_that_connects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mcp-hub add URL` reads the card at URL/server-card: a second hub mounts the first by its card alone."""
    async with serve_app(build_server(DATA / "docs").streamable_http_app()) as upstream:
        path = write_config(tmp_path / "hub.toml", {"skills": {"url": f"{upstream}/mcp"}}, name="team hub")
        with path.open("a", encoding="utf-8") as file:
            file.write(textwrap.dedent(HUB))
        config = load_config(path, environ={"ALICE_KEY": KEYS["alice"]})
        async with running_hub(config) as hub, serve_app(hub.http_app("127.0.0.1")) as base:
            front = tmp_path / "front" / "hub.toml"
            front.parent.mkdir()
            code, err = await anyio.to_thread.run_sync(add, capsys, f"{base}/mcp/docs", "--config", str(front))
            assert code == 0, err
            table = tomllib.loads(front.read_text(encoding="utf-8"))["servers"]["team-hub-docs"]
            assert table == {
                "url": f"{base}/mcp/docs",
                "transport": "streamable-http",
                "headers": {"X-API-Key": "${TEAM_HUB_DOCS_X_API_KEY}"},
            }
            assert "added [servers.team-hub-docs]" in err and "TEAM_HUB_DOCS_X_API_KEY" in err
            second = load_config(front, environ={"TEAM_HUB_DOCS_X_API_KEY": KEYS["alice"]})
            async with running_hub(second) as outer, hub_client(outer, "2026-07-28") as client:
                tools = [t.name for t in (await client.list_tools()).tools]
            assert "team-hub-docs_skills_skill_count" in tools  # the first hub's tools, through the second
            # Where there is no card: the URL, what came back, and what to do instead.
            code, err = await anyio.to_thread.run_sync(add, capsys, f"{upstream}/mcp", "--config", str(front))
    assert code == 2
    assert f"{upstream}/mcp/server-card" in err and "HTTP 404" in err and "add the server by hand" in err
