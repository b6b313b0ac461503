"""Header fields on the hub's HTTP edges: values read as RFC 9110 defines them (without the whitespace around
them), and `Mcp-Param-*` headers (2026-07-28) checked on the way in and produced for the server on the way out.

Header values with whitespace at their edges are sent over a raw TCP connection: HTTP clients (httpx2's
h11 among them) refuse to send them, as clients should, but a server must still accept them."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.caching import CACHEABLE_METHODS, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from mcp_hub.config import parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.server.http import build_app
from mcp_hub.server.http.fields import trimmed_headers
from tests.conftest import fixture_server, make_config, running_hub, serve_app
from tests.harness.wire import MODERN, MODERN_META, legacy_session, modern_call
from tests.servers.fixture import build_server

pytestmark = pytest.mark.anyio


# -- a raw HTTP/1.1 exchange --------------------------------------------------------------------------------


async def raw_post(url: str, headers: list[tuple[str, str]], body: Any) -> tuple[int, dict[str, str], Any]:
    """POST `body` as JSON with exactly these header lines; the status, headers and JSON (or SSE data) answer."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(data)}"]
    lines += [f"{name}:{value}" for name, value in headers]
    lines.append("Connection: close")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data
    received = bytearray()
    with anyio.fail_after(30):
        async with await anyio.connect_tcp(parts.hostname or "127.0.0.1", parts.port or 80) as stream:
            await stream.send(request)
            try:
                while True:
                    received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
    head, _, payload = bytes(received).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    answer_headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    if answer_headers.get("transfer-encoding") == "chunked":
        payload = _dechunked(payload)
    text = payload.decode()
    if answer_headers.get("content-type", "").startswith("text/event-stream"):
        answer: Any = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")][-1]
    elif answer_headers.get("content-type", "").startswith("application/json"):
        answer = json.loads(text)
    else:
        answer = text
    return int(status_line.split()[1]), answer_headers, answer


def _dechunked(payload: bytes) -> bytes:
    out = bytearray()
    while payload:
        size_line, _, rest = payload.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        payload = rest[size + 2 :]
    return bytes(out)


def padded(headers: dict[str, str], *names: str) -> list[tuple[str, str]]:
    """The header lines, with spaces and tabs around the values of `names` (RFC 9110's OWS)."""
    return [(name, f" \t {value}\t  " if name in names else f" {value}") for name, value in headers.items()]


# -- reading header values -----------------------------------------------------------------------------------


def test_values_lose_only_the_spaces_and_tabs_around_them() -> None:
    headers = [(b"mcp-name", b"\t get weather  "), (b"accept", b"a, b"), (b"x-empty", b""), (b"x-blank", b" \t ")]
    assert trimmed_headers(headers) == [
        (b"mcp-name", b"get weather"),
        (b"accept", b"a, b"),
        (b"x-empty", b""),
        (b"x-blank", b""),
    ]
    assert trimmed_headers([(b"mcp-name", b"x"), (b"accept", b"a, b")]) is None  # unchanged: no copy


@asynccontextmanager
async def hub_url(tmp_path: Path) -> AsyncIterator[str]:
    """A hub with the fixture server `srv`, over HTTP on loopback; its endpoint's URL."""
    config = make_config(tmp_path, {"srv": fixture_server("srv")})
    async with running_hub(config) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(app) as base:
            yield f"{base}/mcp"


async def test_a_2026_request_with_whitespace_around_its_header_values_is_served(tmp_path: Path) -> None:
    """`Mcp-Name:  srv_echo  ` names the tool `srv_echo` (the conformance suite's
    `sep-2243-server-accepts-whitespace-header-value`), as do the method and version headers."""
    async with hub_url(tmp_path) as url:
        headers, body = modern_call("srv_echo", {"text": "padded"})
        for names in (("Mcp-Name",), ("Mcp-Name", "Mcp-Method", "MCP-Protocol-Version", "Accept", "Content-Type")):
            status, _, answer = await raw_post(url, padded(headers, *names), body)
            assert status == 200, answer
            assert answer["result"]["structuredContent"] == {"text": "padded", "server": "srv"}
        # Whitespace inside a value is part of it: that name is still no tool's.
        status, _, answer = await raw_post(url, padded({**headers, "Mcp-Name": "srv _echo"}), body)
        assert status == 400 and answer["error"]["code"] == -32020


async def test_a_handshake_era_request_with_whitespace_around_its_session_id_is_served(tmp_path: Path) -> None:
    async with hub_url(tmp_path) as url, httpx2.AsyncClient(timeout=30) as http:
        session = await legacy_session(http, url)
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "srv_echo", "arguments": {}}}
        body["params"]["arguments"] = {"text": "in session"}
        status, _, answer = await raw_post(url, padded(session, "Mcp-Session-Id", "MCP-Protocol-Version"), body)
    assert status == 200, answer
    assert answer["result"]["structuredContent"] == {"text": "in session", "server": "srv"}


# -- Mcp-Param-* headers ---------------------------------------------------------------------------------------

LOOKUP = {
    "name": "lookup",
    "description": "Where a region's data lives; routed on its Region and Shard parameters.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "shard": {"type": "integer", "x-mcp-header": "Shard"},
            "query": {"type": "string"},
        },
        "required": ["region"],
    },
}


def routed_server(seen: list[dict[str, str]]) -> Any:
    """An SDK server over streamable HTTP with one tool whose parameters are mirrored into headers; the
    `Mcp-*` headers of each `tools/call` it is sent go to `seen`. The SDK refuses a call whose headers and
    arguments disagree (-32020), as the protocol asks of a server."""

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        return {"resultType": "complete", "tools": [LOOKUP]}

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        args = params.arguments or {}
        text = f"{args.get('region')}/{args.get('shard')}"
        return {"resultType": "complete", "content": [{"type": "text", "text": text}]}

    hints = {method: CacheHint() for method in CACHEABLE_METHODS if method != "server/discover"}
    server = Server("routed", cache_hints=hints, on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app()

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode(): v.decode() for k, v in scope["headers"] if k.startswith(b"mcp-")}
            if headers.get("mcp-method") == "tools/call":
                seen.append(headers)
        await app(scope, receive, send)

    return recording


def sentinel(value: str) -> str:
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


@asynccontextmanager
async def routed_hub(tmp_path: Path, seen: list[dict[str, str]]) -> AsyncIterator[str]:
    """The routed server mounted as `geo` (its tool is `geo_lookup` to the hub's clients) by a hub served
    over HTTP; the hub's endpoint URL."""
    async with serve_app(routed_server(seen)) as upstream:
        config = make_config(tmp_path, {"geo": {"url": f"{upstream}/mcp"}})
        async with running_hub(config) as hub:
            app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
            async with serve_app(app) as base:
                yield f"{base}/mcp"


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_a_renamed_tools_parameter_headers_reach_the_server_as_it_names_them(tmp_path: Path, mode: str) -> None:
    """A 2026-07-28 client's call reaches the server in 2026-07-28: `Mcp-Name` is the server's own name for the
    tool, and each parameter the server marks is mirrored into its header, Base64-encoded where the value is not
    plain ASCII or has whitespace at its edges. A handshake-era client's reaches it in the handshake era, as that
    client's would directly (upstream/era.py), with no such headers."""
    seen: list[dict[str, str]] = []
    async with routed_hub(tmp_path, seen) as url, Client(streamable_http_client(url), mode=mode, cache=None) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        plain = await client.call_tool("geo_lookup", {"region": "eu-west1", "shard": 3, "query": "q"})
        encoded = await client.call_tool("geo_lookup", {"region": " Zürich ", "query": "q"})
    assert tools["geo_lookup"].input_schema == LOOKUP["inputSchema"]
    assert [plain.content[0].text, encoded.content[0].text] == ["eu-west1/3", " Zürich /None"]  # type: ignore[union-attr]
    if mode == "legacy":
        assert seen == []  # handshake-era POSTs name no method in their headers
        return
    assert seen[0]["mcp-name"] == "lookup"
    assert (seen[0]["mcp-param-region"], seen[0]["mcp-param-shard"]) == ("eu-west1", "3")
    assert seen[1]["mcp-param-region"] == sentinel(" Zürich ")
    assert "mcp-param-shard" not in seen[1]  # no value, no header


async def test_parameter_headers_are_compared_with_the_arguments_once_decoded(tmp_path: Path) -> None:
    """A client's `Mcp-Param-*` headers must agree with its arguments: a Base64-encoded value is decoded, and
    the whitespace around a plain one is no part of it; a disagreeing one is refused with -32020 before the
    server is called."""
    seen: list[dict[str, str]] = []
    async with routed_hub(tmp_path, seen) as url:
        headers, body = modern_call("geo_lookup", {"region": "Zürich", "shard": 7})

        async def post(**params: str) -> tuple[int, Any]:
            status, _, answer = await raw_post(url, padded({**headers, **params}, *params), body)
            return status, answer

        status, answer = await post(**{"Mcp-Param-Region": sentinel("Zürich"), "Mcp-Param-Shard": "7"})
        assert (status, answer["result"]["content"]) == (200, [{"type": "text", "text": "Zürich/7"}])
        assert (await post(**{"Mcp-Param-Region": sentinel("Zürich"), "Mcp-Param-Shard": "7.0"}))[0] == 200
        for wrong in (
            {"Mcp-Param-Region": sentinel("Zurich"), "Mcp-Param-Shard": "7"},
            {"Mcp-Param-Region": "=?base64?not base64?=", "Mcp-Param-Shard": "7"},
            {"Mcp-Param-Region": sentinel("Zürich")},
            {"Mcp-Param-Region": sentinel("Zürich"), "Mcp-Param-Shard": "8"},
        ):
            status, answer = await post(**wrong)
            assert (status, answer["error"]["code"]) == (400, -32020), wrong
    assert len(seen) == 2  # the refused calls never reached the server


async def test_a_2026_envelope_with_whitespace_in_the_protocol_version_header_only(tmp_path: Path) -> None:
    """The header's whitespace goes; the body's version is compared as it is."""
    async with hub_url(tmp_path) as url:
        headers, body = modern_call("srv_echo", {"text": "x"})
        body["params"]["_meta"] = {**MODERN_META, "io.modelcontextprotocol/protocolVersion": f" {MODERN}"}
        status, _, answer = await raw_post(url, padded(headers, "MCP-Protocol-Version"), body)
    assert status == 400 and answer["error"]["code"] == -32020


# -- what the hub sends servers ---------------------------------------------------------------------------------


async def test_a_mounts_header_values_are_sent_without_the_whitespace_around_them(tmp_path: Path) -> None:
    """A configured header value (a token from the environment, say) with spaces or tabs around it is sent
    without them, on every request to the server; HTTP clients refuse to send such a value, which took the
    mount down."""
    tenants: set[str] = set()
    app = build_server("remote").streamable_http_app()

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            tenants.update(v.decode() for k, v in scope["headers"] if k == b"x-tenant")
        await app(scope, receive, send)

    async with serve_app(recording) as upstream:
        headers = {"X-Tenant": "${TENANT}", "Authorization": " Bearer\tsecret-token-1234\t"}
        with pytest.MonkeyPatch.context() as env:
            env.setenv("TENANT", "acme ")
            config = make_config(tmp_path, {"remote": {"url": f"{upstream}/mcp", "headers": headers}})
        assert config.servers["remote"].headers == {"X-Tenant": "acme", "Authorization": "Bearer\tsecret-token-1234"}
        for mode in ("legacy", MODERN):
            async with running_hub(config) as hub, Client(hub.endpoint.server, mode=mode, cache=None) as client:
                echo = await client.call_tool("remote_echo", {"text": "tenant"})
                assert echo.structured_content == {"text": "tenant", "server": "remote"}
    assert tenants == {"acme"}


def test_a_mounts_header_value_on_more_than_one_line_is_a_config_error() -> None:
    text = '[servers.remote]\nurl = "https://example.com/mcp"\nheaders = { Authorization = "Bearer ${TOKEN}" }\n'
    with pytest.raises(ConfigError, match=r"servers\.remote\.headers\.Authorization: .*line break"):
        parse_config(text, environ={"TOKEN": "secret-token-1234\n"})
