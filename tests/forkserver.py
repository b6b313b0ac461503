"""A command that runs in a fresh process forked from one that has imported it already.

The suite starts Python commands as processes: `mcp-hub` itself, the test servers of tests/servers/ (as stdio
children of hubs), the conformance suite's client under test (`tests/conformance_client.py`). Each such process
spends a second or more of CPU importing the SDK and the hub before it does anything. Run as a server, this
module imports the command's module once and listens on a Unix socket; run as a launcher (with `-S`, so it
imports nothing but the standard library), it hands the server its arguments, environment, working folder and
standard streams, and exits with the exit code of the process the server forked for it. That process is the
command as it would run on its own: the same code, its own process, the launcher's environment and streams; only
its imports were done before it forked.

    python -m tests.forkserver serve SOCKET MODULE      # import MODULE, serve forks of it on SOCKET
    python -S tests/forkserver.py SOCKET ARG...         # run MODULE's command with ARGS in a fork; exit with its code

MODULE's command is its `cli(argv) -> int`, or else its `main()` (sync or async) reading `sys.argv`. The launcher
passes the signals that ask a process to stop (SIGTERM, SIGINT, SIGHUP) on to its fork, which handles them as it
would on its own, and waits for its exit. A launcher that dies (SIGKILL: the suite's own time limit, say, or a
hub killing its child) takes its fork with it: the server kills a fork whose launcher's connection closes. `start`
runs a server for a test fixture.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

_LENGTH = struct.Struct("!I")
_STATUS = struct.Struct("!i")
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""The signals a launcher passes on to its fork (one byte each on the connection: the signal's number)."""


def launch(path: str, argv: list[str]) -> int:
    """Run the server's command with `argv` in a fork that has this process's streams, environment and folder."""
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        message = _LENGTH.pack(len(request)) + request
        sent = socket.send_fds(conn, [message], [0, 1, 2])
        if sent < len(message):
            conn.sendall(message[sent:])
        for signum in FORWARDED:
            if signal.getsignal(signum) != signal.SIG_IGN:  # a signal the launcher ignores does not reach its fork
                signal.signal(signum, lambda signum, _: _forward(conn, signum))
        status = b""
        while len(status) < _STATUS.size:
            chunk = conn.recv(_STATUS.size - len(status))
            if not chunk:
                print("forkserver: the server closed the connection without an exit code", file=sys.stderr)
                return 1
            status += chunk
    return int(_STATUS.unpack(status)[0])


def _forward(conn: socket.socket, signum: int) -> None:
    with contextlib.suppress(OSError):  # the server is gone: the exit code will not come either
        conn.send(bytes([signum]))


def _run_child(
    command: object, fds: list[int], request: dict[str, object], closing: list[object], pidfds: list[int]
) -> None:
    """In the fork: close the server's sockets, take the launcher's streams, environment and folder; run."""
    code = 1
    killed_by: int | None = None
    try:
        for thing in closing:
            thing.close()  # type: ignore[attr-defined]
        for pidfd in pidfds:
            os.close(pidfd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])  # type: ignore[arg-type]
        os.chdir(request["cwd"])  # type: ignore[arg-type]
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as Python starts: KeyboardInterrupt on SIGINT
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        argv = list(request["argv"])  # type: ignore[call-overload]
        sys.argv = [sys.argv[0], *argv]
        code = command(argv) or 0  # type: ignore[operator]
    except SystemExit as exc:  # as Python exits: no code is 0, a code that is not a number is printed, then 1
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:
        import traceback

        traceback.print_exc()
        if isinstance(exc, KeyboardInterrupt):  # as Python exits of an unhandled one: killed by SIGINT
            killed_by = signal.SIGINT
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # the reader may be gone; the exit code still counts
                stream.flush()
        if killed_by is not None:
            signal.signal(killed_by, signal.SIG_DFL)
            os.kill(os.getpid(), killed_by)
        os._exit(code)


def serve(path: str, module: str) -> None:
    """Import `module`, then fork a process running its `cli` for each launcher that connects to `path`."""
    import importlib

    imported = importlib.import_module(module)
    command = getattr(imported, "cli", None) or (lambda argv: _run_main(imported.main))
    selector = selectors.DefaultSelector()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    selector.register(listener, selectors.EVENT_READ, ("accept", None))
    running: dict[socket.socket, tuple[int, int]] = {}  # a launcher's connection -> its fork's pid and pidfd
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            kind, conn = key.data
            if kind == "accept":
                accepted, _ = listener.accept()
                selector.register(accepted, selectors.EVENT_READ, ("request", accepted))
            elif kind == "request":
                selector.unregister(conn)
                try:
                    request, fds = _receive(conn)
                except OSError:
                    request, fds = None, []
                if request is None:
                    conn.close()
                    continue
                closing = [selector, listener, conn, *running]
                pid = os.fork()
                if pid == 0:
                    _run_child(command, fds, request, closing, [pidfd for _, pidfd in running.values()])
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                running[conn] = (pid, pidfd)
                selector.register(conn, selectors.EVENT_READ, ("gone", conn))
                selector.register(pidfd, selectors.EVENT_READ, ("exited", conn))
            elif kind == "gone":  # a signal to pass on, or the launcher closed its end (or died): its fork goes too
                try:
                    signals = conn.recv(64)
                except OSError:
                    signals = b""
                if conn in running and signals:
                    for signum in signals:
                        os.kill(running[conn][0], signum)
                elif conn in running and _registered(selector, conn):
                    selector.unregister(conn)
                    os.kill(running[conn][0], signal.SIGKILL)
            elif conn in running:  # "exited"
                pid, pidfd = running.pop(conn)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                if _registered(selector, conn):
                    selector.unregister(conn)
                with contextlib.suppress(OSError):  # the launcher may be gone
                    conn.sendall(_STATUS.pack(os.waitstatus_to_exitcode(status)))
                conn.close()


def _run_main(main: Any) -> Any:
    if inspect.iscoroutinefunction(main):
        import anyio

        return anyio.run(main)
    return main()


def _registered(selector: selectors.BaseSelector, conn: socket.socket) -> bool:
    try:
        selector.get_key(conn)
    except KeyError:
        return False
    return True


def _receive(conn: socket.socket) -> tuple[dict[str, object] | None, list[int]]:
    """A launcher's request and its three streams (None when the launcher went away before sending it)."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    while len(data) >= _LENGTH.size and len(data) < _LENGTH.size + _LENGTH.unpack_from(data)[0]:
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    if len(fds) != 3 or len(data) < _LENGTH.size or len(data) != _LENGTH.size + _LENGTH.unpack_from(data)[0]:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data[_LENGTH.size :]), fds


def start(module: str, folder: Path) -> tuple[subprocess.Popen[bytes], list[str]]:
    """Start a server of forks of `module` with its socket in `folder`: the server (to `stop`) and the command that
    runs `module` in a fork of it (arguments follow)."""
    root = Path(__file__).resolve().parent.parent
    socket_path = folder / "forkserver.sock"
    log = folder / "forkserver.log"
    with log.open("wb") as errors:
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.forkserver", "serve", str(socket_path), module],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    assert server.stdout is not None
    if server.stdout.readline() != b"ready\n":
        stop(server)
        raise AssertionError(f"the fork server of {module} did not start:\n{log.read_text(errors='replace')}")
    return server, [sys.executable, "-S", str(Path(__file__).resolve()), str(socket_path)]


def stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    server.wait(timeout=10)
    if server.stdout is not None:
        server.stdout.close()


def _exit_as(code: int) -> None:
    """Exit with the fork's exit code, or die of the signal that ended it, at once: the streams close as the
    launcher ends, not before (as Python's own exit would close them), so that whoever reads them sees their end
    and the launcher's exit together, as of a process that ran the command itself."""
    sys.stderr.flush()
    if code < 0:
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3])
    else:
        _exit_as(launch(sys.argv[1], sys.argv[2:]))
