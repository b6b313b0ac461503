"""The result budget link: a result over its token budget reaches the client cut to fit (mcp_hub/results/).

It sits after the policy link and before the guardrails link: on the way back the guardrails see the
whole result (and redact or block in it) before this link cuts it and keeps the whole, so what is kept
is what the guards let through. The cache link, further in, keeps whole results too; a result answered
from the cache is cut here like a fresh one.

Which budget applies is results/budget.py's: a matching policy rule's (`Verdict.result_budget`), else
the smaller of the endpoint's (`CallContext.endpoint_budget`) and the caller's profile's, else
`[results] max_result_tokens`. `tools/call` and `resources/read` results are cut; a prompt, an
`input_required` result and a task handle pass as they are. A cut call's audit line says so
(`Verdict.cut`: the whole's tokens and bytes, the budget, the kept link).

A small result costs one JSON serialization (its size in bytes bounds its tokens); a large one is
counted, and cut, in a worker thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from mcp_hub import wire
from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.config import ResultSettings
from mcp_hub.policy import PolicySet
from mcp_hub.results import KeptResults, Tokens, result_budget, shape
from mcp_hub.results.kept import new_id
from mcp_hub.results.shaping import Reading, link

METHODS = ("tools/call", "resources/read")
INLINE = 65_536
"""Results up to this many bytes (as JSON) are counted on the event loop; larger ones in a worker thread."""


class ResultBudget:
    def __init__(
        self, settings: ResultSettings, kept: KeptResults, counter: Tokens, policy: Callable[[], PolicySet]
    ) -> None:
        self._settings = settings
        self._kept = kept
        self._counter = counter
        self._policy = policy
        self._reading = Reading(settings.read_tool, settings.ttl)
        self._threads = anyio.CapacityLimiter(2)

    def budget(self, ctx: CallContext) -> int | None:
        """The budget of the call's result in tokens (None: none)."""
        verdict = ctx.verdict
        profile = self._policy().result_budget(ctx.principal) if verdict.result_budget is None else None
        return result_budget(verdict.result_budget, ctx.endpoint_budget, profile, self._settings.max_result_tokens)

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        result = await call_next(ctx)
        if ctx.method not in METHODS or result.get("resultType", "complete") != "complete" or "task" in result:
            return result
        budget = self.budget(ctx)
        if budget is None:
            return result
        size = len(wire.dumps(result))
        if size <= budget:  # a token is at least a byte: within the budget, uncounted (the default path)
            return result
        result_id = new_id()
        cut = functools.partial(
            shape,
            result,
            ctx.method,
            budget,
            counter=self._counter,
            result_id=result_id,
            reading=self._reading,
            max_pixels=self._settings.max_image_pixels,
        )
        shaped = cut() if size <= INLINE else await anyio.to_thread.run_sync(cut, limiter=self._threads)
        if shaped is None:
            return result
        await self._kept.keep(result_id, ctx.principal, budget, shaped.parts)
        ctx.verdict.cut = {
            "tokens": shaped.tokens,
            "bytes": shaped.bytes,
            "budget": budget,
            "kept": link(result_id),
            "parts": [part.source for part in shaped.parts],
        }
        return shaped.result
