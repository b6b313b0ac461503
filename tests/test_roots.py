"""Roots: a server's `roots/list` is answered from the mount's configured roots, else by the client it is
about, else (asked outside any call) by the sole client of a hub serving stdio, else with an empty list."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext

from mcp_hub.config import ServerConfig, parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.server.http import build_app
from tests.conftest import (
    ROOT,
    fixture_server,
    hub_client,
    hub_command,
    hub_environment,
    make_config,
    running_hub,
    script_server,
    serve_app,
    wait_for,
    write_config,
)
from tests.harness.people import Person

pytestmark = pytest.mark.anyio

ASKER = str(ROOT / "tests" / "servers" / "roots_asker.py")
CONFIGURED = ["/srv/docs", "file:///srv/data"]
CONFIGURED_URIS = "file:///srv/docs file:///srv/data"


def asker(**settings: Any) -> dict[str, Any]:
    """A `[servers.X]` table for the server that asks for roots on its own as soon as it starts (a
    handshake-era server: a 2026-07-28 one can ask only inside a call)."""
    return script_server(ASKER, protocol="legacy", **settings)


class Roots:
    """A client's roots, which it may change; records each time it is asked."""

    def __init__(self, *uris: str) -> None:
        self.uris = list(uris)
        self.asked = 0

    async def __call__(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in self.uris])  # type: ignore[arg-type]


async def heard(client: Client, count: int = 1, tool: str = "ra_heard") -> list[str]:
    """What the asker's questions got, once it has had `count` answers."""
    answers: list[str] = []

    async def listed() -> bool:
        return tool in {listed.name for listed in (await client.list_tools()).tools}

    async def enough() -> bool:
        nonlocal answers
        result = await client.call_tool(tool, {})
        answers = json.loads(result.content[0].text)  # type: ignore[union-attr]
        return len(answers) >= count

    await wait_for(listed, timeout=20)
    await wait_for(enough, timeout=20)
    return answers


# -- configured roots ------------------------------------------------------------------------------


def test_configured_roots_become_file_uris() -> None:
    config = ServerConfig(name="files", command="x", roots=["/home/me/docs", "/srv/a b/../c", "file:///srv/data"])
    assert config.roots == ("file:///home/me/docs", "file:///srv/c", "file:///srv/data")


@pytest.mark.parametrize(
    ("roots", "reason"),
    [
        ('["docs"]', "'docs' is not an absolute path; write the folder's full path, like '/home/me/docs'"),
        ('["https://example.com/x"]', "'https://example.com/x' is not a local folder; a root is an absolute path"),
        ('["file://host/x"]', "'file://host/x' is not a local file:// URI; write it as file:///absolute/path"),
        ('"/srv/docs"', "must be an array"),
    ],
)
def test_a_root_that_is_not_a_local_folder_is_a_clear_error(roots: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f'[servers.files]\ncommand = "x"\nroots = {roots}\n', "hub.toml")
    assert str(caught.value).startswith("hub.toml: servers.files.roots")
    assert reason in str(caught.value)


@pytest.mark.slow
async def test_configured_roots_answer_a_server_that_asks_on_its_own(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"ra": asker(roots=CONFIGURED)})
    client_roots = Roots("file:///home/ada")
    async with running_hub(config) as hub, hub_client(hub, list_roots_callback=client_roots) as client:
        assert await heard(client) == [CONFIGURED_URIS]
    assert client_roots.asked == 0


@pytest.mark.parametrize(
    ("server_era", "client_mode"),
    [("legacy", "legacy"), ("legacy", "2026-07-28"), ("2026-07-28", "legacy"), ("2026-07-28", "2026-07-28")],
)
async def test_configured_roots_answer_a_server_that_asks_during_a_call(
    tmp_path: Path, server_era: str, client_mode: str
) -> None:
    """Configured roots win over the calling client's, whether a handshake-era server asks mid-call or a
    2026-07-28 one asks with `input_required` (answered by the hub even for a 2026-07-28 client)."""
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol=server_era, roots=CONFIGURED)})
    ada = Person("ada")
    async with running_hub(config) as hub, hub_client(hub, client_mode, **ada.options()) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("srv_ask", {"what": "roots", "text": "hello"})
            other = await client.call_tool("srv_ask", {"what": "sampling", "text": "hello"})
    assert result.content[0].text == "roots: file:///srv/docs, file:///srv/data"  # type: ignore[union-attr]
    assert other.content[0].text == "sampled: ada read 'hello'"  # type: ignore[union-attr]  # still the client's
    assert ada.asked == ["sampling"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_2026_server_hears_that_it_may_ask_for_configured_roots(tmp_path: Path, mode: str) -> None:
    """A 2026-07-28 server hears with each request what the client can be asked; for a mount with configured
    roots the hub answers roots, so `roots` is declared even for a client without it (and nothing else is)."""
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="2026-07-28", roots=CONFIGURED)})
    declared = "io.modelcontextprotocol/clientCapabilities"
    async with running_hub(config) as hub, hub_client(hub, mode) as client:
        with anyio.fail_after(10):
            heard = await client.call_tool("srv_request_meta", {})
            result = await client.call_tool("srv_ask", {"what": "roots", "text": "hello"})
    assert heard.structured_content is not None
    assert set(heard.structured_content[declared]) & {"sampling", "elicitation", "roots"} == {"roots"}
    assert result.content[0].text == "roots: file:///srv/docs, file:///srv/data"  # type: ignore[union-attr]


# -- no configured roots ---------------------------------------------------------------------------


@pytest.mark.slow
async def test_over_http_a_server_asking_outside_any_call_hears_no_roots(tmp_path: Path) -> None:
    """An HTTP hub has many clients: outside a call no one's roots are the server's, so it hears none,
    and no error."""
    config = make_config(tmp_path, {"ra": asker()})
    client_roots = Roots("file:///home/ada")
    async with running_hub(config) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with (
            serve_app(app) as base,
            Client(f"{base}/mcp", mode="legacy", cache=None, list_roots_callback=client_roots) as client,
        ):
            assert await heard(client) == [""]
    assert client_roots.asked == 0


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_stdio_server_asking_the_calling_client_that_cannot_answer_hears_no_roots(
    tmp_path: Path, mode: str
) -> None:
    """A stdio server's `roots/list` during a call carries no call of its own: the hub asks the client whose call
    is in flight, and when that client did not declare `roots` the server hears an empty list, not an error (the
    hub told it it may ask); the client is asked nothing, and the call goes on."""
    config = make_config(tmp_path, {"srv": fixture_server("srv", protocol="legacy")})
    ada = Person("ada")
    options = {"sampling_callback": ada.sampling, "elicitation_callback": ada.elicitation}  # no roots
    async with running_hub(config) as hub, hub_client(hub, mode, **options) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("srv_ask", {"what": "roots", "text": "hello"})
            other = await client.call_tool("srv_ask", {"what": "sampling", "text": "hello"})
    assert result.is_error is not True
    assert result.content[0].text == "roots: "  # type: ignore[union-attr]
    assert other.content[0].text == "sampled: ada read 'hello'"  # type: ignore[union-attr]
    assert ada.asked == ["sampling"]


@asynccontextmanager
async def stdio_hub(tmp_path: Path, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
    """`mcp-hub serve` over stdio, mounting the asker as `ra`."""
    config = write_config(tmp_path / "hub.toml", {"ra": asker()})
    command = hub_command("serve", "--config", str(config))
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        cwd=str(tmp_path),
        env=hub_environment(),
    )
    async with Client(params, mode=mode, cache=None, **options) as client:
        yield client


async def test_over_stdio_the_sole_client_answers_and_its_changes_reach_the_server(tmp_path: Path) -> None:
    client_roots = Roots("file:///home/ada/project")
    async with stdio_hub(tmp_path, list_roots_callback=client_roots) as client:
        assert await heard(client) == ["file:///home/ada/project"]
        client_roots.uris.append("file:///home/ada/notes")
        await client.session.send_notification(types.RootsListChangedNotification())
        assert await heard(client, 2) == ["file:///home/ada/project", "file:///home/ada/project file:///home/ada/notes"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_over_stdio_a_client_that_cannot_be_asked_leaves_the_server_no_roots(tmp_path: Path, mode: str) -> None:
    """A handshake-era client that did not declare `roots`, or a 2026-07-28 client (asked only in calls)."""
    async with stdio_hub(tmp_path, mode) as client:
        assert await heard(client) == [""]


# -- npm's @modelcontextprotocol/server-filesystem, which asks for roots as soon as it starts ---------

FILESYSTEM = ROOT / "tests" / "npm" / "node_modules" / ".bin" / "mcp-server-filesystem"
needs_filesystem = pytest.mark.skipif(not FILESYSTEM.exists(), reason="npm's server-filesystem is not in tests/npm")


async def allowed_directories(client: Client, expected: str) -> str:
    """The filesystem server's allowed directories, once `expected` is among them (it takes roots in the
    background, after it has initialized)."""
    text = ""

    async def allowed() -> bool:
        nonlocal text
        tools = {tool.name for tool in (await client.list_tools()).tools}
        if "files_list_allowed_directories" not in tools:
            return False
        result = await client.call_tool("files_list_allowed_directories", {})
        text = result.content[0].text  # type: ignore[union-attr]
        return expected in text

    with contextlib.suppress(TimeoutError):
        await wait_for(allowed, timeout=30)
    return text


@pytest.mark.slow
@needs_filesystem
async def test_server_filesystem_serves_the_configured_roots(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    config = make_config(tmp_path, {"files": {"command": str(FILESYSTEM), "roots": [str(docs)]}})
    async with running_hub(config) as hub, hub_client(hub) as client:
        assert str(docs) in await allowed_directories(client, str(docs))


@pytest.mark.slow
@needs_filesystem
async def test_server_filesystem_serves_the_roots_of_the_hubs_stdio_client(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config = write_config(tmp_path / "hub.toml", {"files": {"command": str(FILESYSTEM)}})
    command = hub_command("serve", "--config", str(config))
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        cwd=str(tmp_path),
        env=hub_environment(),
    )
    client_roots = Roots(project.as_uri())
    async with Client(params, mode="legacy", cache=None, list_roots_callback=client_roots) as client:
        assert str(project) in await allowed_directories(client, str(project))
    assert client_roots.asked == 1
