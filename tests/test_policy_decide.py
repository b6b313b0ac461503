"""Tests for mcp_hub.policy decisions: precedence, profiles, extends, visibility, rates, explain."""

from __future__ import annotations

import dataclasses

import pytest

from mcp_hub.policy import (
    Decision,
    Outcome,
    PolicySet,
    RateLimit,
    Target,
    empty_policy,
    explain,
    parse_policies,
)


def policy(text: str) -> PolicySet:
    return parse_policies({"p.toml": text})


def tool(mount: str, name: str, arguments: dict[str, object] | None = None) -> Target:
    return Target("tool", mount, name, arguments)


PRECEDENCE = """
[principals]
alice = "mixed"
bob = "open"

[profiles.mixed]
[[profiles.mixed.rules]]
id = "allow-all-notes"
effect = "allow"
tools = ["notes/*"]
[[profiles.mixed.rules]]
id = "confirm-deletes"
effect = "confirm"
tools = ["*/delete_*"]
reason = "destructive"
[[profiles.mixed.rules]]
id = "no-secret"
effect = "deny"
tools = ["notes/delete_secret", "*/secret_*"]
reason = "secrets stay hidden"

[profiles.open]
default = "allow"
[[profiles.open.rules]]
effect = "deny"
tools = ["notes/drop_all"]
"""


@pytest.mark.parametrize(
    ("principal", "name", "outcome", "rule"),
    [
        ("alice", "list_notes", Outcome.ALLOWED, "allow-all-notes"),
        ("alice", "delete_note", Outcome.CONFIRM, "confirm-deletes"),  # confirm beats allow
        ("alice", "delete_secret", Outcome.DENIED, "no-secret"),  # deny beats confirm and allow
        ("alice", "secret_stash", Outcome.DENIED, "no-secret"),
        ("alice", "other", Outcome.ALLOWED, "allow-all-notes"),
        ("bob", "anything", Outcome.ALLOWED, "default"),  # default allow
        ("bob", "drop_all", Outcome.DENIED, "open#1"),  # default id: profile#position
        ("carol", "list_notes", Outcome.DENIED, "no-profile"),
    ],
)
def test_precedence(principal: str, name: str, outcome: Outcome, rule: str) -> None:
    decision = policy(PRECEDENCE).decide(principal, tool("notes", name))
    assert (decision.outcome, decision.rule) == (outcome, rule)


def test_default_deny_when_nothing_matches() -> None:
    decision = policy(PRECEDENCE).decide("alice", tool("time", "get_current_time"))
    assert decision.outcome is Outcome.DENIED
    assert decision.rule == "default"
    assert "denies by default" in decision.reason
    assert decision.profile == "mixed"


def test_default_is_deny_when_not_written() -> None:
    p = policy('[principals]\nx = "p"\n[profiles.p]\n')
    assert p.decide("x", tool("a", "b")).outcome is Outcome.DENIED


def test_decision_fields() -> None:
    p = policy(PRECEDENCE)
    decision = p.decide("alice", tool("notes", "delete_note"))
    assert decision == Decision(
        Outcome.CONFIRM,
        "confirm-deletes",
        "destructive",
        "mixed",
        (),
        p.revision,
        confirmation=p.confirmation,
    )
    denied = p.decide("alice", tool("notes", "delete_secret"))
    assert denied.reason == "secrets stay hidden"
    assert denied.confirmation is None
    assert denied.revision == p.revision
    no_profile = p.decide("carol", tool("notes", "x"))
    assert (no_profile.profile, no_profile.rule) == (None, "no-profile")


def test_star_principal_catches_everyone_else() -> None:
    p = policy('[principals]\n"*" = "ro"\nroot = "rw"\n[profiles.ro]\n[profiles.rw]\ndefault = "allow"\n')
    assert p.profile_for("root") == "rw"
    assert p.profile_for("anyone") == "ro"
    assert p.profile_for("") == "ro"
    assert p.decide("anyone", tool("a", "b")).outcome is Outcome.DENIED
    assert p.decide("root", tool("a", "b")).outcome is Outcome.ALLOWED


def test_no_principals_means_nobody_gets_anything() -> None:
    p = policy('[profiles.rw]\ndefault = "allow"\n')
    assert p.profile_for("stdio") is None
    assert not p.visible("stdio", "tool", "a", "b")


def test_kinds_use_their_own_selectors() -> None:
    p = policy(
        """
        [principals]
        x = "p"
        [profiles.p]
        [[profiles.p.rules]]
        effect = "allow"
        tools = ["notes/summarize"]
        prompts = ["notes/list_notes"]
        resources = ["notes/notes://index"]
        """
    )
    assert p.visible("x", "tool", "notes", "summarize")
    assert not p.visible("x", "tool", "notes", "list_notes")
    assert p.visible("x", "prompt", "notes", "list_notes")
    assert not p.visible("x", "prompt", "notes", "summarize")
    assert p.visible("x", "resource", "notes", "notes://index")
    assert not p.visible("x", "resource", "notes", "notes://other")


def test_selectors_match_mount_and_native_name_separately() -> None:
    p = policy(
        """
        [principals]
        x = "p"
        [profiles.p]
        [[profiles.p.rules]]
        effect = "allow"
        tools = ["no?es/list_*", "t[a-i]me/get_*"]
        resources = ["notes/notes://*", "files/file:///srv/*"]
        """
    )
    assert p.visible("x", "tool", "notes", "list_notes")
    assert p.visible("x", "tool", "nodes", "list_x")
    assert not p.visible("x", "tool", "notes", "List_notes")  # case matters
    assert not p.visible("x", "tool", "notes2", "list_notes")
    assert p.visible("x", "tool", "time", "get_current_time")
    assert not p.visible("x", "tool", "tome", "get_current_time")
    # a tool name may contain '/': the mount is split at the first '/'
    assert p.visible("x", "tool", "notes", "list_/a/b")
    assert not p.visible("x", "tool", "notes/list_x", "y")
    # URI globs: '*' crosses '/'
    assert p.visible("x", "resource", "files", "file:///srv/a/b/c.txt")
    assert not p.visible("x", "resource", "files", "file:///etc/passwd")


def test_resource_templates_match_literally() -> None:
    p = policy(
        """
        [principals]
        x = "p"
        [profiles.p]
        [[profiles.p.rules]]
        effect = "allow"
        resources = ["notes/notes://*", "db/db://tables/{name}"]
        [[profiles.p.rules]]
        effect = "allow"
        resources = ["exact/notes://index"]
        """
    )
    assert p.visible("x", "resource_template", "notes", "notes://{title}")
    assert p.visible("x", "resource", "notes", "notes://{title}")
    assert p.visible("x", "resource_template", "db", "db://tables/{name}")
    assert not p.visible("x", "resource_template", "db", "db://tables/{other}")
    assert not p.visible("x", "resource_template", "exact", "notes://{title}")


def test_visible_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        empty_policy().visible("x", "tools", "a", "b")
    with pytest.raises(ValueError, match="unknown target kind"):
        Target("tools", "a", "b")  # type: ignore[arg-type]


# -- extends -----------------------------------------------------------------------------------

EXTENDS = """
[principals]
viewer = "viewer"
editor = "editor"
admin = "admin"

[profiles.base]
[[profiles.base.rules]]
id = "base-read"
effect = "allow"
tools = ["notes/list_*"]
[[profiles.base.rules]]
id = "base-hide"
effect = "deny"
tools = ["notes/list_secrets"]

[profiles.viewer]
extends = ["base"]

[profiles.editor]
extends = ["viewer", "base"]    # base twice (directly and through viewer): its rules count once
[[profiles.editor.rules]]
id = "edit"
effect = "allow"
tools = ["notes/add_*"]

[profiles.admin]
default = "allow"
extends = ["editor"]
"""


def test_extends_includes_rules_recursively() -> None:
    p = policy(EXTENDS)
    assert p.decide("viewer", tool("notes", "list_notes")).rule == "base-read"
    assert not p.visible("viewer", "tool", "notes", "add_note")
    assert p.decide("editor", tool("notes", "add_note")).rule == "edit"
    assert p.decide("editor", tool("notes", "list_notes")).rule == "base-read"
    # an included deny rule still denies, even under a default-allow profile
    assert p.decide("admin", tool("notes", "list_secrets")).rule == "base-hide"
    # the profile's own default applies
    assert p.decide("admin", tool("x", "y")).outcome is Outcome.ALLOWED
    assert p.decide("editor", tool("x", "y")).outcome is Outcome.DENIED


def test_extends_order_own_rules_first_and_each_once() -> None:
    p = policy(EXTENDS)
    editor = p.profiles["editor"]
    assert editor.includes == ("viewer", "base")
    assert [rule.id for rule in editor.rules] == ["edit", "base-read", "base-hide"]
    assert p.profiles["admin"].includes == ("editor", "viewer", "base")


# -- constraints in decisions ------------------------------------------------------------------

CONSTRAINED = """
[principals]
x = "p"

[profiles.p]
default = "allow"
[[profiles.p.rules]]
id = "files-read"
effect = "allow"
tools = ["files/read_*"]
rate = "30/minute"
[profiles.p.rules.arguments.path]
path_within = ["/srv/docs"]
[[profiles.p.rules]]
id = "files-wide"
effect = "allow"
tools = ["files/*"]
rate = "5 per 10 seconds"
rate_scope = "shared"
[[profiles.p.rules]]
id = "ask-big"
effect = "confirm"
tools = ["files/read_file"]
[profiles.p.rules.arguments.length]
maximum = 1000
[profiles.p.rules.arguments.mode]
enum = ["text", "binary"]
required = true
"""


def fake_realpath(path: str) -> str:
    return path


def test_every_matching_rule_constraint_must_hold() -> None:
    p = policy(CONSTRAINED)
    ok = p.decide("x", tool("files", "read_file", {"path": "/srv/docs/a", "mode": "text"}), realpath=fake_realpath)
    assert (ok.outcome, ok.rule) == (Outcome.CONFIRM, "ask-big")
    # a broader allow rule (files-wide) does not bypass the narrower rule's constraint
    escape = p.decide("x", tool("files", "read_file", {"path": "/etc/passwd", "mode": "text"}), realpath=fake_realpath)
    assert (escape.outcome, escape.rule) == (Outcome.REFUSED, "files-read")
    assert "path_within" in escape.reason and "files-read" in escape.reason and "'path'" in escape.reason
    # REFUSED beats CONFIRM
    big = p.decide(
        "x", tool("files", "read_file", {"path": "/srv/docs/a", "mode": "text", "length": 5000}), realpath=fake_realpath
    )
    assert (big.outcome, big.rule) == (Outcome.REFUSED, "ask-big")
    assert big.confirmation is None


def test_all_violations_are_reported() -> None:
    p = policy(CONSTRAINED)
    decision = p.decide("x", tool("files", "read_file", {"path": 5, "length": 5000}), realpath=fake_realpath)
    assert decision.outcome is Outcome.REFUSED
    assert [(v.rule, v.argument, v.constraint) for v in decision.violations] == [
        ("files-read", "path", "path_within"),
        ("ask-big", "length", "maximum"),
        ("ask-big", "mode", "required"),
    ]
    assert decision.reason == str(decision.violations[0])


def test_missing_arguments_are_a_call_without_arguments() -> None:
    p = policy(CONSTRAINED)
    decision = p.decide("x", tool("files", "read_file"))
    assert (decision.outcome, decision.violations[0].constraint) == (Outcome.REFUSED, "required")
    assert p.visible("x", "tool", "files", "read_file")  # refused, yet visible


def test_rate_limits_come_back_with_the_decision() -> None:
    p = policy(CONSTRAINED)
    decision = p.decide("x", tool("files", "read_text", {"path": "/srv/docs/a"}), realpath=fake_realpath)
    assert decision.outcome is Outcome.ALLOWED
    assert decision.rate_limits == (
        RateLimit("files-read", "30/minute", "principal"),
        RateLimit("files-wide", "5 per 10 seconds", "shared"),
    )
    assert [(r.amount, r.period) for r in decision.rate_limits] == [(30, 60), (5, 10)]
    refused = p.decide("x", tool("files", "read_text", {"path": "/etc"}), realpath=fake_realpath)
    assert len(refused.rate_limits) == 2
    assert p.decide("x", tool("time", "now")).rate_limits == ()  # default allow: no rule, no limit


def test_decide_calls_realpath_only_for_present_path_arguments() -> None:
    calls: list[str] = []

    def counting(path: str) -> str:
        calls.append(path)
        return path

    p = policy(CONSTRAINED)
    p.decide("x", tool("files", "list", {}), realpath=counting)
    p.visible("x", "tool", "files", "read_file")
    assert calls == []
    p.decide("x", tool("files", "read_file", {"path": "/srv/docs/a", "mode": "text"}), realpath=counting)
    assert "/srv/docs/a" in calls


def test_a_decision_the_arguments_cannot_change_is_made_once_and_one_they_can_each_call() -> None:
    """An item no matching rule constrains is decided once per (who, item), whatever the arguments; one with
    constraints is decided on each call's arguments."""
    p = policy(CONSTRAINED)
    first = p.decide("x", tool("time", "now", {"zone": "utc"}))
    assert p.decide("x", tool("time", "now", {"zone": "cet", "more": [1]})) is first
    assert p.decide("x", tool("time", "now", {})) is first and first.outcome is Outcome.ALLOWED
    assert p.decide("x", tool("time", "now")) == first  # (no arguments at all: decided each time, alike)
    assert p.decide("y", tool("time", "now")).outcome is Outcome.DENIED  # another caller: decided on its own
    inside = p.decide("x", tool("files", "read_text", {"path": "/srv/docs/a"}), realpath=fake_realpath)
    outside = p.decide("x", tool("files", "read_text", {"path": "/etc"}), realpath=fake_realpath)
    assert (inside.outcome, outside.outcome) == (Outcome.ALLOWED, Outcome.REFUSED)
    assert p.decide("x", tool("files", "read_text", {"path": "/srv/docs/a"}), realpath=fake_realpath) is not inside


# -- empty policy ------------------------------------------------------------------------------


def test_empty_policy_allows_everything_and_says_so() -> None:
    p = empty_policy()
    decision = p.decide("anyone", tool("files", "delete_everything", {"path": "/"}))
    assert (decision.outcome, decision.rule, decision.profile) == (Outcome.ALLOWED, "default", "allow-all")
    assert p.visible("stdio", "resource", "notes", "notes://x")
    text = explain(p, "anyone", tool("files", "x"))
    assert "no policy directory is configured" in text
    assert p.confirmation.timeout == 120 and p.confirmation.when_unsupported == "deny"
    assert p.pinning.on_change == "flag"
    assert "*token*" in p.audit.mask_arguments


def test_policy_set_is_immutable() -> None:
    p = policy(PRECEDENCE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.revision = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        p.principals["mallory"] = "open"  # type: ignore[index]
    with pytest.raises(TypeError):
        p.profiles["mixed"].by_kind["tool"] = ()  # type: ignore[index]


# -- explain -----------------------------------------------------------------------------------


def test_explain_lists_every_rule_and_the_outcome() -> None:
    p = policy(CONSTRAINED)
    text = explain(
        p,
        "x",
        tool("files", "read_file", {"path": "/etc/x", "mode": "text", "api_token": "s3cr3t"}),
        realpath=fake_realpath,
    )
    assert f"Policy revision {p.revision}" in text
    assert "Principal 'x': profile 'p', from [principals] \"x\"" in text
    assert "files-read [allow]: matches 'files/read_*'; rate 30/minute" in text
    assert "path_within VIOLATED: is outside the allowed directories /srv/docs" in text
    assert "ask-big [confirm]: matches 'files/read_file'" in text
    assert "argument 'length': absent, not required: ok" in text
    assert "argument 'mode': enum ok" in text
    assert "Outcome: REFUSED by rule 'files-read'" in text
    assert "s3cr3t" not in text and '"api_token": "***"' in text


def test_explain_shows_deceiving_characters_escaped() -> None:
    p = policy(CONSTRAINED)
    text = explain(p, "x", tool("files", "read\u202efile", {"path": "/srv/docs/invoice\u202efdp.exe", "t": "日本"}))
    assert "\u202e" not in text
    assert "'read\\u202efile'" in text and '"/srv/docs/invoice\\u202efdp.exe"' in text and "日本" in text


def test_explain_no_match_denied_and_hidden() -> None:
    p = policy(PRECEDENCE)
    text = explain(p, "alice", tool("notes", "delete_secret"))
    assert "allow-all-notes [allow]: matches 'notes/*'" in text
    assert "no-secret [deny]: matches 'notes/delete_secret'" in text
    assert "Outcome: DENIED by rule 'no-secret': secrets stay hidden (hidden:" in text
    text = explain(p, "alice", tool("time", "now"))
    assert "allow-all-notes [allow]: no match (tools: notes/*)" in text
    assert "Outcome: DENIED by the profile's default" in text
    assert "no profile" in explain(p, "nobody", tool("a", "b"))
    confirm = explain(p, "alice", tool("notes", "delete_note"))
    assert "Outcome: CONFIRM by rule 'confirm-deletes': destructive (a person is asked, 120 s" in confirm


@pytest.mark.slow
def test_explain_names_included_profiles() -> None:
    text = explain(policy(EXTENDS), "admin", tool("notes", "list_secrets"))
    assert "Profile 'admin' (default allow; includes the rules of editor, viewer, base)" in text
    assert "base-hide [deny, from profile 'base']: matches" in text
    star = explain(policy('[principals]\n"*" = "p"\n[profiles.p]\n'), "who", tool("a", "b"))
    assert 'from [principals] "*" (it is not listed)' in star
