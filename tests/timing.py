"""Where the suite's time goes: per file, per test, per fixture, and in the processes tests start.

A pytest plugin, off unless asked for:

    .venv/bin/python -m pytest -p tests.timing [--timing-out timing.json] [--timing-top 20]

At the end of the run it prints the slowest files, tests and fixtures (wall time, and the CPU of the pytest
process and of the child processes each spent), and the CPU of the processes the tests started, by kind (hubs,
Python servers, fork servers, node, browsers, Redis, the authorization server). With `--timing-out` it also writes
all of it as JSON, which

    .venv/bin/python -m tests.timing compare BEFORE.json AFTER.json

turns into a Markdown table of per-file times, before and after.

Processes are seen by sampling `/proc` (Linux) five times a second for the pytest process's descendants: one
that lives less than a sample's interval may be missed, and its CPU shows only in its test's child CPU (from
`getrusage`, which counts every descendant that was waited for).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

INTERVAL = 0.2
"""Seconds between two looks at the process tree."""

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def kind_of(argv: list[str]) -> str:
    """What a process is, from its command line: the categories the report sums CPU by."""
    line = " ".join(argv)
    program = Path(argv[0]).name if argv else "?"
    if "chrom" in program:
        return "browser"
    if "redis-server" in program:
        return "redis"
    if program in ("node", "npm", "npx") or program.startswith("node"):
        if "conformance" in line:
            return "node: conformance suite"
        if "oidc" in line or "authorization" in line:
            return "node: authorization server"
        if "inspector" in line:
            return "node: inspector"
        return "node: server"
    if "forkserver" in line:
        return "python: forked server" if " serve " not in line else "python: fork server"
    if "mcp_hub" in line or "mcp-hub" in line:
        return "python: hub"
    if "tests/servers/" in line or "tests.servers" in line or "conformance_client" in line:
        return "python: test server or client"
    if "mcp-server-" in line or "mcp_server_" in line or "uvx" in program:
        return "python: PyPI server"
    if any(part in line for part in ("-m pip", "-m build", "-m venv", "pyproject_hooks", "setuptools")):
        return "python: packaging"
    if program.startswith("python"):
        return "python: other"
    return program


@dataclass
class _Seen:
    kind: str
    test: str
    cpu: float = 0.0


class _Sampler:
    """A thread that watches the pytest process's descendants and remembers each one's last CPU time."""

    def __init__(self) -> None:
        self.root = os.getpid()
        self.current = "(collection)"
        self.seen: dict[tuple[int, int], _Seen] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="timing-sampler", daemon=True)

    def start(self) -> None:
        if Path("/proc/self/stat").exists():
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            self.sample()

    def sample(self) -> None:
        parents: dict[int, int] = {}
        stats: dict[int, list[str]] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                raw = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            fields = raw[raw.rfind(")") + 2 :].split()
            pid = int(entry.name)
            parents[pid] = int(fields[1])
            stats[pid] = fields
        for pid, fields in stats.items():
            if pid == self.root or not self._descends(pid, parents):
                continue
            key = (pid, int(fields[19]))  # pid and start time: a reused pid is another process
            cpu = (int(fields[11]) + int(fields[12])) / _TICK
            seen = self.seen.get(key)
            if seen is None:
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
                except OSError:
                    continue
                seen = self.seen[key] = _Seen(kind_of([part for part in argv if part]), self.current)
            seen.cpu = max(seen.cpu, cpu)

    def _descends(self, pid: int, parents: dict[int, int]) -> bool:
        hops = 0
        while pid > 1 and hops < 64:
            pid = parents.get(pid, 0)
            if pid == self.root:
                return True
            hops += 1
        return False


@dataclass
class _Phase:
    wall: float = 0.0
    cpu: float = 0.0
    children: float = 0.0


@dataclass
class _Report:
    tests: dict[str, dict[str, _Phase]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(_Phase)))
    fixtures: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0.0, 0.0]))
    started: float = field(default_factory=time.perf_counter)
    cpu_started: float = field(default_factory=time.process_time)
    children_started: float = field(default_factory=_children_cpu)


class TimingPlugin:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.report = _Report()
        self.sampler = _Sampler()
        self.sampler.start()

    @contextmanager
    def _measure(self, item: pytest.Item, phase: str) -> Iterator[None]:
        wall, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
        self.sampler.current = item.nodeid
        try:
            yield
        finally:
            spent = self.report.tests[item.nodeid][phase]
            spent.wall += time.perf_counter() - wall
            spent.cpu += time.process_time() - cpu
            spent.children += _children_cpu() - children

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        with self._measure(item, "setup"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        with self._measure(item, "call"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Any:
        with self._measure(item, "teardown"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Any:
        """A fixture's own set-up (the fixtures it depends on are set up before this hook runs)."""
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return (yield)
        finally:
            where = fixturedef.baseid or "pytest"
            entry = self.report.fixtures[f"{fixturedef.argname} ({fixturedef.scope}, {where})"]
            entry[0] += 1
            entry[1] += time.perf_counter() - wall
            entry[2] += time.process_time() - cpu

    def summary(self) -> dict[str, Any]:
        self.sampler.stop()
        report = self.report
        files: dict[str, dict[str, float]] = defaultdict(lambda: {"tests": 0, "wall": 0.0, "cpu": 0.0, "children": 0.0})
        tests = {}
        for nodeid, phases in report.tests.items():
            total = _Phase(*(sum(getattr(p, name) for p in phases.values()) for name in ("wall", "cpu", "children")))
            tests[nodeid] = {
                "wall": total.wall,
                "cpu": total.cpu,
                "children": total.children,
                "setup": phases["setup"].wall,
            }
            row = files[nodeid.split("::")[0]]
            row["tests"] += 1
            row["wall"] += total.wall
            row["cpu"] += total.cpu
            row["children"] += total.children
        processes: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "cpu": 0.0})
        started_by: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "cpu": 0.0})
        for seen in self.sampler.seen.values():
            for row in (processes[seen.kind], started_by[f"{seen.test.split('::')[0]}: {seen.kind}"]):
                row["count"] += 1
                row["cpu"] += seen.cpu
        return {
            "wall": time.perf_counter() - report.started,
            "cpu": time.process_time() - report.cpu_started,
            "children": _children_cpu() - report.children_started,
            "files": dict(files),
            "tests": tests,
            "fixtures": {
                name: {"count": count, "wall": wall, "cpu": cpu} for name, (count, wall, cpu) in report.fixtures.items()
            },
            "processes": dict(processes),
            "processes_by_file": dict(started_by),
        }

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        data = self.summary()
        top = self.config.getoption("timing_top")
        write = terminalreporter.write_line
        terminalreporter.section("where the time went (tests/timing.py)")
        write(
            f"wall {data['wall']:.1f} s; CPU: pytest {data['cpu']:.1f} s, "
            f"child processes {data['children']:.1f} s (waited for)"
        )
        write("")
        write(f"{'file':<52} {'tests':>6} {'wall s':>8} {'pytest CPU':>11} {'child CPU':>10}")
        for name, row in sorted(data["files"].items(), key=lambda kv: -kv[1]["wall"])[:top]:
            write(f"{name:<52} {row['tests']:>6} {row['wall']:>8.1f} {row['cpu']:>11.1f} {row['children']:>10.1f}")
        write("")
        write(f"{'test':<90} {'wall s':>7} {'setup':>6} {'child CPU':>10}")
        for name, row in sorted(data["tests"].items(), key=lambda kv: -kv[1]["wall"])[:top]:
            write(f"{name[:90]:<90} {row['wall']:>7.2f} {row['setup']:>6.2f} {row['children']:>10.2f}")
        write("")
        write(f"{'fixture (own set-up, without the fixtures it uses)':<70} {'count':>6} {'wall s':>8} {'CPU s':>7}")
        for name, row in sorted(data["fixtures"].items(), key=lambda kv: -kv[1]["wall"])[:top]:
            write(f"{name[:70]:<70} {row['count']:>6} {row['wall']:>8.1f} {row['cpu']:>7.1f}")
        write("")
        write(f"{'processes started (sampled)':<40} {'count':>6} {'CPU s':>8}")
        for name, row in sorted(data["processes"].items(), key=lambda kv: -kv[1]["cpu"]):
            write(f"{name:<40} {row['count']:>6} {row['cpu']:>8.1f}")
        write("")
        write(f"{'processes started, by the file whose test started them':<75} {'count':>6} {'CPU s':>8}")
        for name, row in sorted(data["processes_by_file"].items(), key=lambda kv: -kv[1]["cpu"])[:top]:
            write(f"{name[:75]:<75} {row['count']:>6} {row['cpu']:>8.1f}")
        out = self.config.getoption("timing_out")
        if out:
            Path(out).write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
            write(f"\nwritten to {out}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("timing", "where the suite's time goes (tests/timing.py)")
    group.addoption("--timing-out", default=None, help="write the timings as JSON to this file")
    group.addoption("--timing-top", type=int, default=25, help="rows in each table of the summary (default 25)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("numprocesses", None) or hasattr(config, "workerinput"):
        raise pytest.UsageError("tests.timing measures the tests in one process: add -n 0")
    config.pluginmanager.register(TimingPlugin(config), "timing-report")


def compare(before: dict[str, Any], after: dict[str, Any]) -> str:
    """A Markdown table of per-file wall times and CPU (pytest's and its children's), before and after."""
    lines = [
        "| file | tests before | tests after | wall before s | wall after s | CPU before s | CPU after s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = sorted(set(before["files"]) | set(after["files"]), key=lambda n: -before["files"].get(n, {}).get("wall", 0))
    empty = {"tests": 0, "wall": 0.0, "cpu": 0.0, "children": 0.0}
    for name in names:
        old, new = before["files"].get(name, empty), after["files"].get(name, empty)
        lines.append(
            f"| {name} | {old['tests']} | {new['tests']} | {old['wall']:.1f} | {new['wall']:.1f} "
            f"| {old['cpu'] + old['children']:.1f} | {new['cpu'] + new['children']:.1f} |"
        )

    def total(data: dict[str, Any], key: str) -> float:
        return sum(row[key] for row in data["files"].values())

    lines.append(
        f"| **all** | {total(before, 'tests'):.0f} | {total(after, 'tests'):.0f} | {before['wall']:.1f} "
        f"| {after['wall']:.1f} | {before['cpu'] + before['children']:.1f} | {after['cpu'] + after['children']:.1f} |"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "compare":
        sys.exit("usage: python -m tests.timing compare BEFORE.json AFTER.json")
    print(compare(*(json.loads(Path(p).read_text(encoding="utf-8")) for p in sys.argv[2:])))
