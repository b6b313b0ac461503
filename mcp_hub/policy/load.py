"""Loading policies: a directory of `*.toml` files -> one compiled `PolicySet`.

`load_policies(directory)` / `parse_policies(files)` raise `ConfigError(file, key, reason)` at
the first problem; the reason starts with "line N:" when the key is found in the file's text,
and ends with the fix. The steps:

1. read every `*.toml` in the directory (not subdirectories; names starting with "." are
   skipped, as editors' lock and backup files), sorted by name; the revision is the sha256
   of their names and bytes, first 12 hex digits;
2. per file: TOML syntax; unknown keys, with "did you mean"; the model (types, selectors,
   regexes, rates, roots: `model.py`);
3. across files: a principal, scope, group, profile, settings table or principal's or group's budgets
   defined twice; [principals],
   [scopes], [groups] and `extends` naming profiles that do not exist; `extends` cycles; rule and guard ids used twice
   (they share one namespace: an audit line names either);
4. compile (`compiled.py`).
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from mcp_hub.config import (
    config_error,
    dotted_key,
    parse_toml,
    unknown_key_reason,
)
from mcp_hub.errors import ConfigError
from mcp_hub.policy.budgets import Budget, BudgetTables, CompiledBudget, compile_budgets
from mcp_hub.policy.compiled import compile_profiles, rule_id
from mcp_hub.policy.decide import PolicySet
from mcp_hub.policy.guards import guard_id
from mcp_hub.policy.model import (
    SETTINGS_TABLES,
    ArgumentConstraints,
    AuditSettings,
    ConfirmationSettings,
    Guard,
    PinningSettings,
    PolicyFile,
    Profile,
    Rule,
)
from mcp_hub.policy.source import KeyLines, Loc

_TOP_KEYS = tuple(PolicyFile.model_fields)
_PROFILE_KEYS = tuple(Profile.model_fields)
_RULE_KEYS = tuple(Rule.model_fields)
_CONSTRAINT_KEYS = tuple(ArgumentConstraints.model_fields)
_GUARD_KEYS = tuple(Guard.model_fields)
_BUDGET_KEYS = tuple(Budget.model_fields)
_SETTINGS_KEYS = {
    "confirmation": tuple(ConfirmationSettings.model_fields),
    "audit": tuple(AuditSettings.model_fields),
    "pinning": tuple(PinningSettings.model_fields),
}


def load_policies(directory: str | os.PathLike[str]) -> PolicySet:
    """Read, check and compile every `*.toml` policy file in `directory`."""
    root = os.fspath(directory)
    if not os.path.isdir(root):
        reason = "not found" if not os.path.exists(root) else "not a directory"
        fix = "create it, or point the hub at the directory of *.toml files"
        raise ConfigError(root, "", f"policy directory {reason}; {fix}")
    names = sorted(name for name in os.listdir(root) if name.endswith(".toml") and not name.startswith("."))
    if not names:
        raise ConfigError(root, "", "no *.toml policy files in it; add one (start from the hub's policies/ examples)")
    files: dict[str, bytes] = {}
    for name in names:
        try:
            files[name] = Path(root, name).read_bytes()
        except OSError as exc:
            reason = f"cannot read it ({exc}); make it a readable file"
            raise ConfigError(os.path.join(root, name), "", reason) from None
    return parse_policies(files, directory=root)


def parse_policies(files: Mapping[str, str | bytes], *, directory: str | None = None) -> PolicySet:
    """Check and compile policy files given as {file name: text}; they are merged in name order.

    Messages name each file joined to `directory` when given.
    """
    contents = {name: data.encode() if isinstance(data, str) else data for name, data in files.items()}
    ordered = sorted(contents.items())
    sources = [_read(name if directory is None else os.path.join(directory, name), data) for name, data in ordered]
    merged = _Merged()
    for source in sources:
        merged.add(source)
    merged.check()
    return PolicySet(
        revision=policy_revision(ordered),
        confirmation=merged.setting("confirmation", ConfirmationSettings),
        audit=merged.setting("audit", AuditSettings),
        pinning=merged.setting("pinning", PinningSettings),
        principals=MappingProxyType({principal: profile for principal, (profile, _) in merged.principals.items()}),
        scopes=MappingProxyType({scope: profile for scope, (profile, _) in merged.scopes.items()}),
        groups=MappingProxyType({group: profile for group, (profile, _) in merged.groups.items()}),
        principal_budgets=merged.budgets("principals"),
        group_budgets=merged.budgets("groups"),
        profiles=MappingProxyType(compile_profiles({name: p for name, (p, _) in merged.profiles.items()})),
        sources=tuple(source.path for source in sources),
    )


def policy_revision(files: Iterable[tuple[str, bytes]]) -> str:
    """sha256 over the files' names and bytes, in the order given; the first 12 hex digits."""
    digest = hashlib.sha256()
    for name, data in files:
        encoded = name.encode()
        digest.update(len(encoded).to_bytes(8, "big") + encoded + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()[:12]


# -- one file ----------------------------------------------------------------------------------


@dataclass
class _Source:
    path: str
    text: str
    lines: KeyLines
    model: PolicyFile = field(default_factory=PolicyFile)

    def error(self, loc: Loc, reason: str) -> ConfigError:
        line = self.lines.line(loc)
        return ConfigError(self.path, dotted_key(loc), f"line {line}: {reason}" if line else reason)


def _read(path: str, data: bytes) -> _Source:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(path, "", "not UTF-8 text; save the file as UTF-8") from None
    source = _Source(path, text, KeyLines(text))
    parsed = parse_toml(text, path)
    _check_keys(parsed, source)
    try:
        source.model = PolicyFile.model_validate(parsed)
    except ValidationError as exc:
        raise _model_error(exc.errors()[0], source) from None
    return source


def _model_error(error: ErrorDetails, source: _Source) -> ConfigError:
    loc: Loc = tuple(error["loc"])
    if error["type"] == "hub_rule":
        loc = (*loc, *error.get("ctx", {})["key"])
    if error["type"] == "missing":
        hint = {
            "effect": ' (effect = "allow", "deny" or "confirm")',
            "action": ' (action = "redact", "block" or "flag")',
            "detect": ' (detect = ["secrets"], or other detectors)',
        }.get(str(loc[-1]), "")
        return source.error(loc, f"missing required key {loc[-1]!r}; add it{hint}")
    return source.error(loc, config_error(error, source.path).reason)


def _check_keys(data: dict[str, Any], source: _Source) -> None:
    """Reject keys no model knows, with a "did you mean" or a hint where they belong.

    Values of the wrong type are skipped here: the model reports them.
    """
    _check_table(data, _TOP_KEYS, (), source)
    for table, allowed in _SETTINGS_KEYS.items():
        _check_table(_table(data.get(table)), allowed, (table,), source)
    for name, profile in _table(data.get("profiles")).items():
        profile = _table(profile)
        _check_table(profile, _PROFILE_KEYS, ("profiles", name), source)
        rules: Any = profile.get("rules")
        for index, rule in enumerate(cast(list[Any], rules) if isinstance(rules, list) else []):
            rule = _table(rule)
            _check_table(rule, _RULE_KEYS, ("profiles", name, "rules", index), source)
            for argument, spec in _table(rule.get("arguments")).items():
                loc = ("profiles", name, "rules", index, "arguments", argument)
                _check_table(_table(spec), _CONSTRAINT_KEYS, loc, source)
        guards: Any = profile.get("guards")
        for index, guard in enumerate(cast(list[Any], guards) if isinstance(guards, list) else []):
            _check_table(_table(guard), _GUARD_KEYS, ("profiles", name, "guards", index), source)
        _check_budget_keys(profile.get("budgets"), ("profiles", name, "budgets"), source)
    budgets = _table(data.get("budgets"))
    _check_table(budgets, tuple(BudgetTables.model_fields), ("budgets",), source)
    for table in BudgetTables.model_fields:
        for owner, entries in _table(budgets.get(table)).items():
            _check_budget_keys(entries, ("budgets", table, owner), source)


def _check_budget_keys(budgets: Any, loc: Loc, source: _Source) -> None:
    for index, budget in enumerate(cast(list[Any], budgets) if isinstance(budgets, list) else []):
        _check_table(_table(budget), _BUDGET_KEYS, (*loc, index), source)


def _table(value: Any) -> dict[str, Any]:
    """`value` if it is a TOML table, else an empty one."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _check_table(table: dict[str, Any], allowed: tuple[str, ...], loc: Loc, source: _Source) -> None:
    for key in table:
        if key not in allowed:
            hint = _misplaced(key, loc, table[key], allowed)
            raise source.error((*loc, key), hint or unknown_key_reason(key, allowed))


def _misplaced(key: str, loc: Loc, value: Any, allowed: tuple[str, ...]) -> str | None:
    """A hint for a known key written in the wrong table, or a profile without [profiles.]."""
    if len(loc) == 4 and key in _CONSTRAINT_KEYS:
        return (
            f"{key} is an argument constraint; put it in a [profiles.{loc[1]}.rules.arguments.NAME] table "
            "below this rule, NAME being the argument it constrains"
        )
    if len(loc) == 4 and loc[2] == "rules" and key in _GUARD_KEYS:
        return f"{key} belongs to a guard; put it in a [[profiles.{loc[1]}.guards]] entry"
    if len(loc) == 2 and key in _RULE_KEYS + _GUARD_KEYS:
        table = "rules" if key in _RULE_KEYS else "guards"
        return f"{key} belongs to a {table[:-1]}; put it in a [[profiles.{loc[1]}.{table}]] entry"
    if not loc and key in _PROFILE_KEYS + _RULE_KEYS:
        return f"{key} belongs to a profile or a rule; put it under [profiles.NAME] or [[profiles.NAME.rules]]"
    if not loc and isinstance(value, dict) and not difflib.get_close_matches(key, allowed, n=1):
        return f"unknown table [{key}]; a profile is written [profiles.{key}], its rules [[profiles.{key}.rules]]"
    return None


# -- across files ------------------------------------------------------------------------------


@dataclass
class _Merged:
    principals: dict[str, tuple[str, _Source]] = field(default_factory=dict[str, tuple[str, _Source]])
    scopes: dict[str, tuple[str, _Source]] = field(default_factory=dict[str, tuple[str, _Source]])
    groups: dict[str, tuple[str, _Source]] = field(default_factory=dict[str, tuple[str, _Source]])
    profiles: dict[str, tuple[Profile, _Source]] = field(default_factory=dict[str, tuple[Profile, _Source]])
    settings: dict[str, tuple[BaseModel, _Source]] = field(default_factory=dict[str, tuple[BaseModel, _Source]])
    budget_tables: dict[str, dict[str, tuple[tuple[Budget, ...], _Source]]] = field(
        default_factory=lambda: {"principals": {}, "groups": {}}
    )

    def add(self, source: _Source) -> None:
        model = source.model
        for principal, profile in model.principals.items():
            if principal in self.principals:
                first = self.principals[principal][1].path
                reason = f"principal {principal!r} is already mapped in {first}; keep one entry"
                raise source.error(("principals", principal), reason)
            self.principals[principal] = (profile, source)
        for table in ("scopes", "groups"):
            merged = getattr(self, table)
            for grant, profile in getattr(model, table).items():
                if grant in merged:
                    reason = f"{table[:-1]} {grant!r} is already mapped in {merged[grant][1].path}; keep one entry"
                    raise source.error((table, grant), reason)
                merged[grant] = (profile, source)
        for name, profile_model in model.profiles.items():
            if name in self.profiles:
                first = self.profiles[name][1].path
                reason = f"profile {name!r} is already defined in {first}; rename one, or merge them in one file"
                raise source.error(("profiles", name), reason)
            self.profiles[name] = (profile_model, source)
        for table, merged_budgets in self.budget_tables.items():
            for owner, budgets in getattr(model.budgets or BudgetTables(), table).items():
                if owner in merged_budgets:
                    first = merged_budgets[owner][1].path
                    reason = f"the budgets of {table[:-1]} {owner!r} are already set in {first}; keep them in one file"
                    raise source.error(("budgets", table, owner), reason)
                merged_budgets[owner] = (budgets, source)
        for table in SETTINGS_TABLES:
            settings = getattr(model, table)
            if settings is not None:
                if table in self.settings:
                    first = self.settings[table][1].path
                    raise source.error((table,), f"[{table}] is already set in {first}; keep it in one file")
                self.settings[table] = (settings, source)

    def budgets(self, table: str) -> MappingProxyType[str, tuple[CompiledBudget, ...]]:
        owner = "principal" if table == "principals" else "group"
        entries = self.budget_tables[table].items()
        return MappingProxyType({name: compile_budgets(owner, name, budgets) for name, (budgets, _) in entries})

    def setting(self, table: str, default: type[Any]) -> Any:
        return self.settings[table][0] if table in self.settings else default()

    def check(self) -> None:
        for table in ("principals", "scopes", "groups"):
            for entry, (profile, source) in getattr(self, table).items():
                if profile not in self.profiles:
                    raise source.error((table, entry), self._unknown_profile(profile))
        for name, (profile, source) in self.profiles.items():
            for index, parent in enumerate(profile.extends):
                if parent not in self.profiles:
                    raise source.error(("profiles", name, "extends", index), self._unknown_profile(parent))
        self._check_cycles()
        self._check_rule_ids()

    def _unknown_profile(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self.profiles), n=1)
        if close:
            return f"unknown profile {name!r}; did you mean {close[0]!r}?"
        known = ", ".join(sorted(self.profiles)) or "none yet"
        return f"unknown profile {name!r}; define [profiles.{name}] or use a defined one ({known})"

    def _check_cycles(self) -> None:
        done: set[str] = set()

        def visit(name: str, path: list[str]) -> None:
            if name in path:
                cycle = [*path[path.index(name) :], name]
                source = self.profiles[cycle[0]][1]
                reason = f"extends cycle: {' -> '.join(cycle)}; remove one of these extends"
                raise source.error(("profiles", cycle[0], "extends"), reason)
            if name not in done:
                for parent in self.profiles[name][0].extends:
                    visit(parent, [*path, name])
                done.add(name)

        for name in self.profiles:
            visit(name, [])

    def _check_rule_ids(self) -> None:
        seen: dict[str, str] = {}
        for name, (profile, source) in self.profiles.items():
            for index, rule in enumerate(profile.rules):
                rid = rule_id(name, index, rule)
                if rid in seen:
                    loc: Loc = ("profiles", name, "rules", index, *(("id",) if rule.id is not None else ()))
                    reason = f"rule id {rid!r} is already used in {seen[rid]}; give this rule another id"
                    raise source.error(loc, reason)
                seen[rid] = f"profile {name!r} ({source.path})"
            for index, guard in enumerate(profile.guards):
                gid = guard_id(name, index, guard)
                if gid in seen:
                    loc = ("profiles", name, "guards", index, *(("id",) if guard.id is not None else ()))
                    reason = f"id {gid!r} is already used in {seen[gid]}; give this guard another id"
                    raise source.error(loc, reason)
                seen[gid] = f"profile {name!r} ({source.path})"
