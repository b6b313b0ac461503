"""What an immutable policy found for one (who, what), kept for the next call that asks the same.

Each call asks the policy about the same item several times (is it listed, the decision, the guards of its
arguments and of its result), and most calls ask about the few items in use. A `PolicySet` never changes (a
reload makes a new one), so what it finds depends only on who asks (`seen_as`: the principal's name, and its
scopes and groups) and the arguments after it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from cachetools import LRUCache

from mcp_hub.policy.principal import seen_as

KEPT = 4096
"""How many answers a method keeps per policy, the least recently asked given up first."""

F = TypeVar("F", bound=Callable[..., Any])


def per_principal(method: F) -> F:
    """`method(self, principal, *args)` (hashable `args`, a result never changed by its callers), kept per
    `self` by who asks and `args`."""
    slot = f"_kept_{method.__name__}"

    @functools.wraps(method)
    def kept(self: Any, principal: str, *args: Hashable, **named: Any) -> Any:
        if named:  # asked by keyword: not kept (callers pass positions)
            return method(self, principal, *args, **named)
        memo: LRUCache[Hashable, Any] | None = self.__dict__.get(slot)
        if memo is None:
            # (in __dict__, as functools.cached_property does: a frozen dataclass too)
            memo = self.__dict__[slot] = LRUCache(maxsize=KEPT)
        key = (seen_as(principal), *args)
        try:
            return memo[key]
        except KeyError:
            pass
        found = memo[key] = method(self, principal, *args)
        return found

    return kept  # type: ignore[return-value]
