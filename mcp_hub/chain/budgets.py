"""Budgets of calls and cost, counted: how much of each budget (policy/budgets.py) a principal has used.

The counts are `limits`' counters (the library the rate limits use; `incr` is one Lua script in Redis,
INCRBY, and EXPIRE on a new key): in memory, or with `[cluster]` in Redis on the cluster's connection
pool, one count per budget, period and principal (`LIMITS:mcp-hub:budget:OWNER:NAME:MEASURE:PER:PERIOD:WHO`,
expiring after its period), so every replica counts against one budget.

A call is charged before it is sent: each budget that applies goes up by what the call counts (1 for a
calls budget, the call's cost for a cost budget). If one goes over, everything charged for the call is
given back and the call is refused: a refused call costs nothing, and since a count only passes the
budget for a call that is then refused, the calls allowed in a period never add up to more than the
budget, however many replicas share it. Two calls racing for the last of a budget may both be refused
when one would have fitted (each saw the other's charge); never both allowed.

While Redis is down each replica counts in its own memory (as for rate limits, a budget per replica until
Redis answers again); what it counted meanwhile is dropped when Redis is back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from limits.aio.storage import Storage
from limits.storage import storage_from_string

from mcp_hub.cluster import Cluster, limits_uri
from mcp_hub.cluster import errors as cluster_errors
from mcp_hub.errors import OverBudget
from mcp_hub.policy.budgets import CompiledBudget, Per, Usage

_GRACE = 60
"""Seconds a count outlives its period (a replica whose clock is behind may still add to it)."""

GIVE_BACK_TIMEOUT = 2.0
"""Seconds giving back a charge may take (Redis answers each command within `cluster.TIMEOUT`, or is down)."""


@dataclass(slots=True)
class Charge:
    """What one call was charged: the counts it raised (to give back), or the budget it would exceed."""

    storage: Storage | None = None
    counted: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    over: OverBudget | None = None


class BudgetCounter:
    """Counts calls and cost against budgets, in memory or (with a `cluster`) in its Redis."""

    def __init__(self, cluster: Cluster | None = None, clock: Callable[[], float] = time.time) -> None:
        self._cluster = cluster
        self._clock = clock  # the wall clock: periods are calendar ones, the same instant on every replica
        self._local = _storage("async+memory://")
        self._shared: Storage | None = None
        if cluster is not None:
            pool = cluster.client.connection_pool
            self._shared = _storage(limits_uri(cluster.url), implementation="redispy", connection_pool=pool)
            cluster.on_recovered.append(self._recovered)

    async def charge(self, budgets: Sequence[CompiledBudget], principal: str, cost: int) -> Charge:
        """Count one call costing `cost` against `budgets`; `Charge.over` says which one it would exceed (then
        nothing stays counted)."""
        now = datetime.fromtimestamp(self._clock(), UTC)
        if self._shared is not None and self._cluster is not None and self._cluster.up:
            try:
                return await self._charge(self._shared, budgets, principal, cost, now)
            except cluster_errors() as exc:
                self._cluster.failed(exc)
        return await self._charge(self._local, budgets, principal, cost, now)

    async def give_back(self, charge: Charge) -> None:
        """Undo `charge` (the call was not sent after all: refused, declined, answered from the cache); done even
        while the caller is being cancelled, within `GIVE_BACK_TIMEOUT`."""
        if charge.storage is None or not charge.counted:
            return
        counted, charge.counted = charge.counted, []
        with anyio.CancelScope(shield=True), anyio.move_on_after(GIVE_BACK_TIMEOUT):
            try:
                for key, amount in counted:
                    await charge.storage.incr(key, _GRACE, amount=-amount)
            except cluster_errors() as exc:
                if self._cluster is not None:
                    self._cluster.failed(exc)

    async def usage(self, budgets: Sequence[CompiledBudget], principal: str) -> list[Usage]:
        """What `principal` has used of each budget in its current period."""
        now = datetime.fromtimestamp(self._clock(), UTC)
        storage = self._local
        if self._shared is not None and self._cluster is not None and self._cluster.up:
            storage = self._shared
        found: list[Usage] = []
        for budget in budgets:
            label, renews = period(budget.per, now)
            try:
                used = await storage.get(budget.counter(principal, label))
            except cluster_errors() as exc:
                if self._cluster is not None:
                    self._cluster.failed(exc)
                storage = self._local
                used = await storage.get(budget.counter(principal, label))
            found.append(Usage(budget, max(used, 0), renews_text(renews, now)))
        return found

    async def _charge(
        self, storage: Storage, budgets: Sequence[CompiledBudget], principal: str, cost: int, now: datetime
    ) -> Charge:
        charge = Charge(storage)
        for budget in budgets:
            amount = 1 if budget.measure == "calls" else cost
            if amount == 0:
                continue
            label, renews = period(budget.per, now)
            key = budget.counter(principal, label)
            expiry = math.ceil((renews - now).total_seconds()) + _GRACE
            try:
                total = await storage.incr(key, expiry, amount=amount)
            except BaseException:
                await self.give_back(charge)
                raise
            charge.counted.append((key, amount))
            if total > budget.amount:
                await self.give_back(charge)
                charge.over = over_budget(budget, total - amount, amount, renews, now)
                return charge
        return charge

    async def _recovered(self) -> None:
        """Redis is back: what was counted here meanwhile is dropped."""
        self._local = _storage("async+memory://")


def over_budget(budget: CompiledBudget, used: int, amount: int, renews: datetime, now: datetime) -> OverBudget:
    """The refusal of a call that would take `budget` past its amount, `used` already counted."""
    counts = "" if budget.measure == "calls" else f" and this call costs {amount}"
    message = (
        f"Budget {budget.id} is used up: {budget.describe()}, {min(used, budget.amount)} used{counts}; "
        f"it renews at {renews_text(renews, now)}"
    )
    renews_at = renews.strftime("%Y-%m-%dT%H:%M:%SZ")
    return OverBudget(message, budget.id, renews_at, (renews - now).total_seconds())


def _storage(uri: str, **options: Any) -> Storage:
    backend = storage_from_string(uri, **options)
    if not isinstance(backend, Storage):
        raise ValueError(f"budget storage {uri!r} is not an async storage; use an async+ URI")
    return backend


def period(per: Per, now: datetime) -> tuple[str, datetime]:
    """The label of the UTC period `now` falls in ("2026-12-05T10", "2026-12-05", "2026-12"), and when the next
    one starts (when a budget per `per` renews)."""
    now = now.astimezone(UTC)
    if per == "hour":
        start = now.replace(minute=0, second=0, microsecond=0)
        return start.strftime("%Y-%m-%dT%H"), start + timedelta(hours=1)
    if per == "day":
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return start.strftime("%Y-%m-%d"), start + timedelta(days=1)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start.strftime("%Y-%m"), (start + timedelta(days=32)).replace(day=1)


def renews_text(renews: datetime, now: datetime) -> str:
    """ "2026-12-06 00:00 UTC (in 3 h 12 min)"."""
    left = max(int((renews - now).total_seconds()), 0)
    days, rest = divmod(left, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{days} d" if days else "", f"{hours} h" if hours else "", f"{minutes} min" if minutes else ""]
    within = " ".join(part for part in parts if part) or f"{seconds} s"
    return f"{renews.astimezone(UTC):%Y-%m-%d %H:%M} UTC (in {within})"
