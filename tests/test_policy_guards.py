"""Guards in policy files: keys, mistakes (file, key, line, fix), which guards apply, precedence, explain."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mcp_hub.errors import ConfigError
from mcp_hub.guardrails import Detectors, Match, scan_value
from mcp_hub.policy import Target, empty_policy, explain, load_policies, parse_policies

GUARD = '[profiles.p]\n[[profiles.p.guards]]\ndetect = ["secrets"]\naction = "redact"\n'  # guard lines 2-4

ERRORS = {
    "unknown detector": (
        GUARD.replace('"secrets"', '"secret"'),
        "profiles.p.guards[0].detect[0]",
        3,
        "unknown detector 'secret'; did you mean 'secrets'?",
    ),
    "no detectors": (GUARD.replace('["secrets"]', "[]"), "profiles.p.guards[0].detect", 3, "list at least one"),
    "bad action": (
        GUARD.replace('"redact"', '"mask"'),
        "profiles.p.guards[0].action",
        4,
        "'redact', 'block' or 'flag'",
    ),
    "missing action": (
        '[profiles.p]\n[[profiles.p.guards]]\ndetect = ["card"]\n',
        "profiles.p.guards[0].action",
        2,
        'add it (action = "redact", "block" or "flag")',
    ),
    "bad direction": (GUARD + 'on = "inputs"\n', "profiles.p.guards[0].on", 5, "'arguments', 'results' or 'both'"),
    "unknown guard key": (GUARD + 'detectors = ["x"]\n', "profiles.p.guards[0].detectors", 5, "did you mean 'detect'?"),
    "guard key in a rule": (
        '[profiles.p]\n[[profiles.p.rules]]\neffect = "allow"\ntools = ["a/b"]\naction = "block"\n',
        "profiles.p.rules[0].action",
        5,
        "[[profiles.p.guards]]",
    ),
    "guard key in the profile": ('[profiles.p]\ndetect = ["card"]\n', "profiles.p.detect", 2, "[[profiles.p.guards]]"),
    "bad selector": (GUARD + 'tools = ["lookup"]\n', "profiles.p.guards[0].tools[0]", 5, "'*/lookup'"),
    "reserved id": (GUARD + 'id = "default"\n', "profiles.p.guards[0].id", 5, "reserved"),
    "id of a rule": (
        GUARD + 'id = "same"\n[[profiles.p.rules]]\nid = "same"\neffect = "allow"\ntools = ["a/b"]\n',
        "profiles.p.guards[0].id",
        5,
        "'same' is already used in profile 'p'",
    ),
}


@pytest.mark.parametrize(("text", "key", "line", "words"), ERRORS.values(), ids=list(ERRORS))
def test_guard_mistakes_name_file_key_line_and_fix(tmp_path: Path, text: str, key: str, line: int, words: str) -> None:
    (tmp_path / "policy.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_policies(tmp_path)
    error = caught.value
    assert (error.file, error.key) == (str(tmp_path / "policy.toml"), key)
    assert error.reason.startswith(f"line {line}: ")
    assert words in error.reason


POLICY = textwrap.dedent(
    """
    [principals]
    "*" = "agent"
    "admin" = "admin"

    [profiles.base]
    default = "allow"

    [[profiles.base.guards]]
    id = "no-secrets-out"
    detect = ["secrets"]
    action = "block"
    on = "arguments"

    [[profiles.base.guards]]
    id = "flag-personal"
    detect = ["personal"]
    action = "flag"

    [profiles.agent]
    default = "allow"
    extends = ["base"]

    [[profiles.agent.guards]]
    detect = ["card", "hidden"]
    action = "redact"
    on = "results"
    tools = ["crm/*"]

    [profiles.admin]
    default = "allow"
    """
)


def test_which_guards_apply_by_profile_direction_and_selector() -> None:
    policy = parse_policies({"p.toml": POLICY})
    assert policy.has_guards and not empty_policy().has_guards

    def ids(kind: str, mount: str, direction: str, principal: str = "bob") -> list[str]:
        return [g.id for g in policy.guarding(principal, kind, mount, "x", direction).guards]  # type: ignore[arg-type]

    assert ids("tool", "crm", "arguments") == ["no-secrets-out", "flag-personal"]
    assert ids("tool", "crm", "results") == ["agent#guard1", "flag-personal"]
    assert ids("tool", "web", "results") == ["flag-personal"]
    assert ids("resource", "crm", "results") == ["flag-personal"]  # the selector names tools only
    assert ids("tool", "crm", "results", "admin") == []


def test_the_strongest_action_handles_a_match_named_by_the_first_such_guard() -> None:
    policy = parse_policies({"p.toml": POLICY})
    results = policy.guarding("bob", "tool", "crm", "x", "results")
    card, email = Match("card", "card_number", 0, 4), Match("email", "email", 5, 9)
    assert results.detectors == {"card", "hidden", "iban", "national_id", "phone", "email"}
    assert (results.handling(card).id, results.handling(card).action) == ("agent#guard1", "redact")
    assert (results.handling(email).id, results.handling(email).action) == ("flag-personal", "flag")
    assert results.blocking([card, email]) is None
    arguments = policy.guarding("bob", "tool", "crm", "x", "arguments")
    secret = Match("secrets", "aws_access_key", 0, 20)
    assert arguments.blocking([card, secret]) is not None
    assert arguments.blocking([card, secret]).id == "no-secrets-out"  # type: ignore[union-attr]


def test_overlapping_findings_are_handled_by_the_strongest_guard_of_any_of_them() -> None:
    """A database URL: its password found by "secrets", and with the host by "email". One guard flags personal
    data, another blocks secrets: the URL is blocked, and both detectors are told."""
    policy = parse_policies({"p.toml": POLICY})
    arguments = policy.guarding("bob", "tool", "web", "x", "arguments")
    text = "postgres://app:s3cr3t-Pa55w0rd@db.example.com/prod"
    detectors = Detectors()
    _, scan = scan_value(text, lambda value: detectors.find(value, arguments.detectors))
    [(_, match)] = scan.hits
    assert match.found == (("secrets", "url_password"), ("email", "email"))
    assert arguments.handling(match).id == "no-secrets-out"
    assert arguments.blocking([match]) is not None
    merged_the_other_way = Match("email", "email", 0, 9, (("secrets", "url_password"),))
    assert arguments.handling(merged_the_other_way).action == "block"  # whichever finding came first
    results = policy.guarding("bob", "tool", "crm", "x", "results")
    card_in_comment = Match("hidden", "html_comment", 0, 30, (("email", "email"),))
    assert results.handling(card_in_comment).action == "redact"  # redact (hidden) over flag (email)
    explained = explain(policy, "bob", Target("tool", "web", "lookup", {"dsn": text}))
    assert "argument dsn: url_password (secrets), email (email) -> block by no-secrets-out" in explained
    assert "s3cr3t" not in explained and "[REDACTED:url_password,email]" in explained


def test_explain_shows_the_guards_and_what_they_find_without_the_value() -> None:
    policy = parse_policies({"p.toml": POLICY})
    text = explain(policy, "bob", Target("tool", "crm", "lookup", {"note": "key AKIAIOSFODNN7EXAMPLE"}))
    assert "Guard no-secrets-out on arguments, from profile 'base': block secrets in arguments" in text
    assert "argument note: aws_access_key (secrets) -> block by no-secrets-out" in text
    assert "AKIAIOSFODNN7EXAMPLE" not in text and '"key [REDACTED:aws_access_key]"' in text
    assert "Guard agent#guard1 on results: redact card, hidden in results of tools crm/*" in text
    quiet = explain(policy, "admin", Target("tool", "crm", "lookup", {}))
    assert "Guards: none apply" in quiet
