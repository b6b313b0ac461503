"""Explanations: a decision told for a person (`explain`).

The outcome shown is `decide()`'s own; the rule lines re-run the same matching and the same
constraint checks, one rule at a time, so every rule considered appears, matched or not.
Argument values are shown masked with the [audit] settings and with what the guards find
redacted (see guards.py), and names and values with the
characters that would deceive a reader escaped (see shown.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from mcp_hub.guardrails import Detectors, scan_value
from mcp_hub.policy.budgets import CompiledBudget, Usage
from mcp_hub.policy.compiled import SELECTOR_FIELDS, CompiledRule
from mcp_hub.policy.constraints import Realpath
from mcp_hub.policy.decide import BUILTIN_REASON, Decision, PolicySet, Target
from mcp_hub.policy.guards import Guarding
from mcp_hub.policy.masking import mask_arguments
from mcp_hub.policy.principal import Principal, scopes_of
from mcp_hub.shown import shown, shown_json

_MAX_ARGUMENTS_TEXT = 300


def explain(
    policy: PolicySet,
    principal: str,
    target: Target,
    *,
    realpath: Realpath = os.path.realpath,
    detectors: Detectors | None = None,
    usage: Sequence[Usage] | None = None,
) -> str:
    """A multi-line account of `policy`'s decision: profile, every rule considered, constraints, outcome.
    `detectors`: those the hub's guards use (its own secret values, its phone regions); by default plain ones.
    `usage`: what the principal used of its budgets (chain/budgets.py counts it), when known."""
    decision = policy.decide(principal, target, realpath=realpath)
    lines = render(policy, principal, target, decision, realpath, detectors or Detectors())
    if target.kind == "tool" and decision.outcome != "denied":
        lines += "\n" + "\n".join(budget_lines(decision.budgets, decision.cost, usage))
    return lines


def budget_lines(budgets: Sequence[CompiledBudget], cost: int, usage: Sequence[Usage] | None) -> list[str]:
    """The budgets of calls and cost a tool call counts against, what it counts, and (with `usage`) what is left."""
    if not budgets:
        return [f"Budgets: none apply (the call would cost {cost} against a cost budget)"]
    used = {entry.budget: entry for entry in usage or ()}
    lines: list[str] = []
    for budget in budgets:
        counts = 1 if budget.measure == "calls" else cost
        line = f"Budget {budget.id}: {budget.describe()}; this call counts {counts}"
        entry = used.get(budget)
        if entry is not None:
            line += f"; {entry.used} used, {entry.left} left; renews at {entry.renews}"
        else:
            line += (
                f"; renews at the start of each UTC {budget.per} (what is used is counted by the serving hub: "
                "its admin console's Explain shows it, and with [cluster] so does this command)"
            )
        lines.append(line)
    return lines


def render(
    policy: PolicySet,
    principal: str,
    target: Target,
    decision: Decision,
    realpath: Realpath,
    detectors: Detectors | None = None,
) -> str:
    detectors = detectors or Detectors()
    files = f" ({', '.join(policy.sources)})" if policy.sources else " (built-in policy)"
    lines = [f"Policy revision {policy.revision}{files}", _principal_line(policy, principal)]
    target_text = f"{target.kind} {shown(repr(target.name))} on mount {shown(repr(target.mount))}"
    lines.append(f"Target: {target_text}; {_arguments_text(policy, principal, target, detectors)}")
    if decision.profile is not None:
        lines.extend(_profile_lines(policy, target, realpath, decision.profile, scopes_of(principal)))
    lines.append(_outcome_line(decision))
    for limit in decision.rate_limits:
        lines.append(f"Rate limit from rule {limit.rule!r}: {limit.rate} ({_scope_text(limit.scope)})")
    if decision.cache is not None:
        lines.append(
            f"Cache: results kept {decision.cache:g} s for this principal, if the tool's annotations say "
            "readOnlyHint (never an error, nor a call that asked its client something)"
        )
    if decision.profile is not None and decision.outcome != "denied":
        lines.extend(_guard_lines(policy, principal, target, detectors))
    return "\n".join(lines)


def _guard_lines(policy: PolicySet, principal: str, target: Target, detectors: Detectors) -> list[str]:
    """The guards that apply, by direction; with arguments, what they find in them (kinds, never values)."""
    lines: list[str] = []
    for direction in ("arguments", "results"):
        guarding = policy.guarding(principal, target.kind, target.mount, target.name, direction)
        for guard in guarding.guards:
            origin = f", from profile {guard.profile!r}" if guard.profile != policy.profile_for(principal) else ""
            lines.append(f"Guard {guard.id} on {direction}{origin}: {guard.describe()}")
        if direction == "arguments" and guarding and target.kind != "resource" and target.arguments:
            lines.extend(_found_lines(guarding, target.arguments, detectors))
    if not lines:
        lines.append("Guards: none apply (arguments and results pass unexamined)")
    return lines


def _found_lines(guarding: Guarding, arguments: Mapping[str, Any], detectors: Detectors) -> list[str]:
    """What the guards find in the arguments: where, which kind, what happens (never the value)."""
    names = guarding.detectors
    _, scan = scan_value(dict(arguments), lambda text: detectors.find(text, names))
    lines: list[str] = []
    for path, match in scan.hits:
        guard = guarding.handling(match)
        where = "/".join(shown(str(step)) for step in path)
        what = ", ".join(f"{kind} ({detector})" for detector, kind in match.found)
        lines.append(f"  argument {where}: {what} -> {guard.action} by {guard.id}")
    return lines


def _principal_line(policy: PolicySet, principal: str) -> str:
    profile, entry = policy.profile_source(principal)
    who = repr(str(principal))
    if isinstance(principal, Principal):
        granted = [f"scopes {', '.join(sorted(principal.scopes)) or '(none)'}"]
        if principal.groups:
            granted.append(f"groups {', '.join(sorted(principal.groups))}")
        who += f" (token {'; '.join(shown(text) for text in granted)})"
    if profile is None:
        return f'Principal {who}: no profile (not in [principals], [scopes] or [groups], and there is no "*" entry)'
    if policy.profiles[profile].builtin:
        return f"Principal {who}: profile {profile!r} ({BUILTIN_REASON})"
    return f"Principal {who}: profile {profile!r}, from {shown(entry)}"


def _arguments_text(policy: PolicySet, principal: str, target: Target, detectors: Detectors) -> str:
    if target.kind == "resource":
        return "resources take no arguments"
    if target.arguments is None:
        return "no arguments given (checked as a call without arguments)"
    arguments: Any = mask_arguments(target.arguments, policy.audit.mask_arguments)
    guarding = policy.guarding(principal, target.kind, target.mount, target.name, "arguments")
    if guarding:  # what a guard finds is not shown either
        names = guarding.detectors
        arguments, _ = scan_value(arguments, lambda text: detectors.find(text, names), lambda match: True)
    text = shown_json(arguments)
    if len(text) > _MAX_ARGUMENTS_TEXT:
        text = text[:_MAX_ARGUMENTS_TEXT] + "..."
    return f"arguments (masked): {text}"


def _profile_lines(
    policy: PolicySet, target: Target, realpath: Realpath, name: str, scopes: frozenset[str]
) -> list[str]:
    profile = policy.profiles[name]
    extends = f"; includes the rules of {', '.join(profile.includes)}" if profile.includes else ""
    about = f": {profile.description}" if profile.description and not profile.builtin else ""
    lines = [f"Profile {name!r} (default {profile.default}{extends}){about}"]
    field = SELECTOR_FIELDS[target.kind]
    rules = profile.by_kind[target.kind]
    others = len(profile.rules) - len(rules)
    skipped = f" ({others} other {'rules select' if others != 1 else 'rule selects'} no {field})" if others else ""
    lines.append(f"Rules selecting {field}: {len(rules)}{skipped}")
    for number, rule in enumerate(rules, start=1):
        lines.extend(_rule_lines(number, rule, name, target, realpath, scopes))
    return lines


def _rule_lines(
    number: int, rule: CompiledRule, profile: str, target: Target, realpath: Realpath, scopes: frozenset[str]
) -> list[str]:
    origin = f", from profile {rule.profile!r}" if rule.profile != profile else ""
    head = f"  {number}. {rule.id} [{rule.effect}{origin}]"
    if not rule.scopes <= scopes:
        missing = ", ".join(sorted(rule.scopes - scopes))
        return [f"{head}: does not apply (it needs the scopes {shown(missing)}, which the caller's token lacks)"]
    selector = rule.match(target.kind, target.mount, target.name)
    if selector is None:
        written = ", ".join(s.text for s in rule.selectors[target.kind])
        return [f"{head}: no match ({SELECTOR_FIELDS[target.kind]}: {written})"]
    extras = f"; rate {rule.rate} ({_scope_text(rule.rate_scope)})" if rule.rate else ""
    extras += f"; cache {rule.cache:g} s" if rule.cache is not None else ""
    extras += f"; cost {rule.cost}" if rule.cost is not None else ""
    lines = [f"{head}: matches {selector.text!r}{extras}"]
    if rule.effect != "deny" and target.kind != "resource":
        arguments: Any = target.arguments or {}
        for argument in rule.arguments:
            results = [
                f"{constraint} {'ok' if problem is None else 'VIOLATED: ' + problem}"
                for constraint, problem in argument.results(arguments, realpath)
            ]
            lines.append(f"       argument {argument.argument!r}: {'; '.join(results) or 'absent, not required: ok'}")
    return lines


def _outcome_line(decision: Decision) -> str:
    by = {"no-profile": "(no profile)", "default": "by the profile's default"}.get(
        decision.rule or "", f"by rule {decision.rule!r}"
    )
    line = f"Outcome: {decision.outcome.name} {by}: {decision.reason}"
    if decision.outcome == "denied":
        line += " (hidden: not listed, and a call is answered like one to an unknown name)"
    elif decision.outcome == "confirm" and decision.confirmation is not None:
        asked = decision.confirmation
        line += (
            f" (a person is asked, {asked.timeout:g} s to answer; a client that cannot ask: {asked.when_unsupported})"
        )
    return line


def _scope_text(scope: str) -> str:
    return "each principal its own budget" if scope == "principal" else "one budget shared by all principals"
