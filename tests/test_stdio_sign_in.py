"""A person's sign-in to a `mode = "user"` mount when the hub is served over stdio, as a desktop client launches it.

All real parts: `mcp-hub serve` as a stdio child of the SDK's client; the mount's authorization server
(tests/servers/authorization_server.py), whose login page the test fills in as a browser would; the upstream,
the fixture SDK server over streamable HTTP behind its bearer check. The browser comes back to the loopback
`redirect_uri`, where the stdio hub listens for it (mcp_hub/server/loopback.py).
"""

from __future__ import annotations

import socket
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult

from mcp_hub.credentials.connections import new_key
from tests.conftest import fixture_server, free_port, hub_command, hub_environment, serve_app, write_config
from tests.harness.identity import SECRET, sign_in, sign_in_link, witnessed
from tests.servers.authorization_server import AuthorizationServer, guarded
from tests.servers.fixture import build_server

pytestmark = pytest.mark.anyio

KEY = new_key()


@dataclass
class Setup:
    config: Path
    server: AuthorizationServer
    upstream: str
    callback: str
    calls: list[tuple[str, bytes]]

    def client(self, mode: str = "legacy", **options: Any) -> Client:
        command = hub_command("serve", "--config", str(self.config))
        params = StdioServerParameters(
            command=command[0],
            args=command[1:],
            cwd=str(self.config.parent),
            env=hub_environment(HUB_TOKEN_KEY=KEY),
        )
        return Client(params, mode=mode, cache=None, **options)

    def bearers_of(self, text: str) -> set[str]:
        """The bearer tokens of the `remote_echo` calls with `text` that the upstream let through."""
        return {
            bearer.partition(" ")[2]
            for bearer, body in self.calls
            if b'"tools/call"' in body and f'"text":"{text}"'.encode() in body.replace(b" ", b"")
        }

    def issued_to(self, who: str) -> set[str]:
        return {t for t, i in self.server.tokens.items() if i.subject == who and i.audience == self.upstream}


@asynccontextmanager
async def stdio_user_hub(tmp_path: Path, callback_host: str = "127.0.0.1", below: str = "") -> AsyncIterator[Setup]:
    """A hub.toml whose mount "remote" is `mode = "user"`, its redirect_uri on loopback, and the servers it names."""
    callback_port, upstream_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    server = AuthorizationServer(clients={"the-hub": SECRET})
    calls: list[tuple[str, bytes]] = []
    callback = f"http://{callback_host}:{callback_port}{below}/oauth/callback"
    async with serve_app(server.app()) as issuer:
        server.issuer = issuer
        mount = {
            "url": upstream,
            "auth": {
                "mode": "user",
                "issuer": issuer,
                "client_id": "the-hub",
                "client_secret": SECRET,
                "redirect_uri": callback,
                "token_key": "${HUB_TOKEN_KEY}",
                "token_store": str(tmp_path / "connections"),
            },
        }
        config = write_config(tmp_path / "hub.toml", {"remote": mount})
        app = guarded(witnessed(build_server("remote").streamable_http_app(), calls), server, upstream, [], public=True)
        async with serve_app(app, port=upstream_port):
            yield Setup(config, server, upstream, callback, calls)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_url_capable_client_over_stdio_signs_in_through_the_loopback_callback(
    tmp_path: Path, mode: str
) -> None:
    """The stdio hub's client is asked to open the sign-in link; the browser comes back to the loopback
    redirect_uri, where the hub takes the code; the call that waited goes through with the person's token."""
    asked: list[Any] = []
    pages: list[str] = []

    async def open_link(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        back = await sign_in(params.url, "alice")
        pages.append(back.text)
        assert back.status_code == 200, back.text
        return ElicitResult(action="accept")

    async with stdio_user_hub(tmp_path) as setup:
        with anyio.fail_after(60):
            async with setup.client(mode, elicitation_callback=open_link) as client:
                assert "remote_echo" in {tool.name for tool in (await client.list_tools()).tools}
                result = await client.call_tool("remote_echo", {"text": "over-stdio"})
                assert result.structured_content == {"text": "over-stdio", "server": "remote"}
                again = await client.call_tool("remote_echo", {"text": "over-stdio-again"})
                assert not again.is_error
        (params,) = asked
        assert params.mode == "url" and params.url.startswith(setup.callback.removesuffix("callback") + "consent/")
        assert "signed in to remote" in pages[0]
        (token,) = setup.issued_to("alice")
        assert setup.bearers_of("over-stdio") == {token} == setup.bearers_of("over-stdio-again")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_client_answered_with_the_link_over_stdio_signs_in_and_calls_again(tmp_path: Path, mode: str) -> None:
    """A client that does not take URL elicitation hears -32042 with the link; the person signs in (the browser
    comes back to the hub's loopback listener, on localhost and below a path), and the client's next call goes
    through."""
    async with stdio_user_hub(tmp_path, callback_host="localhost", below="/desktop") as setup:
        with anyio.fail_after(60):
            async with setup.client(mode) as client:
                assert "remote_echo" in {tool.name for tool in (await client.list_tools()).tools}
                with pytest.raises(MCPError) as caught:
                    await client.call_tool("remote_echo", {"text": "first"})
                link = sign_in_link(caught)
                done = await sign_in(link, "alice")
                assert done.status_code == 200 and "signed in" in done.text
                result = await client.call_tool("remote_echo", {"text": "then"})
                assert result.structured_content == {"text": "then", "server": "remote"}
        assert setup.bearers_of("then") == setup.issued_to("alice") and not setup.bearers_of("first")


@pytest.mark.slow
async def test_a_callback_port_in_use_stops_the_hub_at_start_with_a_clear_error(tmp_path: Path) -> None:
    async with stdio_user_hub(tmp_path) as setup:
        port = int(setup.callback.rsplit(":", 1)[1].split("/")[0])
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", port))
            taken.listen()
            with anyio.fail_after(60):
                done = await anyio.run_process(
                    hub_command("serve", "--config", str(setup.config)),
                    input=b"",
                    check=False,
                    cwd=str(tmp_path),
                    env=hub_environment(HUB_TOKEN_KEY=KEY),
                )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "servers.remote.auth.redirect_uri" in stderr and f"port {port} on 127.0.0.1 is in use" in stderr, stderr


@pytest.mark.slow
async def test_a_user_mount_added_by_a_live_reload_gets_its_loopback_listener(tmp_path: Path) -> None:
    """The stdio hub starts with no `user` mount, so with no listener. hub.toml gains one while it serves: the
    reload starts its listener, and the person's sign-in comes back to it; the mount taken out again, the
    listener stops and its port is free."""
    async with stdio_user_hub(tmp_path) as setup:
        remote = tomllib.loads(setup.config.read_text(encoding="utf-8"))["servers"]["remote"]
        local = fixture_server("local")
        write_config(setup.config, {"local": local})
        port = int(setup.callback.rsplit(":", 1)[1].split("/")[0])

        async def names() -> set[str]:
            return {tool.name for tool in (await client.list_tools()).tools}

        with anyio.fail_after(90):
            async with setup.client() as client:
                assert "local_echo" in await names()
                assert _free(port)
                write_config(setup.config, {"local": local, "remote": remote})
                while "remote_echo" not in await names():
                    await anyio.sleep(0.2)
                with pytest.raises(MCPError) as caught:
                    await client.call_tool("remote_echo", {"text": "first"})
                done = await sign_in(sign_in_link(caught), "alice")
                assert done.status_code == 200 and "signed in" in done.text
                result = await client.call_tool("remote_echo", {"text": "then"})
                assert result.structured_content == {"text": "then", "server": "remote"}

                write_config(setup.config, {"local": local})
                while "remote_echo" in await names():
                    await anyio.sleep(0.2)
                while not _free(port):
                    await anyio.sleep(0.2)
                assert "local_echo" in await names()
        assert setup.bearers_of("then") == setup.issued_to("alice")


def _free(port: int) -> bool:
    """Whether nothing listens on the port on 127.0.0.1."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0
