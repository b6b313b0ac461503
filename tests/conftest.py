"""Shared test plumbing: real servers, a real hub, the SDK's real client.

Nothing here mocks the protocol. Upstreams are `tests/servers/fixture.py`
(as a stdio child process, or in-process over streamable HTTP) and npm's
`@modelcontextprotocol/server-everything`; the hub is `mcp_hub.hub.Hub`;
clients are `mcp.Client`, connected in-process, over HTTP, or over stdio.
"""

from __future__ import annotations

import compileall
import gc
import inspect
import math
import os
import re
import socket
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import tomlkit
import uvicorn
from hypothesis import settings
from mcp import Client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.config import HubConfig, load_config
from mcp_hub.hub import Hub
from mcp_hub.server.http import build_app
from tests import forkserver

sys.dont_write_bytecode = False
"""pytest keeps each test module's assertion-rewritten code beside it, for the next run to read, only where bytecode
may be written: a run with `PYTHONDONTWRITEBYTECODE` set would rewrite all of them each time (~5 s of CPU)."""

settings.register_profile("untimed", deadline=None)
settings.load_profile("untimed")
"""Property tests check what code does, not how fast: no per-example deadline, which a busy machine misses."""

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = str(ROOT / "tests" / "servers" / "fixture.py")
EVERYTHING = ROOT / "tests" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _state_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The user's state folder, where hubs keep their last known catalog by default, is a temporary one for
    the whole session (platformdirs takes `XDG_STATE_HOME` on Linux): no test writes into the real one. Hubs
    started as child processes inherit it (see `hub_environment`)."""
    folder = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(folder))
        yield folder


def hub_environment(**extra: str) -> dict[str, str]:
    """The environment for `mcp-hub serve` as a test's stdio child: what the SDK gives a stdio child, this
    checkout's hub (not an installed one) and the session's state folder, plus `extra`."""
    return {
        **get_default_environment(),
        "PYTHONPATH": str(ROOT),
        "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"],
        **extra,
    }


class _Forkservers:
    """The session's fork servers (`tests/forkserver.py`), one a module, each started on first use."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._started: dict[str, tuple[Any, list[str]]] = {}

    def launcher(self, module: str) -> list[str]:
        """The command that runs `module`'s command forked from a process that imported it (arguments follow)."""
        if module not in self._started:
            folder = self._folder / module
            folder.mkdir()
            self._started[module] = forkserver.start(module, folder)
        return self._started[module][1]

    def stop(self) -> None:
        for server, _ in self._started.values():
            forkserver.stop(server)


_forking: list[_Forkservers] = []
"""The session's fork servers while a test runs, unless it is marked `real_processes` (see `forked`)."""


def forked(module: str, command: list[str]) -> list[str]:
    """The command that runs `module`'s command (`command`, run on its own) in a test: `tests/forkserver.py`'s
    launcher, unless the test is marked `real_processes` (or this runs outside a test), then `command` itself.

    Forked, the command runs in a fresh process forked from one that imported `module` once for the session, with
    the launcher's streams, environment (`os.environ` and the C environment alike) and working folder, and the
    launcher exits as it does (with its exit code, or of the signal that killed it). That saves the second or so
    of CPU each Python child spends importing the SDK and the hub, in tests of what a command does rather than of
    its process. What such a process does not share with one of its own:

    - its pid, parent and process group are not the launcher's: the fork server is its parent. Of the signals
      sent to the launcher (or its group), SIGTERM, SIGINT and SIGHUP reach it, passed on a moment later; the
      others do not (SIGKILL kills the launcher, and the fork server then kills the fork);
    - `sys.argv[0]` is the fork server's (`tests/forkserver.py`), `sys.path` its own (the checkout first, not the
      working folder), and so are the interpreter's options (`-X`, `PYTHON*` variables read at start-up) and the
      buffering of `sys.stdout` (chosen for the fork server's own streams, not a terminal);
    - it ends with `os._exit` after flushing `sys.stdout` and `sys.stderr`: no `atexit` handler runs and no
      non-daemon thread is waited for.

    A test about any of these is marked `real_processes`."""
    if _forking:
        return _forking[0].launcher(module)
    return command


def hub_command(*args: str) -> list[str]:
    """The command line of `mcp-hub ARGS` (this checkout's hub; see `forked`): for `subprocess.run` or
    `StdioServerParameters`, with `hub_environment()` as its environment."""
    return [*forked("mcp_hub.cli", [sys.executable, "-m", "mcp_hub"]), *args]


def script_server(script: str, *args: str, **settings: Any) -> dict[str, Any]:
    """A `[servers.X]` table that runs a server of tests/servers/ (`script`, with `args`) as a stdio child, forked
    from a process that imported it (see `forked`): for tests of what the hub does with its servers' answers
    rather than of their processes."""
    module = ".".join(Path(script).resolve().relative_to(ROOT).with_suffix("").parts)
    command = forked(module, [sys.executable, script])
    return {"command": command[0], "args": [*command[1:], *args], **settings}


def module_server(module: str, *args: str, **settings: Any) -> dict[str, Any]:
    """A `[servers.X]` table that runs `python -m MODULE ARGS` (a server installed beside the hub: PyPI's
    mcp-server-time, say) as a stdio child, forked from a process that imported it (see `forked`)."""
    command = forked(module, [sys.executable, "-m", module])
    return {"command": command[0], "args": [*command[1:], *args], **settings}


def fixture_server(name: str, *options: str, **settings: Any) -> dict[str, Any]:
    """A `[servers.X]` table that runs the fixture server as a stdio child (see `script_server`)."""
    return script_server(FIXTURE, "--name", name, *options, **settings)


@pytest.fixture(scope="session")
def _forkservers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Forkservers]:
    servers = _Forkservers(tmp_path_factory.mktemp("forkservers"))
    try:
        yield servers
    finally:
        servers.stop()


@contextmanager
def forking(request: pytest.FixtureRequest) -> Iterator[None]:
    """In a fixture wider than a test (a module's hubs, say), `forked` commands while this lasts, as in a test that
    is not marked `real_processes` (inside a test, whatever it is marked, nothing changes)."""
    if _forking or request.node.get_closest_marker("real_processes") is not None:
        yield
        return
    _forking.append(request.getfixturevalue("_forkservers"))
    try:
        yield
    finally:
        _forking.clear()


@pytest.fixture(autouse=True)
def _processes_forked(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("real_processes") is not None:
        yield
        return
    _forking.append(request.getfixturevalue("_forkservers"))
    try:
        yield
    finally:
        _forking.clear()


NO_RESULT_BUDGET = {"max_result_tokens": 0}
"""The `[results]` of the hubs the tests write: no result budget. The suite checks that what servers send reaches
clients whole (a proxy is judged by what it does not lose) and lists exactly their tools; tests/test_results.py
checks the budget a shipped hub has (`results={}`: the defaults)."""


def _no_probe(table: Any) -> Any:
    """An HTTP server's table without the era probe unless the test asks: the probe's choice follows timings,
    and the suite checks each era's behaviour where it is chosen by rule (tests/test_era.py checks the probe)."""
    if isinstance(table, dict) and "url" in table and "era_probe" not in table:
        return {**table, "era_probe": False}
    return table


def write_config(
    path: Path, servers: dict[str, dict[str, Any]], *, results: dict[str, Any] | None = NO_RESULT_BUDGET, **hub: Any
) -> Path:
    document = tomlkit.document()
    if hub:
        document["hub"] = hub
    document["servers"] = {name: _no_probe(table) for name, table in servers.items()}
    if results is not None:
        document["results"] = results
    path.write_text(tomlkit.dumps(document), encoding="utf-8")
    return path


def make_config(tmp_path: Path, servers: dict[str, dict[str, Any]], **hub: Any) -> HubConfig:
    return load_config(write_config(tmp_path / "hub.toml", servers, **hub))


@asynccontextmanager
async def running_hub(config: HubConfig, settle: float = 20.0) -> AsyncIterator[Hub]:
    hub = Hub(config)
    async with hub.running():
        await hub.wait_settled(settle)
        yield hub


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; IANA's range (49152-65535), as BSD and Windows use, starts above it


def _ports() -> Iterator[int]:
    """This worker's block of ports below the ephemeral range, from a random start, round and round."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1), index + 1)
    low, high = _PORTS_FROM, min(_ephemeral_floor(), 65536)
    size = (high - low) // workers
    if size < 100:  # an ephemeral range reaching this low: take ports the old way, from it
        while True:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                yield int(sock.getsockname()[1])
    first = low + index * size
    offset = int.from_bytes(os.urandom(2), "big") % size
    while True:
        for step in range(size):
            yield first + (offset + step) % size


_PORTS_FROM = 10000
_PORTS = _ports()
_PORTS_LOCK = threading.Lock()


def free_port() -> int:
    """A loopback port nothing listens on, for a server a test starts later (its URL written down first).

    Taken below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), which it draws from for every
    outgoing connection and every bind to port 0 (this run's clients and servers among them): a port found free
    there could be given to one of them before the test's server binds it ("address already in use"). Below it
    only a deliberate bind takes a port: each xdist worker has a block of its own, walked from a random start (so
    that another run beside this one rarely walks the same ports), and a port anything holds is passed over."""
    while True:
        with _PORTS_LOCK:  # tests take ports from threads too (the conformance suite's runs)
            port = next(_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


class _Server(uvicorn.Server):
    """uvicorn's server, stopping as soon as a test is done with it: uvicorn looks for `should_exit` on a 0.1 s
    tick, pauses 0.1 s once it has asked open connections to close, then looks every 0.1 s for them to be gone,
    which came to ~0.2 s a served app; this one looks every 0.01 s, with the same steps in the same order."""

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):  # the Date header is renewed every tenth tick: every 0.1 s
            counter += 1
            await anyio.sleep(0.01)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        with anyio.move_on_after(self.config.timeout_graceful_shutdown or math.inf) as waiting:
            while self.server_state.connections or self.server_state.tasks:
                await anyio.sleep(0.01)
        if waiting.cancelled_caught:
            for task in self.server_state.tasks:
                task.cancel(msg="the test's server stops")
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()


@asynccontextmanager
async def serve_app(app: Any, port: int | None = None, *, tls: tuple[Path, Path] | None = None) -> AsyncIterator[str]:
    """Serve an ASGI app on loopback (on a free port unless given); yield its base URL. `tls`: (certificate file,
    key file), served over HTTPS."""
    port = port or free_port()
    files = {"ssl_certfile": str(tls[0]), "ssl_keyfile": str(tls[1])} if tls is not None else {}
    server = _Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **files)  # type: ignore[arg-type]
    )
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # the test owns signals
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"{'https' if tls is not None else 'http'}://127.0.0.1:{port}"
        finally:
            server.should_exit = True


KEYS = {"alice": "a" * 32, "bob": "b" * 32}
"""The API keys of the hub `keyed_hub` serves: principal -> key."""

Connect = Callable[..., AbstractAsyncContextManager[Client]]
"""`connect(principal, **client_options)`: a 2026-07-28 client of the hub's HTTP endpoint, with that principal's key."""


@asynccontextmanager
async def keyed_hub(tmp_path: Path, servers: dict[str, dict[str, Any]]) -> AsyncIterator[tuple[Hub, Connect]]:
    """A hub mounting `servers`, its HTTP endpoint taking the API keys of `KEYS`, and a way to connect as each."""
    path = write_config(tmp_path / "hub.toml", servers)
    with path.open("a", encoding="utf-8") as file:
        file.write('\n[auth]\napi_keys = { alice = "${ALICE_KEY}", bob = "${BOB_KEY}" }\n')
    config = load_config(path, environ={"ALICE_KEY": KEYS["alice"], "BOB_KEY": KEYS["bob"]})
    async with running_hub(config) as hub:
        app = build_app(
            hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health, api_keys=config.auth.api_keys
        )
        async with serve_app(app) as base:

            @asynccontextmanager
            async def connect(principal: str, **options: Any) -> AsyncIterator[Client]:
                async with httpx2.AsyncClient(headers={"X-API-Key": KEYS[principal]}, timeout=30) as http:
                    transport = streamable_http_client(f"{base}/mcp", http_client=http)
                    async with Client(transport, mode="2026-07-28", cache=None, **options) as client:
                        yield client

            yield hub, connect


@asynccontextmanager
async def hub_client(hub: Hub, mode: str = "legacy", **client_options: Any) -> AsyncIterator[Client]:
    """The SDK client connected to the hub's endpoint in-process."""
    async with Client(hub.endpoint.server, mode=mode, cache=None, **client_options) as client:
        yield client


async def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> None:
    """Poll a predicate, sync or async, until it is true (bounded; no fixed sleeps)."""
    with anyio.fail_after(timeout):
        while not await _value(predicate()):
            await anyio.sleep(interval)


async def _value(result: Any) -> Any:
    return await result if inspect.isawaitable(result) else result


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (the default, see pyproject.toml): a worker for each CPU this process may run on.

    Most of a test's time is spent waiting (for a child process to start, a timeout to pass, a server to answer),
    so two workers on two CPUs keep both busy where one pytest process used about 0.7 of them. Each worker runs
    whole test files (`--dist loadfile`), so a module's shared fixtures start once. `-n 0` runs in this process
    (a debugger, `-p tests.timing`)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def pytest_sessionstart(session: pytest.Session) -> None:
    """The checkout's modules are compiled once, before any test starts a hub or a client as a child process: with
    `PYTHONDONTWRITEBYTECODE` set, no child writes what it compiled, and each would compile the hub again (~0.4 s
    of CPU a child). Compiling what is already compiled only reads the file times. With workers (xdist), the
    controller compiles before it starts them."""
    if hasattr(session.config, "workerinput"):
        return
    for folder in ("mcp_hub", "tests"):
        compileall.compile_dir(ROOT / folder, quiet=2, rx=re.compile(r"node_modules|\.venv"))


_MODULES_WITH_SHARED_FIXTURES: set[str] = set()
"""The test files whose tests use a module- or class-scoped fixture: what such a fixture held is left when the
module ends, and collected then (see `_collect_garbage_after_each_module`)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """What exists once the tests are collected (the imported modules, the collected tests) lives for the whole
    session: it is moved out of the collector's reach, so that the collection after each test (below) walks only
    what tests made since, not the whole of the SDK, pydantic and the hub each time (that cost 0.2-0.4 s a test)."""
    for item in session.items:
        info = getattr(item, "_fixtureinfo", None)
        definitions = info.name2fixturedefs.values() if info is not None else ()
        if any(
            definition.scope in ("module", "class") and definition.argname != "_collect_garbage_after_each_module"
            for found in definitions
            for definition in found
        ):
            _MODULES_WITH_SHARED_FIXTURES.add(item.nodeid.split("::", 1)[0])
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_garbage_after_each_test() -> Any:
    """Collect garbage when a test ends, so a leaked process or pipe is reported against the test that leaked it.

    What survives is frozen with the rest (see `pytest_collection_finish`): each collection walks only what the
    test made, not what the module's fixtures hold or earlier tests left behind, which grew each test's collection
    to ~0.1 s by the end of the suite. What a module held is collected when the module ends (below)."""
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="module", autouse=True)
def _collect_garbage_after_each_module(request: pytest.FixtureRequest) -> Any:
    """Collect what the module's shared fixtures left, once they are all gone, and freeze what lives on. A module
    without any is not walked again: the collection after each of its tests found what they left, and a walk of
    the whole heap costs ~0.35 s."""
    yield
    if request.node.nodeid in _MODULES_WITH_SHARED_FIXTURES:
        gc.unfreeze()
        gc.collect()
        gc.freeze()


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real redis-server of the test's own (tests/redis_server.py)."""
    from tests.redis_server import started_redis

    yield from started_redis(tmp_path_factory)
