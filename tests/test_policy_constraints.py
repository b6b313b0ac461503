"""Tests for argument constraints, above all path_within against every escape we know of."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from mcp_hub.policy import Outcome, PolicySet, Target, parse_policies, path_problem


def constrained(table: str) -> PolicySet:
    """A policy where principal x may call t/t, with `table` as the constraints of argument v."""
    text = f"""
    [principals]
    x = "p"
    [profiles.p]
    [[profiles.p.rules]]
    id = "r"
    effect = "allow"
    tools = ["t/t"]
    [profiles.p.rules.arguments.v]
    {table}
    """
    return parse_policies({"p.toml": text})


def violation(table: str, arguments: dict[str, Any]) -> str | None:
    """The violated constraint (None when the call is allowed)."""
    decision = constrained(table).decide("x", Target("tool", "t", "t", arguments), realpath=lambda p: p)
    if decision.outcome is Outcome.ALLOWED:
        return None
    assert decision.outcome is Outcome.REFUSED
    first = decision.violations[0]
    assert (first.rule, first.argument) == ("r", "v")
    assert f"{first.constraint} of rule 'r'" in decision.reason and "argument 'v'" in decision.reason
    return first.constraint


@pytest.mark.parametrize(
    ("table", "value", "broken"),
    [
        ('pattern = "[a-z]+"', "abc", None),
        ('pattern = "[a-z]+"', "abc1", "pattern"),  # the whole string must match
        ('pattern = "[a-z]+"', "1abc", "pattern"),
        ('pattern = "[a-z]+"', 5, "pattern"),
        ('pattern = "[a-z]+"', ["abc"], "pattern"),
        ('not_pattern = "\\\\.env"', "config.yaml", None),
        ('not_pattern = "\\\\.env"', "dir/.env.local", "not_pattern"),  # anywhere
        ('not_pattern = "x"', None, "not_pattern"),
        ('enum = ["utc", "local"]', "utc", None),
        ('enum = ["utc", "local"]', "UTC", "enum"),
        ('enum = ["utc", "local"]', ["utc"], "enum"),
        ("enum = [1, 2.5, true]", 1, None),
        ("enum = [1, 2.5, true]", 1.0, None),  # JSON has one number type
        ("enum = [1, 2.5, true]", 2.5, None),
        ("enum = [1, 2.5, true]", True, None),
        ("enum = [1]", True, "enum"),  # True is not 1
        ("enum = [true]", 1, "enum"),
        ('enum = ["1"]', 1, "enum"),
        ("enum = [1]", "1", "enum"),
        ("max_length = 3", "abc", None),
        ("max_length = 3", "abcd", "max_length"),
        ("max_length = 3", "äöü", None),  # characters, not bytes
        ("max_length = 2", ["a", "b"], None),
        ("max_length = 2", ["a", "b", "c"], "max_length"),
        ("max_length = 2", 5, "max_length"),
        ("max_length = 2", {"a": 1}, "max_length"),
        ("minimum = 0", 0, None),
        ("minimum = 0", -1, "minimum"),
        ("minimum = 0", -0.5, "minimum"),
        ("minimum = 0", "5", "minimum"),
        ("minimum = 0", True, "minimum"),  # booleans are not numbers
        ("minimum = 0", math.nan, "minimum"),
        ("minimum = 0", -math.inf, "minimum"),
        ("maximum = 10.5", 10.5, None),
        ("maximum = 10.5", 11, "maximum"),
        ("maximum = 10.5", False, "maximum"),
        ("maximum = 10.5", math.nan, "maximum"),
        ("maximum = 10.5", math.inf, "maximum"),
        ("minimum = 1\nmaximum = 3", 2, None),
        ("path_within = ['/srv']", 5, "path_within"),
        ("path_within = ['/srv']", ["/srv/a"], "path_within"),
        ("path_within = ['/srv']", None, "path_within"),
        ("required = true", "", None),
        ("required = true", None, None),  # present (null); only presence is required
    ],
)
def test_constraint_kinds(table: str, value: Any, broken: str | None) -> None:
    assert violation(table, {"v": value}) == broken


@pytest.mark.parametrize(
    "table", ['pattern = "x"', "max_length = 1", "minimum = 5", "enum = [1]", "path_within = ['/srv']"]
)
def test_absent_argument_passes_everything_but_required(table: str) -> None:
    assert violation(table, {"other": "zzz"}) is None
    assert violation(f"{table}\nrequired = true", {"other": "zzz"}) == "required"
    assert violation(f"{table}\nrequired = true", {}) == "required"


def test_checks_stop_at_the_first_violation_cheapest_first() -> None:
    seen: list[str] = []

    def realpath(path: str) -> str:
        seen.append(path)
        return path

    p = constrained("max_length = 5\npattern = '(a+)+b'\npath_within = ['/srv']")
    decision = p.decide("x", Target("tool", "t", "t", {"v": "a" * 10_000}), realpath=realpath)
    assert [v.constraint for v in decision.violations] == ["max_length"]
    assert seen == []


def test_violation_messages_never_show_the_value() -> None:
    p = constrained("enum = ['a']\nnot_pattern = 'x'")
    decision = p.decide("x", Target("tool", "t", "t", {"v": "hunter2"}))
    assert "hunter2" not in decision.reason
    assert decision.reason == "argument 'v' must be one of 'a' (enum of rule 'r')"


# -- path_within -------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, str]:
    """docs/ (the root) with a file, a subdirectory, symlinks in and out; docs2/ and outside/ beside it."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("a")
    (docs / "sub" / "b.txt").write_text("b")
    (tmp_path / "docs2").mkdir()
    (tmp_path / "docs2" / "x").write_text("x")
    outside = tmp_path / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "secret").write_text("s")
    (docs / "escape").symlink_to(outside)  # a directory link out of the root
    (docs / "secret-link").symlink_to(outside / "secret")  # a file link out of the root
    (docs / "deep").symlink_to(outside / "deeper")  # "deep/.." is outside/, not docs/
    (docs / "inner").symlink_to(docs / "sub")  # a link that stays inside
    (tmp_path / "root-link").symlink_to(docs)  # a root that is itself a symlink
    return {"root": str(docs), "tmp": str(tmp_path), "root_link": str(tmp_path / "root-link")}


INSIDE = [
    "{root}",
    "{root}/",
    "{root}/a.txt",
    "{root}/sub/b.txt",
    "{root}/new-file.txt",  # need not exist
    "{root}//sub///b.txt",
    "{root}/sub/./../a.txt",
    "{root}/./sub/../a.txt",
    "{root}/inner/b.txt",  # a link that stays inside
    "{root}/a\\b",  # backslashes are ordinary characters on POSIX
    "{root}/%61.txt",  # percent-decodes to a.txt
    "{root}/a%20b",
    "file://{root}/a.txt",
    "file://localhost{root}/sub/b.txt",
    "file://LOCALHOST{root}/sub/b.txt",
    "file://%6cocalhost{root}/a.txt",
    "file:{root}/a.txt",
    "FILE://{root}/ok",  # the scheme is case-insensitive
    "File://{root}/ok",
    "file://{root}/a%20b",  # read as {root}/a%20b and as {root}/a b: both inside
    "file://{root}/a.txt?x=1",
    "file://{root}/x?http://evil/",  # {root}/x with or without the query: a URI in a query is no URI to read
    # Unicode that normalization (NFKC) changes without changing the path's steps stays readable.
    "{root}/\uff46\uff49\uff4c\uff45.txt",  # fullwidth letters: "file.txt" once normalized, in the same place
    "{root}/日本/é.txt",
    "{root}/会议\uff1a纪要.txt",  # a fullwidth colon in a name is no scheme
    "{root}/a\uff0eb",  # a dot inside a name is no dot segment
    "{root}/ﬁle",
]

# A relative path is refused: the hub would check it against a root, but the server resolves it
# against its own working directory, which the hub does not know.
RELATIVE = [
    "a.txt",
    "etc/passwd",
    "./x",
    ".",
    "..",
    "../..",
    "docs/../../etc",
    "sub/../a.txt",
    "../outside/secret",
    "escape/secret",
    "%61.txt",
    "%2e%2e",
    "..%2f..%2fetc",
    "%2e%2e%2foutside%2fsecret",
    "%252e%252e%252fsecret",  # double-encoded
    "%25252e%25252e/x",  # triple-encoded
    "%2F{root}/a.txt",  # absolute once decoded, but relative to a server that does not decode
    "file:a.txt",  # a file: URI with a relative path
    "file:etc/passwd",
    "file%3a//{root}/a.txt",  # an encoded file: URI is a relative path to a server that does not decode
    "C:/Windows",
]

OUTSIDE = {
    "/etc/passwd": "outside",
    "%2fetc%2fpasswd": "outside",  # the most-decoded reading is told first
    "/": "outside",
    "//etc/passwd": "outside",
    "{root}/..": "outside",
    "{root}/../..": "outside",
    "{root}/../outside/secret": "outside",
    "{root}/sub/../../outside/secret": "outside",
    "{tmp}/docs2/x": "outside",  # a sibling sharing the root's prefix
    "{root}2/x": "outside",
    "{root}/../docs2/x": "outside",
    "{root}/%2e%2e": "outside",
    "{root}/%2e%2e%2foutside%2fsecret": "outside",
    "{root}/%2E%2E%2F%2E%2E%2Fetc": "outside",
    "{root}/..%2f..%2fetc": "outside",
    "{root}/%2e%2e/outside/secret": "outside",
    "{root}/%252e%252e%252foutside": "outside",  # double-encoded
    "{root}/%25252e%25252e/x": "outside",  # triple-encoded
    "file:///etc/passwd": "outside",
    "FILE:///etc/passwd": "outside",
    "file:/etc/passwd": "outside",
    "file://localhost/etc/passwd": "outside",
    "file://{root}/%2e%2e/outside/secret": "outside",
    "file://{root}/..?/x": "outside",  # a URI reader drops "?/x": {root}/..
    "file://{root}/..#/x": "outside",
    # an encoded file: URI is read as one too (the server might decode it first)
    "file%3a///etc/passwd": "outside",
    "file%3A///etc/passwd": "outside",
    "FILE%3A///etc/passwd": "outside",
    "file%3a%2f%2f%2fetc%2fpasswd": "outside",
    "file%3A%2F%2F%2Fetc%2Fpasswd": "outside",
    "file%253A%2F%2F%2Fetc%2Fpasswd": "outside",  # double-encoded
    "file%253a%252f%252f%252fetc%252fpasswd": "outside",
    "FiLe%253A///etc/passwd": "outside",
    "file%3a//localhost/etc/passwd": "outside",
    "file%3a/etc/passwd": "outside",
    "file%3A//{root}/%2e%2e/outside/secret": "outside",
    "file://example.com{root}/a.txt": "another host",
    "file://evil-host{root}/x": "another host",
    "FILE://evil-host{root}/x": "another host",
    "file%3a//evil-host{root}/x": "another host",
    "file%253A%2F%2Fevil-host{root}/x": "another host",
    "file:": "without a path",
    "file://": "without a path",
    "file://localhost": "without a path",
    "http://example.com{root}/a.txt": "not a file: URI",
    "HTTPS://example.com/x": "not a file: URI",
    "ftp://example.com{root}/a.txt": "not a file: URI",
    "http%3a//example.com{root}/a.txt": "not a file: URI",
    "http%253A%2F%2Fexample.com%2Fx": "not a file: URI",
    "{root}/escape": "outside",  # symlink inside the root pointing outside
    "{root}/escape/secret": "outside",
    "{root}/secret-link": "outside",
    "{root}/deep/../secret": "outside",  # '..' after a symlink: the system resolves the link first
    "a\x00b": "NUL",
    "{root}/a.txt\x00.png": "NUL",
    "%00": "NUL",
    "%2500": "NUL",
    "{root}/%00": "NUL",
    "~": "'~'",
    "~/x": "'~'",
    "~root/.ssh/id_rsa": "'~'",
    "%7e/x": "'~'",
    "..\\..\\etc\\passwd": "Windows-style",
    "sub\\..\\..": "Windows-style",
    "%2e%2e%5c": "Windows-style",
    "{root}/..\\..\\etc": "Windows-style",
    # Read NFKC-normalized, as some servers do, these step out or elsewhere: refused however read.
    "{root}/\uff0e\uff0e/outside/secret": "Unicode-normalized",  # U+FF0E FULLWIDTH FULL STOP
    "{root}/\uff0e\uff0e/\uff0e\uff0e/etc/passwd": "Unicode-normalized",
    "{root}/\u2024\u2024/outside": "Unicode-normalized",  # U+2024 ONE DOT LEADER
    "{root}/‥/outside": "Unicode-normalized",  # U+2025 TWO DOT LEADER is two dots
    "{root}/﹒﹒/outside": "Unicode-normalized",  # U+FE52 SMALL FULL STOP
    "{root}/sub/\uff0e\uff0e/a.txt": "Unicode-normalized",  # inside either way, but the two readings differ
    "{root}/\uff0e/a.txt": "Unicode-normalized",
    "{root}/…": "Unicode-normalized",  # "..." to a server that normalizes
    "{root}/..\uff0f..\uff0fetc": "Unicode-normalized",  # U+FF0F FULLWIDTH SOLIDUS
    "{root}/a\uff0fb": "Unicode-normalized",
    "{root}/..\uff3c..\uff3cetc": "Unicode-normalized",  # U+FF3C FULLWIDTH REVERSE SOLIDUS
    "{root}/\uff052e\uff052e/outside": "Unicode-normalized",  # U+FF05: "%2e%2e" once normalized, ".." once decoded
    "{root}/%EF%BC%8E%EF%BC%8E/outside": "Unicode-normalized",  # two FULLWIDTH FULL STOPs once decoded
    "{root}/%25EF%25BC%258E%25EF%25BC%258E/x": "Unicode-normalized",  # double-encoded
    "file://{root}/\uff0e\uff0e/outside": "Unicode-normalized",
    "\uff46\uff49\uff4c\uff45:///etc/passwd": "outside",  # fullwidth letters: a file: URI once normalized
    "%EF%BD%86ile:///etc/passwd": "outside",
    "\uff0fetc\uff0fpasswd": "Unicode-normalized",  # relative as written, absolute once normalized
    "\uff5e/x": "'~'",  # U+FF5E FULLWIDTH TILDE
    "": "empty",
    "%ff": "not UTF-8",
    "{root}/%ff": "not UTF-8",
    "{root}/" + "%" + "25" * 12 + "2e": "too many times",
}


@pytest.mark.parametrize("value", INSIDE)
def test_paths_inside_the_root(tree: dict[str, str], value: str) -> None:
    assert path_problem(value.format(**tree), [tree["root"]]) is None


@pytest.mark.parametrize("value", RELATIVE, ids=repr)
def test_relative_paths_are_refused(tree: dict[str, str], value: str) -> None:
    found = path_problem(value.format(**tree), [tree["root"]])
    assert found == "must be absolute: the server would resolve a relative path against its own working directory"


@pytest.mark.parametrize(("value", "problem"), OUTSIDE.items(), ids=[repr(v) for v in OUTSIDE])
def test_paths_escaping_the_root(tree: dict[str, str], value: str, problem: str) -> None:
    found = path_problem(value.format(**tree), [tree["root"]])
    assert found is not None and problem in found


AUDITED = {  # the values of the audit, against /srv/docs: None when allowed, else part of the reason
    "etc/passwd": "must be absolute",
    "./x": "must be absolute",
    "docs/../../etc": "must be absolute",
    "file%3a///etc/passwd": "outside",
    "file%253A%2F%2F%2Fetc%2Fpasswd": "outside",
    "file://evil-host/srv/docs/x": "another host",
    "http%3A//example.com/srv/docs/x": "not a file: URI",
    "/srv/docs/x": None,
    "FILE:///srv/docs/ok": None,
    "file:///srv/docs/a%20b": None,
    "file://localhost/srv/docs/x": None,
    "file%3a///srv/docs/x": "must be absolute",  # encoded: a relative path to a server that does not decode
}


@pytest.mark.parametrize(("value", "problem"), AUDITED.items(), ids=list(AUDITED))
def test_audited_values(value: str, problem: str | None) -> None:
    found = path_problem(value, ["/srv/docs"], os.path.normpath)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


@pytest.mark.parametrize("value", [5, 1.5, True, None, ["a.txt"], {"path": "a.txt"}])
def test_path_must_be_a_string(value: Any) -> None:
    assert path_problem(value, ["/srv"]) == f"must be a path string, got {_json(value)}"


def _json(value: Any) -> str:
    return {int: "a number", float: "a number", bool: "a boolean", type(None): "null", list: "an array"}.get(
        type(value), "an object"
    )


def test_root_that_is_a_symlink(tree: dict[str, str]) -> None:
    roots = [tree["root_link"]]
    assert path_problem(tree["root_link"] + "/a.txt", roots) is None
    assert path_problem(tree["root_link"] + "/sub/b.txt", roots) is None
    assert path_problem(tree["root"] + "/a.txt", roots) is None  # the same directory by its real name
    assert path_problem(tree["root_link"] + "/../outside/secret", roots) is not None
    assert path_problem(tree["root_link"] + "/escape/secret", roots) is not None


def test_several_roots(tree: dict[str, str]) -> None:
    roots = [tree["root"], tree["tmp"] + "/docs2"]
    assert path_problem(tree["tmp"] + "/docs2/x", roots) is None
    assert path_problem(tree["root"] + "/a.txt", roots) is None
    assert path_problem(tree["root"] + "/../docs2/x", roots) is None  # leaves docs for docs2: still within a root
    assert path_problem(tree["root"] + "/../outside/secret", roots) is not None
    # a relative path counts from no root: the server would resolve it against its working directory
    for relative in ("a.txt", "x", "../docs2/x"):
        found = path_problem(relative, roots)
        assert found is not None and found.startswith("must be absolute"), relative


def test_filesystem_root_allows_every_absolute_path(tree: dict[str, str]) -> None:
    assert path_problem("/etc/passwd", ["/"]) is None
    assert path_problem("/../../..", ["/"]) is None
    assert path_problem("file:///etc/passwd", ["/"]) is None
    assert path_problem("../../..", ["/"]) is not None  # relative: where it lands is the server's business
    assert path_problem("~/x", ["/"]) is not None
    assert path_problem("http://example.com/x", ["/"]) is not None


def test_sibling_prefix_with_fake_realpath() -> None:
    identity = os.path.normpath
    assert path_problem("/srv/docs2/x", ["/srv/docs"], identity) is not None
    assert path_problem("/srv/docs-old", ["/srv/docs"], identity) is not None
    assert path_problem("/srv/docs/x", ["/srv/docs"], identity) is None


def test_realpath_failures_refuse() -> None:
    def broken(path: str) -> str:
        raise OSError("too many levels of symbolic links")

    assert path_problem("/srv/docs/x", ["/srv/docs"], broken) is not None

    def relative(path: str) -> str:
        return "docs/x"

    assert path_problem("/srv/docs/x", ["/srv/docs"], relative) is not None


def test_path_within_through_decide_with_real_symlinks(tree: dict[str, str]) -> None:
    p = parse_policies(
        {
            "p.toml": f"""
            [principals]
            x = "p"
            [profiles.p]
            [[profiles.p.rules]]
            id = "docs"
            effect = "allow"
            tools = ["files/read_file"]
            [profiles.p.rules.arguments.path]
            path_within = ["{tree["root"]}"]
            """
        }
    )
    ok = p.decide("x", Target("tool", "files", "read_file", {"path": tree["root"] + "/sub/b.txt"}))
    assert ok.outcome is Outcome.ALLOWED
    escape = p.decide("x", Target("tool", "files", "read_file", {"path": tree["root"] + "/escape/secret"}))
    assert (escape.outcome, escape.rule) == (Outcome.REFUSED, "docs")
    assert escape.reason.startswith("argument 'path' is outside the allowed directories")
    assert "(path_within of rule 'docs')" in escape.reason
    assert "outside/secret" not in escape.reason  # where the link points is not told


@pytest.mark.slow
def test_relative_path_through_decide_names_the_rule() -> None:
    p = constrained("path_within = ['/srv/docs']")
    decision = p.decide("x", Target("tool", "t", "t", {"v": "etc/passwd"}), realpath=lambda path: path)
    assert decision.outcome is Outcome.REFUSED
    assert decision.reason == (
        "argument 'v' must be absolute: the server would resolve a relative path against its own working directory"
        " (path_within of rule 'r')"
    )
    assert "etc/passwd" not in decision.reason
