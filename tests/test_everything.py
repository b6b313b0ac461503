"""npm's `@modelcontextprotocol/server-everything`, mounted through the hub, against a direct connection.

The standard is "works as if connected directly": every result the hub returns is
compared with the same request sent by the SDK client straight to the same kind of
server, equal except for the hub's names (`<mount>_`) and resource URIs (`<mount>+`).

One hub serves the whole module, mounting server-everything twice: `everything` as a
stdio child and `remote` over streamable HTTP (a server-everything process this module
starts on a loopback port). Each test runs for both mounts and for four ways of
reaching the hub: in-process and over the hub's own streamable HTTP endpoint, each
with a handshake-era (`legacy`) and a `2026-07-28` client. server-everything itself
speaks the handshake era only (2025-11-25), as the hub's upstream connections do.

Not covered here (the hub does not relay them yet): the tools that need sampling,
elicitation or roots from the client (server-everything lists them only to clients
declaring those capabilities), logging, resource subscriptions, and task-based tools
(`simulate-research-query`).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference, ResourceTemplateReference

from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests.conftest import EVERYTHING, hub_client, make_config, running_hub, serve_app, wait_for

pytestmark = pytest.mark.anyio

MOUNTS = {"stdio": "everything", "http": "remote"}
"""Upstream kind -> the mount it is served under."""

CLIENTS = [("in-process", "legacy"), ("in-process", "2026-07-28"), ("http", "legacy"), ("http", "2026-07-28")]
"""How a test reaches the hub: (path, client mode)."""

STATIC_DOCS = "demo://resource/static/document/"

# -- server-everything over streamable HTTP --------------------------------------------------------

_LOOPBACK_PRELOAD = r"""
// server-everything listens on every interface (express `app.listen(PORT)`); keep it on
// loopback, and say which port it got (PORT=0 picks a free one; it would log "port 0").
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (/^\d+$/.test(String(args[0])) && typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  this.once("listening", () => process.stderr.write(`loopback port ${this.address().port}\n`));
  return listen.apply(this, args);
};
"""


@asynccontextmanager
async def everything_over_http(workdir: Path) -> AsyncIterator[str]:
    """Run `mcp-server-everything streamableHttp` on a free loopback port; yield its MCP URL."""
    preload = workdir / "loopback.cjs"
    preload.write_text(_LOOPBACK_PRELOAD, encoding="utf-8")
    log = workdir / "everything.log"
    env = {**os.environ, "PORT": "0", "NODE_OPTIONS": f'--require "{preload}"'}
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [str(EVERYTHING), "streamableHttp"],
            env=env,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # it logs every request there
            stderr=stderr,
        )
    try:
        port: list[str] = []

        async def listening() -> bool:
            text = log.read_text(encoding="utf-8", errors="replace")
            assert process.poll() is None, f"server-everything exited with {process.returncode}:\n{text}"
            port.extend(re.findall(r"^loopback port (\d+)$", text, re.MULTILINE)[:1])
            return bool(port)

        await wait_for(listening, timeout=20)
        url = f"http://127.0.0.1:{port[0]}/mcp"

        async def answers() -> bool:
            try:
                async with httpx2.AsyncClient() as http:
                    response = await http.get(url)  # no session: a JSON-RPC error, but an answer
            except httpx2.HTTPError:
                return False
            return response.status_code == 400

        await wait_for(answers, timeout=10)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- fixtures: one hub, its HTTP endpoint and the direct connections, for the module -----------------


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def everything_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    async with everything_over_http(tmp_path_factory.mktemp("everything-http")) as url:
        yield url


STDIO_ENV = {"MCP_HUB_TEST": "set in the mount's env"}


def _servers(everything_url: str, *kinds: str) -> dict[str, dict[str, Any]]:
    tables = {
        "stdio": {"command": str(EVERYTHING), "args": ["stdio"], "env": STDIO_ENV},
        "http": {"url": everything_url},
    }
    return {MOUNTS[kind]: tables[kind] for kind in kinds}


@pytest.fixture(scope="module")
async def hub(tmp_path_factory: pytest.TempPathFactory, everything_url: str) -> AsyncIterator[Hub]:
    config = make_config(tmp_path_factory.mktemp("hub"), _servers(everything_url, "stdio", "http"))
    async with running_hub(config) as hub:
        health = hub.health()
        assert health["status"] == "ok", health
        yield hub


@pytest.fixture(scope="module")
async def hub_url(hub: Hub) -> AsyncIterator[str]:
    async with serve_app(build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)) as base:
        yield f"{base}/mcp"


def _direct_target(kind: str, everything_url: str) -> StdioServerParameters | str:
    if kind == "stdio":
        return StdioServerParameters(command=str(EVERYTHING), args=["stdio"], env=STDIO_ENV)
    return everything_url


async def _decline(*_: Any) -> types.ErrorData:
    return types.ErrorData(code=-32600, message="declined")


AS_THE_HUB_ASKS: dict[str, Any] = {
    "sampling_callback": _decline,
    "sampling_capabilities": types.SamplingCapability(
        context=types.SamplingContextCapability(), tools=types.SamplingToolsCapability()
    ),
    "elicitation_callback": _decline,
    "list_roots_callback": _decline,
}
"""Direct clients declare what the hub declares to its servers (it relays sampling, elicitation
and roots), so server-everything shows both the same tools."""


@pytest.fixture(scope="module")
async def directs(everything_url: str) -> AsyncIterator[dict[str, Client]]:
    """The SDK client connected straight to server-everything, as the hub connects (`mode="auto"`)."""
    async with (
        Client(_direct_target("stdio", everything_url), cache=None, **AS_THE_HUB_ASKS) as stdio,
        Client(_direct_target("http", everything_url), cache=None, **AS_THE_HUB_ASKS) as http,
    ):
        yield {"stdio": stdio, "http": http}


@pytest.fixture(params=list(MOUNTS))
def upstream(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def mount(upstream: str) -> str:
    return MOUNTS[upstream]


@pytest.fixture
def direct(directs: dict[str, Client], upstream: str) -> Client:
    return directs[upstream]


@asynccontextmanager
async def _connect(hub: Hub, hub_url: str, path: str, mode: str, *, large: bool = False) -> AsyncIterator[Client]:
    if path == "in-process":
        async with hub_client(hub, mode) as client:
            yield client
        return
    # The SDK caps one SSE event at 1 MiB by default; a client expecting large results lifts it.
    transport = streamable_http_client(hub_url, max_sse_event_size=None) if large else hub_url
    async with Client(transport, mode=mode, cache=None) as client:
        yield client


@pytest.fixture(params=CLIENTS, ids=["-".join(c) for c in CLIENTS])
async def client(request: pytest.FixtureRequest, hub: Hub, hub_url: str) -> AsyncIterator[Client]:
    """The SDK client connected to the module's hub."""
    path, mode = request.param
    async with _connect(hub, hub_url, path, mode) as client:
        yield client


# -- comparing -------------------------------------------------------------------------------------


def dump(model: Any) -> Any:
    """A result as JSON data, for comparing."""
    if isinstance(model, list):
        return [dump(m) for m in model]
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


_TIMESTAMP = re.compile(r"created at .+$")


def native(data: Any, mount: str) -> Any:
    """`data` as the server itself would have sent it: hub URIs back to the server's, and
    server-everything's creation timestamps (`... created at 10:41:07 AM`) blanked."""
    if isinstance(data, list):
        return [native(item, mount) for item in data]
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("uri", "uriTemplate") and isinstance(value, str):
            value = value.removeprefix(f"{mount}+")
        elif key == "text" and isinstance(value, str):
            value = _TIMESTAMP.sub("created at <time>", value)
        elif key == "blob" and isinstance(value, str):
            text = base64.b64decode(value).decode("utf-8", "replace")
            if _TIMESTAMP.search(text):
                value = _TIMESTAMP.sub("created at <time>", text)
        out[key] = native(value, mount)
    return out


def uris(data: Any) -> list[str]:
    """Every `uri` in a result, depth first."""
    found: list[str] = []
    if isinstance(data, list):
        for item in data:
            found += uris(item)
    elif isinstance(data, dict):
        for key, value in data.items():
            if key == "uri" and isinstance(value, str):
                found.append(value)
            else:
                found += uris(value)
    return found


def unprefixed(items: list[dict[str, Any]], mount: str, key: str) -> dict[str, dict[str, Any]]:
    """The hub's listing of one mount, keyed and named as the server names its items."""
    mine: dict[str, dict[str, Any]] = {}
    for item in items:
        if key == "name":
            if item[key].startswith(f"{mount}_"):
                native_name = item[key].removeprefix(f"{mount}_")
                mine[native_name] = {**item, key: native_name}
        elif item[key].startswith(f"{mount}+"):
            native_uri = item[key].removeprefix(f"{mount}+")
            mine[native_uri] = {**item, key: native_uri}
    return mine


def keyed(items: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    return {item[key]: item for item in items}


async def test_the_hub_connects_as_a_direct_client_does(hub: Hub, directs: dict[str, Client]) -> None:
    servers = hub.health()["servers"]
    for kind, mount in MOUNTS.items():
        assert servers[mount]["state"] == "up"
        assert servers[mount]["transport"] == ("stdio" if kind == "stdio" else "streamable-http")
        # server-everything (TypeScript SDK 1.x) speaks the handshake era; "auto" falls back to it.
        assert servers[mount]["protocol"] == directs[kind].protocol_version == "2025-11-25"


# -- tools -----------------------------------------------------------------------------------------


async def test_tool_list_matches_the_servers_own(client: Client, direct: Client, mount: str) -> None:
    listed: dict[str, dict[str, Any]] = {}
    expected: dict[str, dict[str, Any]] = {}

    async def same_names() -> bool:
        # server-everything adds a tool once a client has initialized (and says so): converge.
        nonlocal listed, expected
        listed = unprefixed(dump((await client.list_tools()).tools), mount, "name")
        expected = keyed(dump((await direct.list_tools()).tools), "name")
        return listed.keys() == expected.keys()

    await wait_for(same_names, timeout=10)
    assert {"echo", "get-sum", "get-structured-content", "get-resource-links"} <= listed.keys()
    for name, tool in expected.items():
        assert listed[name]["inputSchema"] == tool["inputSchema"], name
        if client.mode == "2026-07-28":
            # Tasks left the core protocol in 2026-07-28: its Tool has no `execution`.
            tool = {k: v for k, v in tool.items() if k != "execution"}
        assert listed[name] == tool, name
    # Every tool the hub lists belongs to one of its two mounts.
    assert all(t.name.startswith(("everything_", "remote_")) for t in (await client.list_tools()).tools)


async def test_echo_sum_and_image_tools_answer_as_directly(client: Client, direct: Client, mount: str) -> None:
    calls = [
        ("echo", {"message": "hello through the hub ✓"}),
        ("get-sum", {"a": 2, "b": 40.5}),
        ("get-tiny-image", {}),
    ]
    for name, arguments in calls:
        through_hub = await client.call_tool(f"{mount}_{name}", arguments)
        directly = await direct.call_tool(name, arguments)
        assert through_hub.is_error is False, name
        assert dump(through_hub.content) == dump(directly.content), name
        assert through_hub.structured_content == directly.structured_content, name

    echo = await client.call_tool(f"{mount}_echo", {"message": "hi"})
    assert echo.content[0].text == "Echo: hi"  # type: ignore[union-attr]
    total = await client.call_tool(f"{mount}_get-sum", {"a": 2, "b": 40.5})
    assert total.content[0].text == "The sum of 2 and 40.5 is 42.5."  # type: ignore[union-attr]


async def test_structured_content_passes_through(client: Client, direct: Client, mount: str) -> None:
    for location in ("New York", "Chicago", "Los Angeles"):
        through_hub = await client.call_tool(f"{mount}_get-structured-content", {"location": location})
        directly = await direct.call_tool("get-structured-content", {"location": location})
        assert through_hub.structured_content == directly.structured_content
        assert through_hub.structured_content is not None and "temperature" in through_hub.structured_content
        assert dump(through_hub.content) == dump(directly.content)


async def test_annotated_content_passes_through(client: Client, direct: Client, mount: str) -> None:
    for message_type in ("error", "success", "debug"):
        arguments = {"messageType": message_type, "includeImage": True}
        through_hub = await client.call_tool(f"{mount}_get-annotated-message", arguments)
        directly = await direct.call_tool("get-annotated-message", arguments)
        assert dump(through_hub.content) == dump(directly.content)
    assert through_hub.content[0].annotations is not None  # type: ignore[union-attr]
    assert through_hub.content[0].annotations.audience == ["assistant"]  # type: ignore[union-attr]
    assert through_hub.content[1].type == "image"


async def test_resource_links_point_back_through_the_hub(client: Client, direct: Client, mount: str) -> None:
    through_hub = dump((await client.call_tool(f"{mount}_get-resource-links", {"count": 4})).content)
    directly = dump((await direct.call_tool("get-resource-links", {"count": 4})).content)

    assert native(through_hub, mount) == native(directly, mount)
    links = [block["uri"] for block in through_hub if block["type"] == "resource_link"]
    assert links == [
        f"{mount}+demo://resource/dynamic/blob/1",
        f"{mount}+demo://resource/dynamic/text/2",
        f"{mount}+demo://resource/dynamic/blob/3",
        f"{mount}+demo://resource/dynamic/text/4",
    ]
    # Each link reads back through the hub, as the server's own URI reads directly.
    for link in links:
        read = dump((await client.read_resource(link)).contents)
        read_directly = dump((await direct.read_resource(link.removeprefix(f"{mount}+"))).contents)
        assert uris(read) == [link]
        assert native(read, mount) == native(read_directly, mount)


async def test_embedded_resources_point_back_through_the_hub(client: Client, direct: Client, mount: str) -> None:
    for resource_type, resource_id in (("Text", 1), ("Blob", 7)):
        arguments = {"resourceType": resource_type, "resourceId": resource_id}
        through_hub = dump((await client.call_tool(f"{mount}_get-resource-reference", arguments)).content)
        directly = dump((await direct.call_tool("get-resource-reference", arguments)).content)
        assert native(through_hub, mount) == native(directly, mount)
        kind = resource_type.lower()
        assert uris(through_hub) == [f"{mount}+demo://resource/dynamic/{kind}/{resource_id}"]
        # The text block quoting the URI is the server's prose: left as written.
        assert through_hub[2]["text"].endswith(f" demo://resource/dynamic/{kind}/{resource_id}")


async def test_the_child_gets_the_environment_a_direct_launch_gives(
    client: Client, direct: Client, mount: str, upstream: str
) -> None:
    through_hub = json.loads((await client.call_tool(f"{mount}_get-env", {})).content[0].text)  # type: ignore[union-attr]
    directly = json.loads((await direct.call_tool("get-env", {})).content[0].text)  # type: ignore[union-attr]
    assert through_hub == directly
    if upstream == "stdio":
        assert through_hub["MCP_HUB_TEST"] == STDIO_ENV["MCP_HUB_TEST"]


async def test_tool_errors_pass_through(client: Client, direct: Client, mount: str) -> None:
    bad = {"resourceType": "Text", "resourceId": 0}
    through_hub = await client.call_tool(f"{mount}_get-resource-reference", bad)
    directly = await direct.call_tool("get-resource-reference", bad)
    assert through_hub.is_error is True
    assert dump(through_hub.content) == dump(directly.content)
    assert "Invalid resourceId: 0" in through_hub.content[0].text  # type: ignore[union-attr]


_PROGRESS_DROPPED = pytest.mark.xfail(
    strict=True,
    reason=(
        "hub bug: Endpoint relays progress only when the request's _meta carries a progressToken "
        "(mcp_hub/server/endpoint.py, _progress_relay); the SDK's in-process 2026-07-28 path passes the "
        "client's progress callback to the dispatcher instead, with no token, so the hub never asks the "
        "server for progress and the client gets none"
    ),
)


@pytest.mark.parametrize(
    "via",
    [pytest.param(c, marks=_PROGRESS_DROPPED if c == ("in-process", "2026-07-28") else ()) for c in CLIENTS],
    ids=["-".join(c) for c in CLIENTS],
)
async def test_progress_is_relayed(hub: Hub, hub_url: str, via: tuple[str, str], direct: Client, mount: str) -> None:
    arguments = {"duration": 0.2, "steps": 2}
    seen: dict[str, list[tuple[float, float | None]]] = {"hub": [], "direct": []}

    def recorder(key: str) -> Any:
        async def record(progress: float, total: float | None, message: str | None) -> None:
            seen[key].append((progress, total))

        return record

    async with _connect(hub, hub_url, *via) as client:
        with anyio.fail_after(10):
            through_hub = await client.call_tool(
                f"{mount}_trigger-long-running-operation", arguments, progress_callback=recorder("hub")
            )
            directly = await direct.call_tool(
                "trigger-long-running-operation", arguments, progress_callback=recorder("direct")
            )
    assert dump(through_hub.content) == dump(directly.content)
    assert seen["direct"] == [(1, 2), (2, 2)]
    assert seen["hub"] == seen["direct"]


# -- resources -------------------------------------------------------------------------------------


async def test_resource_and_template_lists_match_the_servers_own(client: Client, direct: Client, mount: str) -> None:
    resources = dump((await client.list_resources()).resources)
    templates = dump((await client.list_resource_templates()).resource_templates)

    listed = unprefixed(resources, mount, "uri")
    expected = keyed(dump((await direct.list_resources()).resources), "uri")
    assert listed == expected
    assert f"{STATIC_DOCS}architecture.md" in listed

    listed_templates = unprefixed(templates, mount, "uriTemplate")
    expected_templates = keyed(dump((await direct.list_resource_templates()).resource_templates), "uriTemplate")
    assert listed_templates == expected_templates
    assert listed_templates.keys() == {
        "demo://resource/dynamic/text/{resourceId}",
        "demo://resource/dynamic/blob/{resourceId}",
    }
    assert all(r["uri"].startswith(("everything+", "remote+")) for r in resources)


async def test_reading_resources_matches_reading_them_directly(client: Client, direct: Client, mount: str) -> None:
    static = [r.uri for r in (await direct.list_resources()).resources]
    assert len(static) == 7
    for uri in static:
        through_hub = dump((await client.read_resource(f"{mount}+{uri}")).contents)
        directly = dump((await direct.read_resource(uri)).contents)
        assert uris(through_hub) == [f"{mount}+{uri}"]
        assert native(through_hub, mount) == native(directly, mount)
        assert [c["text"] for c in through_hub] == [c["text"] for c in directly]  # static: byte for byte
    # From the templates: text and blob.
    for uri in ("demo://resource/dynamic/text/5", "demo://resource/dynamic/blob/6"):
        through_hub = dump((await client.read_resource(f"{mount}+{uri}")).contents)
        directly = dump((await direct.read_resource(uri)).contents)
        assert uris(through_hub) == [f"{mount}+{uri}"]
        assert native(through_hub, mount) == native(directly, mount)


async def test_resource_errors_pass_through(client: Client, direct: Client, mount: str) -> None:
    uri = "demo://resource/dynamic/text/not-a-number"
    with pytest.raises(MCPError) as through_hub:
        await client.read_resource(f"{mount}+{uri}")
    with pytest.raises(MCPError) as directly:
        await direct.read_resource(uri)
    assert (through_hub.value.code, through_hub.value.message) == (directly.value.code, directly.value.message)


# -- prompts and completion ------------------------------------------------------------------------


async def test_prompt_list_matches_the_servers_own(client: Client, direct: Client, mount: str) -> None:
    listed = unprefixed(dump((await client.list_prompts()).prompts), mount, "name")
    expected = keyed(dump((await direct.list_prompts()).prompts), "name")
    assert listed == expected
    assert listed.keys() == {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}


async def test_getting_prompts_matches_getting_them_directly(client: Client, direct: Client, mount: str) -> None:
    for name, arguments in (
        ("simple-prompt", None),
        ("args-prompt", {"city": "Lyon"}),
        ("args-prompt", {"city": "Austin", "state": "TX"}),
        ("completable-prompt", {"department": "Sales", "name": "Eve"}),
        ("resource-prompt", {"resourceType": "Text", "resourceId": "3"}),
        ("resource-prompt", {"resourceType": "Blob", "resourceId": "4"}),
    ):
        through_hub = await client.get_prompt(f"{mount}_{name}", arguments)
        directly = await direct.get_prompt(name, arguments)
        assert native(dump(through_hub.messages), mount) == native(dump(directly.messages), mount), name
        assert through_hub.description == directly.description

    weather = await client.get_prompt(f"{mount}_args-prompt", {"city": "Austin", "state": "TX"})
    assert weather.messages[0].content.text == "What's weather in Austin, TX?"  # type: ignore[union-attr]
    embedded = await client.get_prompt(f"{mount}_resource-prompt", {"resourceType": "Blob", "resourceId": "4"})
    assert embedded.messages[1].content.resource.uri == f"{mount}+demo://resource/dynamic/blob/4"  # type: ignore[union-attr]


async def test_completion_matches_completion_directly(client: Client, direct: Client, mount: str) -> None:
    cases: list[tuple[Any, Any, dict[str, str], dict[str, str] | None, list[str]]] = [
        (
            PromptReference(name=f"{mount}_completable-prompt"),
            PromptReference(name="completable-prompt"),
            {"name": "department", "value": "S"},
            None,
            ["Sales", "Support"],
        ),
        (
            PromptReference(name=f"{mount}_completable-prompt"),
            PromptReference(name="completable-prompt"),
            {"name": "name", "value": ""},
            {"department": "Engineering"},
            ["Alice", "Bob", "Charlie"],
        ),
        (
            PromptReference(name=f"{mount}_resource-prompt"),
            PromptReference(name="resource-prompt"),
            {"name": "resourceType", "value": "B"},
            None,
            ["Blob"],
        ),
        (
            ResourceTemplateReference(uri=f"{mount}+demo://resource/dynamic/text/{{resourceId}}"),
            ResourceTemplateReference(uri="demo://resource/dynamic/text/{resourceId}"),
            {"name": "resourceId", "value": "42"},
            None,
            ["42"],
        ),
        (
            ResourceTemplateReference(uri=f"{mount}+demo://resource/dynamic/blob/{{resourceId}}"),
            ResourceTemplateReference(uri="demo://resource/dynamic/blob/{resourceId}"),
            {"name": "resourceId", "value": "x"},
            None,
            [],
        ),
    ]
    for hub_ref, native_ref, argument, context, values in cases:
        through_hub = await client.complete(hub_ref, argument, context)
        directly = await direct.complete(native_ref, argument, context)
        assert dump(through_hub.completion) == dump(directly.completion), argument
        assert through_hub.completion.values == values


# -- a large result, both ways ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(MOUNTS))
async def test_a_large_result_arrives_whole(tmp_path: Path, everything_url: str, kind: str) -> None:
    """gzip-file-as-resource on ~900 KiB of noise: a request and a result of ~1.2 MB each, over 1 MiB.

    A hub of its own (the tool adds a session resource to the server, which would change
    the module hub's listings), reached every way; compared with a direct call.
    """
    mount = MOUNTS[kind]
    payload = random.Random(7).randbytes(900 * 1024)
    data = "data:application/octet-stream;base64," + base64.b64encode(payload).decode()
    config = make_config(tmp_path, _servers(everything_url, kind))

    large_direct = streamable_http_client(everything_url, max_sse_event_size=None) if kind == "http" else None
    async with (
        running_hub(config) as hub,
        serve_app(build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)) as base,
        Client(large_direct or _direct_target(kind, everything_url), cache=None, **AS_THE_HUB_ASKS) as direct,
    ):
        with anyio.fail_after(30):
            directly = await direct.call_tool(
                "gzip-file-as-resource", {"name": "direct.gz", "data": data, "outputType": "resource"}
            )
        expected_blob = directly.content[0].resource.blob  # type: ignore[union-attr]
        assert gzip.decompress(base64.b64decode(expected_blob)) == payload
        assert len(expected_blob) > 1024 * 1024

        for path, mode in CLIENTS:
            async with _connect(hub, f"{base}/mcp", path, mode, large=True) as client:
                name = f"hub-{path}-{mode}.gz"
                with anyio.fail_after(30):
                    embedded = await client.call_tool(
                        f"{mount}_gzip-file-as-resource", {"name": name, "data": data, "outputType": "resource"}
                    )
                    linked = await client.call_tool(
                        f"{mount}_gzip-file-as-resource", {"name": name, "data": data, "outputType": "resourceLink"}
                    )
                    link = linked.content[0].uri  # type: ignore[union-attr]
                    read = await client.read_resource(link)

                uri = f"{mount}+demo://resource/session/{name}"
                assert embedded.is_error is False
                assert embedded.content[0].resource.uri == uri  # type: ignore[union-attr]
                assert embedded.content[0].resource.blob == expected_blob  # type: ignore[union-attr]
                assert link == uri
                assert read.contents[0].uri == uri
                assert read.contents[0].blob == expected_blob  # type: ignore[union-attr]

                # The server announced its new resource; the hub lists it.
                async def listed(client: Client = client, uri: str = uri) -> bool:
                    return uri in {r.uri for r in (await client.list_resources()).resources}

                await wait_for(listed, timeout=10)
