"""The policy file model: what one `policies/*.toml` file may contain.

Shape, types and the rules one file can break on its own (a bad glob, regex, rate or root).
Rules across files (duplicates, unknown profile names, `extends` cycles, rule ids) are checked
by `load.py` once every file is read. Models are pydantic v2, strict, frozen, unknown keys
rejected, like `mcp_hub.config`; errors go through the same `hub_rule` error type so they
become `ConfigError(file, key, reason)` in one place.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from mcp_hub.config import rule_error
from mcp_hub.guardrails import GROUPS, NAMES
from mcp_hub.policy.budgets import Budgets, BudgetTables, check_budgets
from mcp_hub.policy.durations import parse_duration
from mcp_hub.policy.globs import selector_problem, unclosed_bracket
from mcp_hub.policy.rates import parse_rate

_MODEL_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True)


def _as_tuple(value: Any) -> Any:
    """TOML arrays arrive as lists; the frozen models hold tuples (items stay strict)."""
    return tuple(cast(list[Any], value)) if isinstance(value, list) else value


_Strings = Annotated[tuple[str, ...], BeforeValidator(_as_tuple)]
_Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]

PROFILE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}\Z")
RULE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#/-]{0,127}\Z")
RESERVED_RULE_IDS = frozenset(("default", "no-profile"))
DEFAULT_MASK = ("*password*", "*passwd*", "*secret*", "*token*", "authorization", "cookie", "*api_key*", "*apikey*")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class ArgumentConstraints(BaseModel):
    """One `[profiles.P.rules.arguments.NAME]` table: what argument NAME must look like."""

    model_config = _MODEL_CONFIG

    path_within: _Strings | None = None
    pattern: str | None = None
    not_pattern: str | None = None
    enum: Annotated[tuple[Any, ...], BeforeValidator(_as_tuple)] | None = None
    max_length: int | None = Field(default=None, ge=0)
    minimum: Any = None
    maximum: Any = None
    required: bool = False

    @field_validator("path_within")
    @classmethod
    def _absolute_roots(cls, roots: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if roots is None:
            return None
        if not roots:
            raise rule_error('no roots; list at least one absolute directory, like ["/srv/docs"]')
        for index, root in enumerate(roots):
            if "\x00" in root or not os.path.isabs(root):
                raise rule_error(f"{root!r} is not an absolute path; write the full directory, like '/srv/docs'", index)
        return tuple(os.path.normpath(root) for root in roots)

    @field_validator("pattern", "not_pattern")
    @classmethod
    def _regex(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise rule_error(f"invalid regular expression ({exc}); fix it (Python `re` syntax)") from None
        return pattern

    @field_validator("enum")
    @classmethod
    def _scalars(cls, values: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        if values is None:
            return None
        if not values:
            raise rule_error("no allowed values; list at least one, or remove enum")
        for index, value in enumerate(values):
            finite = not isinstance(value, float) or math.isfinite(value)
            if not (isinstance(value, str | bool | int | float) and finite):
                raise rule_error(
                    f"enum values must be strings, numbers or booleans, got a {type(value).__name__}; fix it", index
                )
        return values

    @field_validator("minimum", "maximum")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if value is not None and not (_is_number(value) and math.isfinite(value)):
            raise rule_error("must be a number, like 0 or 2.5 (without quotes)")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> ArgumentConstraints:
        if not self.model_fields_set:
            raise rule_error("no constraints; add one (like required = true or max_length = 100) or remove the table")
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise rule_error(f"minimum {self.minimum} is above maximum {self.maximum}; swap them", "minimum")
        strings = [key for key in ("path_within", "pattern", "not_pattern") if getattr(self, key) is not None]
        numbers = [key for key in ("minimum", "maximum") if getattr(self, key) is not None]
        if strings and numbers:
            raise rule_error(
                f"{strings[0]} needs a string and {numbers[0]} a number, so no value can pass both; "
                "keep the ones that fit the argument",
                numbers[0],
            )
        return self


def _check_id(rule_id: str | None) -> str | None:
    if rule_id is not None:
        if rule_id in RESERVED_RULE_IDS:
            raise rule_error(f"{rule_id!r} is reserved for decisions no rule made; choose another id")
        if not RULE_ID.match(rule_id):
            raise rule_error(
                "a rule id is 1-128 letters, digits and _ . : # / - (starting with a letter or digit); rename it"
            )
    return rule_id


def _check_selectors(selectors: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
    for index, selector in enumerate(selectors):
        problem = selector_problem(selector, info.field_name or "")
        if problem is not None:
            raise rule_error(problem, index)
    return selectors


class Rule(BaseModel):
    """One `[[profiles.P.rules]]` entry."""

    model_config = _MODEL_CONFIG

    id: str | None = None
    effect: Literal["allow", "deny", "confirm"]
    tools: _Strings = ()
    prompts: _Strings = ()
    resources: _Strings = ()
    reason: str = ""
    rate: str | None = None
    rate_scope: Literal["principal", "shared"] = "principal"
    arguments: dict[str, ArgumentConstraints] = Field(default_factory=dict)
    cache: str | None = None
    """How long results of the read-only tools it allows may be kept and served again ("60s")."""
    scopes: _Strings = ()
    """OAuth scopes the caller's token must all carry for the rule to apply (an API key or stdio carries none)."""
    cost: int | None = Field(default=None, ge=0)
    """What a call of the tools it allows counts against cost budgets (1 when no matching rule says)."""
    max_result_tokens: int | None = Field(default=None, ge=0)
    """The result budget, in tokens, of the calls it matches (hub.toml's `[results]`); wins over the profile's,
    the endpoint's and the hub's; 0: no budget."""

    _id = field_validator("id")(_check_id)
    _selectors = field_validator("tools", "prompts", "resources")(_check_selectors)

    @field_validator("cache")
    @classmethod
    def _duration(cls, cache: str | None) -> str | None:
        if cache is not None:
            try:
                parse_duration(cache)
            except ValueError as exc:
                raise rule_error(str(exc)) from None
        return cache

    @field_validator("rate")
    @classmethod
    def _rate(cls, rate: str | None) -> str | None:
        if rate is not None:
            try:
                parse_rate(rate)
            except ValueError as exc:
                raise rule_error(str(exc)) from None
        return rate

    @model_validator(mode="after")
    def _coherent(self) -> Rule:
        if not (self.tools or self.prompts or self.resources):
            raise rule_error('the rule selects nothing; add tools, prompts or resources, like tools = ["notes/*"]')
        if "rate_scope" in self.model_fields_set and self.rate is None:
            raise rule_error('rate_scope without rate; add rate = "30/minute" or remove rate_scope', "rate_scope")
        if self.effect == "deny":
            for key in ("rate", "arguments", "scopes", "cost", "max_result_tokens"):
                if key in self.model_fields_set:
                    raise rule_error(f"a deny rule has no {key}: it hides what it matches; remove {key}", key)
        if self.arguments and self.resources:
            raise rule_error(
                "argument constraints apply to tools and prompts, and resources have no arguments; "
                "move the resources to a rule of their own",
                "arguments",
            )
        if self.cache is not None:
            if self.effect != "allow":
                raise rule_error(
                    f"a {self.effect} rule has no cache: only calls allowed without asking anyone are kept; "
                    "remove cache",
                    "cache",
                )
            if self.prompts or self.resources:
                raise rule_error(
                    "cache applies to tools (resources are kept as their server's ttlMs says); "
                    "move the prompts and resources to a rule of their own",
                    "cache",
                )
        if self.cost is not None and not self.tools:
            raise rule_error('cost applies to tool calls; select tools, like tools = ["search/*"]', "cost")
        for name in self.arguments:
            if not name:
                raise rule_error("an argument name is empty; name the argument", "arguments")
        for index, scope in enumerate(self.scopes):
            if not scope or " " in scope:
                reason = f'{scope!r} is not a scope: a scope is one word, like "notes:write"'
                raise rule_error(reason, "scopes", index)
        return self


def _check_detectors(names: tuple[str, ...], *, allow_empty: bool = False) -> tuple[str, ...]:
    if not names and not allow_empty:
        raise rule_error(f'no detectors; list at least one of {", ".join(NAMES)}, like detect = ["secrets"]')
    for index, name in enumerate(names):
        if name not in NAMES:
            close = difflib.get_close_matches(name, NAMES, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            groups = "; ".join(f"{group} = {', '.join(members)}" for group, members in GROUPS.items())
            raise rule_error(f"unknown detector {name!r}; {hint}use one of {', '.join(NAMES)} ({groups})", index)
    return names


class Guard(BaseModel):
    """One `[[profiles.P.guards]]` entry: what to look for in a call's arguments or results, and what to do
    with what is found. Without tools, prompts or resources, it applies to every tool, prompt and resource."""

    model_config = _MODEL_CONFIG

    id: str | None = None
    detect: _Strings
    action: Literal["redact", "block", "flag"]
    on: Literal["arguments", "results", "both"] = "both"
    tools: _Strings = ()
    prompts: _Strings = ()
    resources: _Strings = ()
    reason: str = ""

    _id = field_validator("id")(_check_id)
    _selectors = field_validator("tools", "prompts", "resources")(_check_selectors)

    @field_validator("detect")
    @classmethod
    def _detectors(cls, detect: tuple[str, ...]) -> tuple[str, ...]:
        return _check_detectors(detect)


class Profile(BaseModel):
    """One `[profiles.NAME]` table."""

    model_config = _MODEL_CONFIG

    description: str = ""
    default: Literal["deny", "allow"] = "deny"
    extends: _Strings = ()
    rules: Annotated[tuple[Rule, ...], BeforeValidator(_as_tuple)] = ()
    guards: Annotated[tuple[Guard, ...], BeforeValidator(_as_tuple)] = ()
    tool_search: bool | None = None
    """Whether its principals list the hub's search and call tools instead of every tool (hub.toml's
    `[search]`); None: as the profiles it extends say, else as `[search] enabled` says."""
    budgets: Budgets | None = None
    """Budgets of calls and cost of its principals (see budgets.py); None: those of the first profile it
    extends that has some; [] none."""

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, budgets: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        return None if budgets is None else check_budgets(budgets, scoped=True)

    max_result_tokens: int | None = Field(default=None, ge=0)
    """The result budget, in tokens, of its principals' calls (hub.toml's `[results]`); the smaller of this and
    the endpoint's applies; 0: no budget; None: as the profiles it extends say, else as hub.toml says."""


class ConfirmationSettings(BaseModel):
    """`[confirmation]`: how CONFIRM decisions are asked."""

    model_config = _MODEL_CONFIG

    timeout: _Seconds = 120.0
    """Seconds to wait for a person's answer (no answer: the call is refused)."""
    when_unsupported: Literal["deny", "allow"] = "deny"
    """What a CONFIRM decision becomes for a client that cannot ask its user."""


class AuditSettings(BaseModel):
    """`[audit]`: what audit records hide."""

    model_config = _MODEL_CONFIG

    mask_arguments: _Strings = DEFAULT_MASK
    """Argument-name globs (case-insensitive, at any depth) whose values are recorded as "***".
    Setting it replaces the default list."""

    @field_validator("mask_arguments")
    @classmethod
    def _globs(cls, globs: tuple[str, ...]) -> tuple[str, ...]:
        for index, glob in enumerate(globs):
            if not glob:
                raise rule_error("an empty glob masks nothing; remove it", index)
            if unclosed_bracket(glob):
                raise rule_error(f"unclosed '[' in {glob!r}; close it, or write '[[]' for a literal '['", index)
        return globs


class PinningSettings(BaseModel):
    """`[pinning]`: what happens to a tool whose definition changed after it was first seen."""

    model_config = _MODEL_CONFIG

    on_change: Literal["accept", "flag", "hold"] = "flag"
    scan: _Strings = ("hidden", "instructions")
    """Detectors run over each listed tool's name, title, description and schemas; a tool they find
    something in is handled as by `on_change`, until its definition is accepted. [] turns it off."""

    @field_validator("scan")
    @classmethod
    def _detectors(cls, scan: tuple[str, ...]) -> tuple[str, ...]:
        return _check_detectors(scan, allow_empty=True)


class PolicyFile(BaseModel):
    """One whole policy file. Every table is optional; the directory's files are merged."""

    model_config = _MODEL_CONFIG

    principals: dict[str, str] = Field(default_factory=dict)
    scopes: dict[str, str] = Field(default_factory=dict)
    """OAuth scope -> profile, for a caller not in [principals]: the first entry whose scope its token carries."""
    groups: dict[str, str] = Field(default_factory=dict)
    """Group (from the token's groups claim) -> profile, after [scopes]: the first entry the caller is in."""
    profiles: dict[str, Profile] = Field(default_factory=dict)
    confirmation: ConfirmationSettings | None = None
    audit: AuditSettings | None = None
    pinning: PinningSettings | None = None
    budgets: BudgetTables | None = None
    """Budgets of one principal ([budgets.principals]) and of a group ([budgets.groups])."""

    @field_validator("budgets", mode="before")
    @classmethod
    def _budget_tables(cls, value: Any) -> Any:
        if isinstance(value, list):
            raise rule_error(
                "a top-level budgets is a table of [budgets.principals] and [budgets.groups]; a profile's "
                "budgets = [...] goes under its [profiles.NAME]"
            )
        return value

    @model_validator(mode="after")
    def _names(self) -> PolicyFile:
        for principal in self.principals:
            if not principal:
                raise rule_error(
                    'an empty principal id; name the principal, or use "*" for everyone else', "principals"
                )
            if principal != "*" and set(principal) & set("*?["):
                raise rule_error(
                    f"principal ids are exact, not globs: {principal!r} would only match itself; "
                    'list each principal, or use "*" alone for everyone not listed',
                    "principals",
                    principal,
                )
        for table in ("scopes", "groups"):
            for grant in getattr(self, table):
                if not grant or grant == "*" or " " in grant:
                    raise rule_error(
                        f'{grant!r} is not a {table[:-1]}: name one exactly ("*" belongs in [principals])',
                        table,
                        grant,
                    )
        for name in self.profiles:
            if not PROFILE_NAME.match(name):
                raise rule_error(
                    "a profile name is 1-64 letters, digits, '_' and '-', starting with a letter; rename the table",
                    "profiles",
                    name,
                )
        return self


SETTINGS_TABLES = ("confirmation", "audit", "pinning")
