"""The audit log: one JSON line per decision, in order, rotated, bounded, nothing lost silently.

Real files, real threads, real anyio tasks. The one seam is `AuditLog(handler=...)`, used to stand in
for a disk that stalls; waits are on events with generous bounds, never fixed sleeps. The audit link is
tested in a running hub, with the SDK's client and the fixture server.
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
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from mcp_hub.chain.audit import AuditTrail
from mcp_hub.chain.context import CallContext, compose
from mcp_hub.config import load_config
from mcp_hub.errors import ConfigError
from mcp_hub.observe import audit_log as audit
from mcp_hub.observe.audit_log import AuditEvent, AuditLog
from mcp_hub.policy import empty_policy
from tests.conftest import fixture_server, hub_client, running_hub, wait_for, write_config

FIELDS = [field.name for field in fields(AuditEvent)]
BASE = AuditEvent(
    time="2026-11-22T04:05:06.123Z",
    decision_id="0" * 32,
    principal="alice",
    session="s-1",
    method="tools/call",
    mount="notes",
    name="add_note",
    via=None,
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
    ids = [uuid.UUID(AuditLog.new_decision_id()) for _ in range(200)]  # every id: version 4, the RFC's variant
    assert {(i.version, i.variant) for i in ids} == {(4, uuid.RFC_4122)} and len(set(ids)) == 200
    assert len({i.int & 0xFFFF for i in ids}) > 100  # random bits are not cleared with the version's


def test_the_time_is_the_clock_s_to_the_millisecond_and_a_new_second_is_written_anew() -> None:
    """`now()` keeps the text of the second it last wrote, and writes another second's anew."""
    from mcp_hub.observe import audit_log

    for stale in (None, (int(time.time()) - 1, "1999-01-01T00:00:00")):
        if stale is not None:
            audit_log._second = stale  # as if the last line had been written a second ago
        before = datetime.now(UTC).replace(tzinfo=None)
        written = datetime.fromisoformat(AuditLog.now().removesuffix("Z"))
        after = datetime.now(UTC).replace(tzinfo=None)
        assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= written <= after


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


def test_a_line_escapes_what_would_deceive_its_reader_and_parses_to_the_same_values() -> None:
    """Read in a terminal or a viewer, a right-to-left override would reorder the line and a C1 control
    start a terminal sequence: they are written as JSON escapes; other non-ASCII text is written as it is."""
    arguments = {"path": "invoice\u202efdp.exe", "note": "\x9b2J\u2028\U000e0041", "title": "日本 café"}
    line = replace(BASE, name="delete\u200bnote", arguments=arguments).to_json()
    assert not {"\u202e", "\x9b", "\u2028", "\U000e0041", "\u200b"} & set(line)
    assert '"invoice\\u202efdp.exe"' in line and "日本 café" in line
    record = strict_loads(line)
    assert record["arguments"] == arguments and record["name"] == "delete\u200bnote"


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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_lines_queued_together_go_to_the_file_in_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the writer takes at once is one write and one flush (a rotation splits it), not one per line."""
    writes: list[int] = []
    put = audit._AuditFileHandler._put

    def counted(self: Any, chunk: list[str]) -> None:
        writes.append(len(chunk))
        put(self, chunk)

    monkeypatch.setattr(audit._AuditFileHandler, "_put", counted)
    path = tmp_path / "audit.log"
    sent = [event(name=f"t{i}") for i in range(200)]
    with AuditLog(path) as log:
        for e in sent:  # queued within the writer's linger
            log.record(e)
    assert [r["decision_id"] for r in lines(path)] == [e.decision_id for e in sent]
    assert sum(writes) == 200 and len(writes) <= 3, writes  # (a first line may be taken alone)
    writes.clear()
    rotated = tmp_path / "rotated.log"
    with AuditLog(rotated, max_bytes=2_000, backups=200) as log:
        for e in sent:
            log.record(e)
    assert all(f.stat().st_size <= 2_000 for f in files(rotated))
    assert len(writes) <= len(files(rotated)) + 2  # one write per file, give or take a wake-up


def test_a_line_longer_than_max_bytes_gets_a_file_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    sent = [event(name="a"), event(name="b" * 3_000), event(name="c")]
    with AuditLog(path, max_bytes=2_000, backups=10) as log:
        for e in sent:
            log.record(e)
    assert [r["name"] for r in lines(path)] == ["a", "b" * 3_000, "c"]
    assert all(f.stat().st_size > 0 for f in files(path))  # no empty file rotated away
    assert len(files(path)) == 3


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


def test_a_file_closed_behind_the_logs_back_loses_no_line_and_stops_cleanly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """uvicorn's `logging.config.dictConfig` closes every logging handler when the HTTP endpoint starts,
    the audit file's among them: lines recorded after it are written, and stop() reports no error."""
    caplog.set_level(logging.ERROR, logger="mcp_hub.audit.errors")
    path = tmp_path / "audit.log"
    log = AuditLog(path)
    log.start()
    log._handler.close()  # type: ignore[union-attr]  # what dictConfig does to every handler
    log.stop()
    assert errors(caplog) == []
    log = AuditLog(path)
    log.start()
    log._handler.close()  # type: ignore[union-attr]
    log.record(event())
    log.stop()
    assert errors(caplog) == [] and len(lines(path)) == 1


def test_stop_without_start_is_safe(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.stop()
    log.stop()
    assert not (tmp_path / "audit.log").exists()


def test_events_outside_start_and_stop_are_counted_as_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path)
    caplog.set_level(logging.ERROR, logger="mcp_hub.audit.errors")
    log.record(event())  # before start()
    with log:
        log.record(event())
    for _ in range(1_500):
        log.record(event())  # after stop(): never raises
    assert len(lines(path)) == 1
    assert log.dropped == 1_501
    reported = errors(caplog)
    assert "1 events lost" in reported[0]  # the first loss at once, then at most once a second
    assert len(reported) < 10
    assert all("not running" in m for m in reported)


def writers() -> int:
    """Audit writer threads alive."""
    return sum(thread.name == "mcp-hub audit log" for thread in threading.enumerate())


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


SLACK = 0.5  # scheduling noise on a busy machine; far below the second a blocking put used to wait


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


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mcp_hub.audit.errors" and r.levelno == logging.ERROR]


def check_stalled(log: AuditLog, disk: StalledDisk, durations: list[float], caplog: pytest.LogCaptureFixture) -> None:
    assert max(durations) < SLACK  # a full queue drops at once: it never waits for room
    assert log.dropped == 7  # the queue of 2 holds t1, t2; t3..t9 found it full and were dropped
    reported = errors(caplog)
    assert len(reported) == 1 and "1 events lost" in reported[0] and "queue is full" in reported[0]  # rate-limited
    disk.unblock.set()
    log.stop()
    assert [json.loads(line)["name"] for line in disk.written] == ["t0", "t1", "t2"]
    reported = errors(caplog)  # stop() reports the losses the rate limit held back
    assert len(reported) == 2 and "7 events lost" in reported[1]


def test_a_stalled_disk_never_blocks_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="mcp_hub.audit.errors")
    disk = StalledDisk()
    log = AuditLog(None, queue_size=2, handler=disk)
    log.start()
    try:
        check_stalled(log, disk, fill_a_stalled_log(log, disk), caplog)
    finally:
        disk.unblock.set()
        log.stop()


@pytest.mark.anyio
async def test_a_stalled_disk_never_blocks_a_task(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="mcp_hub.audit.errors")
    disk = StalledDisk()
    log = AuditLog(None, queue_size=2, handler=disk)
    log.start()
    try:
        with anyio.fail_after(30):
            durations = fill_a_stalled_log(log, disk)  # on the event loop, as the audit link calls it
            await anyio.sleep(0)
        check_stalled(log, disk, durations, caplog)
    finally:
        disk.unblock.set()
        log.stop()


@pytest.mark.slow
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


# -- the audit link, in a running hub -----------------------------------------------------------------------------

POLICY = """
[principals]
stdio = "operator"

[profiles.operator]
default = "allow"
[[profiles.operator.rules]]
id = "destructive"
effect = "confirm"
tools = ["srv/delete_note"]

[confirmation]
timeout = 60

[audit]
mask_arguments = ["{mask}"]
"""


def hub_setup(tmp_path: Path, mask: str = "*secret*") -> tuple[Path, Path]:
    """A hub.toml serving the fixture server with a policy folder and an audit file; returns (config, audit file)."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "hub.toml").write_text(POLICY.replace("{mask}", mask), encoding="utf-8")
    config = write_config(tmp_path / "hub.toml", {"srv": fixture_server("srv")})
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[policy]\ndir = "policies"\n\n[audit]\nfile = "audit.jsonl"\n')
    return config, tmp_path / "audit.jsonl"


async def audited(path: Path, count: int = 1) -> list[dict[str, Any]]:
    """The audit file's lines, once it has `count` of them (the writer thread writes them shortly)."""

    async def written() -> bool:
        return path.exists() and len(lines(path)) >= count

    await wait_for(written, timeout=10)
    return lines(path)


async def _exists(path: Path) -> bool:
    return path.exists()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_call_its_client_cancels_is_audited_as_cancelled(tmp_path: Path, mode: str) -> None:
    config, audit_file = hub_setup(tmp_path)
    marker = tmp_path / "call"
    async with running_hub(load_config(config)) as hub, hub_client(hub, mode) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "srv_wait", {"marker": str(marker)})
            await wait_for(lambda: _exists(Path(f"{marker}.started")))
            tg.cancel_scope.cancel()
        (line,) = await audited(audit_file)
        assert (await client.call_tool("srv_echo", {"text": "after"})).is_error is not True
    assert line["outcome"] == "cancelled" and line["name"] == "wait"
    assert line["latency_ms"] is not None and line["policy_revision"] is not None


class Waiting:
    """A person who is asked, and never answers."""

    def __init__(self) -> None:
        self.asked = anyio.Event()

    async def elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        self.asked.set()
        await anyio.sleep_forever()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_call_cancelled_while_waiting_for_confirmation_is_audited_as_cancelled(
    tmp_path: Path, mode: str
) -> None:
    """Handshake-era: the client cancels the call. 2026-07-28: the client never comes back, and the hub stops."""
    config, audit_file = hub_setup(tmp_path)
    person = Waiting()
    async with running_hub(load_config(config)) as hub:
        async with (
            hub_client(hub, mode, elicitation_callback=person.elicitation) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(client.call_tool, "srv_delete_note", {"key": "k"})
            with anyio.fail_after(15):
                await person.asked.wait()
            tg.cancel_scope.cancel()
        if mode == "legacy":
            await audited(audit_file)
    (line,) = lines(audit_file)  # 2026-07-28: the parked call ended with the hub, before the log closed
    assert line["outcome"] == "cancelled" and line["name"] == "delete_note" and line["rule"] == "destructive"


@pytest.mark.anyio
async def test_an_exception_the_audit_link_does_not_know_is_audited_as_error_not_allowed(tmp_path: Path) -> None:
    """No server misbehaves this way on purpose: a bug below the audit link is the only way, so the link
    runs here on its own, over a real audit file."""
    path = tmp_path / "audit.jsonl"

    async def broken(ctx: CallContext) -> dict[str, Any]:
        raise RuntimeError("a bug")

    call = CallContext(
        method="tools/call",
        kind="tool",
        mount="srv",
        native="echo",
        public="srv_echo",
        params={"name": "echo", "arguments": {"text": "x"}},
        principal="stdio",
        session=None,
        origin=cast(Any, None),
    )
    with AuditLog(path) as log:
        handler = compose([AuditTrail(log, empty_policy)], broken)
        with pytest.raises(RuntimeError):
            await handler(call)
    (line,) = lines(path)
    assert line["outcome"] == "error" and "RuntimeError" in (line["reason"] or "")


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_line_names_the_policy_that_decided_even_if_it_changed_during_confirmation(
    tmp_path: Path, mode: str
) -> None:
    config, audit_file = hub_setup(tmp_path, mask="*secret*")
    policy_file = tmp_path / "policies" / "hub.toml"
    async with running_hub(load_config(config)) as hub:
        deciding = hub.policy().revision

        async def reload_then_accept(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
            policy_file.write_text(POLICY.replace("{mask}", "key"), encoding="utf-8")
            await wait_for(lambda: _is(hub.policy().revision != deciding))
            return types.ElicitResult(action="accept", content={"confirm": True})

        async with hub_client(hub, mode, elicitation_callback=reload_then_accept) as client:
            result = await client.call_tool("srv_delete_note", {"key": "k", "secret_token": "hunter2"})
            (line,) = await audited(audit_file)
    assert result.content[0].text == "deleted k"  # type: ignore[union-attr]
    assert line["outcome"] == "confirmed"
    assert line["policy_revision"] == deciding != hub.policy().revision
    assert line["arguments"] == {"key": "k", "secret_token": "***"}  # masked as the deciding policy said


async def _is(value: bool) -> bool:
    return value
