"""Property tests: visible() agrees with decide(), decide() agrees with the written precedence,
accepted paths stay inside their root, masking hides what it should."""

from __future__ import annotations

import fnmatch
import json
import os
import unicodedata
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_hub.policy import Outcome, PolicySet, Target, mask_arguments, parse_policies, path_problem

pytestmark = pytest.mark.slow  # thousands of generated examples

MOUNT_GLOBS = ["*", "notes", "n*", "time", "[nt]*", "no?es"]
NAME_GLOBS = ["*", "list_*", "delete_*", "x", "*_note", "?ist*", "notes://*", "notes://{title}"]
MOUNTS = ["notes", "time", "nodes", "x"]
NAMES = ["list_notes", "delete_note", "x", "add_note", "notes://index", "notes://{title}", "list/x"]
PRINCIPALS = ["alice", "bob", "carol"]
KINDS = ["tool", "prompt", "resource"]
FIELDS = {"tool": "tools", "prompt": "prompts", "resource": "resources"}

selectors = st.lists(st.builds(lambda m, n: f"{m}/{n}", st.sampled_from(MOUNT_GLOBS), st.sampled_from(NAME_GLOBS)))


@st.composite
def rules(draw: st.DrawFn) -> dict[str, Any]:
    rule: dict[str, Any] = {"effect": draw(st.sampled_from(["allow", "deny", "confirm"]))}
    for field in ("tools", "prompts", "resources"):
        chosen = draw(selectors)
        if chosen:
            rule[field] = chosen
    if not any(field in rule for field in FIELDS.values()):
        rule["tools"] = ["*/*"]
    if rule["effect"] != "deny" and "resources" not in rule and draw(st.booleans()):
        rule["arguments"] = {"n": draw(st.sampled_from([{"required": True}, {"max_length": 3}]))}
    return rule


@st.composite
def policies(draw: st.DrawFn) -> tuple[PolicySet, dict[str, Any]]:
    count = draw(st.integers(1, 4))
    profiles: dict[str, Any] = {}
    for index in range(count):
        profile: dict[str, Any] = {"default": draw(st.sampled_from(["allow", "deny"]))}
        earlier = [f"p{i}" for i in range(index)]
        if earlier:
            profile["extends"] = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=2))
        profile["rules"] = draw(st.lists(rules(), max_size=4))
        profiles[f"p{index}"] = profile
    names = [*profiles]
    principals = draw(st.dictionaries(st.sampled_from([*PRINCIPALS[:2], "*"]), st.sampled_from(names)))
    data = {"principals": principals, "profiles": profiles}
    text = "\n".join(f"{key} = {inline_toml(value)}" for key, value in data.items())
    return parse_policies({"p.toml": text}), data


def inline_toml(value: Any) -> str:
    """TOML for strings, booleans, integers, arrays and tables (inline; tomlkit is slow here)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(inline_toml(item) for item in value) + "]"
    return "{" + ", ".join(f"{json.dumps(key)} = {inline_toml(item)}" for key, item in value.items()) + "}"


targets = st.builds(
    Target,
    st.sampled_from(KINDS),
    st.sampled_from(MOUNTS),
    st.sampled_from(NAMES),
    st.sampled_from([None, {}, {"n": "ab"}, {"n": "abcdef"}]),
)


def expected_outcome(data: dict[str, Any], principal: str, target: Target) -> Outcome:
    """The precedence of decide.py's docstring, written again as plainly as possible."""
    profile_name = data["principals"].get(principal, data["principals"].get("*"))
    if profile_name is None:
        return Outcome.DENIED
    names, queue = [], [profile_name]
    while queue:
        name = queue.pop(0)
        if name not in names:
            names.append(name)
            queue.extend(data["profiles"][name].get("extends", []))
    matching = []
    for name in names:
        for rule in data["profiles"][name]["rules"]:
            for selector in rule.get(FIELDS[target.kind], []):
                mount, _, rest = selector.partition("/")
                if fnmatch.fnmatchcase(target.mount, mount) and fnmatch.fnmatchcase(target.name, rest):
                    matching.append(rule)
                    break
    if any(rule["effect"] == "deny" for rule in matching):
        return Outcome.DENIED
    if not matching and data["profiles"][profile_name]["default"] == "deny":
        return Outcome.DENIED
    arguments = target.arguments or {}
    for rule in matching:
        spec = rule.get("arguments", {}).get("n")
        if spec and target.kind != "resource":
            if spec.get("required") and "n" not in arguments:
                return Outcome.REFUSED
            if "max_length" in spec and "n" in arguments and len(arguments["n"]) > spec["max_length"]:
                return Outcome.REFUSED
    if any(rule["effect"] == "confirm" for rule in matching):
        return Outcome.CONFIRM
    return Outcome.ALLOWED


@settings(max_examples=300, deadline=None)
@given(policies(), st.sampled_from(PRINCIPALS), targets)
def test_visible_is_decide_not_denied_and_decide_follows_the_precedence(
    generated: tuple[PolicySet, dict[str, Any]], principal: str, target: Target
) -> None:
    policy, data = generated
    decision = policy.decide(principal, target)
    assert decision.outcome == expected_outcome(data, principal, target)
    assert policy.visible(principal, target.kind, target.mount, target.name) == (decision.outcome != Outcome.DENIED)
    for arguments in (None, {}, {"n": "abcdef"}):  # arguments never change visibility
        other = Target(target.kind, target.mount, target.name, arguments)
        assert (policy.decide(principal, other).outcome == Outcome.DENIED) == (decision.outcome == Outcome.DENIED)
    if target.kind == "resource":  # a template is visible exactly when its text is, as a URI
        assert policy.visible(principal, "resource_template", target.mount, target.name) == policy.visible(
            principal, "resource", target.mount, target.name
        )


# -- paths -------------------------------------------------------------------------------------

ROOT = "/srv/docs"
PIECES = ["a", "..", ".", "/", "%2e", "%2f", "%25", "2e", "%5c", "\\", "~", "docs", "srv", "file:", "?"]
LOOKALIKES = [
    "\uff0e",  # FULLWIDTH FULL STOP: "."
    "\u2024",  # ONE DOT LEADER: "."
    "\u2025",  # TWO DOT LEADER: ".."
    "\u2026",  # HORIZONTAL ELLIPSIS: "..."
    "\ufe52",  # SMALL FULL STOP: "."
    "\uff0f",  # FULLWIDTH SOLIDUS: "/"
    "\uff3c",  # FULLWIDTH REVERSE SOLIDUS: "\\"
    "\uff05",  # FULLWIDTH PERCENT SIGN: "%"
    "\uff5e",  # FULLWIDTH TILDE: "~"
    "\uff46\uff49\uff4c\uff45\uff1a",  # "file:" in fullwidth letters
    "%EF%BC%8E",  # FULLWIDTH FULL STOP, percent-encoded
    "\u00e9",
    "\u65e5",
]
path_values = st.lists(st.sampled_from(PIECES), max_size=10).map("".join)
unicode_path_values = st.lists(st.sampled_from(PIECES + LOOKALIKES), max_size=10).map("".join)


def inside(path: str) -> bool:
    parts = [part for part in os.path.normpath(os.path.join(ROOT, path)).split("/") if part]
    return parts[:2] == ["srv", "docs"]


@settings(max_examples=1000, deadline=None)
@given(st.one_of(path_values, path_values.map(lambda v: ROOT + "/" + v)))
def test_accepted_paths_stay_inside_however_decoded(value: str) -> None:
    if path_problem(value, [ROOT], os.path.normpath) is None:
        spelling = value
        for _ in range(10):
            assert inside(spelling), spelling
            assert "\x00" not in spelling and not spelling.startswith("~")
            spelling = unquote(spelling)


def readings(value: str) -> set[str]:
    """Every way a server might read `value`: percent-decoded, NFKC-normalized, both, in any order, repeatedly."""
    found, pending = set(), [value]
    while pending:
        text = pending.pop()
        if text in found or len(found) > 200:
            continue
        found.add(text)
        pending += [unquote(text), unicodedata.normalize("NFKC", text)]
    return found


def steps(path: str) -> list[str]:
    return path.replace("\\", "/").split("/")


@settings(max_examples=1000, deadline=None)
@given(st.one_of(unicode_path_values, unicode_path_values.map(lambda v: ROOT + "/" + v)))
def test_accepted_paths_stay_inside_however_decoded_or_normalized(value: str) -> None:
    if path_problem(value, [ROOT], os.path.normpath) is None:
        for reading in readings(value):
            assert inside(reading), reading
            assert "\x00" not in reading and not reading.startswith("~")
            # Normalization changes no step: the same separators, the same dot segments, in the same places.
            normal = unicodedata.normalize("NFKC", reading)
            written, read = steps(unquote(reading)), steps(unquote(normal))
            assert len(written) == len(read), (reading, normal)
            assert all(a == b or (a.strip(".") and b.strip(".")) for a, b in zip(written, read, strict=True))


# -- masking -----------------------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["a", "Token", "pw", "x"]), children, max_size=3),
    ),
    max_leaves=12,
)


def _keys_and_values(value: Any) -> list[tuple[str, Any]]:
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((key, item))
            found.extend(_keys_and_values(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_keys_and_values(item))
    return found


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "Token", "pw", "x"]), json_values, max_size=4))
def test_masking_hides_every_matching_key_at_any_depth(arguments: dict[str, Any]) -> None:
    original = repr(arguments)
    masked = mask_arguments(arguments, ["*token*", "PW"])
    assert repr(arguments) == original  # not modified
    for key, value in _keys_and_values(masked):
        if key.lower() in ("token", "pw"):
            assert value == "***"
    unmasked = mask_arguments(arguments, [])
    assert unmasked == arguments and unmasked is not arguments
