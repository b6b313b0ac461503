"""The audit log: one JSON line per decision (an OPA-style decision event), never free text.

`record()` -> a private queue (a deque) -> the writer thread -> `RotatingFileHandler` (audit.log, .1, .2...),
never through the logger tree, so application log config (levels, `dictConfig`, `logging.disable`) cannot touch
it. Lines are written whole and in queue order, fsync'ed before each rotation and at `stop()`. What the writer
takes at once goes to the file in one write and one flush (split only where the file rotates), not a
`LogRecord`, a rotation check (two `stat`s, a seek) and a flush per line: on the hub's busy path that per-line
work, done in a thread that shares the interpreter's lock with the event loop, cost about as much as the line.

The writer is woken by the first line queued after it last emptied the queue, and lingers `LINGER` seconds
before writing what is queued by then: under a steady stream of calls it wakes some fifty times a second
rather than once a call (waking a thread is most of what a line would cost the hub), and a line is on disk
within a few tens of milliseconds of its call. An idle hub's writer sleeps.

`record()` runs on the event loop, in the path of every call, so it never waits. When the disk falls so far
behind that the queue is full, the line is dropped, counted and reported, rather than stalling every client of
the hub until the disk catches up: a bounded queue that blocks would turn a slow disk into a hub-wide outage,
and an unbounded one into unbounded memory. Dropping the newest line (not the oldest) keeps what is written a
gap-free prefix in order; the gap is visible in `dropped` and on "mcp_hub.audit.errors".

Beside the file, each event's line goes to the sinks `[[audit.sinks]]` asks for (audit_sinks.py): syslog, OTLP log
records, more files, in the hub's JSON or as OCSF. `record()` hands them the line it made for the file, and each
buffers it on its own (audit_sink.py), so a sink that is down changes nothing of what the file gets, nor of how
long `record()` takes.

A line keeps non-ASCII text readable (é, 日本), and escapes the characters that would deceive a person reading
it in a terminal or a viewer (bidi overrides, invisible characters, C1 controls, line separators: see shown.py);
the line stays JSON, and parses to the same values.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

from mcp_hub.errors import ConfigError
from mcp_hub.observe.audit_sink import AuditSink
from mcp_hub.shown import shown

errors_log = logging.getLogger("mcp_hub.audit.errors")


@dataclass(frozen=True)
class Administrator:
    """Who acts as an administrator: a console login's name (an admin key's, or a person's email or name), the
    system user of `mcp-hub`; for a person signed in through the identity provider, its issuer, their subject
    there, and their name and email as it gave them (`person`)."""

    name: str
    issuer: str | None = None
    subject: str | None = None
    person: str | None = None

    def __str__(self) -> str:
        """How a reason names them: `'root'`, or `'alice@example.com' (Alice Admin <alice@example.com>, subject
        alice at https://idp.example.com)`."""
        if self.issuer is None:
            return repr(self.name)
        return f"{self.name!r} ({self.person + ', ' if self.person else ''}subject {self.subject} at {self.issuer})"


@dataclass(frozen=True)
class AuditEvent:
    """One decision, as written: fields in this order, `arguments` already masked by the caller."""

    time: str
    decision_id: str
    principal: str
    session: str | None
    method: str
    mount: str | None
    name: str | None
    via: str | None
    """How the call named its target when not by the hub's name: "app" (an MCP Apps page); null otherwise."""
    arguments: Mapping[str, Any] | None
    outcome: str
    rule: str | None
    reason: str | None
    latency_ms: float | None
    policy_revision: str | None
    issuer: str | None = None
    """For a caller with an OAuth access token: the token's issuer, its subject (`sub`) and its client."""
    subject: str | None = None
    client_id: str | None = None
    results: Sequence[str] | None = None
    """For a search of the tool search (search/tools.py): the names of the tools found, best first."""
    cost: int | None = None
    """For a tool call the policy let through to its server: what it counts against cost budgets."""
    cut: Mapping[str, Any] | None = None
    """For a call whose result was over its budget (chain/results.py): its size, the budget and the kept id."""
    client_address: str | None = None
    """For an HTTP client: its network address, the peer's, or the client a trusted proxy names in
    `X-Forwarded-For` (`[http] forwarded_allow_ips`); on the console's lines, the administrator's browser's; null
    over stdio, on the command line's and the hub's own lines."""

    @classmethod
    def by_administrator(
        cls,
        admin: str | Administrator,
        *,
        method: str,
        mount: str | None,
        name: str | None = None,
        arguments: Mapping[str, Any] | None,
        outcome: str,
        reason: str,
        policy_revision: str | None,
        via: str = "admin-console",
    ) -> AuditEvent:
        """The line of an administrator's action (principal `admin:NAME`), made now: in the admin console
        (`via` "admin-console", NAME the console's login) or with `mcp-hub` ("cli", NAME the system user). A person
        signed in through the identity provider is named by their issuer and subject too."""
        who = admin if isinstance(admin, Administrator) else Administrator(admin)
        return cls(
            time=AuditLog.now(),
            decision_id=AuditLog.new_decision_id(),
            principal=f"admin:{who.name}",
            session=None,
            method=method,
            mount=mount,
            name=name,
            via=via,
            arguments=arguments,
            outcome=outcome,
            rule=None,
            reason=reason,
            latency_ms=None,
            policy_revision=policy_revision,
            issuer=who.issuer,
            subject=who.subject,
        )

    @classmethod
    def revoked(
        cls,
        admin: str | Administrator,
        *,
        principal: str,
        mount: str,
        issuer: str,
        message: str,
        policy_revision: str | None,
        via: str,
    ) -> AuditEvent:
        """The line of an administrator's revoke of `principal`'s sign-in at `mount` (`message`: what became of
        its tokens), in the console or with the CLI (`via`), as both write it."""
        return cls.by_administrator(
            admin,
            method="admin/connections/revoke",
            mount=mount,
            arguments={"principal": principal, "issuer": issuer},
            outcome="revoked",
            reason=f"the sign-in of {principal!r} at {mount} ({issuer}) was revoked by the administrator "
            f"{_named(admin)}; {message}",
            policy_revision=policy_revision,
            via=via,
        )

    @classmethod
    def withdrawn(
        cls,
        admin: str | Administrator,
        *,
        principal: str,
        client: str,
        mount: str,
        browsers: int,
        policy_revision: str | None,
        via: str,
    ) -> AuditEvent:
        """The line of an administrator's withdrawal of `principal`'s consent for `client` at `mount`, in the
        console or with the CLI (`via`), as both write it."""
        return cls.by_administrator(
            admin,
            method="admin/connections/withdraw",
            mount=mount,
            arguments={"principal": principal, "client": client},
            outcome="withdrawn",
            reason=f"the consent of {principal!r} for the client {client!r} at {mount} ({browsers} browser(s)) was "
            f"withdrawn by the administrator {_named(admin)}; the client's next sign-in asks again; the tokens are "
            "kept",
            policy_revision=policy_revision,
            via=via,
        )

    def to_json(self) -> str:
        """One compact line; never raises. Unserializable values (and NaN, cycles, odd keys) become repr strings."""
        values = dict(self.__dict__)  # the fields, in their order (`__init__` sets them in it)
        try:
            arguments = None if self.arguments is None else dict(self.arguments)  # a MappingProxyType too
            results = None if self.results is None else list(self.results)
            cut = None if self.cut is None else dict(self.cut)
            line = _ENCODER.encode({**values, "arguments": arguments, "results": results, "cut": cut})
        except Exception:  # field by field, so one bad value spoils only itself
            line = "{" + ",".join(f'"{key}":{_dumps_field(value)}' for key, value in values.items()) + "}"
        return shown(line, json_escapes=True)


def _named(admin: str | Administrator) -> str:
    return str(admin) if isinstance(admin, Administrator) else repr(admin)


def _repr(value: object) -> str:  # json.dumps(default=): what JSON cannot hold becomes its repr
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__qualname__}>"


_JSON: dict[str, Any] = {"ensure_ascii": False, "separators": (",", ":"), "allow_nan": False, "default": _repr}
_ENCODER = json.JSONEncoder(**_JSON)
"""`json.dumps(..., **_JSON)` without making an encoder per line."""


def _dumps_field(value: object) -> str:
    try:
        return json.dumps(value, **_JSON)
    except Exception:
        return json.dumps(_repr(value), ensure_ascii=False)


class _AuditFileHandler(RotatingFileHandler):
    """Fsyncs before each rotation; reports failed writes to `on_error`; writes a lone surrogate as \\udc80."""

    def __init__(self, path: Path, max_bytes: int, backups: int, on_error: Callable[[str, int], None]) -> None:
        super().__init__(path, "a", max_bytes, backups, encoding="utf-8", errors="backslashreplace")
        self.on_error = on_error

    def sync(self) -> None:
        """Flush and fsync the open file; nothing to do if it was closed behind the log's back
        (`logging.config.dictConfig`, which uvicorn calls when the HTTP endpoint starts, closes every
        handler; the next line written opens the file again)."""
        self.flush()
        if self.stream is not None:
            os.fsync(self.stream.fileno())

    def doRollover(self) -> None:
        self.sync()
        super().doRollover()

    def handleError(self, record: logging.LogRecord) -> None:
        self.on_error(f"write failed: {sys.exc_info()[1]!r}", 1)

    def write_lines(self, lines: Sequence[str]) -> None:
        """Append `lines`, each whole and in order, with one write and one flush, rotating first wherever a line
        would take a file that holds something to `maxBytes` (as `shouldRollover` decides for each record; as
        Python 3.13's, never an empty file: a line longer than `maxBytes` gets a file of its own). A failed write
        is reported to `on_error`, with the lines it lost: those of the failed write and the rest of the batch."""
        self.acquire()
        written = 0
        try:
            if self.stream is None:  # closed behind the log's back (see `sync`): opened again
                self.stream = self._open()
            regular = not (os.path.exists(self.baseFilename) and not os.path.isfile(self.baseFilename))
            rotating = self.maxBytes > 0 and regular
            position = 0
            if rotating:
                self.stream.seek(0, 2)
                position = self.stream.tell()
            chunk: list[str] = []
            for line in lines:
                text = line + self.terminator
                if rotating and position and position + len(text) >= self.maxBytes:  # never an empty file
                    self._put(chunk)
                    written += len(chunk)
                    chunk = []
                    self.doRollover()
                    position = 0
                chunk.append(text)
                position += len(text)
            self._put(chunk)
        except Exception as exc:  # OSError: the disk
            self.on_error(f"write failed: {exc!r}", len(lines) - written)
        finally:
            self.release()

    def _put(self, chunk: list[str]) -> None:
        if chunk:
            assert self.stream is not None
            self.stream.write("".join(chunk))
            self.stream.flush()


_UUID_CLEARED = ~(0xC000 << 48 | 0xF000 << 64)
_UUID4 = 0x8000 << 48 | 0x4000 << 64
"""A version 4 UUID's variant (RFC 4122) and version bits, set as `uuid.UUID(bytes=..., version=4)` sets them."""
_second: tuple[int, str] = (-1, "")
"""The second `AuditLog.now()` last wrote, and its text."""

LINGER = 0.02
"""Seconds the writer waits, once woken, for more lines to write with the first (see the module docstring)."""
_BATCH = 1000
"""Most lines the writer takes from the queue for one write."""
REPORT_INTERVAL = 1.0
"""Seconds between two reports of lost events on "mcp_hub.audit.errors"."""


class AuditLog:
    """The hub's audit log: `start()`, then `record()` from any thread or task, then `stop()`.

    Lost events (the queue was full, a write failed, recorded before `start()` or after `stop()`) are counted in
    `dropped` and reported as errors on "mcp_hub.audit.errors" with the count so far: at once, then at most once
    per `REPORT_INTERVAL` (at the next loss after it); `stop()` reports any the interval held back.
    `path=None`: no file. `max_bytes=0`: no rotation. `handler`: a test seam replacing the rotating file. `sinks`:
    more places each event goes ([[audit.sinks]], audit_sink.py), each buffering on its own; with neither a file nor
    sinks, events are discarded.
    """

    # fmt: off
    def __init__(self, path: str | os.PathLike[str] | None, *, max_bytes: int = 10_000_000, backups: int = 5,
                 queue_size: int = 100_000, handler: logging.Handler | None = None,
                 sinks: Sequence[AuditSink] = ()) -> None:
        # fmt: on
        self.path = None if path is None else Path(path)
        self.sinks = tuple(sinks)
        self._file = path is not None or handler is not None
        self.dropped = 0
        self._reported = 0  # `dropped` when it was last reported
        self._latest_loss = ""
        self._next_report = -math.inf  # monotonic time from which a loss is reported at once
        self._max_bytes, self._backups = max_bytes, backups
        self._discard = not self._file and not self.sinks
        self._handler = handler
        self._queue: deque[str] = deque()
        """Lines not yet taken by the writer, at most `queue_size` (a soft bound: producers racing past the check
        together may each add one)."""
        self._queue_size = queue_size
        self._pending = threading.Event()
        """Set when a line was queued since the writer last looked (or at `stop()`)."""
        self._writer: threading.Thread | None = None
        self._running = self._closed = False  # _closed: the writer has ended, producers empty the queue themselves
        self._stopping = False
        self._state_lock = threading.Lock()
        self._count_lock = threading.Lock()  # not the state lock: stop() holds that while writes may fail

    @staticmethod
    def new_decision_id() -> str:
        """A random (version 4) UUID, as 32 hex digits: `uuid.uuid4().hex`, made without a `UUID` object (one a
        call: the object's checks cost as much as the random bytes)."""
        return f"{int.from_bytes(os.urandom(16)) & _UUID_CLEARED | _UUID4:032x}"

    @staticmethod
    def now() -> str:
        """UTC, RFC 3339, milliseconds: "2026-11-22T04:05:06.123Z" (the second's text made once a second)."""
        global _second  # one tuple, swapped whole: threads read a consistent pair
        seconds, ns = divmod(time.time_ns(), 1_000_000_000)
        second = _second
        if second[0] != seconds:
            second = _second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
        return f"{second[1]}.{ns // 1_000_000:03d}Z"

    def start(self) -> None:
        """Open the file (creating parent directories) and start the writer thread, and the sinks. Once only."""
        with self._state_lock:
            if self._discard or self._writer is not None or self._closed or self._running:
                return
            if self._file and self._handler is None:
                assert self.path is not None
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._handler = _AuditFileHandler(self.path, self._max_bytes, self._backups, self._lost)
                except OSError as exc:
                    why = f"{exc.strerror or exc}; set it to a writable path, or fix the permissions of its directory"
                    raise ConfigError(str(self.path), "audit.file", f"cannot write the audit log: {why}") from exc
            try:
                for sink in self.sinks:
                    sink.start()  # a file sink's unwritable file: ConfigError
            except BaseException:
                for sink in self.sinks:
                    sink.stop()
                if self._handler is not None:
                    self._handler.close()
                raise
            if self._file:
                self._writer = threading.Thread(target=self._write, name="mcp-hub audit log", daemon=True)
                self._writer.start()
            self._running = True

    def record(self, event: AuditEvent) -> None:
        """Queue one event for writing. Never waits (a full queue drops it, counted), never raises."""
        if self._discard:
            return
        if not self._running:
            self._lost("the audit log is not running (recorded before start() or after stop())")
            return
        line = None
        if self.sinks:
            line = event.to_json()
            for sink in self.sinks:
                sink.offer(line)
            if not self._file:
                return
        if len(self._queue) >= self._queue_size:
            self._lost(f"the queue is full ({self._queue_size} lines): the disk is not keeping up")
            return
        self._queue.append(event.to_json() if line is None else line)
        if not self._pending.is_set():  # the first line since the writer last looked: wake it
            self._pending.set()
        if self._closed:  # stop() finished while we were putting: no one else will take it
            self._drop_leftovers()

    def stop(self) -> None:
        """Write every line queued so far, fsync, close the file and end the thread; then stop the sinks (each sends
        what it buffered, for a few seconds at most). Idempotent."""
        try:
            self._stop_file()
        finally:
            for sink in self.sinks:
                sink.stop()

    def _stop_file(self) -> None:
        with self._state_lock:
            self._running = False
            if self._writer is None or self._closed:
                self._closed = True
                self._report_held_back()
                return
            self._stopping = True
            self._pending.set()
            self._writer.join()  # the thread writes everything queued so far, then ends
            self._closed = True
            self._drop_leftovers()  # put after the sentinel by producers already past the `_running` check
            for step in ("sync", "close"):
                try:
                    getattr(self._handler, step, lambda: None)()
                except Exception as exc:  # OSError
                    errors_log.error("audit log %s: closing failed: %r", self.path, exc)
            self._report_held_back()

    def record_tool_changed(
        self, mount: str, name: str, old_fingerprint: str, new_fingerprint: str, poisoned: str | None = None
    ) -> None:
        """A server now serves a definition of a pinned tool other than the pinned one, and it is served
        (`[pinning] on_change = "flag"`): one event, outcome "tool_changed", by the principal "mcp-hub".
        `poisoned`: why the definition looks poisoned (hidden text or instructions to the model in it), if it does;
        the old fingerprint is empty for a tool first seen so."""
        self._record_by_hub(
            method="tools/list",
            mount=mount,
            name=name,
            arguments={"old_fingerprint": old_fingerprint, "new_fingerprint": new_fingerprint},
            outcome="tool_changed",
            reason=(
                f"the tool's definition looks poisoned ({poisoned}); served (pinning: flag)"
                if poisoned
                else "the tool's definition changed since it was pinned; served (pinning: flag)"
            ),
        )

    def record_server_limit(self, mount: str, ended: str) -> None:
        """A stdio server's sandbox ended it for a limit (`ended` says which): one event, outcome "server_limit",
        by the principal "mcp-hub"; the server is restarted."""
        reason = f"{ended}; restarted"
        self._record_by_hub(
            method="server/exit", mount=mount, name=None, arguments={}, outcome="server_limit", reason=reason
        )

    def _record_by_hub(
        self, *, method: str, mount: str, name: str | None, arguments: Mapping[str, Any], outcome: str, reason: str
    ) -> None:
        """One event the hub itself is the principal of ("mcp-hub"), made now."""
        self.record(
            AuditEvent(
                time=self.now(),
                decision_id=self.new_decision_id(),
                principal="mcp-hub",
                session=None,
                method=method,
                mount=mount,
                name=name,
                via=None,
                arguments=arguments,
                outcome=outcome,
                rule=None,
                reason=reason,
                latency_ms=None,
                policy_revision=None,
            )
        )

    def __enter__(self) -> AuditLog:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _write(self) -> None:
        """The writer thread: wait for a line, linger, write every line queued; until `stop()`."""
        handler = self._handler
        assert handler is not None
        while True:
            self._pending.wait()
            if not self._stopping:
                time.sleep(LINGER)
            self._pending.clear()  # before taking the lines: one queued from now on wakes the writer again
            while self._queue:
                lines = [self._queue.popleft() for _ in range(min(len(self._queue), _BATCH))]
                if isinstance(handler, _AuditFileHandler):
                    handler.write_lines(lines)
                else:  # a test's handler
                    for line in lines:
                        handler.handle(logging.LogRecord("mcp_hub.audit", logging.INFO, "", 0, line, None, None))
            if self._stopping:
                return

    def _drop_leftovers(self) -> None:  # once the writer has ended: what is still queued came during stop()
        count = 0
        with contextlib.suppress(IndexError):
            while True:
                self._queue.popleft()
                count += 1
        self._lost("recorded during stop()", count)

    def _lost(self, why: str, count: int = 1) -> None:
        """Count lost events; report at once, unless a report went out less than `REPORT_INTERVAL` ago."""
        if not count:
            return
        with self._count_lock:
            self.dropped += count
            self._latest_loss = why
            now = time.monotonic()
            if now < self._next_report:
                return
            self._next_report = now + REPORT_INTERVAL
            self._reported = total = self.dropped
        errors_log.error("audit log %s: %d events lost so far (latest: %s)", self.path, total, why)

    def _report_held_back(self) -> None:
        with self._count_lock:
            if self.dropped == self._reported:
                return
            self._reported = total = self.dropped
            why = self._latest_loss
        errors_log.error("audit log %s: %d events lost so far (latest: %s)", self.path, total, why)


@contextlib.contextmanager
def appending(path: str | os.PathLike[str] | None, sinks: Sequence[AuditSink] = ()) -> Iterator[AuditLog]:
    """The audit log of a command run beside the hub (`mcp-hub connections revoke`, say): its lines are
    appended to `path` (None: not written there), which it never rotates, since a running hub may hold the file
    open and rotates it itself, and sent to `sinks` (those [[audit.sinks]] asks for, files among them not rotated
    either); leaving it waits for the sinks to send them (a few seconds at most for one that is down)."""
    log = AuditLog(path, max_bytes=0, sinks=sinks)
    log.start()
    try:
        yield log
    finally:
        log.stop()
