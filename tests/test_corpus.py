"""Real third-party servers, mounted through one hub, against a direct connection to each.

The corpus, each server started as its users start it:

- npm: `@modelcontextprotocol/server-filesystem` (on a directory this module makes),
  `server-memory` (its store in a temporary file, `MEMORY_FILE_PATH`), `server-sequential-thinking`,
  and `server-everything` as a stdio child and in its streamable HTTP mode;
- PyPI, on the Python SDK 2.x beside the hub: `mcp-server-time`, `mcp-server-fetch` (fetching
  pages a loopback HTTP server of this module serves), `mcp-server-git` (on a repository this
  module makes with `git init`);
- the Python SDK's 1.x line and PyPI's `fastmcp` (2.x, built on it), under a Python of their own,
  `tests/.venv-sdk1` (made once from `tests/servers/sdk1-requirements.txt`, and reused);
- a server on the SDK's low-level `Server` that implements `tools/list` and `tools/call` only.

Where bubblewrap can run (see README, "Sandbox"), the hub runs every stdio server of the corpus in its sandbox,
as a user would mount it (`sandboxed`), and the direct connections do not: the sandbox changes nothing a
client sees.

One hub mounts them all. Each is listed and called through the hub by a handshake-era client
(`initialize`, 2025-11-25) and by a 2026-07-28 client, and the same requests go to the same server
over a direct connection made as the hub makes its own (`mode="auto"`): the listings are equal
but for the hub's names (`<mount>_`, `<mount>+`), the results are equal but for those names, and
so are the errors and refusals.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.routing import Route

from mcp_hub.hub import Hub
from mcp_hub.upstream.sandbox import unavailable
from tests.conftest import (
    EVERYTHING,
    ROOT,
    hub_client,
    hub_command,
    make_config,
    module_server,
    running_hub,
    script_server,
    serve_app,
    wait_for,
    write_config,
)
from tests.harness.everything import Asked, Script, everything_over_http
from tests.harness.venvs import python_with

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

NPM_BIN = ROOT / "tests" / "npm" / "node_modules" / ".bin"
SERVERS = ROOT / "tests" / "servers"
VENV_SDK1 = ROOT / "tests" / ".venv-sdk1"
SDK1_REQUIREMENTS = SERVERS / "sdk1-requirements.txt"
ERAS = ["legacy", "2026-07-28"]
KINDS = ["tools", "prompts", "resources", "resource_templates"]


# -- the Python of the SDK 1.x servers ----------------------------------------------------------------


def sdk1_python() -> Path:
    """`tests/.venv-sdk1/bin/python`, with `sdk1-requirements.txt` installed; made when missing or stale, by the
    helper that makes the tests' other Pythons of their own (tests/harness/venvs.py: lock-free, renamed into place,
    stamped with its requirements; this Python's pip installs into it, without compiling)."""
    return python_with(VENV_SDK1, SDK1_REQUIREMENTS, sys.executable)


# -- the workspace: a directory to serve, a git repository, pages to fetch ------------------------


def make_tree(root: Path) -> Path:
    files = root / "files"
    (files / "docs").mkdir(parents=True)
    (files / "docs" / "guide.md").write_text("# Guide\n\nFirst line.\nSecond line ✓\n", encoding="utf-8")
    (files / "docs" / "notes.txt").write_text("alpha\nbeta\ngamma\n", encoding="utf-8")
    (files / "data.json").write_text('{"answer": 42}\n', encoding="utf-8")
    return files


def make_repository(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Corpus Test",
        "GIT_AUTHOR_EMAIL": "corpus@example.com",
        "GIT_COMMITTER_NAME": "Corpus Test",
        "GIT_COMMITTER_EMAIL": "corpus@example.com",
        "GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z",
        "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (repo / "README.md").write_text("# A repository\n", encoding="utf-8")
    git("add", "README.md")
    git("commit", "-q", "-m", "First commit")
    (repo / "README.md").write_text("# A repository\n\nMore text.\n", encoding="utf-8")
    git("commit", "-q", "-am", "Second commit")
    git("branch", "feature")
    (repo / "README.md").write_text("# A repository\n\nMore text, not committed.\n", encoding="utf-8")
    (repo / "new.txt").write_text("staged\n", encoding="utf-8")
    git("add", "new.txt")
    return repo


PAGE = """<!doctype html><html><head><title>Corpus page</title></head>
<body><main><h1>Through the hub</h1><p>A page served on loopback, with <a href="/other">a link</a>.</p>
<ul><li>one</li><li>two</li></ul></main></body></html>"""


def pages_app() -> Starlette:
    async def page(request: Any) -> HTMLResponse:
        return HTMLResponse(PAGE)

    async def robots(request: Any) -> PlainTextResponse:
        return PlainTextResponse("User-agent: *\nDisallow: /private\n")

    async def text(request: Any) -> PlainTextResponse:
        return PlainTextResponse("plain text " * 50)

    async def broken(request: Any) -> PlainTextResponse:
        return PlainTextResponse("gone", status_code=500)

    return Starlette(
        routes=[
            Route("/page", page),
            Route("/private", page),
            Route("/robots.txt", robots),
            Route("/text", text),
            Route("/broken", broken),
        ]
    )


# -- the corpus ---------------------------------------------------------------------------------------


@dataclass
class Server:
    """One server of the corpus: its `[servers.X]` table, and the same server for a direct connection."""

    table: dict[str, Any]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Tool calls made through the hub and directly, results and errors compared."""
    prompts: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    """Resource URIs (the server's own) read both ways, beside every listed resource."""
    direct_env: dict[str, str] | None = None
    """The direct connection's environment, where it differs from the mount's."""

    def direct(self) -> StdioServerParameters | str:
        if "url" in self.table:
            return self.table["url"]
        env = self.direct_env if self.direct_env is not None else self.table.get("env")
        return StdioServerParameters(command=self.table["command"], args=self.table.get("args", []), env=env)


def corpus(work: Path, everything_url: str, pages: str, sdk1: Path) -> dict[str, Server]:
    files = make_tree(work)
    repo = make_repository(work)
    python = sys.executable
    # Loopback only, no proxy; and no Node.js on its PATH: readabilipy (which the fetch server uses)
    # would otherwise `npm install` Readability.js into its own package on first use.
    no_node = work / "no-node"
    no_node.mkdir()
    no_proxy = {"NO_PROXY": "*", "no_proxy": "*", "PATH": str(no_node)}
    return {
        "files": Server(
            {"command": str(NPM_BIN / "mcp-server-filesystem"), "args": [str(files)]},
            calls=[
                ("list_allowed_directories", {}),
                ("list_directory", {"path": str(files)}),
                ("directory_tree", {"path": str(files)}),
                ("read_text_file", {"path": str(files / "docs" / "guide.md")}),
                ("read_text_file", {"path": str(files / "docs" / "notes.txt"), "head": 2}),
                ("read_multiple_files", {"paths": [str(files / "data.json"), str(files / "nope.txt")]}),
                ("search_files", {"path": str(files), "pattern": "*.md"}),
                ("get_file_info", {"path": str(files / "docs")}),
                ("write_file", {"path": str(files / "written.txt"), "content": "the same text both ways\n"}),
                ("edit_file", {"path": str(files / "docs" / "notes.txt"), "edits": [], "dryRun": True}),
                # Refusals: outside the allowed directory, a missing file, arguments the schema rejects.
                ("read_text_file", {"path": "/etc/hostname"}),
                ("read_text_file", {"path": str(files / "missing.txt")}),
                ("list_directory", {}),
            ],
        ),
        "memory": Server(
            {
                "command": str(NPM_BIN / "mcp-server-memory"),
                "env": {"MEMORY_FILE_PATH": str(work / "memory-hub.jsonl")},
            },
            direct_env={"MEMORY_FILE_PATH": str(work / "memory-direct.jsonl")},
            # The same calls go to both stores, in the same order: each store holds the same graph.
            calls=[
                (
                    "create_entities",
                    {
                        "entities": [
                            {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
                            {"name": "Engine", "entityType": "machine", "observations": []},
                        ]
                    },
                ),
                ("create_relations", {"relations": [{"from": "Ada", "to": "Engine", "relationType": "programmed"}]}),
                ("add_observations", {"observations": [{"entityName": "Ada", "contents": ["born 1815"]}]}),
                ("search_nodes", {"query": "program"}),
                ("open_nodes", {"names": ["Ada", "Nobody"]}),
                ("read_graph", {}),
                ("add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}),
                ("create_entities", {"entities": [{"name": "no type"}]}),
            ],
        ),
        "thinking": Server(
            {"command": str(NPM_BIN / "mcp-server-sequential-thinking"), "env": {"DISABLE_THOUGHT_LOGGING": "true"}},
            calls=[
                (
                    "sequentialthinking",
                    {
                        "thought": "First, list the servers.",
                        "nextThoughtNeeded": True,
                        "thoughtNumber": 1,
                        "totalThoughts": 2,
                    },
                ),
                ("sequentialthinking", {"thought": "no numbers"}),
            ],
        ),
        "everything": Server(
            {"command": str(EVERYTHING), "args": ["stdio"]},
            calls=[
                ("echo", {"message": "hello ✓"}),
                ("get-sum", {"a": 1, "b": 2}),
                ("get-structured-content", {"location": "Chicago"}),
                ("get-sum", {"a": "one"}),
            ],
            prompts=[("simple-prompt", {}), ("args-prompt", {"city": "Paris", "state": "TX"})],
            reads=["demo://resource/static/document/architecture.md"],
        ),
        "everything-http": Server(
            {"url": everything_url},
            calls=[("echo", {"message": "over http"}), ("get-sum", {"a": 20, "b": 22})],
            prompts=[("simple-prompt", {})],
        ),
        "time": Server(
            {"command": python, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
            calls=[
                ("convert_time", {"source_timezone": "Europe/Paris", "time": "14:30", "target_timezone": "Asia/Tokyo"}),
                ("convert_time", {"source_timezone": "Nowhere/Atlantis", "time": "14:30", "target_timezone": "UTC"}),
                ("convert_time", {"source_timezone": "UTC", "time": "25:99", "target_timezone": "UTC"}),
                ("get_current_time", {"timezone": "Mars/Olympus"}),
            ],
        ),
        "fetch": Server(
            {"command": python, "args": ["-m", "mcp_server_fetch", "--allow-private-ips"], "env": no_proxy},
            calls=[
                ("fetch", {"url": f"{pages}/page"}),
                ("fetch", {"url": f"{pages}/page", "raw": True}),
                ("fetch", {"url": f"{pages}/text", "max_length": 100, "start_index": 10}),
                # Refusals: robots.txt, a server error, a closed port, not a URL, a bad argument.
                ("fetch", {"url": f"{pages}/private"}),
                ("fetch", {"url": f"{pages}/broken"}),
                ("fetch", {"url": "http://127.0.0.1:9/nothing"}),
                ("fetch", {"url": "not a url"}),
                ("fetch", {"url": f"{pages}/page", "max_length": "10"}),
            ],
            prompts=[("fetch", {"url": f"{pages}/page"}), ("fetch", {"url": f"{pages}/broken"})],
        ),
        "fetch-guarded": Server(
            {"command": python, "args": ["-m", "mcp_server_fetch"], "env": no_proxy},
            calls=[("fetch", {"url": f"{pages}/page"})],  # refused: a loopback address
        ),
        "git": Server(
            {"command": python, "args": ["-m", "mcp_server_git", "--repository", str(repo)]},
            calls=[
                ("git_status", {"repo_path": str(repo)}),
                ("git_diff_unstaged", {"repo_path": str(repo)}),
                ("git_diff_staged", {"repo_path": str(repo)}),
                ("git_diff", {"repo_path": str(repo), "target": "feature"}),
                ("git_log", {"repo_path": str(repo), "max_count": 5}),
                ("git_show", {"repo_path": str(repo), "revision": "HEAD~1"}),
                ("git_branch", {"repo_path": str(repo), "branch_type": "local"}),
                # Refusals: an unknown revision, an option smuggled as a revision, a path outside the repository.
                ("git_show", {"repo_path": str(repo), "revision": "no-such-revision"}),
                ("git_diff", {"repo_path": str(repo), "target": "--output=/tmp/x"}),
                ("git_status", {"repo_path": str(work)}),
                ("git_log", {"repo_path": str(repo), "max_count": "five"}),
            ],
        ),
        "sdk1": Server(
            {"command": str(sdk1), "args": [str(SERVERS / "sdk1.py")]},
            calls=[
                ("add", {"a": 2, "b": 40}),
                ("weather", {"city": "Oslo"}),
                ("fail", {"message": "refused on purpose"}),
                ("add", {"a": "two"}),
            ],
            prompts=[("greet", {"name": "Ada"})],
            reads=["sdk1://notes/first"],
        ),
        "fastmcp": Server(
            {"command": str(sdk1), "args": [str(SERVERS / "fastmcp_server.py")]},
            calls=[
                ("multiply", {"a": 1.5, "b": 4}),
                ("order", {"item": "tea", "quantity": 3}),
                ("refuse", {"reason": "not today"}),
                ("multiply", {"a": "x"}),
            ],
            prompts=[("summarize", {"text": "a long text"})],
            reads=["fastmcp://users/7/profile"],
        ),
        "tools-only": Server(
            {"command": python, "args": [str(SERVERS / "tools_only.py")]},
            calls=[("add", {"a": 2, "b": 3}), ("shout", {"text": "hub"}), ("shout", {"text": ""})],
        ),
    }


MOUNTS = [
    "files",
    "memory",
    "thinking",
    "everything",
    "everything-http",
    "time",
    "fetch",
    "fetch-guarded",
    "git",
    "sdk1",
    "fastmcp",
    "tools-only",
]


# -- fixtures: the corpus, one hub mounting it all, and a direct connection to each server ------------


def answers(files: Path) -> Asked:
    """How every client here answers a server's questions: roots are the directory server-filesystem
    serves (as its command line says), sampling and elicitation get a scripted answer."""
    return Asked(Script(roots=((files.as_uri(), "files"),)))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def servers(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Server]]:
    with ThreadPoolExecutor(1) as pool:
        sdk1 = pool.submit(sdk1_python)  # made while server-everything starts
        async with (
            everything_over_http(tmp_path_factory.mktemp("everything-http")) as everything_url,
            serve_app(pages_app()) as pages,
        ):
            python = await anyio.to_thread.run_sync(sdk1.result)
            yield corpus(tmp_path_factory.mktemp("corpus"), everything_url, pages, python)


@asynccontextmanager
async def connected(targets: dict[str, Any], **options: Any) -> AsyncIterator[dict[str, Client]]:
    """A client connected to each target, all connecting at once; `options` as the hub's own clients have."""
    clients: dict[str, Client] = {}
    done = anyio.Event()

    async def hold(mount: str, target: Any) -> None:
        async with Client(target, cache=None, **options) as client:
            clients[mount] = client
            await done.wait()

    async with anyio.create_task_group() as tg:
        for mount, target in targets.items():
            tg.start_soon(hold, mount, target)
        try:
            yield clients
        finally:
            done.set()


@pytest.fixture(scope="module")
async def started(
    tmp_path_factory: pytest.TempPathFactory, servers: dict[str, Server]
) -> AsyncIterator[tuple[Hub, dict[str, Client]]]:
    """One hub mounting the whole corpus, and the direct connections, started together."""
    tables = {mount: server.table for mount, server in servers.items()}
    folder = tmp_path_factory.mktemp("hub")
    if unavailable() is None:
        tables = sandboxed(tables, Path(servers["files"].table["args"][0]).parent)
    config = make_config(folder, tables)
    if unavailable() is None:
        assert all(config.servers[mount].sandbox for mount, table in tables.items() if "command" in table)
    asked = answers(Path(servers["files"].table["args"][0]))
    async with (
        connected({m: s.direct() for m, s in servers.items()}, **asked.options()) as clients,
        running_hub(config, settle=90) as hub,
    ):
        await wait_for(lambda: _all(clients, servers), timeout=90)
        if unavailable() is None:
            reports = hub.health()["servers"]
            assert {m: reports[m]["sandbox"]["status"] for m in tables if "command" in tables[m]} == dict.fromkeys(
                (m for m in tables if "command" in tables[m]), "on"
            )
        yield hub, clients


def sandboxed(tables: dict[str, dict[str, Any]], work: Path) -> dict[str, dict[str, Any]]:
    """The tables as a user of the sandbox writes them (README, "Sandbox"): every stdio server in the "standard"
    profile, with the folders it is given to work on, and the network for the servers that fetch pages."""
    given = {
        "files": {"sandbox": {"write": [str(work / "files")]}},
        "memory": {"sandbox": {"write": [str(work)]}},  # MEMORY_FILE_PATH's folder
        "git": {"sandbox": {"read": [str(work / "repo")]}},
        "fetch": {"sandbox": "network"},
        "fetch-guarded": {"sandbox": "network"},
    }
    return {
        mount: {**table, **given.get(mount, {"sandbox": "standard"})} if "command" in table else table
        for mount, table in tables.items()
    }


async def _all(clients: dict[str, Client], servers: dict[str, Server]) -> bool:
    return clients.keys() == servers.keys()


@pytest.fixture(scope="module")
def hub(started: tuple[Hub, dict[str, Client]]) -> Hub:
    return started[0]


@pytest.fixture(scope="module")
def directs(started: tuple[Hub, dict[str, Client]]) -> dict[str, Client]:
    return started[1]


@pytest.fixture(params=ERAS)
async def client(request: pytest.FixtureRequest, hub: Hub, servers: dict[str, Server]) -> AsyncIterator[Client]:
    asked = answers(Path(servers["files"].table["args"][0]))
    async with hub_client(hub, request.param, **asked.options()) as client:
        yield client


# -- comparing ----------------------------------------------------------------------------------------


def dump(model: Any) -> Any:
    if isinstance(model, list):
        return [dump(m) for m in model]
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def native(data: Any, mount: str) -> Any:
    """`data` as the server itself would have sent it: the hub's URIs back to the server's."""
    if isinstance(data, list):
        return [native(item, mount) for item in data]
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("uri", "uriTemplate") and isinstance(value, str):
            value = value.removeprefix(f"{mount}+")
        out[key] = native(value, mount)
    return out


async def listing(client: Client, kind: str) -> list[Any]:
    match kind:
        case "tools":
            return dump((await client.list_tools()).tools)
        case "prompts":
            return dump((await client.list_prompts()).prompts)
        case "resources":
            return dump((await client.list_resources()).resources)
        case _:
            return dump((await client.list_resource_templates()).resource_templates)


def of_mount(items: list[dict[str, Any]], mount: str, kind: str) -> dict[str, dict[str, Any]]:
    """The hub's listing of one mount, keyed and named as the server names its items."""
    key = {"tools": "name", "prompts": "name", "resources": "uri", "resource_templates": "uriTemplate"}[kind]
    sep = "_" if key == "name" else "+"
    return {
        item[key].removeprefix(f"{mount}{sep}"): {**item, key: item[key].removeprefix(f"{mount}{sep}")}
        for item in items
        if item[key].startswith(f"{mount}{sep}")
    }


def keyed(items: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    key = {"tools": "name", "prompts": "name", "resources": "uri", "resource_templates": "uriTemplate"}[kind]
    return {item[key]: item for item in items}


async def outcome(call: Any) -> Any:
    """A request's result as JSON data, or its error (code, message, data)."""
    try:
        result = await call
    except MCPError as error:
        return {"error": dump(error.error)}
    return dump(result)


def same_call(through_hub: Any, directly: Any, mount: str) -> tuple[Any, Any]:
    """Both outcomes with what the era or the connection adds left out (result metadata)."""
    hub, direct = native(through_hub, mount), native(directly, mount)
    for data in (hub, direct):
        for extra in ("_meta", "resultType", "ttlMs", "cacheScope"):
            data.pop(extra, None)
    return hub, direct


def mounts(*names: str, xfail: dict[str, str] | None = None) -> list[Any]:
    xfail = xfail or {}
    return [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=xfail[name])) if name in xfail else name
        for name in names
    ]


# -- tests --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mount", mounts(*MOUNTS))
async def test_each_server_mounts_as_it_connects_directly(hub: Hub, directs: dict[str, Client], mount: str) -> None:
    state = hub.health()["servers"][mount]
    assert state["state"] == "up", state
    assert state["protocol"] == directs[mount].protocol_version


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mount", mounts(*MOUNTS))
async def test_listing_matches_the_servers_own(
    client: Client, directs: dict[str, Client], mount: str, kind: str
) -> None:
    try:
        expected = keyed(await listing(directs[mount], kind), kind)
    except MCPError:
        expected = {}  # the server does not list these: the hub lists none of its
    listed = of_mount(await listing(client, kind), mount, kind)
    assert listed.keys() == expected.keys()
    for key, item in expected.items():
        if client.mode == "2026-07-28":
            item.pop("execution", None)  # tasks left the core protocol in 2026-07-28: its Tool has no `execution`
        assert native(listed[key], mount) == native(item, mount), key


@pytest.mark.parametrize("mount", mounts(*MOUNTS))
async def test_calls_answer_as_directly(
    client: Client, directs: dict[str, Client], servers: dict[str, Server], mount: str
) -> None:
    for name, arguments in servers[mount].calls:
        through_hub = await outcome(client.call_tool(f"{mount}_{name}", arguments))
        directly = await outcome(directs[mount].call_tool(name, arguments))
        hub_side, direct_side = same_call(through_hub, directly, mount)
        assert hub_side == direct_side, (name, arguments)


@pytest.mark.parametrize("mount", mounts(*MOUNTS))
async def test_prompts_and_resources_answer_as_directly(
    client: Client, directs: dict[str, Client], servers: dict[str, Server], mount: str
) -> None:
    server = servers[mount]
    for name, arguments in server.prompts:
        through_hub = await outcome(client.get_prompt(f"{mount}_{name}", arguments))
        directly = await outcome(directs[mount].get_prompt(name, arguments))
        hub_side, direct_side = same_call(through_hub, directly, mount)
        assert hub_side == direct_side, name
    try:
        listed = [item["uri"] for item in await listing(directs[mount], "resources")]
    except MCPError:
        listed = []
    for uri in [*listed[:5], *server.reads]:
        through_hub = await outcome(client.read_resource(f"{mount}+{uri}"))
        directly = await outcome(directs[mount].read_resource(uri))
        hub_side, direct_side = same_call(through_hub, directly, mount)
        assert hub_side == direct_side, uri


async def test_every_server_answers_its_first_call(
    client: Client, directs: dict[str, Client], servers: dict[str, Server]
) -> None:
    """The comparisons above compare answers, not errors on both sides: each server's first call succeeds
    (but the loopback fetch of the fetch server that refuses private addresses)."""
    for mount, server in servers.items():
        name, arguments = server.calls[0]
        result = await client.call_tool(f"{mount}_{name}", arguments)
        assert result.is_error is (mount == "fetch-guarded"), (mount, dump(result))
        assert result.content, mount


# -- roots, asked by server-filesystem once a client has connected --------------------------------------


async def test_filesystem_serves_the_roots_its_own_client_gives(tmp_path: Path, servers: dict[str, Server]) -> None:
    """server-filesystem asks for roots as soon as a session starts, and serves them instead of its
    command line's directories. Mounted `per-client`, its session is the client's own, so through
    the hub it serves the roots that client gives, as directly."""
    files = Path(servers["files"].table["args"][0])
    docs = files / "docs"
    asked = Asked(Script(roots=((docs.as_uri(), "docs"),)))
    table = {**servers["files"].table, "isolation": "per-client"}
    config = make_config(tmp_path, {"files": table})
    calls = [
        ("list_allowed_directories", {}),
        ("read_text_file", {"path": str(docs / "notes.txt")}),
        ("read_text_file", {"path": str(files / "data.json")}),  # outside the roots
    ]
    async with (
        running_hub(config) as hub,
        hub_client(hub, "legacy", **asked.options()) as client,
        Client(servers["files"].direct(), cache=None, **asked.options()) as direct,
    ):

        async def serves_the_roots(client: Client, name: str) -> bool:
            result = await client.call_tool(name, {})
            return str(docs) in result.content[0].text  # type: ignore[union-attr]

        # The server asks once the session has started, and the answer lands a moment later.
        await wait_for(lambda: serves_the_roots(direct, "list_allowed_directories"), timeout=10)
        with contextlib.suppress(TimeoutError):
            await wait_for(lambda: serves_the_roots(client, "files_list_allowed_directories"), timeout=5)
        for name, arguments in calls:
            through_hub = await outcome(client.call_tool(f"files_{name}", arguments))
            directly = await outcome(direct.call_tool(name, arguments))
            hub_side, direct_side = same_call(through_hub, directly, "files")
            assert hub_side == direct_side, name


# -- the hub as a stdio child process, listed at once --------------------------------------------------

STDIO_HUB_GRACE = 120.0
"""The whole corpus starting at once on a loaded 2-core machine may take longer than the default grace."""


def forked_table(table: dict[str, Any]) -> dict[str, Any]:
    """A server's table, with the servers this Python runs (`python -m MODULE`, a script of tests/servers/) forked
    from a process that imported them (`module_server`, `script_server`): the same server code, started without
    paying for its imports again, where what is tested is the hub's first listing rather than the servers."""
    command, args = table.get("command"), table.get("args", [])
    settings = {key: value for key, value in table.items() if key not in ("command", "args")}
    if command != sys.executable or not args:
        return table
    if args[0] == "-m":
        return module_server(args[1], *args[2:], **settings)
    return script_server(args[0], *args[1:], **settings)


@pytest.mark.parametrize("era", ERAS)
async def test_a_stdio_client_lists_the_corpus_right_after_connecting(
    tmp_path: Path, era: str, hub: Hub, servers: dict[str, Server]
) -> None:
    """`mcp-hub serve` over stdio, as Claude Desktop runs it: a client that lists tools and prompts as
    soon as it has connected sees every mount's, as the module's hub (compared with the servers
    themselves above) lists them. The hub and the servers this Python runs are forks of preloaded processes
    (`forked_table`); the npm servers and the SDK 1.x ones start as they would."""
    tables = {mount: forked_table(server.table) for mount, server in servers.items()}
    config = write_config(tmp_path / "hub.toml", tables, startup_grace=STDIO_HUB_GRACE)
    command, *args = hub_command("serve", "--config", str(config))
    hub_process = StdioServerParameters(
        command=command,
        args=args,
        env={"PYTHONPATH": str(ROOT), "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]},
        cwd=str(tmp_path),
    )
    with anyio.fail_after(STDIO_HUB_GRACE + 30):
        async with Client(hub_process, mode=era, cache=None) as over_stdio, hub_client(hub, era) as client:
            for kind in ("tools", "prompts"):
                listed = await listing(over_stdio, kind)
                expected = await listing(client, kind)
                assert keyed(listed, kind) == keyed(expected, kind), kind
