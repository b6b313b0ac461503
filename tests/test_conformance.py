"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`) against the hub.

The suite is an MCP client that runs named scenarios against a server over streamable HTTP
and checks what it answers. Its server scenarios call fixed names, which
`tests/servers/conformance.py` serves. Each suite runs against four targets:

- `direct`: the conformance server itself, over streamable HTTP;
- `hub-stdio`: `mcp-hub serve --transport http` mounting the conformance server as a stdio
  child, as the only mount and unprefixed (`prefix = false`), so the suite's names reach it
  unchanged;
- `hub-http`: the same, with the conformance server mounted over streamable HTTP;
- `hub-stdio-legacy`: as `hub-stdio`, with the hub held to the handshake era towards the server
  (`protocol = "legacy"`), so the 2026-07-28 suite runs through the hub's bridging of the two eras
  (questions asked mid-call become `input_required` rounds, and so on).

Three suites: 0.1.16's active suite (its scenarios run on the 2025-11-25 handshake), the
0.2.0 alpha's 2026-07-28 scenarios (run on the stateless 2026-07-28 wire), and the alpha's
`tasks-*` scenarios of the tasks extension (SEP-2663), run by its pending suite at no spec version, against
`tests/servers/tasks_server.py` in place of the conformance server; each under the Node 22 that
`tests/npm` installs. The rule: a scenario that passes directly passes through
the hub. A scenario fails when any of its checks is a `FAILURE` (warnings are SHOULDs).

Every target's processes start once for the module, on first use; each suite runs once per
target, all of its scenarios in one invocation, at every target at once, and the tests read its
per-scenario `checks.json`. Known failures are strict xfails carrying their reason, so fixing one fails
its test until the mark goes. `benchmarks/conformance.md` records the same table.

The suite's client scenarios test the hub's client side (see the section at the end):
`tests/conformance_client.py`, the SDK's client, is the client under test, connected to each
scenario server directly and through an in-process hub that mounts it; the same rule holds. Each
client suite runs in one invocation, which starts all of its scenarios at once.
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tests import forkserver
from tests.conftest import ROOT, free_port, write_config

pytestmark = pytest.mark.slow

NPM = ROOT / "tests" / "npm" / "node_modules"
NODE = NPM / ".bin" / "node"
SERVER = ROOT / "tests" / "servers" / "conformance.py"
TASKS_SERVER = ROOT / "tests" / "servers" / "tasks_server.py"

SUITE_TIMEOUT = 300.0
"""Seconds one suite invocation may take (it runs every scenario of the suite)."""
TARGETS_AT_ONCE = 3
"""Targets whose suites run at once. Some checks allow a request 500 ms (`server-stateless`): more at once on a
small, shared machine would fail them for want of CPU."""


@dataclass(frozen=True)
class Suite:
    package: str
    """Where the suite's package is installed under `tests/npm/node_modules`."""
    version: str
    args: tuple[str, ...]
    scenarios: tuple[str, ...]
    """What the suite runs with `args`, in its order."""
    server: Path = SERVER
    """The reference server the suite's scenarios call (directly, and mounted in the hub)."""
    only: str = ""
    """The prefix of the scenarios read from what `args` runs (the others are another suite's)."""


SUITES = {
    "2025-11-25": Suite(
        package="@modelcontextprotocol/conformance",
        version="0.1.16",
        args=(),  # the active suite: every server scenario but the pending ones
        scenarios=(
            "server-initialize",
            "logging-set-level",
            "ping",
            "completion-complete",
            "tools-list",
            "tools-call-simple-text",
            "tools-call-image",
            "tools-call-audio",
            "tools-call-embedded-resource",
            "tools-call-mixed-content",
            "tools-call-with-logging",
            "tools-call-error",
            "tools-call-with-progress",
            "tools-call-sampling",
            "tools-call-elicitation",
            "elicitation-sep1034-defaults",
            "server-sse-multiple-streams",
            "elicitation-sep1330-enums",
            "resources-list",
            "resources-read-text",
            "resources-read-binary",
            "resources-templates-read",
            "resources-subscribe",
            "resources-unsubscribe",
            "prompts-list",
            "prompts-get-simple",
            "prompts-get-with-args",
            "prompts-get-embedded-resource",
            "prompts-get-with-image",
            "dns-rebinding-protection",
        ),
    ),
    "2026-07-28": Suite(
        package="conformance-next",
        version="0.2.0-alpha.12",
        # Every scenario that applies to 2026-07-28, the pending ones included, on that wire.
        args=("--spec-version", "2026-07-28", "--suite", "all", "--timeout", "20000"),
        scenarios=(
            "server-stateless",
            "completion-complete",
            "tools-list",
            "tools-call-simple-text",
            "tools-call-image",
            "tools-call-audio",
            "tools-call-embedded-resource",
            "tools-call-mixed-content",
            "tools-call-error",
            "tools-call-with-progress",
            "json-schema-2020-12",
            "server-sse-multiple-streams",
            "resources-list",
            "resources-read-text",
            "resources-read-binary",
            "resources-templates-read",
            "sep-2164-resource-not-found",
            "prompts-list",
            "prompts-get-simple",
            "prompts-get-with-args",
            "prompts-get-embedded-resource",
            "prompts-get-with-image",
            "dns-rebinding-protection",
            "caching",
            "http-header-validation",
            "http-custom-header-server-validation",
            "input-required-result-basic-elicitation",
            "input-required-result-basic-sampling",
            "input-required-result-basic-list-roots",
            "input-required-result-request-state",
            "input-required-result-multiple-input-requests",
            "input-required-result-multi-round",
            "input-required-result-missing-input-response",
            "input-required-result-non-tool-request",
            "input-required-result-result-type",
            "input-required-result-unsupported-methods",
            "input-required-result-tampered-state",
            "input-required-result-capability-check",
            "input-required-result-ignore-extra-params",
            "input-required-result-validate-input",
        ),
    ),
    "tasks": Suite(
        package="conformance-next",
        version="0.2.0-alpha.12",
        # The tasks extension's scenarios (SEP-2663) are on no spec version's timeline, and pending: the pending
        # suite at no spec version runs them on the 2026-07-28 wire (an extension's), as `--force --scenario` would,
        # with the other pending scenarios, which are not the tasks server's and are not read.
        args=("--suite", "pending", "--timeout", "20000"),
        scenarios=(
            "tasks-lifecycle",
            "tasks-capability-negotiation",
            "tasks-wire-fields",
            "tasks-request-state-removal",
            "tasks-mrtr-input",
            "tasks-request-headers",
            "tasks-dispatch-and-envelope",
            "tasks-status-notifications",
            "tasks-required-task-error",
            "tasks-mrtr-composition",
        ),
        server=TASKS_SERVER,
        only="tasks-",
    ),
}

HUBS = ("hub-stdio", "hub-http", "hub-stdio-legacy")


@dataclass(frozen=True)
class Known:
    """A recorded failure: the checks that fail, and why."""

    checks: frozenset[str]
    reason: str


class KnownFailure(Exception):
    """The scenario failed exactly as recorded: those checks and no others."""


UVICORN_TRIMS = tuple(int(part) for part in uvicorn.__version__.split(".")[:2]) >= (0, 55)
"""uvicorn 0.55 and later read a header's value without the whitespace after it (RFC 9110), as the hub does."""

DIRECT_FAILURES: dict[tuple[str, str], Known] = (
    {}
    if UVICORN_TRIMS
    else {
        ("2026-07-28", "http-header-validation"): Known(
            frozenset({"sep-2243-server-accepts-whitespace-header-value"}),
            "the SDK (mcp 2.3.0) compares the Mcp-Name header with the body's name without trimming the whitespace "
            "around it, and uvicorn before 0.55 passes it on, so `Mcp-Name:   test_simple_text  ` is refused with "
            "HTTP 400 / -32020",
        ),
    }
)
"""(suite, scenario) -> how the conformance server fails it when connected directly."""

HUB_PASSES: frozenset[tuple[str, str]] = frozenset({("2026-07-28", "http-header-validation")})
"""(suite, scenario) the conformance server fails directly and the hub passes: the hub reads header values
without the whitespace around them (RFC 9110), before the SDK compares them with the body."""

HUB_FAILURES: dict[tuple[str, str, str], Known] = {
    ("2026-07-28", "server-stateless", "hub-stdio-legacy"): Known(
        frozenset({"sep-2575-server-rejects-undeclared-capability", "sep-2575-missing-capability-http-400"}),
        "a handshake-era server hears the capabilities the hub declared at its handshake, not those of the "
        "2026-07-28 client calling through it, so `test_missing_capability` runs where it should answer -32021",
    ),
}
"""(suite, scenario, target) -> how it fails through the hub while it passes directly."""

NOT_APPLICABLE: dict[tuple[str, str], str] = {
    ("2026-07-28", "hub-stdio-legacy"): (
        "the conformance server's input_required tools and prompt answer with 2026-07-28 results whatever the "
        "era, which no handshake-era server can send; the hub's bridging of a handshake-era server's mid-call "
        "questions into input_required rounds is tested in tests/test_relay.py"
    ),
    ("tasks", "hub-stdio-legacy"): (
        "the tasks extension is 2026-07-28's: a handshake-era server's call result is a CallToolResult (the SDK "
        "validates it so), never a task handle"
    ),
}
"""(suite, target) -> why the suite's `input-required-result-*` and `tasks-*` scenarios do not apply through
that target."""


def _skipped_scenario(scenario: str) -> bool:
    return scenario.startswith(("input-required-result-", "tasks-"))


@dataclass
class Outcome:
    failed: dict[str, str]
    """The checks that failed: id -> message."""

    @property
    def passed(self) -> bool:
        return not self.failed

    @property
    def reason(self) -> str:
        return "; ".join(f"{check}: {message}" for check, message in self.failed.items())

    def verify(self, known: Known | None) -> None:
        """Pass; or fail exactly as `known` records (`KnownFailure`); anything else is an `AssertionError`."""
        if self.passed:
            return
        unexpected = set(self.failed) - (known.checks if known else set())
        assert not unexpected, self.reason
        raise KnownFailure(self.reason)


@dataclass
class Target:
    url: str
    results: dict[str, dict[str, Outcome]] = field(default_factory=dict)
    """suite -> scenario -> outcome, filled by the first test that needs the suite's run."""


_SCENARIO_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def read_results(output: Path, only: str = "") -> dict[str, Outcome]:
    """Each scenario's outcome (of those whose name starts with `only`) from the `checks.json` files the suite
    saved under `output`."""
    outcomes: dict[str, Outcome] = {}
    for checks_file in sorted(output.glob("server-*/checks.json")):
        match = _SCENARIO_DIR.match(checks_file.parent.name)
        assert match, f"unexpected result folder {checks_file.parent.name}"
        if not match["scenario"].startswith(only):
            continue
        checks = json.loads(checks_file.read_text(encoding="utf-8"))
        failed = {c["id"]: c.get("errorMessage") or c["description"] for c in checks if c["status"] == "FAILURE"}
        outcomes[match["scenario"]] = Outcome(failed)
    return outcomes


def run_suite(suite: Suite, url: str, workdir: Path) -> dict[str, Outcome]:
    """Run every scenario of `suite` against `url` in one invocation; return each one's outcome."""
    output = workdir / "results"
    command = [str(NODE), str(NPM / suite.package / "dist" / "index.js"), "server", "--url", url, "-o", str(output)]
    log = workdir / "suite.log"
    missing = f"the suite saved no checks for it; see {log}"
    with log.open("wb") as out:
        try:
            subprocess.run(
                [*command, *suite.args], cwd=workdir, stdout=out, stderr=subprocess.STDOUT, timeout=SUITE_TIMEOUT
            )
        except subprocess.TimeoutExpired:
            missing = f"the suite did not finish within {SUITE_TIMEOUT:g}s; see {log}"
    outcomes = read_results(output, suite.only)
    for scenario in suite.scenarios:
        outcomes.setdefault(scenario, Outcome({"no-checks": missing}))
    return outcomes


class Processes:
    """Processes this module started: each is terminated, then killed if need be, and reaped."""

    def __init__(self) -> None:
        self._running: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, command: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as output:
            process = subprocess.Popen(
                command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT
            )
        self._running.append((process, log))
        return process

    def wait_until(
        self, process: subprocess.Popen[bytes], ready: Callable[[], bool], what: str, timeout: float = 30.0
    ) -> None:
        log = next(log for p, log in self._running if p is process)
        deadline = time.monotonic() + timeout
        while not ready():
            if process.poll() is not None:
                raise AssertionError(f"{what} exited with {process.returncode}:\n{log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not ready within {timeout:g}s:\n{log.read_text(errors='replace')}")
            time.sleep(0.1)

    def stop_all(self) -> None:
        for process, _ in reversed(self._running):
            process.terminate()
        for process, _ in reversed(self._running):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._running.clear()


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _hub_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            health = json.load(response)
    except OSError:
        return False
    return bool(health["servers"]["conformance"]["state"] == "up")


HUB_MODULE = "mcp_hub.cli"


def _module(script: Path) -> str:
    return ".".join(script.resolve().relative_to(ROOT).with_suffix("").parts)


class Targets:
    """The module's targets, each started on first use.

    Their processes (the reference servers, over HTTP or as a hub's stdio child, and the hubs) are
    `tests/forkserver.py`'s: each a fresh process forked from one that imported its module once for the
    module's tests, with its own command line, streams, environment and folder, as `python SCRIPT` or
    `python -m mcp_hub` would run (each would otherwise spend ~1 s of CPU on its imports)."""

    def __init__(self, workdir: Path, wanted: set[tuple[str, str]]) -> None:
        self._workdir = workdir
        self._wanted = wanted
        """(target, suite) the selected tests read."""
        self._processes = Processes()
        self._forkservers: dict[str, tuple[subprocess.Popen[bytes], list[str]]] = {}
        self._lock = threading.Lock()
        self._targets: dict[str, Target] = {}
        self._broken: dict[str, str] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._runs: dict[tuple[str, str], Future[dict[str, Outcome]]] = {}

    def launcher(self, module: str) -> list[str]:
        """The command that runs `module` (its `cli` or `main`) in a fork of a process that imported it."""
        with self._lock:
            if module not in self._forkservers:
                folder = self._workdir / f"forkserver-{module}"
                folder.mkdir()
                self._forkservers[module] = forkserver.start(module, folder)
            return self._forkservers[module][1]

    def conformance_server(self, name: str, server: Path = SERVER) -> str:
        """Start a reference server (by default the conformance server) over streamable HTTP; return its MCP URL."""
        port = free_port()
        process = self._processes.start(
            [*self.launcher(_module(server)), "--http", str(port)], self._workdir / f"{name}.log"
        )
        self._processes.wait_until(process, lambda: _accepts(port), f"the conformance server ({name})")
        return f"http://127.0.0.1:{port}/mcp"

    def hub(self, name: str, mount: dict[str, Any]) -> str:
        """Start `mcp-hub serve --transport http` with `mount` as its only, unprefixed mount; return its URL."""
        config = write_config(
            self._workdir / f"{name}.toml", {"conformance": {**mount, "prefix": False}}, log_level="warning"
        )
        port = free_port()
        command = [*self.launcher(HUB_MODULE), "serve", "--config", str(config), "--transport", "http"]
        process = self._processes.start([*command, "--port", str(port)], self._workdir / f"{name}.log")
        self._processes.wait_until(process, lambda: _hub_up(port), f"the hub ({name})")
        return f"http://127.0.0.1:{port}/mcp"

    def get(self, target: str, server: Path = SERVER) -> Target:
        """`target` in front of the reference server `server`."""
        name = target if server == SERVER else f"{target}-{server.stem}"
        assert name not in self._broken, self._broken[name]  # a target that did not start is tried once
        if name not in self._targets:
            try:
                if target == "direct":
                    url = self.conformance_server(name, server)
                elif target.startswith("hub-stdio"):
                    launcher = self.launcher(_module(server))
                    mount = {"command": launcher[0], "args": launcher[1:]}
                    url = self.hub(name, {**mount, "protocol": "legacy"} if target == "hub-stdio-legacy" else mount)
                else:
                    upstream = self.conformance_server(f"{name}-upstream", server)
                    url = self.hub(name, {"url": upstream, "transport": "streamable-http"})
            except AssertionError as exc:
                self._broken[name] = str(exc)
                raise
            self._targets[name] = Target(url)
        return self._targets[name]

    def outcomes(self, target_name: str, suite_name: str) -> dict[str, Outcome]:
        """The suite's outcomes at `target_name`. The first time any is needed, every run the selected tests read
        starts: each target runs its suites one after the other, `TARGETS_AT_ONCE` targets at a time (each its own
        processes), so that one target's waits overlap the others'."""
        if self._pool is None:
            chains: dict[tuple[str, Path], list[tuple[str, str]]] = {}
            for suite in SUITES:  # in order
                for target in ("direct", *HUBS):
                    if (target, suite) in self._wanted:
                        chains.setdefault((target, SUITES[suite].server), []).append((target, suite))
            # One reference server's targets, then another's, in turns: the tasks scenarios' waits beside the others.
            by_server = [[c for (_, server), c in chains.items() if server == s] for s in (SERVER, TASKS_SERVER)]
            self._pool = ThreadPoolExecutor(TARGETS_AT_ONCE)
            for chain in (c for turn in zip_longest(*by_server) for c in turn if c):
                futures: list[Future[dict[str, Outcome]]] = [Future() for _ in chain]
                self._runs.update(zip(chain, futures, strict=True))
                self._pool.submit(self._run_chain, chain, futures)
        run = self._runs.get((target_name, suite_name))
        return run.result() if run is not None else self._run(target_name, suite_name)

    def _run_chain(self, chain: list[tuple[str, str]], futures: list[Future[dict[str, Outcome]]]) -> None:
        for (target_name, suite_name), future in zip(chain, futures, strict=True):
            try:
                future.set_result(self._run(target_name, suite_name))
            except BaseException as exc:  # a target that did not start fails its own tests
                future.set_exception(exc)

    def _run(self, target_name: str, suite_name: str) -> dict[str, Outcome]:
        target = self.get(target_name, SUITES[suite_name].server)
        if suite_name not in target.results:
            workdir = self._workdir / f"{target_name}-{suite_name}"
            workdir.mkdir()
            target.results[suite_name] = run_suite(SUITES[suite_name], target.url, workdir)
        return target.results[suite_name]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        self._processes.stop_all()  # each launcher's fork goes with it
        for server, _ in self._forkservers.values():
            _wait_childless(server.pid)
            forkserver.stop(server)


def _wait_childless(pid: int, timeout: float = 10.0) -> None:
    """Wait until process `pid` has no children left (Linux: /proc), or `timeout` seconds."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    deadline = time.monotonic() + timeout
    while children.exists() and children.read_text().split() and time.monotonic() < deadline:
        time.sleep(0.05)


def _selected(request: pytest.FixtureRequest) -> list[tuple[str, dict[str, Any]]]:
    """The selected tests of this module that will run: (function name, parameters)."""
    return [
        (item.originalname, item.callspec.params)
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.path == Path(__file__)
        and hasattr(item, "callspec")
        and item.get_closest_marker("skip") is None
    ]


@pytest.fixture(scope="module")
def targets(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Targets]:
    assert NODE.exists(), "run `npm ci --prefix tests/npm` first: the suite runs under the Node 22 installed there"
    wanted = set()
    for name, params in _selected(request):
        if name in ("test_the_suite_runs_the_scenarios_listed_here", "test_directly", "test_through_the_hub"):
            wanted.add(("direct", params["suite"]))
        if name == "test_through_the_hub":
            wanted.add((params["target"], params["suite"]))
    started = Targets(tmp_path_factory.mktemp("conformance"), wanted)
    try:
        yield started
    finally:
        started.close()


def _cases(*hubs: str) -> list[Any]:
    cases = []
    for suite_name, suite in SUITES.items():
        for scenario in suite.scenarios:
            for target in hubs or (None,):
                known = (
                    HUB_FAILURES.get((suite_name, scenario, target))
                    if target
                    else DIRECT_FAILURES.get((suite_name, scenario))
                )
                marks = [pytest.mark.xfail(raises=KnownFailure, strict=True, reason=known.reason)] if known else []
                skipped = NOT_APPLICABLE.get((suite_name, target)) if target else None
                if skipped and _skipped_scenario(scenario):
                    marks = [pytest.mark.skip(reason=skipped)]
                values = (suite_name, scenario, target) if target else (suite_name, scenario)
                cases.append(pytest.param(*values, marks=marks, id="-".join(v for v in values if v)))
    return cases


@pytest.mark.parametrize("suite", list(SUITES))
def test_the_suite_runs_the_scenarios_listed_here(targets: Targets, suite: str) -> None:
    ran = set(targets.outcomes("direct", suite))
    assert ran == set(SUITES[suite].scenarios), "the suite's scenarios changed: update SUITES (and the benchmark)"


@pytest.mark.parametrize(("suite", "scenario"), _cases())
def test_directly(targets: Targets, suite: str, scenario: str) -> None:
    targets.outcomes("direct", suite)[scenario].verify(DIRECT_FAILURES.get((suite, scenario)))


@pytest.mark.parametrize(("suite", "scenario", "target"), _cases(*HUBS))
def test_through_the_hub(targets: Targets, suite: str, scenario: str, target: str) -> None:
    direct = targets.outcomes("direct", suite)[scenario]
    if not direct.passed and (suite, scenario) not in HUB_PASSES:
        pytest.skip(f"fails when connected directly too: {direct.reason}")
    targets.outcomes(target, suite)[scenario].verify(HUB_FAILURES.get((suite, scenario, target)))


# -- the hub as a client: the suite's client scenarios ----------------------------------------------------------------
#
# The suite also tests clients: for each client scenario it starts a scenario server, runs a client command
# with the server's URL, and checks what the server saw. `tests/conformance_client.py` is that command: the
# SDK's `Client`, connected to the scenario server directly (`--via direct`) or through an in-process hub that
# mounts it (`--via hub`), running the same steps either way. Through the hub, what the server sees is the
# hub's client side. The rule is the server side's: what passes directly passes through the hub.

CLIENT_SLOTS = 3
"""Clients that run their steps at once (`tests/conformance_client.py --slots`); the others of the suite's runs wait."""
CLIENT_TIMEOUT_MS = 300_000
"""The suite's limit on one client process (`--timeout`), its wait for a slot included (the suite's default is 30 s):
a suite starts all of its scenarios' clients at once."""
CLIENT_SUITE_TIMEOUT = 600.0
"""Seconds one suite invocation may take (it runs its scenarios at once, each with its own client process)."""


@dataclass(frozen=True)
class ClientSuite:
    package: str
    version: str
    scenarios: tuple[str, ...]
    """The suite's client scenarios at this spec version, but its authorization ones."""
    auth: tuple[str, ...]
    """Its `auth/*` client scenarios at this spec version: run through the hub only (`test_client_authorization`)."""


_AUTH_2025 = (
    "metadata-default",
    "metadata-var1",
    "metadata-var2",
    "metadata-var3",
    "basic-cimd",
    "scope-from-www-authenticate",
    "scope-from-scopes-supported",
    "scope-omitted-when-undefined",
    "scope-step-up",
    "scope-retry-limit",
    "token-endpoint-auth-basic",
    "token-endpoint-auth-post",
    "token-endpoint-auth-none",
    "pre-registration",
)
_AUTH_2026 = (
    "resource-mismatch",
    "offline-access-scope",
    "offline-access-not-supported",
    "authorization-server-migration",
    "iss-supported",
    "iss-not-advertised",
    "iss-supported-missing",
    "iss-wrong-issuer",
    "iss-unexpected",
    "iss-normalized",
    "metadata-issuer-mismatch",
)


CLIENT_SUITES = {
    "2025-11-25": ClientSuite(
        package="@modelcontextprotocol/conformance",
        version="0.1.16",
        scenarios=("initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"),
        auth=tuple(f"auth/{name}" for name in _AUTH_2025),
    ),
    "2026-07-28": ClientSuite(
        package="conformance-next",
        version="0.2.0-alpha.12",
        scenarios=(
            "tools_call",
            "request-metadata",
            "sep-2322-client-request-state",
            "http-standard-headers",
            "http-custom-headers",
            "http-invalid-tool-headers",
            "json-schema-ref-no-deref",
            "json-schema-2020-12-preservation",
        ),
        auth=tuple(f"auth/{name}" for name in (*_AUTH_2025, *_AUTH_2026)),
    ),
}

AUTH_EXTENSIONS = (
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
)
"""The 0.2.0 alpha's `auth/*` client scenarios on no spec version's timeline (extensions, and the 2025-03-26
ones): forced, under the "2026-07-28" suite's package."""

HUB_AUTH_FAILURES: dict[tuple[str, str], Known] = {}
"""(suite, scenario) -> how an `auth/*` client scenario fails through the hub."""

DIRECT_CLIENT_FAILURES: dict[tuple[str, str], Known] = {}
"""(suite, scenario) -> how the SDK's client fails it when connected directly."""

HUB_CLIENT_FAILURES: dict[tuple[str, str], Known] = {}
"""(suite, scenario) -> how it fails through the hub while it passes directly."""


def list_client_scenarios(suite_name: str) -> list[str]:
    """The client scenarios the suite lists at the suite's spec version."""
    suite = CLIENT_SUITES[suite_name]
    command = [str(NODE), str(NPM / suite.package / "dist" / "index.js"), "list", "--client"]
    listing = subprocess.run(
        [*command, "--spec-version", suite_name], capture_output=True, text=True, timeout=60, check=True
    )
    return re.findall(r"^\s+- (\S+) \[", listing.stdout, re.MULTILINE)


CLIENT_MODULE = "tests.conformance_client"

_CLIENT_RESULT = re.compile(r"^(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@dataclass(frozen=True)
class ClientInvocation:
    """One run of the suite's `client` command: a whole suite of client scenarios against one client command."""

    via: str
    """`direct` or `hub`: how `tests/conformance_client.py` reaches each scenario server."""
    args: tuple[str, ...]
    """Which scenarios: `--suite`, and `--spec-version` or `--force`."""
    only: tuple[str, ...] | None = None
    """The scenarios the client runs its steps for (`--only`); for the suite's others it exits at once."""


def client_invocations(suite_name: str) -> list[ClientInvocation]:
    """The suite's runs: every client scenario at its spec version through the hub; the same run with the client
    connected directly, for the scenarios but the `auth/*` ones; and the forced `AUTH_EXTENSIONS` through the hub.

    `--suite all` at a spec version runs exactly what `list --client` lists at it (the scenarios and the `auth/*`
    ones of `CLIENT_SUITES`); `--suite extensions` and `--suite backcompat`, forced, are `AUTH_EXTENSIONS`."""
    at_version = ("--suite", "all", "--spec-version", suite_name)
    runs = [
        ClientInvocation("hub", at_version),
        ClientInvocation("direct", at_version, only=CLIENT_SUITES[suite_name].scenarios),
    ]
    if suite_name == "2026-07-28":
        runs += [ClientInvocation("hub", ("--suite", suite, "--force")) for suite in ("extensions", "backcompat")]
    return runs


def read_client_results(output: Path) -> dict[str, Path]:
    """scenario -> the folder of its results (`checks.json`, and the client's `stderr.txt`) the suite saved under
    `output` (an `auth/*` scenario's one folder deeper)."""
    found = {}
    for checks_file in sorted(output.glob("**/checks.json")):
        match = _CLIENT_RESULT.match(checks_file.parent.relative_to(output).as_posix())
        assert match, f"unexpected result folder {checks_file.parent}"
        found[match["scenario"]] = checks_file.parent
    return found


def client_outcome(folder: Path) -> Outcome:
    checks = json.loads((folder / "checks.json").read_text(encoding="utf-8"))
    steps = folder / "stderr.txt"  # the client's own account of its steps
    return Outcome(
        {
            c["id"]: f"{c.get('errorMessage') or c['description']} (the client's steps: {steps})"
            for c in checks
            if c["status"] == "FAILURE"
        }
    )


def run_client_suite(
    suite_name: str, run: ClientInvocation, workdir: Path, launcher: list[str], slots: Path
) -> dict[str, Outcome]:
    """Run a suite of client scenarios in one invocation (the suite runs them at once, each with its own scenario
    server and client process started by `launcher`, which runs its steps holding one of `slots`' lock files);
    return each scenario's outcome."""
    suite = CLIENT_SUITES[suite_name]
    output = workdir / f"{run.via}-{suite_name}-{'-'.join(a.strip('-') for a in run.args)}"
    client = [*launcher, "--via", run.via, "--slots", str(slots)]
    client += ["--only", ",".join(run.only)] if run.only else []
    command = [str(NODE), str(NPM / suite.package / "dist" / "index.js"), "client", *run.args]
    command += ["--command", shlex.join(client), "--timeout", str(CLIENT_TIMEOUT_MS), "-o", str(output)]
    log = output.with_suffix(".log")
    missing = f"the suite saved no checks for it; see {log}"
    with log.open("wb") as out:
        try:
            subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=CLIENT_SUITE_TIMEOUT)
        except subprocess.TimeoutExpired:
            missing = f"the suite did not finish within {CLIENT_SUITE_TIMEOUT:g}s; see {log}"
    outcomes = {scenario: client_outcome(folder) for scenario, folder in read_client_results(output).items()}
    wanted = run.only if run.only is not None else outcomes.keys()
    return {scenario: outcomes.get(scenario, Outcome({"no-checks": missing})) for scenario in wanted}


@pytest.fixture(scope="module")
def client_launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """How the suite starts the client under test: `tests/forkserver.py`'s launcher, each run a fresh process
    forked from one that imported `tests/conformance_client.py` once for the module (each client process would
    otherwise spend ~2.5 s of CPU importing the SDK and the hub, once per scenario run)."""
    server, launcher = forkserver.start(CLIENT_MODULE, tmp_path_factory.mktemp("forkserver"))
    try:
        yield launcher
    finally:
        forkserver.stop(server)


class ClientRuns:
    """Each suite's client scenarios, run directly and through the hub (`client_invocations`). On first use, the
    runs of every suite the selected tests read start at once; their clients share `CLIENT_SLOTS` slots."""

    def __init__(self, workdir: Path, launcher: list[str], wanted: set[str]) -> None:
        self._workdir = workdir
        self._launcher = launcher
        self._wanted = wanted
        """The suites the selected tests read."""
        self._slots = workdir / "slots"
        self._outcomes: dict[str, dict[tuple[str, str], Outcome]] = {}

    def outcome(self, suite_name: str, scenario: str, via: str) -> Outcome:
        if suite_name not in self._outcomes:
            self._run({suite_name, *self._wanted} - self._outcomes.keys())
        missing = Outcome({"no-checks": f"no run of the suite saved checks for it {via}; see {self._workdir}"})
        return self._outcomes[suite_name].get((scenario, via), missing)

    def _run(self, suites: set[str]) -> None:
        if not self._slots.exists():
            self._slots.mkdir()
            for slot in range(CLIENT_SLOTS):
                (self._slots / str(slot)).touch()
        runs = [(suite, run) for suite in CLIENT_SUITES if suite in suites for run in client_invocations(suite)]
        for suite in suites:
            self._outcomes.setdefault(suite, {})
        with ThreadPoolExecutor(len(runs)) as pool:
            results = pool.map(lambda each: run_client_suite(*each, self._workdir, self._launcher, self._slots), runs)
            for (suite, run), outcomes in zip(runs, results, strict=True):
                for scenario, outcome in outcomes.items():
                    self._outcomes[suite][scenario, run.via] = outcome


@pytest.fixture(scope="module")
def client_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, client_launcher: list[str]
) -> ClientRuns:
    assert NODE.exists(), "run `npm ci --prefix tests/npm` first: the suite runs under the Node 22 installed there"
    clients = ("test_client_authorization_through_the_hub", "test_client_directly", "test_client_through_the_hub")
    wanted = {params["suite"] for name, params in _selected(request) if name in clients}
    return ClientRuns(tmp_path_factory.mktemp("conformance-client"), client_launcher, wanted)


def _client_cases(through_hub: bool) -> list[Any]:
    cases = []
    for suite_name, suite in CLIENT_SUITES.items():
        for scenario in suite.scenarios:
            failures = HUB_CLIENT_FAILURES if through_hub else DIRECT_CLIENT_FAILURES
            known = failures.get((suite_name, scenario))
            marks = [pytest.mark.xfail(raises=KnownFailure, strict=True, reason=known.reason)] if known else []
            cases.append(pytest.param(suite_name, scenario, marks=marks, id=f"{suite_name}-{scenario}"))
    return cases


@pytest.mark.parametrize("suite", list(CLIENT_SUITES))
def test_the_suite_runs_the_client_scenarios_listed_here(suite: str) -> None:
    listed = set(list_client_scenarios(suite))
    expected = {*CLIENT_SUITES[suite].scenarios, *CLIENT_SUITES[suite].auth}
    assert listed == expected, "the suite's client scenarios changed: update CLIENT_SUITES"


# The suite's `auth/*` client scenarios: a scenario server that answers 401 until the client logs in at the
# suite's own authorization server (which approves by itself). Through the hub, the mount's `auth` table does
# that (tests/conformance_client.py `mount_auth`): the hub's own login (authorization code + PKCE, registered
# dynamically or as the context's client), for the client credentials scenarios a client credentials token, and
# for enterprise-managed authorization the context's ID token traded at its identity provider (mode = "enterprise"),
# for workload identity federation the context's workload token (mode = "workload"), and for private_key_jwt the
# context's private key (token_endpoint_auth_method = "private_key_jwt").
# They run through the hub only: the SDK's `Client`, connected directly, does no OAuth unless handed a provider.


def _auth_scenarios(suite_name: str) -> list[str]:
    return [*CLIENT_SUITES[suite_name].auth, *(AUTH_EXTENSIONS if suite_name == "2026-07-28" else ())]


def _auth_cases() -> list[Any]:
    cases = []
    for suite_name in CLIENT_SUITES:
        for scenario in _auth_scenarios(suite_name):
            known = HUB_AUTH_FAILURES.get((suite_name, scenario))
            marks = [pytest.mark.xfail(raises=KnownFailure, strict=True, reason=known.reason)] if known else []
            cases.append(pytest.param(suite_name, scenario, marks=marks, id=f"{suite_name}-{scenario}"))
    return cases


@pytest.mark.parametrize(("suite", "scenario"), _auth_cases())
def test_client_authorization_through_the_hub(client_runs: ClientRuns, suite: str, scenario: str) -> None:
    client_runs.outcome(suite, scenario, "hub").verify(HUB_AUTH_FAILURES.get((suite, scenario)))


@pytest.mark.parametrize(("suite", "scenario"), _client_cases(through_hub=False))
def test_client_directly(client_runs: ClientRuns, suite: str, scenario: str) -> None:
    client_runs.outcome(suite, scenario, "direct").verify(DIRECT_CLIENT_FAILURES.get((suite, scenario)))


@pytest.mark.parametrize(("suite", "scenario"), _client_cases(through_hub=True))
def test_client_through_the_hub(client_runs: ClientRuns, suite: str, scenario: str) -> None:
    direct = client_runs.outcome(suite, scenario, "direct")
    if not direct.passed:
        pytest.skip(f"fails with the SDK's client connected directly too: {direct.reason}")
    client_runs.outcome(suite, scenario, "hub").verify(HUB_CLIENT_FAILURES.get((suite, scenario)))
