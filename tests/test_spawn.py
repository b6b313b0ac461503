"""A stdio server's child, spawned by the standard library under the event loop (sdk/process.py): on asyncio's
loop and on uvloop's (the hub's), its pipes, its exit and its session, as the SDK's stdio client uses them."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from anyio._backends._asyncio import StreamReaderWrapper, StreamWriterWrapper

from mcp_hub.sdk import process as process_module
from mcp_hub.sdk.client import asyncio_reader_of, asyncio_writer_of
from mcp_hub.sdk.process import ChildProcess, spawn, spawn_supported
from mcp_hub.upstream.connection import connect
from mcp_hub.upstream.relay import InFlight
from mcp_hub.upstream.stdio import StdioChannel
from tests.conftest import fixture_server, make_config

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="pidfds are Linux's"),
    pytest.mark.real_processes,
    pytest.mark.slow,
]
uvloop = pytest.importorskip("uvloop")  # the hub's loop where it is installed (not on Windows)

ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line.upper()); sys.stdout.flush()\nsys.exit(3)\n"


def on_each_loop(test: Callable[[], Awaitable[None]]) -> None:
    """Run `test` on asyncio's own loop, then on uvloop's."""
    asyncio.run(test())
    uvloop.run(test())


def test_a_child_talks_over_its_pipes_and_its_exit_is_seen() -> None:
    async def talk() -> None:
        assert spawn_supported()
        child = await spawn([sys.executable, "-c", ECHO], env=None, stderr=subprocess.DEVNULL, cwd=None)
        assert isinstance(child, ChildProcess)
        # What the hub reads and writes past the SDK's transport: anyio's wrappers of asyncio's streams.
        assert isinstance(child.stdin, StreamWriterWrapper) and asyncio_writer_of(child.stdin) is not None
        assert isinstance(child.stdout, StreamReaderWrapper) and asyncio_reader_of(child.stdout) is not None
        assert os.getsid(child.pid) == child.pid  # a session of its own: the SDK stops the whole group
        await child.stdin.send(b"hello\n")
        assert await child.stdout.receive() == b"HELLO\n"
        assert child.returncode is None
        await child.stdin.aclose()  # end of input: the child exits
        assert await asyncio.wait_for(child.wait(), 30) == 3
        assert child.returncode == 3
        await child.stdout.aclose()

    on_each_loop(talk)


def test_a_child_is_stopped_by_its_signals_and_by_closing_it() -> None:
    async def stop() -> None:
        child = await spawn([sys.executable, "-c", ECHO], env=None, stderr=subprocess.DEVNULL, cwd=None)
        child.terminate()
        assert await asyncio.wait_for(child.wait(), 30) == -signal.SIGTERM
        child.kill()  # already gone: nothing to signal, nothing raised

        hanging = await spawn(
            [sys.executable, "-c", "import time; time.sleep(60)"], env=None, stderr=subprocess.DEVNULL, cwd=None
        )
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(hanging.aclose(), 0.5)  # cancelled while waiting: killed
        assert await asyncio.wait_for(hanging.wait(), 30) == -signal.SIGKILL

    on_each_loop(stop)


def test_the_environment_and_the_folder_are_the_childs(tmp_path: Path) -> None:
    async def where() -> None:
        script = "import os; print(os.getcwd(), os.environ.get('SPAWN_PROBE'))"
        child = await spawn(
            [sys.executable, "-c", script], env={"SPAWN_PROBE": "yes"}, stderr=subprocess.DEVNULL, cwd=tmp_path
        )
        out = b""
        while not out.endswith(b"\n"):
            out += await child.stdout.receive()
        assert out.decode().split() == [str(tmp_path.resolve()), "yes"]
        assert await asyncio.wait_for(child.wait(), 30) == 0

    on_each_loop(where)


def test_a_command_that_is_not_there_fails_as_popen_fails() -> None:
    async def missing() -> None:
        with pytest.raises(FileNotFoundError):
            await spawn(["/nonexistent/mcp-server"], env=None, stderr=subprocess.DEVNULL, cwd=None)

    on_each_loop(missing)


def test_a_stdio_mount_runs_on_a_child_spawned_here_on_both_loops(tmp_path: Path) -> None:
    """A real stdio server, connected as a mount connects, called, and stopped, on each loop: its child is
    one `spawn` started, and the hub's channel writes to its stdin past the SDK."""
    config = make_config(tmp_path, {"up": fixture_server("up")}).servers["up"]
    spawned: list[object] = []

    async def ignore(message: object) -> None:
        pass

    async def mount() -> None:
        async with connect(config, inflight=InFlight("up"), message_handler=ignore, on_broken=print) as up:
            result = await up.send("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            channel = up._channel  # pyright: ignore[reportPrivateUsage]
            assert isinstance(channel, StdioChannel)
            assert channel._stdin is not None  # pyright: ignore[reportPrivateUsage]
        assert "hi" in str(result)

    original = process_module.ChildProcess.attach

    async def attach(popen: subprocess.Popen[bytes]) -> ChildProcess:
        child = await original(popen)
        spawned.append(child)
        return child

    process_module.ChildProcess.attach = attach  # type: ignore[method-assign]
    try:
        on_each_loop(mount)
    finally:
        process_module.ChildProcess.attach = original  # type: ignore[method-assign]
    assert len(spawned) == 2
    assert all(child.returncode is not None for child in spawned)  # type: ignore[attr-defined]


def _children_running(marker: str) -> list[int]:
    """This process's children whose command line holds `marker` and that have not exited."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            command = Path(entry.path, "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and marker.encode() in command:
            found.append(int(entry.name))
    return found


def test_a_spawn_cancelled_at_any_of_its_waits_leaves_no_child_and_no_pipe_open() -> None:
    """The hub stopping while a server starts: `spawn` cancelled before it began, and at each of its waits in turn
    (connecting the stdout pipe, then the stdin pipe, ...), leaves no child running and no pipe transport open
    (an open one, or a `Popen` of a child still running, warns when collected: an error in this suite)."""
    marker = f"cancelled-spawn-{os.getpid()}"
    sleeper = [sys.executable, "-c", f"import time; time.sleep(60)  # {marker}"]

    async def scenario() -> None:
        cancelled = 0
        for turns in range(8):
            task = asyncio.ensure_future(spawn(sleeper, env=None, stderr=subprocess.DEVNULL, cwd=None))
            for _ in range(turns):
                await asyncio.sleep(0)
            task.cancel()
            try:
                child = await task
            except asyncio.CancelledError:
                cancelled += 1
            else:  # started before the cancel came: closed as the hub closes one
                child.kill()
                await child.aclose()
        assert cancelled >= 3  # before the spawn began, and at (at least) both pipes' connections
        gc.collect()
        for _ in range(200):  # a child killed as it was discarded is reaped by a thread of its own
            if not _children_running(marker):
                break
            await asyncio.sleep(0.01)
        assert _children_running(marker) == []

    # A pipe transport left open also keeps uvloop's loop from closing: bounded here, as a failure, not a hang.
    ended, failed = threading.Event(), []

    def run() -> None:
        try:
            on_each_loop(scenario)
        except BaseException as exc:
            failed.append(exc)
        finally:
            ended.set()

    threading.Thread(target=run, name="cancelled spawns", daemon=True).start()
    assert ended.wait(60), "a loop did not close within 60 s: a child's pipe transport was left open"
    if failed:
        raise failed[0]
