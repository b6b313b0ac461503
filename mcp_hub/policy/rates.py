"""Rate strings, in the `limits` library's syntax, checked without it.

`N/UNIT`, `N per UNIT`, `N/M UNITs`, `N per M UNITs`, with UNIT one of second, minute, hour,
day (singular or plural, any case): "30/minute", "5 per second", "100 per 15 minutes". One
limit per rule; a second limit is a second rule with the same selectors.
"""

from __future__ import annotations

import re

_RATE = re.compile(
    r"\s*(?P<amount>[0-9]+)\s*(?:/|per)\s*(?:(?P<multiple>[0-9]+)\s*)?"
    r"(?P<unit>second|minute|hour|day)s?\s*\Z",
    re.IGNORECASE,
)
_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}

RATE_SYNTAX = 'write it like "30/minute", "5 per second" or "100 per 15 minutes" (units: second, minute, hour, day)'


def parse_rate(rate: str) -> tuple[int, int]:
    """(amount, period in seconds) of a rate string: "100 per 15 minutes" -> (100, 900).

    Raises ValueError (with the accepted syntax) for anything else, or a zero amount or period.
    """
    match = _RATE.match(rate)
    if match is None:
        raise ValueError(f"invalid rate {rate!r}; {RATE_SYNTAX}")
    amount, multiple = int(match["amount"]), int(match["multiple"] or 1)
    if amount == 0 or multiple == 0:
        raise ValueError(f"rate {rate!r} allows nothing; use a deny rule instead, or a rate of at least 1")
    return amount, multiple * _SECONDS[match["unit"].lower()]
