"""The guardrails link: what a call sends to a server, and what its result brings back to the model.

The policy's guards (policy/guards.py) decide; this link enforces them, after the policy link (a
denied call is never looked at) and around the router:

- arguments, on their way to the server: every string at any depth is scanned by the detectors of
  the guards that apply; a blocked match answers the call without sending it (a tool error naming
  the guard for tools, an invalid-params error for prompts), redacted matches are replaced by
  `[REDACTED:<kind>]` in what the server receives, flagged ones pass;
- results, on their way back: text content, structuredContent, embedded resources, `resources/read`
  contents and prompt messages, every string at any depth but base64 payloads (`data`, `blob`) and the
  protocol's own fields (`_meta`, `requestState`, `type`, `mimeType`, `uri`, `taskId`); a blocked match replaces
  the whole result (a tool error for tools, an error for prompts and resources), redacted ones are
  replaced;
- progress messages, on their way to the client while the call runs, as results are, one by one (each
  is relayed at once, nothing is held back): a match is redacted whether its guard redacts or blocks.

A value with more than `INLINE_SCAN` characters of text is scanned in a worker thread (at most
`SCAN_THREADS` at a time), so that the event loop serves other clients meanwhile; smaller ones, the
common case, are scanned inline (a thread hop would cost more than the scan).

A task's follow-up (`tasks/get`, server/tasks.py) is guarded by `guard_task`: the task's final result
as the call's result would have been (the guards in force now, for the principal and tool of the call
that created it), its `statusMessage`, a failed task's `error` and an `input_required` task's
`inputRequests` as progress messages.

Overlapping matches are one match, handled by the strongest action of the guards that detect any of its
findings (policy/guards.py). Every hit leaves one audit line per guard and detector ("redacted", "blocked" or
"flagged", the guard that handled it as the rule, the kinds and counts as the reason), never the value; the call's own audit line shows its
arguments as redacted. With no guard in the policy, a call passes straight through.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import anyio.to_thread
from mcp.shared.dispatcher import ProgressFnT

from mcp_hub.chain.audit import call_event
from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.config import HubConfig
from mcp_hub.errors import Refused
from mcp_hub.guardrails import BINARY_KEYS, Detectors, Match, Scan, scan_value, text_size
from mcp_hub.observe.audit_log import AuditLog
from mcp_hub.policy import PolicySet
from mcp_hub.policy.guards import CompiledGuard, Direction, Guarding

RESULT_SKIP = BINARY_KEYS | {"_meta", "requestState", "type", "mimeType", "uri", "taskId"}
"""Fields of a result that are the protocol's, not content for the model: changing them would break it."""

_TASK_ASIDES = (("statusMessage", "status message"), ("error", "task's error"), ("inputRequests", "input requests"))
"""What a `tasks/get` answer brings the client besides the result: guarded as messages (see `_guard_message`). A
failed task's `error` (its message and data) and an `input_required` task's questions (an elicitation's message
and schema, a sampling request's messages) reach the person or the model as a result would."""

INLINE_SCAN = 32 * 1024
"""Text (in characters) up to which a value is scanned in the event loop: about 10 ms of the detectors' time."""
SCAN_THREADS = 2
"""How many large values are scanned at once (in worker threads); more wait their turn."""

_SECRET_NAMES = ("password", "passwd", "secret", "token", "authorization", "cookie", "key", "credential")


def configured_secrets(config: HubConfig) -> list[str]:
    """The hub's own secret values, for the "secrets" detector: the API keys of `[auth]`, and the values of
    mounts' env variables and headers, and of telemetry headers, whose names say they are secret (a name
    containing key, token, secret, password, authorization, cookie or credential). An `Authorization`
    value counts also without its scheme ("Bearer ")."""
    values = list(config.auth.api_keys.values())
    named = [config.telemetry.headers] + [s.headers for s in config.servers.values()]
    named += [s.env for s in config.servers.values()]
    for table in named:
        for name, value in table.items():
            if any(word in name.lower() for word in _SECRET_NAMES):
                values.append(value)
                scheme, _, credential = value.partition(" ")
                if credential and scheme.isalpha():
                    values.append(credential)
    return values


class Guardrails:
    def __init__(self, policy: Callable[[], PolicySet], detectors: Detectors, audit: AuditLog) -> None:
        self._policy = policy
        self._detectors = detectors
        self._audit = audit
        self._threads = anyio.CapacityLimiter(SCAN_THREADS)

    def know_secrets(self, values: Iterable[str]) -> None:
        """Look for these secret values too, from now on (a configuration reload added or changed a mount)."""
        self._detectors = self._detectors.knowing(values)

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        policy = self._policy()
        if not policy.has_guards:
            return await call_next(ctx)
        if ctx.kind != "resource" and ctx.arguments:
            guarding = policy.guarding(ctx.principal, ctx.kind, ctx.mount, ctx.native, "arguments")
            if guarding:
                sent = dict(ctx.arguments)
                arguments, scan = await self._scan(guarding, sent, ())
                if scan.hits:
                    ctx.verdict.arguments = (await self._scan(guarding, sent, (), everything=True))[0]
                    self._record(ctx, guarding, scan, "arguments", policy.revision)
                    blocker = guarding.blocking(match for _, match in scan.hits)
                    if blocker is not None:
                        return self._blocked(ctx, blocker, scan, "arguments")
                    if arguments is not sent:  # something was redacted
                        ctx = dataclasses.replace(ctx, params={**ctx.params, "arguments": arguments})
        guarding = policy.guarding(ctx.principal, ctx.kind, ctx.mount, ctx.native, "results")
        if guarding and ctx.on_progress is not None:
            ctx = dataclasses.replace(ctx, on_progress=self._progress(ctx, guarding, ctx.on_progress, policy.revision))
        result = await call_next(ctx)
        if not guarding:
            return result
        return await self._guard_result(ctx, guarding, result, policy.revision)

    async def guard_task(self, ctx: CallContext, answer: dict[str, Any]) -> dict[str, Any]:
        """A `tasks/get` answer for the task that the call `ctx` created: its `result` guarded as that call's
        result, its status message, error and input requests as progress messages, by the policy in force now."""
        policy = self._policy()
        if not policy.has_guards:
            return answer
        guarding = policy.guarding(ctx.principal, ctx.kind, ctx.mount, ctx.native, "results")
        if not guarding:
            return answer
        for key, where in _TASK_ASIDES:
            value = answer.get(key)
            if value:
                answer = {**answer, key: await self._guard_message(ctx, guarding, value, policy.revision, where)}
        result = answer.get("result")
        if isinstance(result, dict):
            answer = {**answer, "result": await self._guard_result(ctx, guarding, result, policy.revision)}
        return answer

    async def _guard_result(
        self, ctx: CallContext, guarding: Guarding, result: dict[str, Any], revision: str
    ) -> dict[str, Any]:
        checked, scan = await self._scan(guarding, result, RESULT_SKIP)
        if not scan.hits:
            return result
        self._record(ctx, guarding, scan, "results", revision)
        blocker = guarding.blocking(match for _, match in scan.hits)
        if blocker is not None:
            return self._blocked(ctx, blocker, scan, "results")
        return checked

    async def _guard_message(
        self, ctx: CallContext, guarding: Guarding, message: Any, revision: str, where: str
    ) -> Any:
        """A message on its way to the client outside a result (progress, a task's status, error or questions): a
        match is redacted whether its guard redacts or blocks (such a message cannot be answered with an error)."""
        detectors, names = self._detectors, guarding.detectors
        checked, scan = scan_value(
            message,
            lambda text: detectors.find(text, names),
            lambda match: guarding.handling(match).action != "flag",
            skip=RESULT_SKIP,
        )
        if scan.hits:
            self._record(ctx, guarding, scan, where, revision)
        return checked

    def _progress(self, ctx: CallContext, guarding: Guarding, relay: ProgressFnT, revision: str) -> ProgressFnT:
        """Progress on its way to the client, its message scanned as a result is: a match is redacted whether
        its guard redacts or blocks (a notification cannot be answered with an error; the result will be)."""

        async def guarded(progress: float, total: float | None, message: str | None) -> None:
            if message:
                message = await self._guard_message(ctx, guarding, message, revision, "progress messages")
            await relay(progress, total, message)

        return guarded

    async def _scan(
        self, guarding: Guarding, value: Any, skip: Iterable[str], *, everything: bool = False
    ) -> tuple[Any, Scan]:
        """Scan `value`: inline when small, else in a worker thread (see `INLINE_SCAN`)."""
        detectors, names, skip = self._detectors, guarding.detectors, frozenset(skip)

        def redact(match: Match) -> bool:
            return everything or guarding.handling(match).action == "redact"

        scan = functools.partial(scan_value, value, lambda text: detectors.find(text, names), redact, skip=skip)
        if text_size(value, skip, INLINE_SCAN) <= INLINE_SCAN:
            return scan()
        return await anyio.to_thread.run_sync(scan, limiter=self._threads)

    def _blocked(self, ctx: CallContext, guard: CompiledGuard, scan: Scan, direction: Direction) -> dict[str, Any]:
        kinds = ", ".join(sorted(scan.kinds()))
        where = "the arguments" if direction == "arguments" else "the result"
        why = f": {guard.reason}" if guard.reason else ""
        message = f"Blocked by guard {guard.id}: {where} held {kinds}{why}"
        ctx.verdict.outcome, ctx.verdict.rule, ctx.verdict.reason = "blocked", guard.id, message
        if ctx.method == "tools/call":
            return {"content": [{"type": "text", "text": message}], "isError": True}
        raise Refused(message, guard.id)

    def _record(self, ctx: CallContext, guarding: Guarding, scan: Scan, direction: str, revision: str) -> None:
        """One audit line per guard and detector: what was found (kinds and counts), never the value. Each
        detector that found a match that overlapping ones merged has its line, under the guard that handled it."""
        found: dict[tuple[str, str], dict[str, int]] = {}
        guards: dict[str, CompiledGuard] = {}
        for _, match in scan.hits:
            guard = guarding.handling(match)
            guards[guard.id] = guard
            for detector, kind in match.found:
                kinds = found.setdefault((guard.id, detector), {})
                kinds[kind] = kinds.get(kind, 0) + 1
        for (guard_id, detector), kinds in found.items():
            action = guards[guard_id].action
            counts = ", ".join(f"{kind} x{count}" for kind, count in sorted(kinds.items()))
            self._audit.record(
                call_event(
                    ctx,
                    arguments=None,
                    outcome={"redact": "redacted", "block": "blocked", "flag": "flagged"}[action],
                    rule=guard_id,
                    reason=f"{detector} found {counts} in the {direction}",
                    latency_ms=None,
                    policy_revision=revision,
                )
            )
