"""The hub's HTTP clients verify servers with one TLS context: no session, token request or fetch makes its own
(httpx2 would, reading the CA certificates again: ~30 ms of CPU on the event loop and a few MiB each)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest

from mcp_hub.tls import verifying
from tests.conftest import hub_client, make_config, running_hub, serve_app, wait_for
from tests.servers.fixture import build_server

pytestmark = pytest.mark.anyio


async def test_sessions_with_servers_over_http_make_no_tls_context_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Any] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        made.append(context)
        load(context, *args, **kwargs)

    verifying()  # the one context, made before counting
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    async with serve_app(build_server("up").streamable_http_app()) as base:
        servers = {f"s{n}": {"url": f"{base}/mcp"} for n in range(4)}
        async with running_hub(make_config(tmp_path, servers)) as hub, hub_client(hub) as client:
            await wait_for(lambda: all(str(u.state) == "up" for u in hub.upstreams.values()))
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {f"s{n}_echo" for n in range(4)} <= names
            assert (await client.call_tool("s3_echo", {"text": "hi"})).is_error is False
    assert made == []
    assert verifying() is verifying()
    assert verifying().verify_mode == ssl.CERT_REQUIRED and verifying().check_hostname
