"""Tests for loading policy directories: errors (file, key, line, fix), merging, revisions."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mcp_hub.errors import ConfigError
from mcp_hub.policy import load_policies, parse_policies, policy_revision

RULE = '[profiles.p]\n[[profiles.p.rules]]\neffect = "allow"\ntools = ["a/b"]\n'  # rule lines 2-4


def load_error(tmp_path: Path, files: dict[str, str]) -> ConfigError:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_policies(tmp_path)
    return caught.value


# (file text, dotted key, line, words of the reason and fix)
ERRORS = {
    "unknown key": (RULE + "tool = ['x/y']\n", "profiles.p.rules[0].tool", 5, "did you mean 'tools'?"),
    "unknown profile key": ("[profiles.p]\ndefualt = 'deny'\n", "profiles.p.defualt", 2, "did you mean 'default'?"),
    "unknown top key": ("[principal]\nx = 'p'\n", "principal", 1, "did you mean 'principals'?"),
    "profile without profiles.": ("[readonly]\ndefault = 'deny'\n", "readonly", 1, "[profiles.readonly]"),
    "unknown constraint key": (
        RULE + "[profiles.p.rules.arguments.path]\npath_inside = ['/x']\n",
        "profiles.p.rules[0].arguments.path.path_inside",
        6,
        "did you mean 'path_within'?",
    ),
    "constraint in the rule": (RULE + "max_length = 5\n", "profiles.p.rules[0].max_length", 5, "arguments.NAME]"),
    "rule key in the profile": ("[profiles.p]\neffect = 'allow'\n", "profiles.p.effect", 2, "[[profiles.p.rules]]"),
    "unknown settings key": ("[confirmation]\ntimeout_s = 5\n", "confirmation.timeout_s", 2, "'timeout'"),
    "toml syntax": ("[profiles.p\n", "", None, "line 1, column"),
    "missing effect": (
        "[profiles.p]\n[[profiles.p.rules]]\ntools = ['a/b']\n",
        "profiles.p.rules[0].effect",
        2,
        'add it (effect = "allow", "deny" or "confirm")',
    ),
    "bad effect": (
        RULE.replace('"allow"', '"permit"'),
        "profiles.p.rules[0].effect",
        3,
        "'allow', 'deny' or 'confirm'",
    ),
    "wrong type": ("[confirmation]\ntimeout = '10'\n", "confirmation.timeout", 2, "remove the quotes"),
    "negative timeout": ("[confirmation]\ntimeout = -1\n", "confirmation.timeout", 2, "greater than 0"),
    "bad pinning": ("[pinning]\non_change = 'ask'\n", "pinning.on_change", 2, "'accept', 'flag' or 'hold'"),
    "rules not an array": ("[profiles.p]\nrules = 5\n", "profiles.p.rules", 2, "must be an array"),
    "selector without slash": (RULE.replace("a/b", "list_notes"), "profiles.p.rules[0].tools[0]", 4, "'*/list_notes'"),
    "public name as selector": (RULE.replace("a/b", "notes_list"), "profiles.p.rules[0].tools[0]", 4, "'notes/list'"),
    "uppercase mount": (RULE.replace("a/b", "Notes/x"), "profiles.p.rules[0].tools[0]", 4, "write 'notes/x'"),
    "empty name part": (RULE.replace("a/b", "notes/"), "profiles.p.rules[0].tools[0]", 4, "'notes/*'"),
    "unclosed bracket": (RULE.replace("a/b", "a/[b"), "profiles.p.rules[0].tools[0]", 4, "unclosed '['"),
    "uri without mount": (
        RULE.replace("tools", "resources").replace("a/b", "notes://*"),
        "profiles.p.rules[0].resources[0]",
        4,
        "'*/notes://*'",
    ),
    "selects nothing": (
        "[profiles.p]\n[[profiles.p.rules]]\neffect = 'allow'\n",
        "profiles.p.rules[0]",
        2,
        "add tools, prompts or resources",
    ),
    "bad regex": (
        RULE + "[profiles.p.rules.arguments.q]\npattern = '(a'\n",
        "profiles.p.rules[0].arguments.q.pattern",
        6,
        "invalid regular expression",
    ),
    "bad not_pattern": (
        RULE + "arguments.q = { not_pattern = '[z-a]' }\n",
        "profiles.p.rules[0].arguments.q.not_pattern",
        5,
        "invalid regular expression",
    ),
    "relative root": (
        RULE + "[profiles.p.rules.arguments.path]\npath_within = ['srv/docs']\n",
        "profiles.p.rules[0].arguments.path.path_within[0]",
        6,
        "absolute",
    ),
    "no roots": (
        RULE + "arguments.path = { path_within = [] }\n",
        "profiles.p.rules[0].arguments.path.path_within",
        5,
        "at least one",
    ),
    "empty constraints": (
        RULE + "[profiles.p.rules.arguments.path]\n",
        "profiles.p.rules[0].arguments.path",
        5,
        "no constraints",
    ),
    "minimum above maximum": (
        RULE + "arguments.n = { minimum = 5, maximum = 1 }\n",
        "profiles.p.rules[0].arguments.n.minimum",
        5,
        "swap them",
    ),
    "string bound": (
        RULE + "arguments.n = { minimum = '5' }\n",
        "profiles.p.rules[0].arguments.n.minimum",
        5,
        "must be a number",
    ),
    "bool bound": (
        RULE + "arguments.n = { maximum = true }\n",
        "profiles.p.rules[0].arguments.n.maximum",
        5,
        "must be a number",
    ),
    "contradictory types": (
        RULE + "arguments.n = { pattern = 'x', minimum = 1 }\n",
        "profiles.p.rules[0].arguments.n.minimum",
        5,
        "no value can pass both",
    ),
    "empty enum": (RULE + "arguments.n = { enum = [] }\n", "profiles.p.rules[0].arguments.n.enum", 5, "at least one"),
    "negative max_length": (
        RULE + "arguments.n = { max_length = -1 }\n",
        "profiles.p.rules[0].arguments.n.max_length",
        5,
        "greater than or equal to 0",
    ),
    "bad rate": (RULE + "rate = '30/minit'\n", "profiles.p.rules[0].rate", 5, '"30/minute"'),
    "zero rate": (RULE + "rate = '0/second'\n", "profiles.p.rules[0].rate", 5, "use a deny rule"),
    "rate_scope alone": (RULE + "rate_scope = 'shared'\n", "profiles.p.rules[0].rate_scope", 5, "add rate"),
    "bad rate_scope": (
        RULE + "rate = '1/day'\nrate_scope = 'global'\n",
        "profiles.p.rules[0].rate_scope",
        6,
        "'principal' or 'shared'",
    ),
    "deny with rate": (
        RULE.replace("allow", "deny") + "rate = '1/second'\n",
        "profiles.p.rules[0].rate",
        5,
        "a deny rule has no rate",
    ),
    "deny with arguments": (
        RULE.replace("allow", "deny") + "arguments.x = { required = true }\n",
        "profiles.p.rules[0].arguments",
        5,
        "remove arguments",
    ),
    "arguments on resources": (
        RULE + "resources = ['a/b://c']\narguments.x = { required = true }\n",
        "profiles.p.rules[0].arguments",
        6,
        "resources have no arguments",
    ),
    "reserved id": (RULE + "id = 'default'\n", "profiles.p.rules[0].id", 5, "reserved"),
    "bad id": (RULE + "id = 'has space'\n", "profiles.p.rules[0].id", 5, "rename it"),
    "duplicate id": (
        RULE + "id = 'same'\n" + RULE[13:] + "id = 'same'\n",
        "profiles.p.rules[1].id",
        9,
        "'same' is already used",
    ),
    "explicit id equal to a default one": (
        RULE + RULE[13:] + "id = 'p#1'\n",
        "profiles.p.rules[1].id",
        8,
        "already used",
    ),
    "bad profile name": ("[profiles.'read only']\n", 'profiles."read only"', 1, "rename the table"),
    "unknown profile in principals": (
        "[principals]\nstdio = 'amdin'\n[profiles.admin]\n",
        "principals.stdio",
        2,
        "did you mean 'admin'?",
    ),
    "unknown profile, no close match": (
        "[principals]\n'*' = 'zzz'\n[profiles.admin]\n",
        'principals."*"',
        2,
        "define [profiles.zzz] or use a defined one (admin)",
    ),
    "principal glob": ("[principals]\n'ci-*' = 'p'\n[profiles.p]\n", 'principals."ci-*"', 2, 'use "*" alone'),
    "unknown extends": (
        "[profiles.a]\n\n[profiles.b]\nextends = ['a', 'c']\n",
        "profiles.b.extends[1]",
        4,
        "unknown profile 'c'",
    ),
    "extends itself": ("[profiles.a]\nextends = ['a']\n", "profiles.a.extends", 2, "extends cycle: a -> a"),
    "extends cycle": (
        "[profiles.a]\nextends = ['b']\n[profiles.b]\nextends = ['c']\n[profiles.c]\nextends = ['a']\n",
        "profiles.a.extends",
        2,
        "extends cycle: a -> b -> c -> a; remove one",
    ),
    "mask glob": ("[audit]\nmask_arguments = ['ok', '[x']\n", "audit.mask_arguments[1]", 2, "unclosed '['"),
}


@pytest.mark.parametrize(("text", "key", "line", "words"), ERRORS.values(), ids=list(ERRORS))
def test_load_errors_name_file_key_line_and_fix(
    tmp_path: Path, text: str, key: str, line: int | None, words: str
) -> None:
    error = load_error(tmp_path, {"policy.toml": text})
    assert error.file == str(tmp_path / "policy.toml")
    assert error.key == key
    if line is not None:
        assert error.reason.startswith(f"line {line}: ")
    assert words in error.reason
    assert str(error).startswith(f"{tmp_path / 'policy.toml'}: {key}")


def test_line_of_a_key_in_a_later_array_element_and_subtable(tmp_path: Path) -> None:
    text = """
    # comment
    [profiles.p]
    description = '''
    [profiles.p.rules.arguments.x]
    a multi-line string that looks like a header
    '''

    [[profiles.p.rules]]
    effect = "allow"
    tools = ["a/b"]

    [[profiles.p.rules]]
    effect = "allow"
    tools = ["a/b"]
    [profiles.p.rules.arguments.path]
    required = true

    [[profiles.p.rules]]
    effect = "allow"
    tools = ["a/b"]
    [profiles.p.rules.arguments.path]
    required = true
    pattern = "("
    """
    error = load_error(tmp_path, {"p.toml": text})
    assert error.key == "profiles.p.rules[2].arguments.path.pattern"
    assert error.reason.startswith("line 23: ")


@pytest.mark.parametrize(
    ("first", "second", "key", "line", "words"),
    [
        ("[principals]\nx = 'p'\n[profiles.p]\n", "#\n[principals]\nx = 'p'\n", "principals.x", 3, "already mapped in"),
        ("[profiles.p]\n", "# p again\n[profiles.p]\n", "profiles.p", 2, "already defined in"),
        ("[audit]\nmask_arguments = []\n", "[pinning]\n\n[audit]\n", "audit", 3, "already set in"),
    ],
)
def test_duplicates_across_files(tmp_path: Path, first: str, second: str, key: str, line: int, words: str) -> None:
    error = load_error(tmp_path, {"a.toml": first, "b.toml": second})
    assert (error.file, error.key) == (str(tmp_path / "b.toml"), key)
    assert error.reason.startswith(f"line {line}: ")
    assert f"{words} {tmp_path / 'a.toml'}" in error.reason


def test_references_across_files(tmp_path: Path) -> None:
    (tmp_path / "10-principals.toml").write_text("[principals]\nstdio = 'admin'\nci = 'ro'\n")
    (tmp_path / "20-ro.toml").write_text("[profiles.ro]\n[[profiles.ro.rules]]\neffect='allow'\ntools=['a/*']\n")
    (tmp_path / "30-admin.toml").write_text("[profiles.admin]\nextends = ['ro']\n[confirmation]\ntimeout = 5\n")
    p = load_policies(tmp_path)
    assert (p.profile_for("stdio"), p.profile_for("ci")) == ("admin", "ro")
    assert p.visible("stdio", "tool", "a", "x")
    assert p.confirmation.timeout == 5
    assert p.sources == tuple(str(tmp_path / n) for n in ("10-principals.toml", "20-ro.toml", "30-admin.toml"))


def test_directory_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="policy directory not found; create it"):
        load_policies(tmp_path / "missing")
    (tmp_path / "file.toml").write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        load_policies(tmp_path / "file.toml")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a policy")
    (empty / ".#lock.toml").write_text("not read")
    with pytest.raises(ConfigError, match=r"no \*\.toml policy files"):
        load_policies(empty)
    (empty / "bad.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8") as caught:
        load_policies(empty)
    assert caught.value.file == str(empty / "bad.toml")


def test_skips_dotfiles_and_subdirectories(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text("[profiles.p]\n")
    (tmp_path / ".backup.toml").write_text("broken [")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "q.toml").write_text("broken [")
    assert load_policies(tmp_path).sources == (str(tmp_path / "p.toml"),)


def test_empty_files_load_and_deny_everything(tmp_path: Path) -> None:
    (tmp_path / "empty.toml").write_text("# nothing yet\n")
    p = load_policies(tmp_path)
    assert not p.visible("stdio", "tool", "a", "b")
    assert p.pinning.on_change == "flag"


# -- revision ----------------------------------------------------------------------------------


def test_revision_changes_with_content_and_names_only(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text("[profiles.p]\n")
    (tmp_path / "b.toml").write_text("[profiles.q]\n")
    first = load_policies(tmp_path).revision
    assert len(first) == 12 and int(first, 16) >= 0
    assert load_policies(tmp_path).revision == first  # same files: same revision
    (tmp_path / "notes.md").write_text("not a policy")
    assert load_policies(tmp_path).revision == first  # other files do not count
    (tmp_path / "b.toml").write_text("[profiles.q]\n# a comment\n")
    changed = load_policies(tmp_path).revision
    assert changed != first
    (tmp_path / "b.toml").write_text("[profiles.q]\n")
    assert load_policies(tmp_path).revision == first  # back to the same bytes
    (tmp_path / "b.toml").rename(tmp_path / "c.toml")
    assert load_policies(tmp_path).revision != first  # names count
    assert parse_policies({"a.toml": "[profiles.p]\n", "b.toml": "[profiles.q]\n"}).revision == first


def test_revision_is_unambiguous() -> None:
    assert policy_revision([("ab", b"c")]) != policy_revision([("a", b"bc")])
    assert policy_revision([("a", b"x"), ("b", b"")]) != policy_revision([("a", b""), ("b", b"x")])
    assert policy_revision([]) == "e3b0c44298fc"
