"""Guards: what the policy does with a secret, personal datum or hidden text found in a call.

A guard (`[[profiles.P.guards]]`) names detectors (see mcp_hub/guardrails), a direction (`on`:
the arguments on their way to a server, the results on their way to the model, or both; each with
whatever else travels that way, a resource URI, a client's answers, a server's questions: see
chain/guardrails.py), an
action and, optionally, the tools, prompts and resources it applies to (none: all of them). A
principal's guards are its profile's own followed by those of the profiles it extends.

Precedence, written down once: each match is handled by the strongest action among the guards
that apply to the call and direction and detect it, `block` > `redact` > `flag`, named by the
first such guard (profile order). Overlapping matches are one match (guardrails.merged) that keeps
every detector's finding, and is handled by the strongest action of the guards that detect any of
them: a database URL's password, found by "secrets" and, overlapping, as part of an e-mail address
by "email", is blocked by a guard that blocks secrets even where another only flags e-mail. One
blocked match blocks the whole call or result; otherwise every match to redact is replaced by
`[REDACTED:<kind>]` (`[REDACTED:url_password,email]` for a match of several kinds), and the flagged
ones pass. Every hit is audited with each of its detectors and the guard that handled it, never
its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from mcp_hub.guardrails import Match, expand
from mcp_hub.policy.globs import SELECTOR_FIELDS, Kind, Selector
from mcp_hub.policy.model import Guard

Action = Literal["redact", "block", "flag"]
Direction = Literal["arguments", "results"]
STRENGTH: Mapping[str, int] = MappingProxyType({"flag": 0, "redact": 1, "block": 2})


@dataclass(frozen=True, slots=True)
class CompiledGuard:
    id: str
    profile: str
    detectors: frozenset[str]
    action: Action
    on: Literal["arguments", "results", "both"]
    reason: str
    selectors: Mapping[Kind, tuple[Selector, ...]] | None
    """None: every tool, prompt and resource."""

    def applies(self, kind: Kind, mount: str, name: str) -> bool:
        if self.selectors is None:
            return True
        return any(selector.matches(mount, name) for selector in self.selectors[kind])

    def watches(self, direction: Direction) -> bool:
        return self.on in (direction, "both")

    def describe(self) -> str:
        where = "all tools, prompts and resources" if self.selectors is None else self._selected()
        return f"{self.action} {', '.join(sorted(self.detectors))} in {self._direction()} of {where}"

    def _direction(self) -> str:
        return "arguments and results" if self.on == "both" else self.on

    def _selected(self) -> str:
        assert self.selectors is not None
        parts = [f"{field} {', '.join(s.text for s in self.selectors[k])}" for k, field in SELECTOR_FIELDS.items()]
        return "; ".join(p for k, p in zip(SELECTOR_FIELDS, parts, strict=True) if self.selectors[k])


def guard_id(profile: str, index: int, guard: Guard) -> str:
    """A guard's id: its own, or "<profile>#guard<n>" counting from 1."""
    return guard.id if guard.id is not None else f"{profile}#guard{index + 1}"


def compile_guard(profile: str, index: int, guard: Guard) -> CompiledGuard:
    selected = guard.tools or guard.prompts or guard.resources
    selectors: dict[Kind, tuple[Selector, ...]] = {
        kind: tuple(Selector.parse(text) for text in getattr(guard, field)) for kind, field in SELECTOR_FIELDS.items()
    }
    return CompiledGuard(
        id=guard_id(profile, index, guard),
        profile=profile,
        detectors=expand(guard.detect),
        action=guard.action,
        on=guard.on,
        reason=guard.reason,
        selectors=MappingProxyType(selectors) if selected else None,
    )


@dataclass(frozen=True, slots=True)
class Guarding:
    """The guards that apply to one call, in one direction, in profile order."""

    guards: tuple[CompiledGuard, ...]

    @property
    def detectors(self) -> frozenset[str]:
        return frozenset(name for guard in self.guards for name in guard.detectors)

    def __bool__(self) -> bool:
        return bool(self.guards)

    def handling(self, match: Match) -> CompiledGuard:
        """The guard whose action applies to `match`: the strongest among those that detect any of its findings
        (`Match.found`), the first in profile order among equals. `match` must come from one of `detectors`."""
        detectors = {detector for detector, _ in match.found}
        found = [guard for guard in self.guards if not guard.detectors.isdisjoint(detectors)]
        return max(found, key=lambda guard: STRENGTH[guard.action])  # max keeps the first among equals

    def blocking(self, matches: Iterable[Match]) -> CompiledGuard | None:
        """The guard that blocks, if any match is blocked: that of the first such match."""
        for match in matches:
            guard = self.handling(match)
            if guard.action == "block":
                return guard
        return None
