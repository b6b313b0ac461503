"""Bounded rings of what the hub measured: one per series, one cell per `SLOT` seconds over the last `SLOTS` slots.

A series is a key: ("hub",), ("mount", NAME), ("tool", PUBLIC NAME), ("principal", NAME) or
("principal_tool", PRINCIPAL, TOOL). Its cell for one slot holds what was measured in those seconds: the calls,
the errors among them (and their kinds), a latency histogram (counts per bucket of `BOUNDARIES`, sparse), the decisions
(denied, confirmed, declined, rate_limited, over_budget, redacted, blocked, flagged...: counted by kind), and,
for a mount, the states it was seen in and its restarts. Cells add up (`Cell.add`): the same slot of N replicas
is their sum, a window of slots is theirs, and percentiles are read off the summed histogram (`quantile`), so a
p95 over replicas is a p95 of all their calls, not an average of theirs.

Pure data: no clock of its own (slots are numbered `int(unix time // SLOT)` by the caller), no I/O; a ring keeps
`SLOTS` slots at most, older ones dropped as newer ones come.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

SLOT = 10
"""Seconds per cell."""

SLOTS = 360
"""Cells kept per series: one hour."""

BOUNDARIES: tuple[float, ...] = tuple(
    round(mantissa * 10.0**exponent, 6)
    for exponent in range(-4, 3)
    for mantissa in (1, 1.5, 2, 3, 5, 7)
    if 0.0005 <= mantissa * 10.0**exponent <= 300
)
"""Latency bucket bounds (seconds), six per decade from 0.5 ms to 300 s: a percentile read off them is within
half a bucket (some 20 %) of the true one."""

ERROR_OUTCOMES = frozenset({"error", "tool_error"})
"""Outcomes of a call counted as errors (a denial is a decision, not an error)."""

Key = tuple[str, ...]


@dataclass(slots=True)
class Cell:
    """What one series measured in one slot (or, summed, in several)."""

    calls: int = 0
    errors: int = 0
    seconds: float = 0.0
    """The calls' latencies summed."""
    buckets: dict[int, int] = field(default_factory=dict)
    """Index into `BOUNDARIES` (len(BOUNDARIES): above the last) -> calls that took that long."""
    decisions: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    """The errors by `error.type`: a JSON-RPC error code, "tool_error", or an exception's class."""
    states: set[str] = field(default_factory=set)
    """The states a mount was seen in."""
    restarts: int = 0

    def add(self, other: Cell) -> None:
        self.calls += other.calls
        self.errors += other.errors
        self.seconds += other.seconds
        self.restarts += other.restarts
        if other.buckets:
            mine = self.buckets
            for index, count in other.buckets.items():
                mine[index] = mine.get(index, 0) + count
        if other.decisions:
            for kind, count in other.decisions.items():
                self.decisions[kind] = self.decisions.get(kind, 0) + count
        if other.failures:
            for kind, count in other.failures.items():
                self.failures[kind] = self.failures.get(kind, 0) + count
        if other.states:
            self.states |= other.states

    def record(self, count: int, seconds: float, buckets: Iterable[tuple[int, int]], errors: bool) -> None:
        """`count` calls that took `seconds` in all, as (index into `BOUNDARIES`, calls) pairs (`sparse`)."""
        self.calls += count
        self.seconds += seconds
        if errors:
            self.errors += count
        mine = self.buckets
        for index, value in buckets:
            mine[index] = mine.get(index, 0) + value

    def quantile(self, q: float) -> float | None:
        """The `q` quantile of the latencies (seconds), interpolated within its bucket; None without calls."""
        total = sum(self.buckets.values())
        if total == 0:
            return None
        rank = q * total
        seen = 0
        for index in sorted(self.buckets):
            count = self.buckets[index]
            if seen + count >= rank:
                low = BOUNDARIES[index - 1] if index > 0 else 0.0
                high = BOUNDARIES[index] if index < len(BOUNDARIES) else BOUNDARIES[-1]
                return low + (high - low) * ((rank - seen) / count if count else 1.0)
            seen += count
        return BOUNDARIES[-1]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.calls:
            data.update(
                c=self.calls, e=self.errors, s=round(self.seconds, 6), b={str(k): v for k, v in self.buckets.items()}
            )
        if self.decisions:
            data["d"] = self.decisions
        if self.failures:
            data["f"] = self.failures
        if self.states:
            data["st"] = sorted(self.states)
        if self.restarts:
            data["r"] = self.restarts
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cell:
        return cls(
            calls=int(data.get("c", 0)),
            errors=int(data.get("e", 0)),
            seconds=float(data.get("s", 0.0)),
            buckets={int(k): int(v) for k, v in (data.get("b") or {}).items()},
            decisions={str(k): int(v) for k, v in (data.get("d") or {}).items()},
            failures={str(k): int(v) for k, v in (data.get("f") or {}).items()},
            states={str(s) for s in data.get("st") or ()},
            restarts=int(data.get("r", 0)),
        )


def sparse(bucket_counts: Iterable[int]) -> list[tuple[int, int]]:
    """A histogram's counts per bucket (OpenTelemetry's, one per bucket) as (index, count) pairs, zeros left out."""
    return [(index, count) for index, count in enumerate(bucket_counts) if count]


def bucket_of(seconds: float) -> int:
    """The index into `BOUNDARIES` of a latency (OpenTelemetry's rule: a bucket holds values up to its bound)."""
    return bisect.bisect_left(BOUNDARIES, seconds)


class Rings:
    """The cells of every series, `SLOTS` slots deep: slot -> key -> cell."""

    def __init__(self, slots: int = SLOTS) -> None:
        self.slots = slots
        self.cells: dict[int, dict[Key, Cell]] = {}
        """slot -> key -> cell (read it; write through `cell`, which keeps the ring bounded)."""
        self._sums: dict[tuple[int, int], dict[Key, Cell]] = {}
        """(last, count) -> every key's cells of those slots summed, until the next write (`totals`)."""

    def cell(self, slot: int, key: Key) -> Cell:
        """The cell of `key` in `slot` (to write to), made if new; slots older than the ring is deep are dropped."""
        if self._sums:
            self._sums.clear()
        cells = self.cells.get(slot)
        if cells is None:
            cells = self.cells[slot] = {}
            for old in [s for s in self.cells if s <= slot - self.slots]:
                del self.cells[old]
        found = cells.get(key)
        if found is None:
            found = cells[key] = Cell()
        return found

    def prune(self, oldest: int) -> None:
        """Drop the slots before `oldest`."""
        for old in [s for s in self.cells if s < oldest]:
            del self.cells[old]

    def slot(self, slot: int) -> Mapping[Key, Cell]:
        return self.cells.get(slot, {})

    def slot_json(self, slot: int) -> list[list[Any]]:
        """One slot's cells as JSON (for the other replicas): [[key...], cell] pairs."""
        return [[list(key), cell.to_json()] for key, cell in self.cells.get(slot, {}).items()]

    def merge_json(self, slot: int, cells: Iterable[Any]) -> None:
        """Add another replica's cells of `slot` (`slot_json`'s form) to this ring; malformed entries are skipped."""
        for entry in cells:
            if (
                isinstance(entry, list)
                and len(entry) == 2
                and isinstance(entry[0], list)
                and isinstance(entry[1], dict)
            ):
                self.cell(slot, tuple(str(part) for part in entry[0])).add(Cell.from_json(entry[1]))

    def keys(self, kind: str) -> set[Key]:
        """Every key of `kind` ("mount", "tool"...) with a cell in the ring."""
        return {key for key in self.totals(max(self.cells, default=0), self.slots) if key[0] == kind}

    def points(self, key: Key, last: int, count: int) -> list[Cell]:
        """`key`'s cells of the `count` slots ending with `last`, oldest first (empty cells where nothing was)."""
        return [self.cells.get(slot, {}).get(key) or Cell() for slot in range(last - count + 1, last + 1)]

    def total(self, key: Key, last: int, count: int) -> Cell:
        """`key`'s cells of the `count` slots ending with `last`, summed (to read: not to change)."""
        return self.totals(last, count).get(key) or Cell()

    def totals(self, last: int, count: int) -> Mapping[Key, Cell]:
        """Every key's cells of the `count` slots ending with `last`, summed in one pass, and kept until the next
        write: a page asks for many keys' totals over the same slots."""
        sums = self._sums.get((last, count))
        if sums is None:
            sums = {}
            for slot in range(last - count + 1, last + 1):
                for key, cell in self.cells.get(slot, {}).items():
                    summed = sums.get(key)
                    if summed is None:
                        summed = sums[key] = Cell()
                    summed.add(cell)
            self._sums[(last, count)] = sums
        return sums

    @classmethod
    def overlaid(cls, *layers: Rings) -> Rings:
        """A ring that reads `layers`' slots, a later layer's slot over an earlier one's (their cells shared, not
        copied: for reading only)."""
        rings = cls()
        for layer in layers:
            rings.cells.update(layer.cells)
        return rings

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.cells))
