"""The policy link: every call is decided before it reaches a server.

The decision is the policy's (`PolicySet.decide`, pure); this link enforces it:

- DENIED: answered exactly like a name that does not exist (hidden, no existence leak);
- REFUSED (an argument constraint): a tool error naming the rule, for tools; an
  invalid-params error otherwise;
- rate limits of the matching rules: counted per rule (and per principal, unless
  the rule says "shared"), over the limit answered with when to retry;
- budgets of calls and cost (tools only; budgets.py): charged after the rate limits
  and before a person is asked, so nobody is asked about a call its budget would
  refuse; over a budget answered with the budget and when it renews. What a call was
  charged is given back if it is not sent after all (a person said no, the cache
  answered it);
- CONFIRM: a person is asked through the client (elicitation) and the call
  proceeds only on an explicit yes; no, cancel, silence past the timeout, or a
  client that cannot ask (unless the policy allows that) refuse it. The question
  quotes the names and arguments with the characters that would deceive a person
  (bidi overrides, invisible and control characters) escaped (see shown.py).

Refusals of tool calls are tool errors so the model reads why; the same
refusal elsewhere is a JSON-RPC error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from limits import RateLimitItem, parse
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string

from mcp_hub.chain.budgets import BudgetCounter, Charge
from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.cluster import Cluster, limits_uri
from mcp_hub.cluster import errors as cluster_errors
from mcp_hub.errors import OverBudget, RateLimited, Refused, UnknownName
from mcp_hub.policy import Decision, Outcome, PolicySet, RateLimit, Target, mask_arguments
from mcp_hub.shown import shown, shown_json
from mcp_hub.upstream import ClientCannotAnswer

_CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Allow this call?"}},
    "required": ["confirm"],
}


class RateLimiter:
    """Counts calls against the policy's rate limits (and the admin console its login attempts, against its
    own: admin/throttle.py) with `limits`' moving windows, in memory; with a `cluster`,
    in its Redis (`limits`' async Redis storage), one budget for every replica, and in memory while Redis
    is down (a budget per replica: the limits loosen to N times, for N replicas, until Redis is back)."""

    def __init__(self, cluster: Cluster | None = None) -> None:
        self._cluster = cluster
        self._local = _limiter("async+memory://")
        self._shared = None
        if cluster is not None:
            pool = cluster.client.connection_pool
            self._shared = _limiter(limits_uri(cluster.url), implementation="redispy", connection_pool=pool)
            cluster.on_recovered.append(self._recovered)
        self._items: dict[str, RateLimitItem] = {}

    async def over(self, limit: RateLimit, principal: str) -> float | None:
        """Count one call; None when within the limit, else the seconds until a call may succeed."""
        return await self.hit(limit.rate, *((limit.rule, principal) if limit.scope == "principal" else (limit.rule,)))

    async def hit(self, rate: str, *keys: str) -> float | None:
        """Count one hit against `rate` ("5/minute", as `limits` writes rates) for what `keys` name; None when
        within it, else the seconds until a hit may succeed."""
        item = self._items.get(rate)
        if item is None:
            item = self._items[rate] = parse(rate)
        if self._shared is not None and self._cluster is not None and self._cluster.up:
            try:
                return await _over(self._shared, item, keys)
            except cluster_errors() as exc:
                self._cluster.failed(exc)
        return await _over(self._local, item, keys)

    async def _recovered(self) -> None:
        """Redis is back: what was counted here meanwhile is dropped."""
        self._local = _limiter("async+memory://")


def _limiter(uri: str, **options: Any) -> MovingWindowRateLimiter:
    backend = storage_from_string(uri, **options)
    if not isinstance(backend, Storage):
        raise ValueError(f"rate limit storage {uri!r} is not an async storage; use an async+ URI")
    return MovingWindowRateLimiter(backend)


async def _over(limiter: MovingWindowRateLimiter, item: RateLimitItem, keys: tuple[str, ...]) -> float | None:
    if await limiter.hit(item, *keys):
        return None
    stats = await limiter.get_window_stats(item, *keys)
    return max(stats.reset_time - _now(), 0.0)


def _now() -> float:
    return time.time()  # `limits` keeps windows on the wall clock, which Redis-shared replicas agree on


class PolicyGuard:
    def __init__(
        self, policy: Callable[[], PolicySet], limiter: RateLimiter, budgets: BudgetCounter | None = None
    ) -> None:
        self._policy = policy
        self._limiter = limiter
        self._budgets = budgets if budgets is not None else BudgetCounter()

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        policy = self._policy()
        arguments = ctx.arguments if ctx.kind != "resource" else None
        decision = policy.decide(ctx.principal, Target(ctx.kind, ctx.mount, ctx.native, arguments))
        ctx.verdict.rule, ctx.verdict.reason = decision.rule, decision.reason
        ctx.verdict.revision, ctx.verdict.mask = decision.revision, policy.audit.mask_arguments  # for the audit line
        ctx.verdict.cache, ctx.verdict.asked = decision.cache, decision.outcome == Outcome.CONFIRM  # for the cache
        charge: Charge | None = None
        ctx.verdict.result_budget = decision.max_result_tokens  # for the result budget (chain/results.py)
        try:
            if decision.outcome == Outcome.DENIED:
                ctx.verdict.outcome = "denied"
                raise UnknownName(ctx.kind, ctx.public)
            if decision.outcome == Outcome.REFUSED:
                ctx.verdict.outcome = "refused"
                raise Refused(f"Refused by policy rule {decision.rule}: {decision.reason}", decision.rule)
            for limit in decision.rate_limits:
                retry_after = await self._limiter.over(limit, ctx.principal)
                if retry_after is not None:
                    ctx.verdict.outcome, ctx.verdict.rule = "rate_limited", limit.rule
                    raise RateLimited(limit.rule, limit.rate, retry_after)
            if decision.budgets:
                charge = await self._budgets.charge(decision.budgets, ctx.principal, decision.cost)
                if charge.over is not None:
                    ctx.verdict.outcome, ctx.verdict.rule = "over_budget", charge.over.budget
                    ctx.verdict.reason = str(charge.over)
                    raise charge.over
            if decision.outcome == Outcome.CONFIRM:
                try:
                    await self._confirm(ctx, decision, policy)
                except BaseException:
                    await self._give_back(charge)
                    raise
        except (Refused, RateLimited, OverBudget) as refusal:
            if ctx.method == "tools/call":
                return _tool_error(str(refusal))
            raise
        if ctx.method == "tools/call":
            ctx.verdict.cost = decision.cost  # for the audit line
        result = await call_next(ctx)
        if ctx.verdict.outcome == "cached":  # not sent: it costs nothing
            ctx.verdict.cost = None
            await self._give_back(charge)
        return result

    async def _give_back(self, charge: Charge | None) -> None:
        if charge is not None:
            await self._budgets.give_back(charge)

    async def _confirm(self, ctx: CallContext, decision: Decision, policy: PolicySet) -> None:
        settings = policy.confirmation
        arguments = mask_arguments(ctx.arguments, policy.audit.mask_arguments)
        message = (
            f"Allow {ctx.kind} '{shown(ctx.public)}' on server '{shown(ctx.mount)}'"
            + (f" with arguments {shown_json(arguments)}" if arguments else "")
            + f"? (policy rule {decision.rule}{': ' + decision.reason if decision.reason else ''})"
        )
        params = {"message": message, "requestedSchema": _CONFIRM_SCHEMA}
        try:
            with anyio.fail_after(settings.timeout):
                answer = await ctx.origin.ask("elicitation/create", params)
        except TimeoutError:
            ctx.verdict.outcome = "declined"
            raise Refused(f"No confirmation within {settings.timeout:g}s (policy rule {decision.rule})", None) from None
        except ClientCannotAnswer as exc:
            if settings.when_unsupported == "allow":
                ctx.verdict.outcome, ctx.verdict.reason = "allowed", f"unconfirmed: {exc.message}"
                return
            ctx.verdict.outcome = "declined"
            raise Refused(
                f"This call needs a person's confirmation (policy rule {decision.rule}), and the client "
                f"cannot ask for it: {exc.message}",
                decision.rule,
            ) from None
        content = answer.get("content")
        if answer.get("action") == "accept" and isinstance(content, dict) and content.get("confirm") is True:
            ctx.verdict.outcome = "confirmed"
            return
        ctx.verdict.outcome = "declined"
        action = shown(str(answer.get("action", "no answer")))
        raise Refused(f"Not confirmed ({action}; policy rule {decision.rule})", None)


def _tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}
