"""Argument constraints: what the arguments of a call must look like.

A rule's `[rules.arguments.NAME]` table compiles to one `ArgumentRule`. An absent argument
passes every constraint but `required`. A value of the wrong type for a constraint (a number
for `path_within`, a string for `minimum`) violates it. Per argument, checks run cheapest
first and stop at the first violation, so a value over `max_length` never reaches a regex.

Violation details name the constraint and what was expected, never the value or where a
symlink points: they reach the caller as a tool error and the audit log as text.

`path_within`, the security-critical one, is described at `path_problem`.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import unquote

from mcp_hub.policy.model import ArgumentConstraints

Realpath = Callable[[str], str]
Checker = Callable[[Any, Realpath], str | None]
"""A compiled constraint: the problem with a present value, or None when it holds."""

ABSENT = object()
MAX_DECODE_ROUNDS = 8
MAX_SPELLINGS = 64
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")  # two letters at least: "C:" is a drive, not a scheme
_SEPARATOR = re.compile(r"[/\\]")


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken constraint: which rule, argument and constraint, and what was expected."""

    rule: str
    argument: str
    constraint: str
    detail: str

    def __str__(self) -> str:
        return f"argument {self.argument!r} {self.detail} ({self.constraint} of rule {self.rule!r})"


@dataclass(frozen=True, slots=True)
class ArgumentRule:
    """The compiled constraints on one argument."""

    argument: str
    required: bool
    checks: tuple[tuple[str, Checker], ...]

    def results(self, arguments: Mapping[str, Any], realpath: Realpath) -> Iterator[tuple[str, str | None]]:
        """(constraint, problem or None) for each constraint checked, stopping after the first problem."""
        value = arguments.get(self.argument, ABSENT)
        if value is ABSENT:
            if self.required:
                yield "required", "is required but missing"
            return
        for constraint, check in self.checks:
            problem = check(value, realpath)
            yield constraint, problem
            if problem is not None:
                return

    def violations(self, rule: str, arguments: Mapping[str, Any], realpath: Realpath) -> Iterator[Violation]:
        for constraint, problem in self.results(arguments, realpath):
            if problem is not None:
                yield Violation(rule, self.argument, constraint, problem)


def compile_argument(argument: str, spec: ArgumentConstraints) -> ArgumentRule:
    """Compile one validated `[arguments.NAME]` table; regexes are compiled here, once."""
    checks: list[tuple[str, Checker]] = []
    if spec.max_length is not None:
        checks.append(("max_length", _max_length(spec.max_length)))
    if spec.enum is not None:
        checks.append(("enum", _enum(spec.enum)))
    if spec.minimum is not None:
        checks.append(("minimum", _bound(spec.minimum, below=True)))
    if spec.maximum is not None:
        checks.append(("maximum", _bound(spec.maximum, below=False)))
    if spec.pattern is not None:
        checks.append(("pattern", _pattern(spec.pattern)))
    if spec.not_pattern is not None:
        checks.append(("not_pattern", _not_pattern(spec.not_pattern)))
    if spec.path_within is not None:
        roots = spec.path_within
        checks.append(("path_within", lambda value, realpath: path_problem(value, roots, realpath)))
    return ArgumentRule(argument, spec.required, tuple(checks))


def json_type(value: Any) -> str:
    """The JSON type of a value, for messages (values themselves are never shown)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return f"a {type(value).__name__}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _max_length(limit: int) -> Checker:
    def check(value: Any, _: Realpath) -> str | None:
        if isinstance(value, str):
            return None if len(value) <= limit else f"must be at most {limit} characters long"
        if isinstance(value, list | tuple):
            return None if len(cast(Sequence[Any], value)) <= limit else f"must have at most {limit} items"
        return f"must be a string or an array, got {json_type(value)}"

    return check


def _enum(allowed: tuple[Any, ...]) -> Checker:
    shown = ", ".join(repr(value) for value in allowed[:10]) + (", ..." if len(allowed) > 10 else "")

    def check(value: Any, _: Realpath) -> str | None:
        scalar = isinstance(value, str | int | float)  # bool is an int
        if scalar and any(_equal(value, choice) for choice in allowed):
            return None
        return f"must be one of {shown}"

    return check


def _equal(value: Any, choice: Any) -> bool:
    """JSON equality of scalars: booleans only equal booleans, strings strings, numbers numbers."""
    if isinstance(value, bool) or isinstance(choice, bool):
        return isinstance(value, bool) and isinstance(choice, bool) and value == choice
    if isinstance(value, str) or isinstance(choice, str):
        return isinstance(value, str) and isinstance(choice, str) and value == choice
    return bool(value == choice)


def _bound(limit: float, *, below: bool) -> Checker:
    def check(value: Any, _: Realpath) -> str | None:
        if not _is_number(value) or math.isnan(value):
            return f"must be a number, got {json_type(value) if not _is_number(value) else 'NaN'}"
        if below and value < limit:
            return f"must be at least {limit}"
        if not below and value > limit:
            return f"must be at most {limit}"
        return None

    return check


def _pattern(pattern: str) -> Checker:
    regex = re.compile(pattern)

    def check(value: Any, _: Realpath) -> str | None:
        if not isinstance(value, str):
            return f"must be a string, got {json_type(value)}"
        return None if regex.fullmatch(value) else f"must match the pattern {pattern!r}"

    return check


def _not_pattern(pattern: str) -> Checker:
    regex = re.compile(pattern)

    def check(value: Any, _: Realpath) -> str | None:
        if not isinstance(value, str):
            return f"must be a string, got {json_type(value)}"
        return None if regex.search(value) is None else f"must not match the pattern {pattern!r}"

    return check


# -- path_within -------------------------------------------------------------------------------


def path_problem(value: Any, roots: Sequence[str], realpath: Realpath = os.path.realpath) -> str | None:
    """Why `value` is not an absolute path inside one of `roots` (absolute, normalized), or None.

    Every way the value could be read is checked, and each must stay inside:

    1. it must be a non-empty string;
    2. the value as given, and every percent-decoding of it until decoding changes nothing
       (`%252e` -> `%2e` -> `.`), are all spellings to check: the server might decode or might not;
       so is the Unicode compatibility normalization (NFKC) of each, which some servers apply
       (U+FF0F FULLWIDTH SOLIDUS -> `/`, two U+FF0E FULLWIDTH FULL STOPs or one U+2025 TWO DOT
       LEADER -> `..`, U+FF05 FULLWIDTH PERCENT SIGN -> `%`). A value that normalization would
       give other separators or other dot segments (`{root}/\uff0e\uff0e/etc` is a name inside the
       root as written, and a step out of it once normalized) is refused outright, whichever
       reading stays inside: the two readings would point to different files;
    3. a spelling that is a `file:` URI (any case: `file:///p`, `file://localhost/p`, `file:/p`),
       however it was reached (`file%3a///p` decodes to one), is read as its path, with and
       without what follows a `?` or `#`, and that path is decoded in turn; a `file:` URI naming
       another host, and a URI of any other scheme (`http:`, `ftp:`, ...), are refused;
    4. each spelling: no NUL byte, no leading `~`, no `..\\` or `\\..` (backslashes are
       ordinary characters on POSIX, but a Windows-style parent step is suspicious);
    5. each spelling must be absolute: the server resolves a relative path against its own
       working directory, which the hub does not know, so no root can vouch for it;
    6. both the normalized path (`os.path.normpath`) and the path as written are resolved with
       `realpath` (the latter matters when `..` follows a symlink: the system resolves the link
       first), and each result must be a root or below one, comparing path components
       (`/srv/docs2` is not within `/srv/docs`). Roots are resolved with `realpath` too, so a
       root that is itself a symlink works.

    Spellings are checked most-decoded first, so the reason given is the one that matters most
    (`file%3a///etc/passwd` is outside the roots, not merely relative).
    """
    if not isinstance(value, str):
        return f"must be a path string, got {json_type(value)}"
    if not value:
        return "is an empty path; give a path inside " + _roots_text(roots)
    spellings = _spellings(value)
    if isinstance(spellings, str):
        return spellings
    try:
        resolved_roots = [parts for root in roots if (parts := _components(realpath(root))) is not None]
    except (OSError, ValueError):
        return "cannot be checked: an allowed directory cannot be resolved"
    for spelling in reversed(spellings):
        problem = _spelling_problem(spelling, roots, resolved_roots, realpath)
        if problem is not None:
            return problem
    return None


def _roots_text(roots: Sequence[str]) -> str:
    return ", ".join(roots)


def _spellings(value: str) -> list[str] | str:
    """Every path the value could be read as, in the order found; or the problem.

    A spelling is the value or one of its percent-decodings; a spelling that is a `file:` URI
    stands for its path (and that path's decodings) rather than for itself.
    """
    spellings: list[str] = []
    pending: list[tuple[str, int]] = [(value, 0)]  # (text, percent-decodings it took)
    seen: set[str] = set()
    while pending:
        text, rounds = pending.pop(0)
        if text in seen:
            continue
        seen.add(text)
        if len(seen) > MAX_SPELLINGS:
            return "can be read in too many ways"
        try:
            decoded = unquote(text, errors="strict")
        except UnicodeDecodeError:
            return "has percent-encoding that is not UTF-8"
        if decoded != text:
            if rounds >= MAX_DECODE_ROUNDS:
                return "is percent-encoded too many times"
            pending.append((decoded, rounds + 1))
        normal = unicodedata.normalize("NFKC", text)
        if normal != text:
            if _steps_differ(text, normal):
                return (
                    "reads as other path separators or dot segments once Unicode-normalized (NFKC), as some "
                    "servers read it; write the path in plain characters"
                )
            pending.append((normal, rounds))
        paths = _uri_paths(text)
        if isinstance(paths, str):
            return paths
        if paths is None:
            spellings.append(text)
        else:
            pending.extend((path, rounds) for path in paths)
    return spellings


def _steps_differ(text: str, normal: str) -> bool:
    """Whether `normal` (the NFKC form of `text`) has other separators or dot segments than `text`, each read
    percent-decoded as far as it goes (`\uff052e` normalizes to `%2e`, which decodes to `.`)."""
    written, read = _SEPARATOR.split(_decoded(text)), _SEPARATOR.split(_decoded(normal))
    if len(written) != len(read):
        return True
    return any(a != b and (_dots(a) or _dots(b)) for a, b in zip(written, read, strict=True))


def _decoded(text: str) -> str:
    """`text` percent-decoded until decoding changes nothing (as far as it decodes)."""
    for _ in range(MAX_DECODE_ROUNDS + 1):
        try:
            decoded = unquote(text, errors="strict")
        except UnicodeDecodeError:
            return text
        if decoded == text:
            break
        text = decoded
    return text


def _dots(segment: str) -> bool:
    """A segment of dots only: `.` and `..` step, and some systems read `...` as one of them."""
    return bool(segment) and segment.strip(".") == ""


def _uri_paths(text: str) -> list[str] | str | None:
    """None if `text` is no URI; the paths a `file:` URI may be read as; or why the URI is refused."""
    scheme = _SCHEME.match(text)
    if scheme is None:
        return None
    if scheme.group().lower() != "file:":
        return "is a URI, not a file: URI; give a local path"
    rest = text[scheme.end() :]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if unquote(host).lower() not in ("", "localhost"):
            return "is a file: URI for another host; give a local path"
        if not slash:
            return "is a file: URI without a path"
        rest = "/" + path
    if not rest:
        return "is a file: URI without a path"
    paths = [rest]
    for mark in "?#":
        if mark in rest:
            paths.append(rest.split(mark, 1)[0])
    return paths


def _spelling_problem(
    spelling: str, roots: Sequence[str], resolved_roots: list[tuple[str, ...]], realpath: Realpath
) -> str | None:
    if "\x00" in spelling:
        return "contains a NUL byte"
    if spelling.startswith("~"):
        return "starts with '~'; give the full path"
    if "..\\" in spelling or "\\.." in spelling:
        return "contains a Windows-style parent step ('..\\'); use '/' and stay inside " + _roots_text(roots)
    if not os.path.isabs(spelling):
        return "must be absolute: the server would resolve a relative path against its own working directory"
    for candidate in {os.path.normpath(spelling), spelling}:
        try:
            resolved = _components(realpath(candidate))
        except (OSError, ValueError):
            return "cannot be resolved"
        if resolved is None or not any(resolved[: len(root)] == root for root in resolved_roots):
            return "is outside the allowed directories " + _roots_text(roots)
    return None


def _components(path: str) -> tuple[str, ...] | None:
    """An absolute path's components ("/" -> ()); None for a relative one (from a broken realpath)."""
    if not os.path.isabs(path):
        return None
    return tuple(part for part in os.path.normpath(path).split(os.sep) if part)
