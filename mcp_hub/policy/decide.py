"""Decisions: may this principal see, or call, this tool, prompt or resource?

A target is a kind (tool, prompt, resource), a mount, the server's own name (a resource's URI)
and, for calls, the arguments. The principal's profile decides; its rules are its own followed
by those of the profiles it extends (recursively, each once), in that order.

Precedence, written down once (the first step that applies decides):

1. No profile: the principal is not in [principals], its token carries no scope in [scopes] and
   names no group in [groups], and there is no "*" entry -> DENIED, rule "no-profile".
   (A profile is chosen in that order: the principal's own entry, the first [scopes] entry, the
   first [groups] entry, "*".)
2. A `deny` rule matches the target -> DENIED, by the first such rule. A rule with `scopes` matches
   only a caller whose token carries them all.
3. No `allow` or `confirm` rule matches and the profile's default is "deny"
   -> DENIED, rule "default".
4. Some constraint of some matching allow/confirm rule does not hold for the arguments
   (constraints of all matching rules must hold, so a broad allow never bypasses a narrow
   rule's constraint) -> REFUSED, by the rule of the first violation.
5. A `confirm` rule matches -> CONFIRM, by the first such rule, with the [confirmation] settings.
6. Otherwise -> ALLOWED, by the first matching allow rule, or rule "default" when none
   matched and the profile's default is "allow".

DENIED means hidden: the hub neither lists the item nor lets it be called, and answers a call
exactly like one to a name that does not exist (the reason is for the audit log only). REFUSED
is visible: the call answers a tool error naming the rule and the constraint. Rule order never
changes the outcome, only which rule is named.

`visible()` is steps 1-3: "the decision is not DENIED", the same code as calls use. Arguments
only matter from step 4, so an item is visible or not whatever the arguments. A target without
arguments (None) is checked as a call with no arguments: only `required` can fail then.
Resource templates are checked like resources, their uriTemplate taken literally as the URI.

An ALLOWED call of a tool also says how long its result may be kept (`cache`: the shortest `cache` of
the matching rules that set one; the hub keeps results of read-only tools only). A CONFIRM decision
never does: a call a person must confirm is never answered from, or kept in, the cache.

The rate limits of every matching allow/confirm rule come back with every decision that is not
DENIED (REFUSED included, so an enforcer may count refused attempts); `decide` counts nothing.
So do, for a tool, the budgets of calls and cost that apply to the principal (its profile's, its own,
its groups': `budgets_for`) and what the call costs: the highest `cost` of the matching rules that set
one, else 1 (the highest, so rule order does not change it either). See budgets.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal

from mcp_hub.policy.budgets import CompiledBudget
from mcp_hub.policy.compiled import KINDS, CompiledProfile, CompiledRule, Kind
from mcp_hub.policy.constraints import Realpath, Violation
from mcp_hub.policy.guards import Direction, Guarding
from mcp_hub.policy.memo import per_principal
from mcp_hub.policy.model import AuditSettings, ConfirmationSettings, PinningSettings
from mcp_hub.policy.principal import Principal, groups_of, scopes_of
from mcp_hub.policy.rates import parse_rate

NO_PROFILE = "no-profile"
DEFAULT = "default"
KIND_ALIASES: Mapping[str, Kind] = MappingProxyType({**{kind: kind for kind in KINDS}, "resource_template": "resource"})


@dataclass(frozen=True)
class Target:
    """What a decision is about: `name` is the server's own name, or the resource URI."""

    kind: Literal["tool", "prompt", "resource"]
    mount: str
    name: str
    arguments: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown target kind {self.kind!r}; use one of {', '.join(KINDS)}")


class Outcome(StrEnum):
    ALLOWED = "allowed"
    CONFIRM = "confirm"
    REFUSED = "refused"
    DENIED = "denied"


@dataclass(frozen=True)
class RateLimit:
    """A rate limit the enforcer applies: per principal, or one budget `shared` by all."""

    rule: str
    rate: str
    scope: Literal["principal", "shared"]

    @property
    def amount(self) -> int:
        """How many calls the rate allows per `period` seconds."""
        return parse_rate(self.rate)[0]

    @property
    def period(self) -> int:
        return parse_rate(self.rate)[1]


@dataclass(frozen=True)
class Decision:
    """The answer for one principal and target, and why."""

    outcome: Outcome
    rule: str | None
    """The deciding rule's id, "default" (the profile's default) or "no-profile"."""
    reason: str
    profile: str | None
    rate_limits: tuple[RateLimit, ...]
    revision: str
    violations: tuple[Violation, ...] = ()
    """Every broken constraint (REFUSED only); `reason` describes the first."""
    confirmation: ConfirmationSettings | None = None
    """How to ask (CONFIRM only)."""
    cache: float | None = None
    """Seconds the result may be kept and served again, if the tool is read-only (ALLOWED only): the
    shortest `cache` of the matching rules that have one."""
    budgets: tuple[CompiledBudget, ...] = ()
    """The budgets of calls and cost the call counts against (tools only; not DENIED)."""
    cost: int = 1
    """What the call counts against cost budgets: the highest `cost` of the matching rules, else 1."""
    max_result_tokens: int | None = None
    """The result budget the matching rules set (ALLOWED and CONFIRM): the smallest `max_result_tokens` of those
    that have one (0, no budget, only when every one that says says 0); None: none says."""


@dataclass(frozen=True, eq=False)
class PolicySet:
    """Compiled policies: immutable; decisions need no I/O but the injected `realpath`."""

    revision: str
    confirmation: ConfirmationSettings
    audit: AuditSettings
    pinning: PinningSettings
    principals: Mapping[str, str]
    profiles: Mapping[str, CompiledProfile]
    sources: tuple[str, ...] = field(default=())
    """The files it was compiled from (empty for the built-in policy)."""
    scopes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """[scopes]: OAuth scope -> profile, in the order written."""
    groups: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """[groups]: group -> profile, in the order written."""
    principal_budgets: Mapping[str, tuple[CompiledBudget, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """[budgets.principals]: a principal's own budgets."""
    group_budgets: Mapping[str, tuple[CompiledBudget, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """[budgets.groups]: the budgets a group's members share."""

    def budgets_for(self, principal: str, profile: str | None = None) -> tuple[CompiledBudget, ...]:
        """The budgets of `principal`'s tool calls: its profile's (`profile`, else its own profile's), its own,
        and those of the groups its token names (in name order)."""
        profile = profile if profile is not None else self.profile_for(principal)
        found = self.profiles[profile].budgets if profile is not None else ()
        found += self.principal_budgets.get(str(principal), ())
        for group in sorted(groups_of(principal)):
            found += self.group_budgets.get(group, ())
        return found

    def profile_for(self, principal: str) -> str | None:
        """The principal's profile: its own entry, else the first [scopes] entry its token carries, else the
        first [groups] entry it is in, else the "*" entry, else None."""
        return self.profile_source(principal)[0]

    def profile_source(self, principal: str) -> tuple[str | None, str]:
        """The principal's profile and the entry that gave it (`[principals] "alice"`, `[scopes] "x"`...)."""
        name = str(principal)
        if name in self.principals:
            return self.principals[name], f'[principals] "{name}"'
        if isinstance(principal, Principal):
            for table, granted in (("scopes", principal.scopes), ("groups", principal.groups)):
                for grant, profile in getattr(self, table).items():
                    if grant in granted:
                        return profile, f'[{table}] "{grant}"'
        if "*" in self.principals:
            return self.principals["*"], '[principals] "*" (it is not listed)'
        return None, ""

    def decide(self, principal: str, target: Target, *, realpath: Realpath = os.path.realpath) -> Decision:
        """The decision for `principal` on `target` (see the module docstring for the precedence)."""
        found = self._grants(principal, target.kind, target.mount, target.name)
        if isinstance(found, Decision):
            return found
        profile, grants = found
        if target.arguments is not None and not any(rule.arguments for rule in grants):
            return self._unconstrained(principal, target.kind, target.mount, target.name)
        rates = tuple(RateLimit(rule.id, rule.rate, rule.rate_scope) for rule in grants if rule.rate is not None)
        spend: tuple[tuple[CompiledBudget, ...], int] = ((), 1)
        if target.kind == "tool":
            cost = max((rule.cost for rule in grants if rule.cost is not None), default=1)
            spend = (self.budgets_for(principal, profile.name), cost)
        if target.kind != "resource":
            arguments = target.arguments or {}
            violations = tuple(v for rule in grants if rule.arguments for v in rule.violations(arguments, realpath))
            if violations:
                first = violations[0]
                return self._decision(
                    Outcome.REFUSED, first.rule, str(first), profile, rates, violations=violations, spend=spend
                )
        budget = _rules_budget(grants)
        for rule in grants:
            if rule.effect == "confirm":
                reason = rule.reason or f"rule {rule.id!r} asks for confirmation"
                return self._decision(
                    Outcome.CONFIRM, rule.id, reason, profile, rates, confirm=True, spend=spend, budget=budget
                )
        cache = min((rule.cache for rule in grants if rule.cache is not None), default=None)
        if grants:
            reason = grants[0].reason or f"allowed by rule {grants[0].id!r}"
            return self._decision(
                Outcome.ALLOWED, grants[0].id, reason, profile, rates, cache=cache, spend=spend, budget=budget
            )
        reason = BUILTIN_REASON if profile.builtin else f"profile {profile.name!r} allows by default"
        return self._decision(Outcome.ALLOWED, DEFAULT, reason, profile, rates, spend=spend)

    @per_principal
    def _unconstrained(self, principal: str, kind: Kind, mount: str, name: str) -> Decision:
        """`decide` for an item no matching rule constrains the arguments of: the same whatever they are, made once."""
        return self.decide(principal, Target(kind, mount, name))  # (no arguments: decided, not kept)

    @cached_property
    def has_guards(self) -> bool:
        """Whether any profile has guards (without, nothing in calls or results is looked at)."""
        return any(profile.guards for profile in self.profiles.values())

    @per_principal
    def guarding(self, principal: str, kind: Kind, mount: str, name: str, direction: Direction) -> Guarding:
        """The guards of the principal's profile that apply to this item in this direction (see guards.py)."""
        profile_name = self.profile_for(principal)
        if profile_name is None:
            return Guarding(())
        guards = self.profiles[profile_name].guards
        return Guarding(tuple(g for g in guards if g.watches(direction) and g.applies(kind, mount, name)))

    @cached_property
    def says_tool_search(self) -> bool:
        """Whether any profile turns tool search on or off (without, `[search] enabled` decides for everyone)."""
        return any(profile.tool_search is not None for profile in self.profiles.values())

    def tool_search(self, principal: str) -> bool | None:
        """Whether the principal's profile turns tool search on or off (None: it says nothing)."""
        if not self.says_tool_search:  # the common case: no profile lookup on every call
            return None
        profile_name = self.profile_for(principal)
        return None if profile_name is None else self.profiles[profile_name].tool_search

    def visible(self, principal: str, kind: str, mount: str, name: str) -> bool:
        """Whether the item is listed (and callable at all): the decision is not DENIED.

        `kind` is tool, prompt, resource, or resource_template (a template's uriTemplate is
        matched literally, like a resource URI).
        """
        if kind not in KIND_ALIASES:
            raise ValueError(f"unknown kind {kind!r}; use one of {', '.join(KIND_ALIASES)}")
        return not isinstance(self._grants(principal, KIND_ALIASES[kind], mount, name), Decision)

    def scopes_wanted(self, principal: str, kind: str, mount: str, name: str) -> tuple[str, ...]:
        """The scopes to add to the caller's token so that it may use an item it may not use now: what to ask the
        caller to get a token with (403 insufficient_scope, the step-up). Empty: it may use it already, it is no
        OAuth caller (a plain name carries no scopes), or no scope would help.

        Two ways scopes help (the first that does is asked for): a rule of the caller's profile that would allow
        the item needs scopes the token lacks; or a [scopes] entry written before the one that picks the
        caller's profile (any, when its profile comes from [groups] or "*", or it has none) would pick one that
        allows it (with that profile's rule's scopes, if its rule needs some). Of those entries, the one written
        nearest before it is asked for first: since the first entry a token carries wins, entries are written
        strongest first, so that is the smallest step up. Never for a principal with its own [principals]
        entry: scopes do not change its profile. Every answer is checked: with the scopes asked for, the
        decision is not DENIED; so a scope that would change nothing is never asked for."""
        kind_ = KIND_ALIASES[kind]
        if not isinstance(principal, Principal):
            return ()  # an API key's or the stdio user's: no token to add scopes to
        if not isinstance(self._grants(principal, kind_, mount, name), Decision):
            return ()  # it may use it already
        for extra in self._step_ups(principal, kind_, mount, name):
            stepped = Principal(str(principal), scopes=principal.scopes | extra, groups=principal.groups)
            if not isinstance(self._grants(stepped, kind_, mount, name), Decision):
                return tuple(sorted(extra))
        return ()

    def _step_ups(self, principal: Principal, kind: Kind, mount: str, name: str) -> Iterator[frozenset[str]]:
        """Sets of scopes that might let `principal` use the item (see `scopes_wanted`), the first to try first."""
        held = principal.scopes

        def by_rules(profile: str, added: frozenset[str]) -> Iterator[frozenset[str]]:
            for rule in self.profiles[profile].by_kind[kind]:
                lacking = rule.scopes - held - added
                if rule.effect != "deny" and lacking and rule.match(kind, mount, name) is not None:
                    yield added | lacking

        current = self.profile_for(principal)
        if current is not None:
            yield from by_rules(current, frozenset())
        if str(principal) in self.principals:
            return
        entries = list(self.scopes.items())
        picking = next((n for n, (scope, _) in enumerate(entries) if scope in held), len(entries))
        for scope, profile in reversed(entries[:picking]):  # those written after the one that picks it change nothing
            yield frozenset({scope})
            yield from by_rules(profile, frozenset({scope}))

    @per_principal
    def _grants(
        self, principal: str, kind: Kind, mount: str, name: str
    ) -> Decision | tuple[CompiledProfile, tuple[CompiledRule, ...]]:
        """Steps 1-3: a DENIED decision, or the profile and its matching allow/confirm rules."""
        profile_name = self.profile_for(principal)
        if profile_name is None:
            reason = f'principal {str(principal)!r} has no profile (not in [principals], and no "*" entry)'
            return Decision(Outcome.DENIED, NO_PROFILE, reason, None, (), self.revision)
        profile = self.profiles[profile_name]
        grants: list[CompiledRule] = []
        scopes = scopes_of(principal)
        for rule in profile.by_kind[kind]:
            if rule.match(kind, mount, name, scopes) is not None:
                if rule.effect == "deny":
                    reason = rule.reason or f"denied by rule {rule.id!r}"
                    return Decision(Outcome.DENIED, rule.id, reason, profile.name, (), self.revision)
                grants.append(rule)
        if not grants and profile.default == "deny":
            reason = f"no rule of profile {profile.name!r} allows this, and it denies by default"
            return Decision(Outcome.DENIED, DEFAULT, reason, profile.name, (), self.revision)
        return profile, tuple(grants)

    def _decision(
        self,
        outcome: Outcome,
        rule: str,
        reason: str,
        profile: CompiledProfile,
        rates: tuple[RateLimit, ...],
        *,
        violations: tuple[Violation, ...] = (),
        confirm: bool = False,
        cache: float | None = None,
        spend: tuple[tuple[CompiledBudget, ...], int] = ((), 1),
        budget: int | None = None,
    ) -> Decision:
        confirmation = self.confirmation if confirm else None
        fields = (outcome, rule, reason, profile.name, rates, self.revision, violations, confirmation, cache)
        return Decision(*fields, *spend, budget)  # (spend: the budgets and the cost)

    def result_budget(self, principal: str) -> int | None:
        """The `max_result_tokens` of the principal's profile (or of one it extends); None: none says."""
        if not self._profiles_budget:  # the common case: no profile lookup on every call
            return None
        profile_name = self.profile_for(principal)
        return None if profile_name is None else self.profiles[profile_name].max_result_tokens

    @cached_property
    def _profiles_budget(self) -> bool:
        return any(profile.max_result_tokens is not None for profile in self.profiles.values())

    @cached_property
    def says_result_budget(self) -> bool:
        """Whether any profile or rule sets a positive result budget (the hub then lists its `read_result` tool)."""
        return any(
            (profile.max_result_tokens or 0) > 0 or any((rule.max_result_tokens or 0) > 0 for rule in profile.rules)
            for profile in self.profiles.values()
        )


def _rules_budget(grants: tuple[CompiledRule, ...]) -> int | None:
    """The result budget matching rules set: the smallest positive one; 0 when every one that says says 0."""
    said = [rule.max_result_tokens for rule in grants if rule.max_result_tokens is not None]
    if not said:
        return None
    return min((budget for budget in said if budget > 0), default=0)


BUILTIN_PROFILE = "allow-all"
BUILTIN_REASON = "built-in profile: no policy directory is configured, so every principal may see and call everything"
EMPTY_REVISION = "e3b0c44298fc"
"""The revision of no files at all: the first 12 hex digits of sha256(b"")."""


def empty_policy() -> PolicySet:
    """The policy when none is configured: every principal gets the built-in profile "allow-all"."""
    profile = CompiledProfile.build(BUILTIN_PROFILE, BUILTIN_REASON, "allow", (), (), builtin=True)
    return PolicySet(
        revision=EMPTY_REVISION,
        confirmation=ConfirmationSettings(),
        audit=AuditSettings(),
        pinning=PinningSettings(),
        principals=MappingProxyType({"*": BUILTIN_PROFILE}),
        profiles=MappingProxyType({BUILTIN_PROFILE: profile}),
    )
