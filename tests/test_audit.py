"""The audit log: one JSON line per decision, in order, rotated, bounded, nothing lost silently.

Real files, real threads, real anyio tasks. The one seam is `AuditLog(handler=...)`, used to stand in
for a disk that stalls; waits are on events with generous bounds, never fixed sleeps.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import fields, replace
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio
import pytest

from mcp_hub import audit
from mcp_hub.audit import AuditEvent, AuditLog
from mcp_hub.errors import ConfigError

FIELDS = [field.name for field in fields(AuditEvent)]
BASE = AuditEvent(
    time="2026-11-22T04:05:06.123Z",
    decision_id="0" * 32,
    principal="alice",
    session="s-1",
    method="tools/call",
    mount="notes",
    name="add_note",
    arguments={"title": "café ☕", "token": "***"},
    outcome="allowed",
    rule="allow-notes",
    reason=None,
    latency_ms=1.5,
    policy_revision="rev-1",
)


def event(**changes: Any) -> AuditEvent:
    return replace(BASE, time=AuditLog.now(), decision_id=AuditLog.new_decision_id(), **changes)


def strict_loads(line: str) -> dict[str, Any]:
    """`json.loads` without Python's extensions: NaN and Infinity are not JSON."""

    def reject(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=reject)


def files(path: Path) -> list[Path]:
    """The live file and its backups, oldest first."""
    backups = sorted(path.parent.glob(path.name + ".*"), key=lambda p: int(p.suffix[1:]), reverse=True)
    return [*backups, path] if path.exists() else backups


def lines(path: Path) -> list[dict[str, Any]]:
    """Every line of every file, oldest first; each must be a whole JSON object with the fields in order."""
    found: list[dict[str, Any]] = []
    for file in files(path):
        text = file.read_text(encoding="utf-8")
        assert text == "" or text.endswith("\n"), f"{file.name} ends in a partial line"
        for line in text.splitlines():
            record = strict_loads(line)
            assert list(record) == FIELDS
            found.append(record)
    return found


def test_a_line_is_compact_json_with_the_fields_in_order() -> None:
    line = BASE.to_json()
    assert "\n" not in line and ", " not in line and '": ' not in line
    assert "café ☕" in line  # non-ASCII kept
    record = strict_loads(line)
    assert list(record) == FIELDS
    assert record["arguments"] == {"title": "café ☕", "token": "***"}
    assert record["reason"] is None and record["latency_ms"] == 1.5
    assert "\n" not in replace(BASE, reason="two\nlines").to_json()


def test_time_and_decision_id_formats() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", AuditLog.now())
    decision_id = AuditLog.new_decision_id()
    assert re.fullmatch(r"[0-9a-f]{32}", decision_id) and uuid.UUID(decision_id).version == 4
    assert AuditLog.new_decision_id() != decision_id


class Unrepresentable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_values_json_cannot_hold_are_written_as_their_repr() -> None:
    when = datetime(2026, 11, 22, 4, 5, 6)
    record = json.loads(replace(BASE, arguments={"when": when, "raw": b"\x00", "tags": {"a"}}).to_json())
    assert record["arguments"] == {"when": repr(when), "raw": repr(b"\x00"), "tags": repr({"a"})}
    assert json.loads(replace(BASE, arguments=MappingProxyType({"a": 1})).to_json())["arguments"] == {"a": 1}
    assert json.loads(replace(BASE, arguments={"x": Unrepresentable()}).to_json())["arguments"] == {
        "x": "<unrepresentable Unrepresentable>"
    }
    # whole-line failures (a cycle, a non-string key, NaN) spoil only their own field
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    for bad in ({"arguments": cyclic}, {"arguments": {(1, 2): "tuple key"}}, {"latency_ms": float("nan")}):
        record = strict_loads(replace(BASE, **bad).to_json())
        ((key, value),) = bad.items()
        assert record[key] == repr(value)
        assert {k: v for k, v in record.items() if k != key} == {
            k: v for k, v in json.loads(BASE.to_json()).items() if k != key
        }


def test_events_reach_the_file_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "audit.log"  # parent directories are created
    arguments = {"title": "café ☕", "text": "a\nb", "lone": "\udc80"}  # a lone surrogate: written as a \u escape
    sent = [event(name=f"t{i}", arguments={"i": i, **arguments}) for i in range(50)]
    with AuditLog(path) as log:
        for e in sent:
            log.record(e)
    assert [r["decision_id"] for r in lines(path)] == [e.decision_id for e in sent]
    assert lines(path)[0]["arguments"] == {"i": 0, **arguments}
    assert "café ☕" in path.read_text(encoding="utf-8")
    assert log.dropped == 0


def test_hundred_threads_lose_and_reorder_nothing(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path, max_bytes=300_000, backups=100)  # rotating while they write
    log.start()
    barrier = threading.Barrier(100)

    def produce(producer: int) -> None:
        barrier.wait()
        for seq in range(100):
            log.record(event(principal=f"p{producer}", name=str(seq)))

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.stop()
    check_producers(path, log, expected_files=2)


@pytest.mark.anyio
async def test_hundred_tasks_lose_and_reorder_nothing(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    with AuditLog(path, max_bytes=300_000, backups=100) as log:

        async def produce(producer: int) -> None:
            for seq in range(100):
                log.record(event(principal=f"p{producer}", name=str(seq)))
                await anyio.sleep(0)  # interleave with the other 99

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for n in range(100):
                    group.start_soon(produce, n)
    check_producers(path, log, expected_files=2)


def check_producers(path: Path, log: AuditLog, expected_files: int) -> None:
    records = lines(path)
    assert len(records) == 10_000 and log.dropped == 0
    assert len({r["decision_id"] for r in records}) == 10_000
    per_producer: dict[str, list[int]] = defaultdict(list)
    for r in records:
        per_producer[r["principal"]].append(int(r["name"]))
    assert len(per_producer) == 100
    assert all(seqs == list(range(100)) for seqs in per_producer.values())
    assert len(files(path)) >= expected_files


def test_rotation_keeps_every_line_whole(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    sent = [event(name=f"t{i}") for i in range(300)]
    with AuditLog(path, max_bytes=2_000, backups=200) as log:
        for e in sent:
            log.record(e)
    assert len(files(path)) > 10
    assert all(f.stat().st_size <= 2_000 for f in files(path))
    assert [r["decision_id"] for r in lines(path)] == [e.decision_id for e in sent]  # order kept across files


def test_rotation_fsyncs_and_stop_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(audit.os, "fsync", fsync)
    path = tmp_path / "audit.log"
    log = AuditLog(path, max_bytes=2_000, backups=10)
    log.start()
    for _ in range(3):
        log.record(event())
    assert synced == []  # no fsync per line
    for _ in range(30):
        log.record(event())
    log.stop()
    assert len(synced) == len(files(path))  # one per rotation, one at stop


def test_stop_writes_everything_queued_and_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path)
    before = writers()
    log.start()
    assert writers() == before + 1
    for _ in range(5_000):
        log.record(event())
    log.stop()  # no waiting: the lines are there when stop() returns, the thread has ended
    assert len(lines(path)) == 5_000 and writers() == before
    log.stop()
    assert len(lines(path)) == 5_000 and log.dropped == 0


def test_stop_without_start_is_safe(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.stop()
    log.stop()
    assert not (tmp_path / "audit.log").exists()


def test_events_outside_start_and_stop_are_counted_as_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path)
    caplog.set_level(logging.WARNING, logger="mcp_hub.audit.errors")
    log.record(event())  # before start()
    with log:
        log.record(event())
    for _ in range(1_500):
        log.record(event())  # after stop(): never raises
    assert len(lines(path)) == 1
    assert log.dropped == 1_501
    warnings = [r.getMessage() for r in caplog.records if r.name == "mcp_hub.audit.errors"]
    assert len(warnings) == 2  # the first loss, then once per 1000
    assert "1 events lost" in warnings[0] and "1000 events lost" in warnings[1]
    assert all("not running" in w for w in warnings)


def writers() -> int:
    """Audit writer threads alive (QueueListener names its thread after `_monitor`)."""
    return sum("_monitor" in thread.name for thread in threading.enumerate())


def test_no_path_discards_cheaply() -> None:
    before = writers()
    with AuditLog(None) as log:
        assert writers() == before  # no writer thread
        for _ in range(1_000):
            log.record(event())
    assert log.dropped == 0


@pytest.mark.parametrize("where", ["parent is a file", "path is a directory"])
def test_an_unwritable_path_is_a_config_error_naming_the_file(tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_text("", encoding="utf-8")
    path = tmp_path / "file" / "audit.log" if where == "parent is a file" else tmp_path
    log = AuditLog(path)
    before = writers()
    with pytest.raises(ConfigError) as caught:
        log.start()
    assert caught.value.file == str(path) and caught.value.key == "audit.file"
    assert str(path) in str(caught.value) and "cannot write the audit log" in str(caught.value)
    assert writers() == before
    log.stop()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full to simulate a full disk")
def test_a_full_disk_never_raises_into_record(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mcp_hub.audit.errors"), AuditLog("/dev/full") as log:
        for _ in range(5):
            log.record(event())
    assert log.dropped == 5
    messages = [r.getMessage() for r in caplog.records if r.name == "mcp_hub.audit.errors"]
    assert any("write failed" in m and "No space left" in m for m in messages)
    assert any("closing failed" in m for m in messages)


def test_application_log_config_cannot_silence_or_reroute_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    factory = logging.getLogRecordFactory()

    def broken_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        raise RuntimeError("an application's record factory")

    logging.disable(logging.CRITICAL)
    logging.setLogRecordFactory(broken_factory)
    try:
        with AuditLog(path) as log:
            log.record(event())
    finally:
        logging.setLogRecordFactory(factory)
        logging.disable(logging.NOTSET)
    assert len(lines(path)) == 1


class StalledDisk(logging.Handler):
    """A disk that stalls: every write waits until the test unblocks it."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.unblock = threading.Event()
        self.written: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.entered.set()
        self.unblock.wait(timeout=30)
        self.written.append(record.getMessage())


PUT_TIMEOUT = 0.05
SLACK = 0.5  # scheduling noise on a busy machine; still far below "blocked until the disk recovers"


def fill_a_stalled_log(log: AuditLog, disk: StalledDisk) -> list[float]:
    sent = [event(name=f"t{i}") for i in range(10)]
    log.record(sent[0])
    assert disk.entered.wait(timeout=10)  # the writer is now stuck in the first write
    durations = []
    for e in sent[1:]:
        started = time.monotonic()
        log.record(e)
        durations.append(time.monotonic() - started)
    return durations


def check_stalled(log: AuditLog, disk: StalledDisk, durations: list[float]) -> None:
    assert max(durations) < PUT_TIMEOUT + SLACK
    assert log.dropped == 7  # queue of 2 holds t1, t2; t3..t9 waited put_timeout and were dropped
    disk.unblock.set()
    log.stop()
    assert [json.loads(line)["name"] for line in disk.written] == ["t0", "t1", "t2"]


def test_a_stalled_disk_blocks_record_at_most_put_timeout() -> None:
    disk = StalledDisk()
    log = AuditLog(None, queue_size=2, put_timeout=PUT_TIMEOUT, handler=disk)
    log.start()
    try:
        check_stalled(log, disk, fill_a_stalled_log(log, disk))
    finally:
        disk.unblock.set()
        log.stop()


@pytest.mark.anyio
async def test_a_stalled_disk_blocks_a_task_at_most_put_timeout() -> None:
    disk = StalledDisk()
    log = AuditLog(None, queue_size=2, put_timeout=PUT_TIMEOUT, handler=disk)
    log.start()
    try:
        with anyio.fail_after(30):
            durations = fill_a_stalled_log(log, disk)
            await anyio.sleep(0)
        check_stalled(log, disk, durations)
    finally:
        disk.unblock.set()
        log.stop()


def test_events_recorded_while_stopping_are_written_or_counted(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path)
    log.start()
    running = threading.Event()
    recorded = [0] * 8

    def produce(n: int) -> None:
        while True:
            log.record(event(principal=f"p{n}"))
            recorded[n] += 1
            running.set()
            if log.dropped:  # stop() has happened: this call was counted, not written
                return

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    assert running.wait(timeout=10)
    log.stop()
    for thread in threads:
        thread.join(timeout=30)
    assert len(lines(path)) + log.dropped == sum(recorded)
