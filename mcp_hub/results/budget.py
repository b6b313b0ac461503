"""Which result budget applies to a call, in one place.

1. A matching policy rule's `max_result_tokens` wins (the smallest, when several match): a rule is about
   this tool or resource, so it may give it more room than the caller has elsewhere, or less.
2. Else the smaller of the curated endpoint's (`[endpoints.NAME] max_result_tokens`) and the caller's policy
   profile's (or of a profile it extends): whichever is stricter.
3. Else the hub-wide `[results] max_result_tokens`.

0 anywhere means "no budget" there: a rule's 0 lets that tool's results through whole; an endpoint's or a
profile's 0 leaves the other one (or, if both say 0, none); the hub's 0 turns budgets off by default.
"""

from __future__ import annotations


def result_budget(rule: int | None, endpoint: int | None, profile: int | None, hub: int) -> int | None:
    """The budget in tokens, or None for none (see the module docstring)."""
    if rule is not None:
        return rule or None
    said = [budget for budget in (endpoint, profile) if budget is not None]
    if said:
        return min((budget for budget in said if budget > 0), default=None)
    return hub or None
