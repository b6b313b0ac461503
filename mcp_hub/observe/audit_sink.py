"""An audit sink: one more place the audit events go (a file, a syslog receiver, an OTLP collector), in a format.

`offer()` runs on the event loop, in the path of every call: it appends the event's line to a bounded buffer and
returns; it never waits and never raises. A thread of the sink's own takes what is buffered, formats it (the hub's
JSON line, or OCSF: audit_ocsf.py) and hands it to the sink's transport (audit_syslog.py, audit_otlp.py, or a
rotating file here), in order, in batches.

A destination that is down (refused, reset, timed out, answered with an error) keeps what it could not take in the
buffer, and the thread tries again after a back-off that doubles from `RETRY_FIRST` to `RETRY_MOST` seconds and
starts over once a send succeeds. While it is down, the buffer fills; beyond its bound (`[[audit.sinks]] buffer`)
the OLDEST events are dropped, so that what arrives when the destination is back is the latest `buffer` events
in order, and a hub that ran for a day beside a dead receiver does not grow without bound. Drops are counted
(`dropped`) and reported as errors on "mcp_hub.audit.errors" (at once, then at most once per `REPORT_INTERVAL`);
that a sink went down and came back is logged on the same logger, once each way.

(The audit log's own file, audit_log.py, drops the NEWEST line instead when its queue is full: a local disk that
falls 100,000 lines behind is not a destination that comes back with a gap to fill, and a gap-free prefix is what a
file reader wants. A remote destination's outage is the expected case here, and the freshest events matter most.)

Delivery is at least once: a batch that failed part-way is sent again whole, so a receiver may see an event twice
after a reconnection, never out of order within one connection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any, Protocol

from mcp_hub.errors import ConfigError
from mcp_hub.observe.audit_ocsf import to_ocsf

errors_log = logging.getLogger("mcp_hub.audit.errors")

RETRY_FIRST = 0.5
"""Seconds before the first retry of a destination that is down; doubled after each failure."""
RETRY_MOST = 30.0
"""The longest wait between two tries."""
REPORT_INTERVAL = 1.0
"""Seconds between two reports of dropped events."""
BATCH = 500
"""The most events handed to the transport at once."""
LINGER = 0.02
"""Seconds the thread waits, once woken, for more events to send with the first (as the audit log's writer)."""


@dataclass(frozen=True)
class Entry:
    """One event as a transport sends it: its fields (the audit line, parsed) and its text in the sink's format."""

    fields: Mapping[str, Any]
    text: str


class Transport(Protocol):
    """Where a sink's entries go. `send` raises OSError (or ConnectionError) when the destination did not take them;
    the sink keeps them and calls `send` again later (after `close`, so the next `send` connects afresh)."""

    description: str
    """How the destination is named in the hub's logs ("syslog tls://siem:6514")."""

    def open(self) -> None:
        """What must work before the hub starts (a file sink's file); nothing on the network."""

    def send(self, entries: Sequence[Entry]) -> None: ...

    def close(self) -> None: ...

    def probe(self) -> str:
        """Reach the destination once, sending no event (`mcp-hub check --connect`): what was found, or raise."""
        ...


class Formatter(Protocol):
    def __call__(self, line: str) -> Entry: ...


def formatter(format: str) -> Formatter:
    """The sink's format: "hub" (the audit line as it is) or "ocsf" (OCSF API Activity JSON)."""

    def hub(line: str) -> Entry:
        return Entry(json.loads(line), line)

    def ocsf(line: str) -> Entry:
        fields = json.loads(line)
        return Entry(fields, json.dumps(to_ocsf(fields), ensure_ascii=False, separators=(",", ":")))

    return ocsf if format == "ocsf" else hub


class AuditSink:
    """One sink: `start()`, then `offer()` from any thread, then `stop()` (which sends what it can within
    `stop_timeout` seconds, and counts the rest as dropped)."""

    def __init__(
        self, transport: Transport, format: str = "hub", *, buffer: int = 10_000, stop_timeout: float = 5.0
    ) -> None:
        self.transport = transport
        self.description = transport.description
        self.buffer = buffer
        self.stop_timeout = stop_timeout
        self.dropped = 0
        """Events lost: dropped (oldest first) from a full buffer, or still buffered when `stop()` gave up."""
        self.sent = 0
        """Events the transport took."""
        self.down_since: float | None = None
        """Monotonic time of the first failure of the outage in progress; None while the destination takes events."""
        self.format = format
        self._format = formatter(format)
        self._queue: deque[str] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._reported = 0
        self._latest = ""
        self._next_report = -math.inf

    @property
    def buffered(self) -> int:
        """Events waiting to be sent."""
        return len(self._queue)

    def start(self) -> None:
        """Open the transport (a file sink raises ConfigError for a file it cannot write) and start the thread."""
        if self._thread is None:
            self.transport.open()
            name = f"mcp-hub audit sink {self.description}"
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def offer(self, line: str) -> None:
        """Buffer one audit line (`AuditEvent.to_json()`) for sending. Never waits, never raises."""
        with self._lock:
            dropped = len(self._queue) >= self.buffer
            if dropped:
                self._queue.popleft()
            self._queue.append(line)
        if dropped:
            self._dropped(1, f"its buffer of {self.buffer} events is full: the oldest was dropped")
        if not self._wake.is_set():
            self._wake.set()

    def stop(self) -> None:
        """Send what is buffered (bounded by `stop_timeout`), close the transport, end the thread. Idempotent."""
        if self._thread is None:
            return
        self._stopping.set()
        self._wake.set()
        self._thread.join(self.stop_timeout + 1.0)
        with self._lock:
            left = len(self._queue)
            self._queue.clear()
        if left:
            self._dropped(left, "still buffered when the hub stopped")
        self._report(force=True)
        try:
            self.transport.close()
        except Exception as exc:
            errors_log.error("audit sink %s: closing failed: %r", self.description, exc)
        self._thread = None

    def _run(self) -> None:
        retry = RETRY_FIRST
        deadline = math.inf
        while True:
            self._wake.wait()
            if self._stopping.is_set():
                deadline = min(deadline, time.monotonic() + self.stop_timeout)
            else:
                time.sleep(LINGER)
            self._wake.clear()
            while self._queue:
                if time.monotonic() >= deadline:
                    return
                with self._lock:
                    taken = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
                formatted = [(line, self._entry(line)) for line in taken]
                lines = [line for line, entry in formatted if entry is not None]  # what to put back if not sent
                entries = [entry for _, entry in formatted if entry is not None]
                if not entries:
                    continue
                try:
                    self.transport.send(entries)
                except Exception as exc:  # OSError, ConnectionError, ssl.SSLError, an exporter's failure
                    self._put_back(lines)
                    self._down(exc, retry)
                    with contextlib.suppress(Exception):
                        self.transport.close()
                    if self._stopping.is_set():  # failed while stopping: what is left is counted by stop()
                        return
                    wait = retry * random.uniform(0.8, 1.0)
                    retry = min(retry * 2, RETRY_MOST)
                    if self._stopping.wait(wait):  # stop() during the back-off: one more try, then give up
                        deadline = min(deadline, time.monotonic() + self.stop_timeout)
                    continue
                self.sent += len(entries)
                retry = RETRY_FIRST
                if self.down_since is not None:
                    errors_log.warning(
                        "audit sink %s is back after %.1f s; sending what it buffered (%d events dropped so far)",
                        self.description,
                        time.monotonic() - self.down_since,
                        self.dropped,
                    )
                    self.down_since = None
            if self._stopping.is_set():
                return

    def _entry(self, line: str) -> Entry | None:
        try:
            return self._format(line)
        except Exception as exc:  # a line the audit log wrote is JSON; this is a bug, not the destination's
            self._dropped(1, f"formatting failed: {exc!r}")
            return None

    def _put_back(self, lines: list[str]) -> None:
        with self._lock:
            self._queue.extendleft(reversed(lines))
            over = len(self._queue) - self.buffer
            for _ in range(max(over, 0)):
                self._queue.popleft()
        if over > 0:
            self._dropped(over, f"its buffer of {self.buffer} events is full: the oldest were dropped")

    def _down(self, exc: BaseException, retry: float) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            errors_log.warning(
                "audit sink %s is down (%s); buffering up to %d events, retrying from %.1f s to %.0f s apart",
                self.description,
                describe(exc),
                self.buffer,
                retry,
                RETRY_MOST,
            )

    def _dropped(self, count: int, why: str) -> None:
        with self._lock:
            self.dropped += count
            self._latest = why
        self._report()

    def _report(self, *, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if self.dropped == self._reported or (not force and now < self._next_report):
                return
            self._next_report = now + REPORT_INTERVAL
            self._reported = total = self.dropped
            why = self._latest
        errors_log.error("audit sink %s: %d events dropped so far (latest: %s)", self.description, total, why)


def describe(exc: BaseException) -> str:
    """An exception as a log line says it: "ConnectionRefusedError: [Errno 111] Connection refused"."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class FileTransport:
    """Entries as lines of a file, rotated at `max_bytes` (`backups` kept), fsync'ed at each rotation and at close."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int, key: str = "audit.sinks.path") -> None:
        self.path, self.key = path, key
        self.description = f"file {path}"
        self._max_bytes, self._backups = max_bytes, backups

    def open(self) -> None:
        """Create the file's folder and open it for appending."""
        path = self.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._handler = RotatingFileHandler(
                path, "a", self._max_bytes, self._backups, encoding="utf-8", errors="backslashreplace"
            )
        except OSError as exc:
            why = f"{exc.strerror or exc}; set it to a writable path, or fix the permissions of its directory"
            raise ConfigError(str(path), self.key, f"cannot write the audit sink's file: {why}") from exc
        self._handler.handleError = self._raise  # type: ignore[method-assign]  # a failed write is the sink's to retry

    @staticmethod
    def _raise(record: logging.LogRecord) -> None:
        """`handleError`, called inside emit()'s `except`: the write's OSError goes on to `send`'s caller."""
        exc = sys.exc_info()[1]
        if exc is not None:
            raise exc

    def send(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            self._handler.emit(logging.LogRecord("mcp_hub.audit", logging.INFO, "", 0, entry.text, None, None))
        self._handler.flush()

    def probe(self) -> str:
        """The folder the file is (or would be) in is writable."""
        folder = next((p for p in (self.path.parent, *self.path.parents) if p.exists()), self.path.parent)
        if not os.access(folder, os.W_OK):
            raise PermissionError(f"{folder} is not writable")
        return "writable"

    def close(self) -> None:
        """Flush and fsync; the next `send` opens the file again."""
        stream = self._handler.stream
        if stream is not None:
            stream.flush()
            os.fsync(stream.fileno())
        self._handler.close()
