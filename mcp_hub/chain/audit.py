"""The audit link: one decision event per call, whatever became of it.

Outermost in the chain, so it sees every outcome: the policy's verdict (allowed,
denied, refused, rate_limited, over_budget, confirmed, declined), a server that failed
(upstream_error) or answered with an error (error), a call that ended before it
finished (cancelled: its client cancelled it or went away, or the hub stopped),
with the call's latency. An exception this link does not know is an "error",
never "allowed".

The policy revision on the line, and the `[audit] mask_arguments` applied to its
arguments, are those of the policy that decided the call (carried by the
verdict), not of whichever policy is in force when the call ends: a reload
during a long confirmation does not change what the line says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
from mcp.shared.exceptions import MCPError

from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.errors import UpstreamError
from mcp_hub.observe.audit_log import AuditEvent, AuditLog
from mcp_hub.policy import PolicySet, mask_arguments
from mcp_hub.policy.principal import credential_of

errors_log = logging.getLogger("mcp_hub.audit.errors")

_DECIDED_ALLOWED = ("allowed", "confirmed")
"""Verdicts under which what became of the call (a tool error, a failure, a cancellation) is the outcome."""


class Search(Protocol):
    """One search of the tool search, as it tells of it (`mcp_hub.search.tools.Searched`)."""

    @property
    def principal(self) -> str: ...
    @property
    def session(self) -> str | None: ...
    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> Mapping[str, Any]: ...
    @property
    def found(self) -> Sequence[str]: ...
    @property
    def outcome(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def latency_ms(self) -> float: ...


class AuditTrail:
    def __init__(self, log: AuditLog, policy: Callable[[], PolicySet]) -> None:
        self._log = log
        self._policy = policy

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        started = time.monotonic()
        outcome: str | None = "error"  # None: as the verdict says; any path not named below is an error
        reason: str | None = None
        try:
            result = await call_next(ctx)
            outcome = "tool_error" if result.get("isError") is True else None
            return result
        except anyio.get_cancelled_exc_class():
            outcome, reason = "cancelled", "the call ended before it finished (cancelled, client gone, or hub stopped)"
            raise
        except UpstreamError as exc:
            outcome, reason = "upstream_error", str(exc)
            raise
        except MCPError as exc:
            outcome, reason = "error", exc.message
            raise
        except BaseException as exc:
            reason = f"unexpected {type(exc).__qualname__}"
            raise
        finally:
            # Synchronous, awaits nothing: written even while this task is being cancelled.
            try:
                self._record(ctx, outcome, reason, time.monotonic() - started)
            except Exception:  # a failure to record must not replace what the call raised or returned
                errors_log.exception("audit: could not record a decision on %s %s", ctx.method, ctx.public)

    def refused(self, ctx: CallContext, reason: str) -> None:
        """A request refused before the chain (a 2026-07-28 retry whose requestState was issued for another
        call): one line, outcome "refused", for what it asked."""
        ctx.verdict.outcome, ctx.verdict.reason = "refused", reason
        try:
            self._record(ctx, None, None, 0.0)
        except Exception:
            errors_log.exception("audit: could not record a refusal of %s %s", ctx.method, ctx.public)

    def searched(self, search: Search) -> None:
        """A search of the tool search (search/tools.py): one line, method "tools/call", the search tool's name,
        its arguments (the query, masked as the policy's `[audit] mask_arguments` says), outcome "searched" (or
        "error" for arguments the search tool refuses), and the names found as `results`."""
        policy = self._policy()
        try:
            self._log.record(
                AuditEvent(
                    time=AuditLog.now(),
                    decision_id=AuditLog.new_decision_id(),
                    principal=search.principal,
                    session=search.session,
                    method="tools/call",
                    mount=None,
                    name=search.tool,
                    via=None,
                    arguments=mask_arguments(search.arguments, policy.audit.mask_arguments),
                    outcome=search.outcome,
                    rule=None,
                    reason=search.reason,
                    latency_ms=search.latency_ms,
                    policy_revision=policy.revision,
                    **credential_of(search.principal),
                    results=list(search.found),
                )
            )
        except Exception:  # a failure to record must not fail the search
            errors_log.exception("audit: could not record a search by %s", search.principal)

    def _record(self, ctx: CallContext, outcome: str | None, reason: str | None, elapsed: float) -> None:
        verdict = ctx.verdict
        if verdict.revision is not None and verdict.mask is not None:
            revision, mask = verdict.revision, verdict.mask
        else:  # no policy link decided: no policy configured (or the call ended before it was decided)
            policy = self._policy()
            revision, mask = policy.revision, policy.audit.mask_arguments
        shown = verdict.arguments if verdict.arguments is not None else ctx.arguments  # as a guard redacted them
        if verdict.target is not None and reason:  # a server's error may quote the URI a guard found something in
            reason = reason.replace(ctx.native, verdict.target[0])
        arguments = mask_arguments(shown, mask) if ctx.kind != "resource" else None
        decided = verdict.outcome not in _DECIDED_ALLOWED
        self._log.record(
            call_event(
                ctx,
                arguments=arguments,
                outcome=verdict.outcome if decided or outcome is None else outcome,
                rule=verdict.rule,
                reason=verdict.reason if decided or reason is None else reason,
                latency_ms=round(elapsed * 1000, 3),
                policy_revision=revision,
                cost=verdict.cost,
                cut=verdict.cut,
            )
        )


def call_event(ctx: CallContext, **fields: Any) -> AuditEvent:
    """An audit line about the call `ctx`: when, who, which session, what and where, by which name; `fields`
    say the rest (arguments, outcome, rule, reason, latency, policy revision). A resource URI in which a guard
    found something is shown redacted (`Verdict.target`)."""
    target = ctx.verdict.target
    return AuditEvent(
        time=AuditLog.now(),
        decision_id=AuditLog.new_decision_id(),
        principal=ctx.principal,
        session=ctx.session,
        method=ctx.method,
        mount=ctx.mount,
        name=ctx.native if target is None else target[0],
        via=ctx.via,
        **credential_of(ctx.principal),
        **fields,
        client_address=ctx.address,
    )
