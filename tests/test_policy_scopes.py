"""A token's scopes and groups in the policy: [scopes] and [groups] pick a profile, a rule may require scopes."""

from __future__ import annotations

import pytest

from mcp_hub.errors import ConfigError
from mcp_hub.policy import Outcome, Target, explain, parse_policies
from mcp_hub.policy.principal import Principal, seen_as

POLICY = """
[principals]
alice = "reader"
"*" = "nobody"

[scopes]
"hub:admin" = "admin"
"hub:read" = "reader"

[groups]
ops = "admin"

[profiles.nobody]

[profiles.reader]
[[profiles.reader.rules]]
id = "read"
effect = "allow"
tools = ["notes/list_*"]
[[profiles.reader.rules]]
id = "write"
effect = "allow"
tools = ["notes/write_note"]
scopes = ["notes:write"]

[profiles.admin]
default = "allow"
"""

LIST = Target("tool", "notes", "list_notes")
WRITE = Target("tool", "notes", "write_note")


def test_a_principals_own_entry_then_scopes_then_groups_then_star() -> None:
    policy = parse_policies({"p.toml": POLICY})
    assert policy.profile_for(Principal("alice", scopes={"hub:admin"})) == "reader"  # its own entry first
    assert policy.profile_for(Principal("bob", scopes={"hub:read", "hub:admin"})) == "admin"  # first written
    assert policy.profile_for(Principal("bob", scopes={"hub:read"}, groups={"ops"})) == "reader"
    assert policy.profile_for(Principal("bob", groups={"ops", "dev"})) == "admin"
    assert policy.profile_for(Principal("bob", scopes={"other"})) == "nobody"
    assert policy.profile_for("hub:admin") == "nobody"  # a plain name (an API key's) carries no scopes


def test_a_rule_with_scopes_applies_only_to_a_token_carrying_them() -> None:
    policy = parse_policies({"p.toml": POLICY})
    reader = Principal("bob", scopes={"hub:read"})
    writer = Principal("bob", scopes={"hub:read", "notes:write"})
    assert policy.decide(reader, LIST).outcome is Outcome.ALLOWED
    assert policy.decide(reader, WRITE).outcome is Outcome.DENIED
    assert policy.decide(writer, WRITE).rule == "write"
    assert policy.decide("alice", WRITE).outcome is Outcome.DENIED  # an API key never carries scopes
    assert not policy.visible(reader, "tool", "notes", "write_note")
    assert policy.visible(writer, "tool", "notes", "write_note")
    text = explain(policy, reader, WRITE)
    assert "Principal 'bob' (token scopes hub:read): profile 'reader', from [scopes] \"hub:read\"" in text
    assert "needs the scopes notes:write" in text


def test_what_a_principal_may_see_is_keyed_by_its_grants_too() -> None:
    assert seen_as("bob") == "bob"
    assert seen_as(Principal("bob")) == "bob"
    assert seen_as(Principal("bob", scopes={"a"})) != seen_as(Principal("bob", scopes={"b"}))
    assert Principal("bob", scopes={"a"}) == "bob"  # one person for rate limits, tasks and the audit line
    assert str(Principal("bob", scopes={"a"})) == "bob"


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ('[scopes]\n"x" = "missing"\n', "scopes.x", "unknown profile 'missing'"),
        ('[groups]\n"*" = "p"\n[profiles.p]\n', "groups", "belongs in [principals]"),
        (
            '[profiles.p]\n[[profiles.p.rules]]\neffect = "deny"\ntools = ["a/*"]\nscopes = ["s"]\n',
            "profiles.p.rules[0].scopes",
            "a deny rule has no scopes",
        ),
        (
            '[profiles.p]\n[[profiles.p.rules]]\neffect = "allow"\ntools = ["a/*"]\nscopes = ["two words"]\n',
            "profiles.p.rules[0].scopes[0]",
            "is not a scope",
        ),
    ],
)
def test_mistakes_name_the_key_and_the_fix(text: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policies({"p.toml": text})
    assert caught.value.key.startswith(key), caught.value
    assert words in str(caught.value)


def test_a_scope_mapped_in_two_files_is_refused() -> None:
    files = {"a.toml": '[scopes]\n"s" = "p"\n[profiles.p]\n', "b.toml": '[scopes]\n"s" = "p"\n'}
    with pytest.raises(ConfigError) as caught:
        parse_policies(files)
    assert "scope 's' is already mapped in a.toml" in str(caught.value)


def test_what_a_policy_keeps_is_per_name_scopes_and_groups() -> None:
    """A policy keeps what it found for (who, item) (policy/memo.py): the same name with other scopes or groups,
    asked in any order, gets its own answer, and the guards and the listing agree with the decision."""
    policy = parse_policies({"p.toml": POLICY})
    asked = [
        (Principal("bob", scopes={"hub:read", "notes:write"}), "write"),
        (Principal("bob", scopes={"hub:read"}), None),
        (Principal("bob", groups={"ops"}), "default"),
        ("bob", None),
        (Principal("bob", scopes={"hub:read", "notes:write"}), "write"),
        (Principal("bob"), None),
    ]
    for _ in range(2):  # the second time from what was kept
        for principal, rule in asked:
            decision = policy.decide(principal, WRITE)
            assert (decision.rule if decision.outcome is Outcome.ALLOWED else None) == rule, seen_as(principal)
            assert policy.visible(principal, "tool", "notes", "write_note") is (rule is not None)
    fresh = parse_policies({"p.toml": POLICY})
    ops = Principal("bob", groups={"ops"})
    assert fresh.decide(ops, WRITE) == policy.decide(ops, WRITE)
