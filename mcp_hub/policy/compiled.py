"""Profiles and rules compiled for decisions: globs and regexes compiled, `extends` flattened.

Built once by `load.py` from validated files (names known to exist, no `extends` cycles).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from mcp_hub.policy.budgets import CompiledBudget, compile_budgets
from mcp_hub.policy.constraints import ArgumentRule, Realpath, Violation, compile_argument
from mcp_hub.policy.durations import parse_duration
from mcp_hub.policy.globs import KINDS, SELECTOR_FIELDS, Kind, Selector
from mcp_hub.policy.guards import CompiledGuard, compile_guard
from mcp_hub.policy.model import Profile, Rule


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """One rule, ready to match. `profile` is the profile that wrote it."""

    id: str
    profile: str
    effect: Literal["allow", "deny", "confirm"]
    reason: str
    selectors: Mapping[Kind, tuple[Selector, ...]]
    arguments: tuple[ArgumentRule, ...]
    rate: str | None
    rate_scope: Literal["principal", "shared"]
    cache: float | None = None
    """Seconds the results of the read-only tools it allows may be kept (its `cache`), or None."""
    scopes: frozenset[str] = frozenset()
    """The OAuth scopes a caller needs for the rule to apply to it."""
    cost: int | None = None
    """What a call of the tools it allows counts against cost budgets (its `cost`), or None."""
    max_result_tokens: int | None = None
    """The result budget of the calls it matches (tokens; 0: none), or None."""

    def match(self, kind: Kind, mount: str, name: str, scopes: frozenset[str] | None = None) -> Selector | None:
        """The first of this rule's selectors for `kind` that matches, or None; None too when the rule needs
        scopes that `scopes` (the caller's; None: not asked) lacks."""
        if self.scopes and scopes is not None and not self.scopes <= scopes:
            return None
        for selector in self.selectors[kind]:
            if selector.matches(mount, name):
                return selector
        return None

    def violations(self, arguments: Mapping[str, Any], realpath: Realpath) -> Iterator[Violation]:
        for argument in self.arguments:
            yield from argument.violations(self.id, arguments, realpath)


@dataclass(frozen=True, slots=True)
class CompiledProfile:
    """A profile with its own rules followed by those it extends (each once), indexed by kind."""

    name: str
    description: str
    default: Literal["deny", "allow"]
    includes: tuple[str, ...]
    rules: tuple[CompiledRule, ...]
    by_kind: Mapping[Kind, tuple[CompiledRule, ...]]
    builtin: bool = False
    guards: tuple[CompiledGuard, ...] = ()
    """Its own guards followed by those of the profiles it includes (see guards.py)."""
    tool_search: bool | None = None
    """Its own `tool_search`, else the first of the profiles it includes that says; None: none says."""
    budgets: tuple[CompiledBudget, ...] = ()
    """Its own `budgets`, else those of the first of the profiles it includes that has them (budgets.py)."""
    max_result_tokens: int | None = None
    """Its own `max_result_tokens`, else the first of the profiles it includes that says; None: none says."""

    @classmethod
    def build(
        cls,
        name: str,
        description: str,
        default: Literal["deny", "allow"],
        includes: tuple[str, ...],
        rules: tuple[CompiledRule, ...],
        *,
        builtin: bool = False,
        guards: tuple[CompiledGuard, ...] = (),
        tool_search: bool | None = None,
        budgets: tuple[CompiledBudget, ...] = (),
        max_result_tokens: int | None = None,
    ) -> CompiledProfile:
        by_kind: dict[Kind, tuple[CompiledRule, ...]] = {
            kind: tuple(rule for rule in rules if rule.selectors[kind]) for kind in KINDS
        }
        by = MappingProxyType(by_kind)
        return cls(
            name, description, default, includes, rules, by, builtin, guards, tool_search, budgets, max_result_tokens
        )


def rule_id(profile: str, index: int, rule: Rule) -> str:
    """A rule's id: its own, or "<profile>#<n>" counting from 1."""
    return rule.id if rule.id is not None else f"{profile}#{index + 1}"


def compile_rule(profile: str, index: int, rule: Rule) -> CompiledRule:
    selectors: dict[Kind, tuple[Selector, ...]] = {
        kind: tuple(Selector.parse(text) for text in getattr(rule, field)) for kind, field in SELECTOR_FIELDS.items()
    }
    return CompiledRule(
        id=rule_id(profile, index, rule),
        profile=profile,
        effect=rule.effect,
        reason=rule.reason,
        selectors=MappingProxyType(selectors),
        arguments=tuple(compile_argument(name, spec) for name, spec in rule.arguments.items()),
        rate=rule.rate,
        rate_scope=rule.rate_scope,
        cache=parse_duration(rule.cache) if rule.cache is not None else None,
        scopes=frozenset(rule.scopes),
        cost=rule.cost,
        max_result_tokens=rule.max_result_tokens,
    )


def compile_profiles(profiles: Mapping[str, Profile]) -> dict[str, CompiledProfile]:
    """Compile every profile; `extends` must name existing profiles without cycles (checked by load)."""
    own = {
        name: tuple(compile_rule(name, index, rule) for index, rule in enumerate(profile.rules))
        for name, profile in profiles.items()
    }
    own_guards = {
        name: tuple(compile_guard(name, index, guard) for index, guard in enumerate(profile.guards))
        for name, profile in profiles.items()
    }
    compiled: dict[str, CompiledProfile] = {}
    for name, profile in profiles.items():
        includes = _includes(name, profiles)
        rules = own[name] + tuple(rule for included in includes for rule in own[included])
        guards = own_guards[name] + tuple(guard for included in includes for guard in own_guards[included])
        searching = [profiles[p].tool_search for p in (name, *includes) if profiles[p].tool_search is not None]
        budgeting = [p for p in (name, *includes) if profiles[p].budgets is not None]
        result_budgets = [
            profiles[p].max_result_tokens for p in (name, *includes) if profiles[p].max_result_tokens is not None
        ]
        compiled[name] = CompiledProfile.build(
            name,
            profile.description,
            profile.default,
            includes,
            rules,
            guards=guards,
            tool_search=searching[0] if searching else None,
            budgets=compile_budgets("profile", budgeting[0], profiles[budgeting[0]].budgets or ()) if budgeting else (),
            max_result_tokens=result_budgets[0] if result_budgets else None,
        )
    return compiled


def _includes(name: str, profiles: Mapping[str, Profile]) -> tuple[str, ...]:
    """The profiles `name` extends, directly or not, depth-first in `extends` order, each once."""
    seen: list[str] = []

    def visit(current: str) -> None:
        for parent in profiles[current].extends:
            if parent != name and parent not in seen:
                seen.append(parent)
                visit(parent)

    visit(name)
    return tuple(seen)
