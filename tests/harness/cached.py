"""A hub with caching on, its policy and its keys, and reading what its audit says about the cache."""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.config import load_config
from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import free_port, running_hub, serve_app, write_config
from tests.servers.counting import counting_server

KEYS = {name: name[0] * 32 for name in ("alice", "bob", "carol", "dave")}
POLICY = """
[principals]
alice = "user"
bob = "limited"
carol = "careful"
dave = "counted"

[profiles.user]
default = "allow"
[[profiles.user.rules]]
id = "cached-lookups"
effect = "allow"
tools = ["up/lookup", "up/failing", "up/write", "up/ask"]
cache = "60s"

[profiles.limited]
default = "allow"
extends = ["user"]
[[profiles.limited.rules]]
id = "no-writes"
effect = "deny"
tools = ["up/write"]
resources = ["up/count://b"]

[profiles.careful]
default = "allow"
extends = ["user"]
[[profiles.careful.rules]]
id = "ask-first"
effect = "confirm"
tools = ["up/lookup"]

[profiles.counted]
default = "allow"
extends = ["user"]
[[profiles.counted.rules]]
id = "slowly"
effect = "allow"
tools = ["up/lookup"]
rate = "2/minute"
"""


@dataclass
class Setup:
    hub: Hub
    served: Counter[tuple[str, str]]
    connect: Callable[..., AbstractAsyncContextManager[Client]]
    audit: Path
    policy: Path
    gate: anyio.Event = field(default_factory=anyio.Event)


@asynccontextmanager
async def cached_hub(
    tmp_path: Path,
    era: str = "2026-07-28",
    *,
    policy: str | None = POLICY,
    scope: str = "private",
    ttl_ms: int = 60_000,
    cache: str = "",
    upstream: tuple[int, Counter[tuple[str, str]]] | None = None,
    list_ttl_ms: int = 0,
    isolation: str = "shared",
    policy_settings: str = "",
) -> AsyncIterator[Setup]:
    """A hub mounting the counting server as "up" (speaking `era`), with `policy`, an audit file, API keys;
    `upstream`: the port of one the test serves, and what it counts."""
    gate = anyio.Event()
    if upstream is None:
        server, served = counting_server(
            "up",
            ttl_ms=ttl_ms,
            scope=scope,  # type: ignore[arg-type]
            gate=gate,
            list_ttl_ms=list_ttl_ms,
        )
        serving: AbstractAsyncContextManager[Any] = serve_app(server.streamable_http_app())
    else:
        port, served = upstream
        serving = _serving(f"http://127.0.0.1:{port}")
    async with serving as url:
        mount = {"url": f"{url}/mcp", "protocol": era, "isolation": isolation}
        path = write_config(tmp_path / "hub.toml", {"up": mount})
        keys = ", ".join(f'{name} = "${{{name.upper()}_KEY}}"' for name in KEYS)
        extra = f'\n[auth]\napi_keys = {{ {keys} }}\n\n[audit]\nfile = "audit.jsonl"\n{cache}\n'
        policies = tmp_path / "policies"
        if policy is not None:
            policies.mkdir(exist_ok=True)
            (policies / "hub.toml").write_text(textwrap.dedent(policy), encoding="utf-8")
            extra += '\n[policy]\ndir = "policies"\n' + policy_settings
        with path.open("a", encoding="utf-8") as file:
            file.write(extra)
        config = load_config(path, environ={f"{name.upper()}_KEY": key for name, key in KEYS.items()})
        async with running_hub(config) as hub:
            app = build_app(
                hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, api_keys=config.auth.api_keys
            )
            async with serve_app(app) as base:

                @asynccontextmanager
                async def connect(principal: str, mode: str = "2026-07-28", **options: Any) -> AsyncIterator[Client]:
                    async with httpx2.AsyncClient(headers={"X-API-Key": KEYS[principal]}, timeout=30) as http:
                        transport = streamable_http_client(f"{base}/mcp", http_client=http)
                        async with Client(transport, mode=mode, cache=None, **options) as client:
                            yield client

                yield Setup(hub, served, connect, tmp_path / "audit.jsonl", policies / "hub.toml", gate)


@asynccontextmanager
async def replicas(tmp_path: Path, url: str, count: int = 2, **options: Any) -> AsyncIterator[list[Setup]]:
    """`count` hubs with `[cluster] redis = url`, mounting one counting server as "up" (`options`: `cached_hub`'s)."""
    server, served = counting_server("up")
    port = free_port()
    async with serve_app(server.streamable_http_app(), port), AsyncExitStack() as stack:
        hubs = []
        for index in range(count):
            folder = tmp_path / f"replica{index}"
            folder.mkdir()
            cluster = f'\n[cluster]\nredis = "{url}"\n'
            hub = cached_hub(folder, upstream=(port, served), cache=cluster, **options)
            hubs.append(await stack.enter_async_context(hub))
        yield hubs


def text(result: types.CallToolResult | types.ReadResourceResult) -> str:
    if isinstance(result, types.ReadResourceResult):
        return result.contents[0].text  # type: ignore[union-attr]
    return result.content[0].text  # type: ignore[union-attr]


def audit_outcomes(path: Path) -> list[tuple[str, str, str]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(line["principal"], line["name"], line["outcome"]) for line in lines]


@asynccontextmanager
async def _serving(url: str) -> AsyncIterator[str]:
    yield url
