"""Duration strings, as a rule's `cache` writes them: "90s", "5m", "1h", "500ms", "2 minutes"."""

from __future__ import annotations

import re

_DURATION = re.compile(
    r"\s*(?P<amount>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>ms|s|m|h|milliseconds?|seconds?|minutes?|hours?)\s*\Z",
    re.IGNORECASE,
)
_SECONDS = {"ms": 0.001, "millisecond": 0.001, "s": 1, "second": 1, "m": 60, "minute": 60, "h": 3600, "hour": 3600}

DURATION_SYNTAX = 'write it like "60s", "5m", "1h" or "500ms" (units: ms, s, m, h, or their names)'
MAX_DURATION = 86_400.0
"""A day: what a cached result may be kept at most (the SDK's cap on `ttlMs`, too)."""


def parse_duration(text: str) -> float:
    """Seconds of a duration string: "5m" -> 300.0. Raises ValueError (with the syntax) for anything else,
    zero, or more than a day."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"invalid duration {text!r}; {DURATION_SYNTAX}")
    unit = match["unit"].lower()
    unit = unit if unit in _SECONDS else unit.rstrip("s")
    seconds = float(match["amount"]) * _SECONDS[unit]
    if seconds <= 0:
        raise ValueError(f"duration {text!r} is zero; remove it to keep nothing")
    if seconds > MAX_DURATION:
        raise ValueError(f'duration {text!r} is more than a day; use at most "24h"')
    return seconds
