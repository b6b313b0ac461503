"""Results sized for the model (mcp_hub/results/, chain/results.py, server/reading.py).

Real servers give megabyte results: npm's server-everything (its `echo` of a megabyte message, over stdio),
PyPI's mcp-server-fetch (a megabyte page of a loopback web server) and the fixture server (`big`, `echo`).
Through the hub, each reaches the SDK's client cut to its budget, with a note and links, in both protocol
eras and over both transports (`mcp-hub serve` over stdio, and streamable HTTP), and its whole comes back
page by page, by `resources/read` and by the `read_result` tool, identical when the pages are joined.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import random
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from mcp_hub.config import load_config
from mcp_hub.results import result_budget, shape, tokens
from mcp_hub.results.shaping import Reading
from mcp_hub.results.tokens import BYTES
from mcp_hub.server.http import build_app
from tests.conftest import (
    EVERYTHING,
    fixture_server,
    hub_command,
    hub_environment,
    module_server,
    running_hub,
    serve_app,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "2026-07-28"]
BUDGET = 20_000
"""The default `[results] max_result_tokens`."""
KEYS = {"alice": "a" * 32, "bob": "b" * 32}
READING = Reading("read_result", 3600)
MEGABYTE = 1_048_576


def _body(size: int) -> str:
    """`size` characters of text that reads like prose and code (not one repeated character), ending in a marker."""
    line = "The quick brown fox jumps over the lazy dog; def f(x): return x * 2  # ünïcødé ✓\n"
    text = (line * (size // len(line) + 1))[: size - 4]
    return text + "END\n"


def _text_tokens(result: types.CallToolResult) -> int:
    counter = tokens()
    return sum(counter.count(block.text) for block in result.content if isinstance(block, types.TextContent))


def _links(result: types.CallToolResult) -> list[str]:
    return [str(block.uri) for block in result.content if isinstance(block, types.ResourceLink)]


async def _read_by_resource(client: Client, uri: str) -> tuple[str, int]:
    """The whole of a kept part, page after page with resources/read; and the number of pages."""
    joined: list[str] = []
    next_uri: str | None = uri
    pages = 0
    while next_uri is not None:
        read = await client.read_resource(next_uri)
        content = read.contents[0]
        assert isinstance(content, types.TextResourceContents)
        assert tokens().count(content.text) <= BUDGET
        joined.append(content.text)
        next_uri = (content.meta or {})["mcp-hub/page"]["next"]
        pages += 1
    return "".join(joined), pages


async def _read_by_tool(client: Client, uri: str) -> tuple[str, int]:
    """The whole of a kept part, page after page with the read_result tool; and the number of pages."""
    joined: list[str] = []
    offset = 0
    pages = 0
    while True:
        read = await client.call_tool("read_result", {"uri": uri, "offset": offset})
        assert read.is_error is False
        page, note = read.content[0], read.content[1]
        assert isinstance(page, types.TextContent) and isinstance(note, types.TextContent)
        assert tokens().count(page.text) <= BUDGET
        joined.append(page.text)
        offset += len(page.text)
        pages += 1
        if "This is the end." in note.text:
            return "".join(joined), pages


def _pages_app(body: str) -> Starlette:
    async def robots(request: Any) -> Response:
        return PlainTextResponse("not here", status_code=404)

    async def page(request: Any) -> Response:
        return PlainTextResponse(body)

    return Starlette(routes=[Route("/robots.txt", robots), Route("/big.txt", page)])


def _fetch_server(work: Path) -> dict[str, Any]:
    """PyPI's mcp-server-fetch, loopback allowed; no proxy, and no Node.js on its PATH (see test_corpus.py)."""
    no_node = work / "no-node"
    no_node.mkdir(exist_ok=True)
    env = {"NO_PROXY": "*", "no_proxy": "*", "PATH": str(no_node)}
    return module_server("mcp_server_fetch", "--allow-private-ips", env=env)  # forked from a preloaded process


def _everything() -> dict[str, Any]:
    return {"command": str(EVERYTHING), "args": ["stdio"]}


Connect = Callable[..., AbstractAsyncContextManager[Client]]


@asynccontextmanager
async def _http_hub(
    tmp_path: Path,
    servers: dict[str, dict[str, Any]],
    results: dict[str, Any] | None = None,
    policy: str | None = None,
    redis: str | None = None,
) -> AsyncIterator[tuple[Any, Connect]]:
    """A hub mounting `servers` with an audit file and `[results]` (None: as shipped), serving streamable HTTP with
    the API keys of `KEYS`; `connect(principal, mode)` is a client of it."""
    path = write_config(tmp_path / "hub.toml", servers, results=results)
    keys = ", ".join(f'{name} = "${{{name.upper()}_KEY}}"' for name in KEYS)
    text = f'\n[auth]\napi_keys = {{ {keys} }}\n\n[audit]\nfile = "audit.jsonl"\n'
    if policy is not None:
        (tmp_path / "policies").mkdir()
        (tmp_path / "policies" / "policy.toml").write_text(textwrap.dedent(policy), encoding="utf-8")
        text += '\n[policy]\ndir = "policies"\nreload = false\n'
    if redis is not None:
        text += f'\n[cluster]\nredis = "{redis}"\n'
    with path.open("a", encoding="utf-8") as file:
        file.write(text)
    config = load_config(path, environ={f"{name.upper()}_KEY": key for name, key in KEYS.items()})
    async with running_hub(config) as hub:
        app = build_app(
            hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, api_keys=config.auth.api_keys
        )
        async with serve_app(app) as base:

            @asynccontextmanager
            async def connect(principal: str, mode: str = "2026-07-28") -> AsyncIterator[Client]:
                async with httpx2.AsyncClient(headers={"X-API-Key": KEYS[principal]}, timeout=60) as http:
                    transport = streamable_http_client(f"{base}/mcp", http_client=http)
                    async with Client(transport, mode=mode, cache=None) as client:
                        yield client

            yield hub, connect


@asynccontextmanager
async def _stdio_hub(tmp_path: Path, servers: dict[str, dict[str, Any]], mode: str) -> AsyncIterator[Client]:
    """`mcp-hub serve` over stdio mounting `servers` (default `[results]`), once every mount's tools are listed."""
    config = write_config(tmp_path / "hub.toml", servers, results=None)
    command = hub_command("serve", "--config", str(config))
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(tmp_path), env=hub_environment())
    async with Client(params, mode=mode, cache=None) as client:

        async def listed() -> bool:
            names = {tool.name for tool in (await client.list_tools()).tools}
            return all(any(name.startswith(f"{mount}_") for name in names) for mount in servers)

        await wait_for(listed, timeout=60)
        yield client


# -- megabyte results of real servers, both eras, both transports ------------------------------------


@asynccontextmanager
async def _client(
    tmp_path: Path, transport: str, mode: str, servers: dict[str, dict[str, Any]]
) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with _stdio_hub(tmp_path, servers, mode) as client:
            yield client
        return
    async with _http_hub(tmp_path, servers) as (_, connect), connect("alice", mode) as client:
        yield client


@pytest.mark.slow
@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_megabyte_result_reaches_the_client_within_budget_and_reads_back_whole(
    tmp_path: Path, transport: str, mode: str
) -> None:
    message = _body(MEGABYTE)
    page = _body(990_000)  # fetch returns at most 999,999 characters; with its few multibyte ones, over a MB
    async with serve_app(_pages_app(page)) as site:
        servers = {"everything": _everything(), "fetch": _fetch_server(tmp_path)}
        async with _client(tmp_path, transport, mode, servers) as client:
            assert "read_result" in {tool.name for tool in (await client.list_tools()).tools}
            with anyio.fail_after(120):
                echoed = await client.call_tool("everything_echo", {"message": message})
                fetched = await client.call_tool(
                    "fetch_fetch", {"url": f"{site}/big.txt", "raw": True, "max_length": 999_999}
                )
                for result in (echoed, fetched):
                    assert result.is_error is not True
                    assert _text_tokens(result) <= BUDGET
                    assert "[mcp-hub] This result was cut to fit a budget of 20,000 tokens" in result.content[1].text  # type: ignore[union-attr]
                # server-everything's echo: read back with resources/read
                [echo_link] = _links(echoed)
                whole, pages = await _read_by_resource(client, echo_link)
                assert whole == f"Echo: {message}" and pages > 2
                assert whole.startswith(echoed.content[0].text)  # type: ignore[union-attr]
                # mcp-server-fetch's page: read back with the read_result tool
                [fetch_link] = _links(fetched)
                whole, pages = await _read_by_tool(client, fetch_link)
                assert whole.endswith(f"Contents of {site}/big.txt:\n{page}") and pages > 2
                assert whole.startswith(fetched.content[0].text)  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ERAS)
async def test_a_megabyte_resource_of_server_everything_is_kept_and_read_back_whole(tmp_path: Path, mode: str) -> None:
    """server-everything gzips a megabyte (of random bytes: it does not shrink) into a session resource, and answers
    with it embedded: the embedded resource becomes a link, and reading the resource itself through the hub gives a
    note in place of its blob; both links read back the blob, identical."""
    data = random.Random(43).randbytes(MEGABYTE)

    async def served(request: Any) -> Response:
        return Response(data, media_type="application/octet-stream")

    async with (
        serve_app(Starlette(routes=[Route("/random.bin", served)])) as site,
        _http_hub(tmp_path, {"everything": _everything()}) as (_, connect),
        connect("alice", mode) as client,
    ):
        tools = [tool.name for tool in (await client.list_tools()).tools]
        [gzip_tool] = [name for name in tools if name.endswith("gzip-file-as-resource")]
        arguments = {"name": "big.gz", "data": f"{site}/random.bin", "outputType": "resource"}
        with anyio.fail_after(60):
            answer = await client.call_tool(gzip_tool, arguments)
        assert answer.is_error is not True
        [embedded] = [block for block in answer.content if isinstance(block, types.ResourceLink)]
        assert str(embedded.uri).startswith("hub://results/") and embedded.name.endswith("big.gz")
        assert "replaced by a link to it" in answer.content[1].text  # type: ignore[union-attr]
        kept = (await client.read_resource(str(embedded.uri))).contents[0]
        assert isinstance(kept, types.BlobResourceContents)
        assert gzip.decompress(base64.b64decode(kept.blob)) == data
        read = await client.read_resource(embedded.name)  # the session resource, through the hub
        assert all(isinstance(content, types.TextResourceContents) for content in read.contents)
        note = read.contents[-1]
        assert isinstance(note, types.TextResourceContents) and "[mcp-hub] This result was cut" in note.text
        kept_uri = str(read.contents[0].uri)
        again = (await client.read_resource(kept_uri)).contents[0]
        assert isinstance(again, types.BlobResourceContents) and again.blob == kept.blob


# -- structure, images, embedded resources (pure) ----------------------------------------------------


@pytest.mark.slow
def test_structured_content_is_cut_by_its_structure_into_valid_json() -> None:
    rows = [{"id": n, "name": f"row {n}", "tags": ["a", "b"] * 50, "note": "x" * 3000} for n in range(3000)]
    structured = {"rows": rows, "total": 3000, "source": "inventory"}
    result = {"content": [{"type": "text", "text": json.dumps(structured)}], "structuredContent": structured}
    shaped = shape(
        result, "tools/call", 4000, counter=tokens(), result_id="0" * 32, reading=READING, max_pixels=1_000_000
    )
    assert shaped is not None
    cut = shaped.result["structuredContent"]
    assert json.loads(json.dumps(cut)) == cut  # plain JSON values: valid JSON, whatever the cut
    assert set(cut) == {"rows", "total", "source"} and cut["total"] == 3000 and cut["source"] == "inventory"
    assert 0 < len(cut["rows"]) < 3000 and cut["rows"][0]["id"] == 0
    assert all(set(row) == {"id", "name", "tags", "note"} for row in cut["rows"])
    note = shaped.result["content"][1]["text"]
    assert f"$.rows: the first {len(cut['rows'])} of 3,000 items" in note
    kept = {part.name: part for part in shaped.parts}
    assert json.loads(kept["structured"].text or "") == structured  # the whole, kept as JSON
    counted = sum(tokens().count(b["text"]) for b in shaped.result["content"] if b["type"] == "text")
    assert counted + tokens().count(json.dumps(cut)) <= 4000


def test_embedded_resources_become_links_and_large_images_are_downscaled() -> None:
    from PIL import Image

    picture = io.BytesIO()
    Image.new("RGB", (2000, 1500), (200, 30, 30)).save(picture, format="PNG")
    image = base64.b64encode(picture.getvalue()).decode()
    result = {
        "content": [
            {"type": "text", "text": _body(200_000)},
            {"type": "image", "data": image, "mimeType": "image/png"},
            {
                "type": "resource",
                "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "n" * 9000},
            },
        ]
    }
    shaped = shape(
        result, "tools/call", 5000, counter=tokens(), result_id="1" * 32, reading=READING, max_pixels=750_000
    )
    assert shaped is not None
    blocks = shaped.result["content"]
    small = Image.open(io.BytesIO(base64.b64decode(blocks[1]["data"])))
    assert small.width * small.height <= 750_000 and small.width / small.height == pytest.approx(2000 / 1500, 0.01)
    assert blocks[2] == {
        "type": "resource_link",
        "uri": f"hub://results/{'1' * 32}/2",
        "name": "file:///notes.txt",
        "mimeType": "text/plain",
        "description": "The embedded resource file:///notes.txt, kept by the hub.",
    }
    kept = {part.name: part for part in shaped.parts}
    assert kept["1"].blob == image and kept["2"].text == "n" * 9000 and kept["0"].text == result["content"][0]["text"]
    assert "downscaled to" in blocks[3]["text"] and "replaced by a link" in blocks[3]["text"]


def test_a_result_within_budget_is_left_as_it_is() -> None:
    result = {"content": [{"type": "text", "text": "hello " * 1000}], "structuredContent": {"a": [1, 2, 3]}}
    assert (
        shape(result, "tools/call", 2000, counter=tokens(), result_id="2" * 32, reading=READING, max_pixels=1) is None
    )
    over_bytes_within_tokens = {"content": [{"type": "text", "text": "hello " * 1000}]}  # 6,000 bytes, 1,000 tokens
    assert (
        shape(
            over_bytes_within_tokens,
            "tools/call",
            1500,
            counter=tokens(),
            result_id="3" * 32,
            reading=READING,
            max_pixels=1,
        )
        is None
    )


def test_heads_stay_within_the_budget_with_either_counter() -> None:
    text = _body(300_000)
    for counter in (tokens(), BYTES):
        head = counter.head(text, 5000)
        assert text.startswith(head) and 0 < counter.count(head) <= 5000
        assert counter.count(text[: len(head) + 2000]) > 5000  # not much less than it could be
    assert tokens().name == "o200k_base (bpe-openai)" and BYTES.count("abcd" * 10) == 10


@pytest.mark.parametrize(
    ("rule", "endpoint", "profile", "hub", "applies"),
    [
        (500, 100, 100, 20_000, 500),  # a matching rule wins, more room or less
        (0, 100, 100, 20_000, None),  # a rule's 0: that tool's results pass whole
        (None, 3000, 8000, 20_000, 3000),  # else the smaller of the endpoint's and the profile's
        (None, None, 8000, 20_000, 8000),
        (None, 0, 8000, 20_000, 8000),  # an endpoint's 0 leaves the profile's
        (None, 0, 0, 20_000, None),
        (None, None, None, 20_000, 20_000),  # else the hub's
        (None, None, None, 0, None),
    ],
)
def test_which_budget_applies(rule: Any, endpoint: Any, profile: Any, hub: int, applies: Any) -> None:
    assert result_budget(rule, endpoint, profile, hub) == applies


# -- through the hub: audit, principals, policy, guardrails --------------------------------------------


@pytest.mark.slow
async def test_the_audit_records_the_cut_and_another_principal_cannot_read_the_kept_result(tmp_path: Path) -> None:
    async with (
        _http_hub(tmp_path, {"fx": fixture_server("fx")}) as (_, connect),
        connect("alice") as alice,
        connect("bob", "legacy") as bob,
    ):
        small = await alice.call_tool("fx_echo", {"text": "hi"})
        assert small.content[0].text == "fx: hi" and len(small.content) == 1  # type: ignore[union-attr]
        big = await alice.call_tool("fx_big", {"size": 400_000})
        [uri] = _links(big)
        assert big.content[0].text == "x" * len(big.content[0].text)  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="was kept for another principal: only the principal that received"):
            await bob.read_resource(uri)
        refused = await bob.call_tool("read_result", {"uri": uri})
        assert refused.is_error is True and "kept for another principal" in refused.content[0].text  # type: ignore[union-attr]
        whole, _ = await _read_by_tool(alice, uri)
        assert whole == "x" * 400_000
        with pytest.raises(MCPError, match="is not kept: it expired"):
            await alice.read_resource(f"hub://results/{'f' * 32}/0")
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    calls = {line["name"]: line for line in lines if line["method"] == "tools/call"}
    assert calls["echo"]["cut"] is None
    cut = calls["big"]["cut"]
    assert 400_000 < cut.pop("bytes") < 400_200  # the whole result as JSON, as its server sent it
    assert cut == {
        "tokens": tokens().count("x" * 400_000),
        "budget": BUDGET,
        "kept": uri.rsplit("/", 1)[0],
        "parts": ["content[0]"],
    }


POLICY = """
[principals]
alice = "reader"
bob = "reader"

[profiles.reader]
default = "allow"
max_result_tokens = 1000

[[profiles.reader.rules]]
effect = "allow"
tools = ["fx/big"]
max_result_tokens = 0

[[profiles.reader.guards]]
detect = ["secrets"]
action = "redact"
on = "results"
"""


@pytest.mark.slow
async def test_a_rule_wins_over_the_profile_and_guardrails_see_the_whole_before_it_is_kept(tmp_path: Path) -> None:
    secret = "AKIA" + "IOSFODNN7EXAMPLE"
    async with (
        _http_hub(tmp_path, {"fx": fixture_server("fx")}, policy=POLICY) as (_, connect),
        connect("alice") as alice,
    ):
        whole = await alice.call_tool("fx_big", {"size": 50_000})  # the rule: no budget for this tool
        assert whole.content[0].text == "x" * 50_000 and len(whole.content) == 1  # type: ignore[union-attr]
        echoed = await alice.call_tool("fx_echo", {"text": "y " * 20_000 + f"key {secret}"})  # the profile's 1,000
        assert _text_tokens(echoed) <= 1000
        [text_link, structured_link] = _links(echoed)
        kept = json.loads(await _read_by_resource_with(alice, structured_link, 1000))
        assert kept["text"].endswith("key [REDACTED:aws_access_key]") and secret not in json.dumps(kept)
        assert (await _read_by_resource_with(alice, text_link, 1000)).endswith("key [REDACTED:aws_access_key]")


async def _read_by_resource_with(client: Client, uri: str, budget: int) -> str:
    joined: list[str] = []
    next_uri: str | None = uri
    while next_uri is not None:
        content = (await client.read_resource(next_uri)).contents[0]
        assert isinstance(content, types.TextResourceContents) and tokens().count(content.text) <= budget
        joined.append(content.text)
        next_uri = (content.meta or {})["mcp-hub/page"]["next"]
    return "".join(joined)


@pytest.mark.slow
async def test_without_a_budget_results_pass_whole_and_no_read_tool_is_listed(tmp_path: Path) -> None:
    async with (
        _http_hub(tmp_path, {"fx": fixture_server("fx")}, results={"max_result_tokens": 0}) as (_, connect),
        connect("alice") as alice,
    ):
        assert "read_result" not in {tool.name for tool in (await alice.list_tools()).tools}
        big = await alice.call_tool("fx_big", {"size": 300_000})
        assert big.content[0].text == "x" * 300_000  # type: ignore[union-attr]


@pytest.mark.slow
async def test_with_a_cluster_the_whole_is_kept_in_redis_and_read_on_another_replica(
    tmp_path: Path, redis_server: Any
) -> None:
    import redis

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with (
        _http_hub(tmp_path / "a", {"fx": fixture_server("fx")}, redis=redis_server.url) as (_, on_a),
        _http_hub(tmp_path / "b", {"fx": fixture_server("fx")}, redis=redis_server.url) as (_, on_b),
        on_a("alice") as alice_on_a,
        on_b("alice") as alice_on_b,
        on_b("bob") as bob_on_b,
    ):
        big = await alice_on_a.call_tool("fx_big", {"size": 300_000})
        [uri] = _links(big)
        result_id = uri.split("/")[3]
        stored = redis.Redis.from_url(redis_server.url)
        try:
            assert 3590_000 < stored.pttl(f"mcp-hub:cache:result:{result_id}") <= 3600_000
        finally:
            stored.close()
        whole, _ = await _read_by_tool(alice_on_b, uri)
        assert whole == "x" * 300_000
        with pytest.raises(MCPError, match="kept for another principal"):
            await bob_on_b.read_resource(uri)


@pytest.mark.slow
async def test_a_curated_endpoints_budget_applies_to_its_calls(tmp_path: Path) -> None:
    path = write_config(tmp_path / "hub.toml", {"fx": fixture_server("fx")}, results=None)
    with path.open("a", encoding="utf-8") as file:
        file.write("\n[endpoints.small]\nmax_result_tokens = 500\n")
    async with running_hub(load_config(path)) as hub:
        async with Client(hub.endpoint.server, mode="legacy", cache=None) as everything:
            whole = await everything.call_tool("fx_big", {"size": 50_000})  # ~6,000 tokens: within 20,000
        async with Client(hub.endpoints["small"].server, mode="2026-07-28", cache=None) as small:
            cut = await small.call_tool("fx_big", {"size": 50_000})
            [uri] = _links(cut)
            page = (await small.read_resource(uri)).contents[0]
    assert whole.content[0].text == "x" * 50_000  # type: ignore[union-attr]
    assert _text_tokens(cut) <= 500 and "a budget of 500 tokens" in cut.content[1].text  # type: ignore[union-attr]
    assert isinstance(page, types.TextResourceContents) and tokens().count(page.text) <= 500


def test_without_pillow_a_large_image_becomes_a_link(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)  # as where Pillow is not installed: `import PIL` fails
    image = base64.b64encode(random.Random(1).randbytes(30_000)).decode()
    picture = {"type": "image", "data": image, "mimeType": "image/png"}
    result = {"content": [{"type": "text", "text": "a chart"}, picture]}
    shaped = shape(result, "tools/call", 5000, counter=tokens(), result_id="4" * 32, reading=READING, max_pixels=1)
    assert shaped is not None
    assert shaped.result["content"][0] == {"type": "text", "text": "a chart"}
    assert shaped.result["content"][1]["type"] == "resource_link"
    assert shaped.result["content"][1]["uri"] == f"hub://results/{'4' * 32}/1"
    assert [(part.name, part.blob) for part in shaped.parts] == [("1", image)]
