"""What a detector finds: a typed span of a text, never a copy of its value."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Match:
    """`text[start:end]` is something of `kind` (e.g. "aws_access_key"), found by `detector` (e.g. "secrets").

    Holds positions only: a match can be logged, counted and audited without the value it points at."""

    detector: str
    kind: str
    start: int
    end: int


def merged(matches: Iterable[Match]) -> list[Match]:
    """Matches sorted by position, overlapping ones merged into the first (longest at the same start)."""
    out: list[Match] = []
    for match in sorted(matches, key=lambda m: (m.start, -m.end)):
        if out and match.start < out[-1].end:
            last = out[-1]
            if match.end > last.end:
                out[-1] = Match(last.detector, last.kind, last.start, match.end)
            continue
        out.append(match)
    return out


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def redacted(text: str, matches: Iterable[Match]) -> str:
    """`text` with each match replaced by `[REDACTED:<kind>]` (overlapping matches merged)."""
    parts: list[str] = []
    position = 0
    for match in merged(matches):
        parts.append(text[position : match.start])
        parts.append(marker(match.kind))
        position = match.end
    parts.append(text[position:])
    return "".join(parts)
