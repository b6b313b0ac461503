"""Policy: who may see and call what, with which arguments, how often, how much. The decision side only.

Pure: no network, no SDK, no clocks. The only I/O is reading the policy files in
`load_policies`, and resolving paths for `path_within` through the `realpath` callable that
`decide` takes (default `os.path.realpath`). The hub enforces the decisions.

```
load.py         policies/*.toml -> PolicySet (+ revision); every mistake a ConfigError
model.py        the file model (pydantic, strict, unknown keys rejected)
globs.py        selectors "MOUNTGLOB/NAMEGLOB" and mask globs, compiled once
rates.py        rate strings ("30/minute")
budgets.py      budgets of calls and cost: declared per profile, principal, group
constraints.py  argument constraints, path_within
compiled.py     profiles with `extends` flattened, rules indexed by kind
decide.py       PolicySet.decide / visible, and THE precedence (its docstring)
memo.py         what a policy found for one (who, what), kept for the next call that asks
explain.py      a decision told for a person (`explain`)
masking.py      argument values hidden for audit records
source.py       the line of a key in a TOML file, for messages
store.py        the policy in force, reloaded when its files change (the one module that runs a task)
```
"""

from __future__ import annotations

from mcp_hub.policy.constraints import Violation, path_problem
from mcp_hub.policy.decide import Decision, Outcome, PolicySet, RateLimit, Target, empty_policy
from mcp_hub.policy.explain import explain
from mcp_hub.policy.load import load_policies, parse_policies, policy_revision
from mcp_hub.policy.masking import mask_arguments
from mcp_hub.policy.model import AuditSettings, ConfirmationSettings, PinningSettings
from mcp_hub.policy.rates import parse_rate

__all__ = [
    "AuditSettings",
    "ConfirmationSettings",
    "Decision",
    "Outcome",
    "PinningSettings",
    "PolicySet",
    "RateLimit",
    "Target",
    "Violation",
    "empty_policy",
    "explain",
    "load_policies",
    "mask_arguments",
    "parse_policies",
    "parse_rate",
    "path_problem",
    "policy_revision",
]
