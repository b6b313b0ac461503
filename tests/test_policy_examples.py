"""The shipped example policies (policies/*.toml) load and do what their comments say,
and mcp_hub.policy stays pure and small."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mcp_hub.policy import Outcome, PolicySet, RateLimit, Target, load_policies, parse_policies

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
PACKAGE = ROOT / "mcp_hub" / "policy"


def shipped(extra: str = "") -> PolicySet:
    """The shipped files, plus `extra` as one more file (to map test principals)."""
    files = {path.name: path.read_text(encoding="utf-8") for path in sorted(POLICIES.glob("*.toml"))}
    if extra:
        files["zz-test.toml"] = extra
    return parse_policies(files)


def outcome(policy: PolicySet, principal: str, kind: str, mount: str, name: str, **arguments: object) -> Outcome:
    return policy.decide(principal, Target(kind, mount, name, arguments), realpath=lambda p: p).outcome  # type: ignore[arg-type]


def test_shipped_policies_load_from_the_directory() -> None:
    policy = load_policies(POLICIES)
    assert set(policy.profiles) == {"readonly", "admin"}
    assert policy.profile_for("stdio") == "admin"
    assert policy.sources == tuple(str(POLICIES / n) for n in ("principals.toml", "profiles.toml", "settings.toml"))


def test_stdio_is_admin_and_destructive_tools_ask_first() -> None:
    policy = load_policies(POLICIES)
    for name in ("add_note", "list_notes", "delete_note"):
        assert policy.visible("stdio", "tool", "notes", name)
    assert outcome(policy, "stdio", "tool", "notes", "add_note", title="t", text="x") is Outcome.ALLOWED
    delete = policy.decide("stdio", Target("tool", "notes", "delete_note", {"title": "t"}))
    assert (delete.outcome, delete.rule, delete.reason) == (
        Outcome.CONFIRM,
        "destructive",
        "destructive: asks before deleting",
    )
    assert delete.confirmation is not None and delete.confirmation.timeout == 120
    assert outcome(policy, "stdio", "prompt", "notes", "summarize", title="t") is Outcome.ALLOWED
    assert policy.visible("stdio", "resource", "notes", "notes://index")
    assert policy.visible("stdio", "resource_template", "notes", "notes://{title}")
    # admin extends readonly, so readonly's rate and path limits apply to admins too
    time = policy.decide("stdio", Target("tool", "time", "get_current_time", {"timezone": "UTC"}))
    assert time.rate_limits == (RateLimit("time", "60/minute", "principal"),)
    assert outcome(policy, "stdio", "tool", "files", "read_file", path="/etc/passwd") is Outcome.REFUSED
    # admins may use every tool of the filesystem server, below /srv/docs
    assert outcome(policy, "stdio", "tool", "files", "write_file", path="/srv/docs/new.md") is Outcome.ALLOWED
    assert outcome(policy, "stdio", "tool", "files", "write_file", path="/etc/passwd") is Outcome.REFUSED
    move = {"source": "/srv/docs/a", "destination": "/srv/docs/b"}
    assert outcome(policy, "stdio", "tool", "files", "move_file", **move) is Outcome.CONFIRM
    move["destination"] = "/srv/docs/../../etc/cron.d/x"
    assert outcome(policy, "stdio", "tool", "files", "move_file", **move) is Outcome.REFUSED
    assert outcome(policy, "stdio", "tool", "files", "read_multiple_files", paths=["/srv/docs/a"]) is Outcome.REFUSED


def test_loopback_clients_without_a_key_are_admin_and_secrets_in_results_are_redacted_for_everyone() -> None:
    """As shipped: HTTP clients with no key ("anonymous", served on loopback only) get what the local user gets,
    and every profile redacts secrets in results (admin extends readonly, which carries the guard)."""
    policy = shipped('[principals]\nci-bot = "readonly"\n')
    assert policy.profile_for("anonymous") == "admin"
    assert outcome(policy, "anonymous", "tool", "notes", "add_note", title="t", text="x") is Outcome.ALLOWED
    for principal in ("stdio", "anonymous", "ci-bot"):
        results = policy.guarding(principal, "tool", "notes", "list_notes", "results")
        assert [(g.id, g.action) for g in results.guards] == [("secrets-in-results", "redact")], principal
        assert not policy.guarding(principal, "tool", "notes", "add_note", "arguments"), principal


def test_unlisted_principals_get_nothing() -> None:
    policy = load_policies(POLICIES)
    assert policy.profile_for("someone") is None
    assert not policy.visible("someone", "tool", "notes", "list_notes")
    assert not policy.visible("someone", "tool", "time", "get_current_time")


def test_readonly_looks_but_does_not_touch() -> None:
    policy = shipped('[principals]\nci-bot = "readonly"\n')
    assert outcome(policy, "ci-bot", "tool", "notes", "list_notes") is Outcome.ALLOWED
    for name in ("add_note", "delete_note"):
        assert not policy.visible("ci-bot", "tool", "notes", name)  # hidden
    assert outcome(policy, "ci-bot", "prompt", "notes", "summarize", title="t") is Outcome.ALLOWED
    assert policy.visible("ci-bot", "resource", "notes", "notes://index")
    assert policy.visible("ci-bot", "resource_template", "notes", "notes://{title}")
    for name in ("get_current_time", "convert_time"):
        assert outcome(policy, "ci-bot", "tool", "time", name) is Outcome.ALLOWED
    assert not policy.visible("ci-bot", "tool", "files", "write_file")
    # the filesystem example: read below /srv/docs only
    assert outcome(policy, "ci-bot", "tool", "files", "read_file", path="/srv/docs/guide.md") is Outcome.ALLOWED
    for escape in ("guide.md", "../etc/passwd", "/srv/docs/%2e%2e/x", "file:///etc/passwd", "/srv/docs2/x", "~/x"):
        refused = policy.decide("ci-bot", Target("tool", "files", "read_file", {"path": escape}), realpath=lambda p: p)
        assert (refused.outcome, refused.rule) == (Outcome.REFUSED, "read-docs"), escape
    assert outcome(policy, "ci-bot", "tool", "files", "read_file") is Outcome.REFUSED  # path is required
    assert outcome(policy, "ci-bot", "tool", "files", "list_directory", path="/srv/docs") is Outcome.ALLOWED


def test_shipped_settings() -> None:
    policy = load_policies(POLICIES)
    assert (policy.confirmation.timeout, policy.confirmation.when_unsupported) == (120, "deny")
    assert policy.pinning.on_change == "hold"
    assert "authorization" in policy.audit.mask_arguments


def _uncommented(text: str) -> str:
    """`text` with its commented-out TOML lines (principal entries, [tables], [[tables]] and key = value) enabled."""
    pattern = re.compile(r"^# ?((?:\[\[?[a-z.]+\]\]?)|(?:[\w\"*-]+ = \S.*))$")
    return "\n".join(pattern.sub(r"\1", line) for line in text.splitlines())


def test_commented_examples_load_when_uncommented() -> None:
    files = {path.name: _uncommented(path.read_text(encoding="utf-8")) for path in POLICIES.glob("*.toml")}
    assert 'ci-bot = "readonly"' in files["principals.toml"]
    assert '\neffect = "deny"\ntools = ["files/write_file"]' in files["profiles.toml"]
    policy = parse_policies(files)
    assert (policy.profile_for("ci-bot"), policy.profile_for("alice"), policy.profile_for("x")) == (
        "readonly",
        "admin",
        "readonly",
    )
    assert not policy.visible("alice", "tool", "files", "write_file")  # the commented deny example
    # the commented budgets: readonly's (admin inherits them), ci-bot's own, the contractors group's
    budgets = policy.decide("ci-bot", Target("tool", "files", "read_file", {"path": "/srv/docs/a"})).budgets
    assert [b.id for b in budgets] == [
        "budget:profile:readonly:calls/day",
        "budget:profile:readonly:cost/month",
        "budget:principal:ci-bot:calls/hour",
    ]
    assert policy.decide("ci-bot", Target("tool", "files", "read_file", {"path": "/srv/docs/a"})).cost == 5
    assert [b.id for b in policy.group_budgets["contractors"]] == ["budget:group:contractors:cost/month"]


# -- the package stays pure --------------------------------------------------------------------

FORBIDDEN_MODULES = {
    "mcp",
    "mcp_types",
    "anyio",
    "asyncio",
    "httpx",
    "httpx2",
    "socket",
    "subprocess",
    "time",
    "datetime",
}


@pytest.mark.parametrize(
    "path",
    sorted(p for p in PACKAGE.glob("*.py") if p.name != "store.py"),  # the policy in force, kept by a task
    ids=lambda p: p.name,
)
def test_policy_package_is_pure_and_small(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) < 400
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules = {node.module or ""}
        else:
            continue
        for module in modules:
            assert module.split(".")[0] not in FORBIDDEN_MODULES, f"{path.name} imports {module}"
            if module.startswith("mcp_hub."):
                allowed = {"errors", "config", "policy", "shown", "guardrails"}
                assert module.split(".")[1] in allowed, f"{path.name} imports {module}"
    if path.name != "load.py":  # the only module that reads files
        io = re.search(r"(?<![\w.])open\(|\.read_\w+\(|listdir|scandir|\.iterdir\(", source)
        assert io is None, f"{path.name} uses {io and io[0]}"
