"""The admin console's hub: its configuration, keys, and logging in to it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2

from mcp_hub.admin import console
from mcp_hub.config import load_config
from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import fixture_server, serve_app, write_config

ADMIN_KEY = "admin-key-" + "k" * 24
ALICE_KEY = "alice-key-" + "a" * 24
BOB_KEY = "bob-key-" + "b" * 24
MOUNT_TOKEN = "mount-token-" + "t" * 20
"""Secrets the console must never show: the admin key, the MCP endpoint's API keys, a mount's secret env value."""

POLICY = """
[principals]
alice = "all"
bob = "echo-only"
stdio = "all"

[profiles.all]
description = "Everything"
default = "allow"

[profiles.echo-only]
description = "The echo tool, nothing else"
default = "deny"

[[profiles.echo-only.rules]]
id = "echo"
effect = "allow"
tools = ["srv/echo"]
reason = "echo changes nothing"

[pinning]
on_change = "hold"
"""


def console_config(
    tmp_path: Path,
    *,
    mount_token: str = MOUNT_TOKEN,
    servers: dict[str, dict[str, Any]] | None = None,
    keys: str = 'root = "${ADMIN_KEY}"',
    tail: str = "",
) -> Path:
    """A hub.toml: the fixture server `srv` (with a secret env value, `mount_token`) and `servers`, pins, an audit
    log, API keys for alice and bob, and the console on with the administrators `keys` (by default one, "root"),
    then `tail`. Written again over the last one, it is an edit a live hub applies."""
    policies = tmp_path / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "policy.toml").write_text(POLICY, encoding="utf-8")
    every = {"srv": fixture_server("srv", env={"API_TOKEN": mount_token}), **(servers or {})}
    path = write_config(tmp_path / "hub.toml.new", every)
    with path.open("a", encoding="utf-8") as file:
        file.write(
            '\n[policy]\ndir = "policies"\npins = "pins.json"\n'
            '\n[audit]\nfile = "audit.jsonl"\n'
            f'\n[auth]\napi_keys = {{ alice = "{ALICE_KEY}", bob = "{BOB_KEY}" }}\n'
            f"\n[admin]\nenabled = true\nkeys = {{ {keys} }}\n{tail}"
        )
    return path.replace(tmp_path / "hub.toml")  # renamed over the old one, as editors and deployment tools do


@asynccontextmanager
async def console_hub(tmp_path: Path, *, live: bool = False, **settings: Any) -> AsyncIterator[tuple[Hub, str]]:
    """The hub of `console_config` (`settings`: its), its HTTP endpoint and console served on loopback: the hub
    and the base URL. `live`: the hub applies edits to its hub.toml, as `mcp-hub serve` does (live.py); the
    environment it reads them with is the process's."""
    environ = None if live else {"ADMIN_KEY": ADMIN_KEY}
    config = load_config(console_config(tmp_path, **settings), environ=environ)
    hub = Hub(config)
    async with hub.running(live=live):
        await hub.wait_settled(20.0)
        app = build_app(
            hub.endpoint.server,
            host="127.0.0.1",
            path="/mcp",
            health=hub.served_health,
            api_keys=config.auth.api_keys,
            admin=console(hub, "127.0.0.1"),
        )
        async with serve_app(app) as base:
            yield hub, base


async def logged_in(web: httpx2.AsyncClient, base: str) -> str:
    """Log `web` in as root; the session's CSRF token."""
    form = await web.get(f"{base}/admin/login")
    token = _csrf(form.text)
    answer = await web.post(f"{base}/admin/login", data={"csrf": token, "key": ADMIN_KEY})
    assert answer.status_code == 303 and answer.headers["location"] == "/admin/status"
    status = await web.get(f"{base}/admin/status")
    assert status.status_code == 200 and 'signed in as <b id="admin-name">root</b>' in status.text
    return _csrf(status.text)


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token in the page"
    return found.group(1)


async def attempt(web: httpx2.AsyncClient, base: str, key: str, address: str | None = None) -> httpx2.Response:
    """One login with `key`, from `address` (as a proxy on loopback names the client: uvicorn trusts it)."""
    form = await web.get(f"{base}/admin/login")
    headers = {"X-Forwarded-For": address} if address else {}
    return await web.post(f"{base}/admin/login", data={"csrf": _csrf(form.text), "key": key}, headers=headers)


def throttled(answer: httpx2.Response) -> bool:
    """Whether a login was refused as one attempt too many, saying so and when to try again."""
    said = re.search(r"too many sign-in attempts; try again in (\d+) s", answer.text)
    return (
        answer.status_code == 429
        and said is not None
        and 0 < int(said.group(1)) <= 60
        and int(answer.headers["retry-after"]) == int(said.group(1))
    )
