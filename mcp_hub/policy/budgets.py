"""Budgets of calls and cost: what a policy declares, and the calendar periods they are counted in.

A budget is a number of tool calls (`calls = 1000`) or of cost (`cost = 500`; a call costs the highest
`cost` of the rules that allow it, 1 when none says) per calendar period in UTC (`per = "hour"`, `"day"`
or `"month"`). It renews at the start of the next UTC hour, day or month: one instant, the same on
every replica, that an error can name. A profile's budgets are each principal's own (`scope =
"principal"`, the default) or one for all its principals together (`scope = "shared"`); a principal
may have budgets of its own (`[budgets.principals]`) and a group one its members share
(`[budgets.groups]`, the groups an access token names). Every budget that applies must hold.

Why calendar periods, not moving windows (which the rate limits use): a budget is an allowance, like a
plan's monthly quota, and a person asks "when do I get it back?"; a calendar period answers with one
time, while a moving window of a month gives back one call at a time, whenever the call a month earlier
was made. And a calendar period is one counter per principal and period (one Redis INCRBY), where a
moving window keeps every call's time (a month of calls in one list).

Pure: the periods themselves, on the wall clock, are the counter's (chain/budgets.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator, model_validator

from mcp_hub.config import rule_error

Per = Literal["hour", "day", "month"]
PERIODS: tuple[Per, ...] = ("hour", "day", "month")
Measure = Literal["calls", "cost"]

_MODEL_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True)
_EXAMPLE = 'like { calls = 1000, per = "day" } or { cost = 500, per = "month" }'


class Budget(BaseModel):
    """One entry of a `budgets = [...]` list."""

    model_config = _MODEL_CONFIG

    calls: int | None = None
    """Tool calls allowed per period."""
    cost: int | None = None
    """Cost allowed per period (each call costs its rules' `cost`, 1 by default)."""
    per: str
    """The calendar period, in UTC: "hour", "day" or "month"."""
    scope: Literal["principal", "shared"] = "principal"
    """A profile's budget: each principal its own, or one for all its principals together."""

    @field_validator("per")
    @classmethod
    def _period(cls, per: str) -> str:
        if per not in PERIODS:
            hint = " (there is no week; budget a day, or a month)" if per.lower().startswith("week") else ""
            raise rule_error(f'per = {per!r} is not a period; use "hour", "day" or "month"{hint}')
        return per

    @model_validator(mode="after")
    def _one_amount(self) -> Budget:
        if (self.calls is None) == (self.cost is None):
            both = "both calls and cost" if self.calls is not None else "neither calls nor cost"
            raise rule_error(f"a budget counts calls or cost, and this one has {both}; write one, {_EXAMPLE}")
        measure = "calls" if self.calls is not None else "cost"
        if cast(int, getattr(self, measure)) < 1:
            raise rule_error(f"{measure} must be at least 1 (to allow nothing, use a deny rule)", measure)
        return self

    @property
    def measure(self) -> Measure:
        return "calls" if self.calls is not None else "cost"

    @property
    def amount(self) -> int:
        return cast(int, self.calls if self.calls is not None else self.cost)


def _as_tuple(value: Any) -> Any:
    return tuple(cast(list[Any], value)) if isinstance(value, list) else value


Budgets = Annotated[tuple[Budget, ...], BeforeValidator(_as_tuple)]


def check_budgets(budgets: tuple[Budget, ...], *where: str, scoped: bool) -> tuple[Budget, ...]:
    """One budget per measure and period in a list; `scope` only where it means something (`scoped`). `where`:
    the keys of the list, for the error."""
    seen: set[tuple[str, str]] = set()
    for index, budget in enumerate(budgets):
        if not scoped and "scope" in budget.model_fields_set:
            reason = (
                "scope belongs to a profile's budgets; a principal's budget is its own and a group's is one for "
                "all its members; remove scope"
            )
            raise rule_error(reason, *where, index, "scope")
        if (budget.measure, budget.per) in seen:
            reason = f"a second {budget.measure} budget per {budget.per}; keep one (the lower)"
            raise rule_error(reason, *where, index)
        seen.add((budget.measure, budget.per))
    return budgets


class BudgetTables(BaseModel):
    """`[budgets]`: budgets of one principal (`[budgets.principals]`) and of a group (`[budgets.groups]`)."""

    model_config = _MODEL_CONFIG

    principals: dict[str, Budgets] = {}
    groups: dict[str, Budgets] = {}

    @model_validator(mode="after")
    def _checked(self) -> BudgetTables:
        for table in ("principals", "groups"):
            entries: dict[str, tuple[Budget, ...]] = getattr(self, table)
            for name, budgets in entries.items():
                if not name or name == "*" or set(name) & set("*?["):
                    reason = (
                        f"{name!r} is not a {table[:-1]}: name one exactly (budgets for everyone belong in a "
                        "profile: [profiles.NAME] budgets = [...])"
                    )
                    raise rule_error(reason, table, name)
                check_budgets(budgets, table, name, scoped=False)
        return self


@dataclass(frozen=True, slots=True)
class CompiledBudget:
    """A budget as enforced: who declared it (a profile, a principal, a group), what it counts and how much."""

    owner: Literal["profile", "principal", "group"]
    name: str
    measure: Measure
    amount: int
    per: Per
    shared: bool
    """One count for every principal it applies to (a profile's `scope = "shared"`, a group's), else one each."""

    @property
    def id(self) -> str:
        """How the audit line and the errors name it: "budget:profile:readonly:calls/day"."""
        return f"budget:{self.owner}:{self.name}:{self.measure}/{self.per}"

    def describe(self) -> str:
        """ "1000 calls per day (profile 'readonly', each principal its own)"."""
        whose = {
            "profile": f"profile {self.name!r}, "
            + ("one budget for all its principals" if self.shared else "each principal its own"),
            "principal": f"principal {self.name!r}, its own",
            "group": f"group {self.name!r}, one budget for all its members",
        }[self.owner]
        return f"{self.amount} {self.measure} per {self.per} ({whose})"

    def counter(self, principal: str, period: str) -> str:
        """The name of this budget's count for `principal` in `period` (the period's label): the amount is not
        in it, so an edit that changes the amount keeps what was counted."""
        who = "*" if self.shared else str(principal)
        return f"mcp-hub:budget:{self.owner}:{self.name}:{self.measure}:{self.per}:{period}:{who}"


@dataclass(frozen=True, slots=True)
class Usage:
    """How much of a budget a principal has used in the current period, and when the next one starts."""

    budget: CompiledBudget
    used: int
    renews: str
    """When, as a person reads it: "2026-12-06 00:00 UTC (in 3 h 12 min)"."""

    @property
    def left(self) -> int:
        return max(self.budget.amount - self.used, 0)


def compile_budgets(
    owner: Literal["profile", "principal", "group"], name: str, budgets: tuple[Budget, ...]
) -> tuple[CompiledBudget, ...]:
    shared = owner == "group"
    return tuple(
        CompiledBudget(owner, name, b.measure, b.amount, cast(Per, b.per), shared or b.scope == "shared")
        for b in budgets
    )
