"""What a detector finds: a typed span of a text, never a copy of its value; whole tokens, merging, redaction."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Match:
    """`text[start:end]` is something of `kind` (e.g. "aws_access_key"), found by `detector` (e.g. "secrets").

    Holds positions only: a match can be logged, counted and audited without the value it points at. A match
    that `merged` made of overlapping ones keeps what each found: its own detector and kind first, then the
    others' in `also` (see `found`)."""

    detector: str
    kind: str
    start: int
    end: int
    also: tuple[tuple[str, str], ...] = ()
    """The other (detector, kind) pairs found in this span, overlapping the first."""

    @property
    def found(self) -> tuple[tuple[str, str], ...]:
        """Every (detector, kind) pair this span holds, its own first."""
        return ((self.detector, self.kind), *self.also)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds this span holds, each once, in the order of `found`."""
        return tuple(dict.fromkeys(kind for _, kind in self.found))


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TOKEN_OR_DOT = _TOKEN_CHARS | {"."}
_TOKEN_AFTER = re.compile(r"(?:[A-Za-z0-9_-]+|\.(?=[A-Za-z0-9_-]))*(?:={1,2}(?![A-Za-z0-9_=-]))?")
"""The rest of a token from a position on: letters, digits, `_` and `-`, single dots between them (a JWT, a
SendGrid key), and base64 padding at its end."""
_TOKEN_BEFORE = re.compile(r"(?:[A-Za-z0-9_-]+|\.(?=[A-Za-z0-9_-]))*")
"""The same, over the text before a position read backwards (no padding there)."""
_BACK_WINDOW = 512


def whole_token(text: str, match: Match) -> Match:
    """`match` widened to the whole token it lies in, when it starts or ends inside one: a detector's pattern
    that stops short of a token's end (a Stripe key's first 24 characters after `sk_live_`, an OpenAI key up to
    20 characters after its marker, a JWT without its signature) must not leave the rest of it.

    A token is a run of ASCII letters, digits, `_` and `-`, with single dots inside it and `=` padding at its
    end. Everything else delimits it: white space, quotes, backslashes (JSON in a string), `, ; : = & ? / @ #`,
    brackets, `< >`, `+`, a dot that ends a sentence. So a value after `key=` or in a URL's path or query stays
    one token, and an e-mail address in a sentence keeps the sentence. A match that starts (or ends) with a
    delimiter, like a phone number's `(` or `+`, is not widened on that side."""
    start, end = match.start, match.end
    if end < len(text) and text[end - 1] in _TOKEN_OR_DOT:  # a dot: a pattern that stopped after one (a JWT's)
        found = _TOKEN_AFTER.match(text, end)
        end = found.end() if found else end
    if start > 0 and text[start] in _TOKEN_CHARS and text[start - 1] in _TOKEN_OR_DOT:
        start = _token_start(text, start)
    if (start, end) == (match.start, match.end):
        return match
    return Match(match.detector, match.kind, start, end, match.also)


def _token_start(text: str, start: int) -> int:
    """Where the token that holds `text[start]` starts (read backwards, a window at a time)."""
    while start > 0:
        low = max(0, start - _BACK_WINDOW)
        window = text[low:start][::-1]
        taken = _TOKEN_BEFORE.match(window).end()  # type: ignore[union-attr]  # the pattern matches empty text
        if taken == len(window) - 1 and window[-1] == "." and low > 0 and text[low - 1] in _TOKEN_CHARS:
            taken += 1  # a dot at the window's edge, inside the token (its next character is past the window)
        start -= taken
        if taken < len(window) or low == 0:
            break
    return start


def merged(matches: Iterable[Match]) -> list[Match]:
    """Matches sorted by position, overlapping ones merged into one span that keeps every (detector, kind)
    pair found in it: the pairs in the order the matches came (`Detectors.find` gives them in the order of
    `DETECTORS`: secrets first), each once."""
    ordered = sorted(enumerate(matches), key=lambda item: (item[1].start, -item[1].end, item[0]))
    groups: list[tuple[int, int, list[tuple[int, Match]]]] = []
    for index, match in ordered:
        if groups and match.start < groups[-1][1]:
            start, end, members = groups[-1]
            members.append((index, match))
            groups[-1] = (start, max(end, match.end), members)
        else:
            groups.append((match.start, match.end, [(index, match)]))
    out: list[Match] = []
    for start, end, members in groups:
        if len(members) == 1 and (members[0][1].start, members[0][1].end) == (start, end):
            out.append(members[0][1])
            continue
        pairs = list(dict.fromkeys(pair for _, match in sorted(members) for pair in match.found))
        (detector, kind), *also = pairs
        out.append(Match(detector, kind, start, end, tuple(also)))
    return out


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def redacted(text: str, matches: Iterable[Match]) -> str:
    """`text` with each match replaced by `[REDACTED:<kind>]` (overlapping matches merged; a span that holds
    several kinds names them all, `[REDACTED:url_password,email]`)."""
    parts: list[str] = []
    position = 0
    for match in merged(matches):
        parts.append(text[position : match.start])
        parts.append(marker(",".join(match.kinds)))
        position = match.end
    parts.append(text[position:])
    return "".join(parts)
