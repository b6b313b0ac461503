"""Where a key is written in a TOML file, for error messages.

`KeyLines(text).line(loc)` answers the 1-based line of the deepest table header or `key =`
line whose path is a prefix of `loc` (a location such as `("profiles", "ro", "rules", 1,
"rate")`), or None. It reads the text line by line: table headers, `[[arrays of tables]]`
(counted, so the second `[[profiles.ro.rules]]` is `rules[1]`, and a `[profiles.ro.rules.x]`
header below it belongs to that element), dotted and quoted keys. Multi-line strings are
skipped; keys inside inline tables and the items of arrays point at the line of their key.
"""

from __future__ import annotations

import json
import re

Loc = tuple[str | int, ...]

_PART = r"""[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*'"""
_KEY = rf"(?:{_PART})(?:\s*\.\s*(?:{_PART}))*"
_ARRAY_HEADER = re.compile(rf"\s*\[\[\s*(?P<key>{_KEY})\s*\]\]\s*(?:#.*)?\Z")
_TABLE_HEADER = re.compile(rf"\s*\[\s*(?P<key>{_KEY})\s*\]\s*(?:#.*)?\Z")
_KEY_LINE = re.compile(rf"\s*(?P<key>{_KEY})\s*=")
_PARTS = re.compile(_PART)


def _split_key(key: str) -> tuple[str, ...]:
    parts: list[str] = []
    for token in _PARTS.findall(key):
        if token.startswith('"'):
            parts.append(json.loads(token))
        elif token.startswith("'"):
            parts.append(token[1:-1])
        else:
            parts.append(token)
    return tuple(parts)


class KeyLines:
    """An index from TOML key paths to the lines that write them."""

    def __init__(self, text: str) -> None:
        self._entries: list[tuple[Loc, int]] = []
        arrays: dict[Loc, int] = {}  # resolved path of an array of tables -> index of its last element
        table: Loc = ()
        in_string: str | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            if in_string is not None:
                if line.count(in_string) % 2:
                    in_string = None
                continue
            if header := _ARRAY_HEADER.match(line):
                *parents, last = _split_key(header["key"])
                path = (*self._resolve(tuple(parents), arrays), last)
                arrays[path] = arrays.get(path, -1) + 1
                table = (*path, arrays[path])
                self._entries.append((table, number))
            elif header := _TABLE_HEADER.match(line):
                table = self._resolve(_split_key(header["key"]), arrays)
                self._entries.append((table, number))
            elif key := _KEY_LINE.match(line):
                self._entries.append(((*table, *_split_key(key["key"])), number))
                in_string = _opened_multiline_string(line[key.end() :])

    @staticmethod
    def _resolve(parts: tuple[str, ...], arrays: dict[Loc, int]) -> Loc:
        """`parts` of a header with the current element index after every array of tables."""
        path: Loc = ()
        for part in parts:
            path = (*path, part)
            if path in arrays:
                path = (*path, arrays[path])
        return path

    def line(self, loc: Loc) -> int | None:
        """The line of `loc`, or of its longest written prefix; a key written only through deeper
        keys (`arguments.x = ...` for `arguments`) is found at the first of them."""
        best, best_length = None, 0
        for path, number in self._entries:
            if loc[: len(path)] == path:
                length = len(path)
            elif path[: len(loc)] == loc:
                length = len(loc)
            else:
                continue
            if length > best_length:
                best, best_length = number, length
        return best


def _opened_multiline_string(value: str) -> str | None:
    for quotes in ('"""', "'''"):
        if value.count(quotes) % 2:
            return quotes
    return None
