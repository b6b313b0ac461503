"""The audit link: one decision event per call, whatever became of it.

Outermost in the chain, so it sees every outcome: the policy's verdict (allowed,
denied, refused, rate_limited, confirmed, declined), a server that failed
(upstream_error) or answered with an error (error), with the call's latency and
the policy revision that decided it. Arguments are masked by the policy's
`[audit] mask_arguments` before they are written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mcp.shared.exceptions import MCPError

from mcp_hub.audit import AuditEvent, AuditLog
from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.errors import UpstreamError
from mcp_hub.policy import PolicySet, mask_arguments


class AuditTrail:
    def __init__(self, log: AuditLog, policy: Callable[[], PolicySet]) -> None:
        self._log = log
        self._policy = policy

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        started = time.monotonic()
        outcome: str | None = None
        reason: str | None = None
        try:
            result = await call_next(ctx)
            if result.get("isError") is True and ctx.verdict.outcome in ("allowed", "confirmed"):
                outcome, reason = "tool_error", None
            return result
        except UpstreamError as exc:
            outcome, reason = "upstream_error", str(exc)
            raise
        except MCPError as exc:
            outcome, reason = "error", exc.message
            raise
        finally:
            self._record(ctx, outcome, reason, time.monotonic() - started)

    def _record(self, ctx: CallContext, outcome: str | None, reason: str | None, elapsed: float) -> None:
        policy = self._policy()
        arguments = mask_arguments(ctx.arguments, policy.audit.mask_arguments) if ctx.kind != "resource" else None
        verdict = ctx.verdict
        decided = verdict.outcome not in ("allowed", "confirmed")
        self._log.record(
            AuditEvent(
                time=AuditLog.now(),
                decision_id=ctx.decision_id,
                principal=ctx.principal,
                session=ctx.session,
                method=ctx.method,
                mount=ctx.mount,
                name=ctx.native,
                arguments=arguments,
                outcome=verdict.outcome if decided or outcome is None else outcome,
                rule=verdict.rule,
                reason=verdict.reason if decided or reason is None else reason,
                latency_ms=round(elapsed * 1000, 3),
                policy_revision=policy.revision,
            )
        )
