"""The guardrails link: what a call sends to a server, and what its result brings back to the model.

The policy's guards (policy/guards.py) decide; this link enforces them, after the policy link (a
denied call is never looked at) and around the router. Every place a value travels is scanned once,
by the detectors of the guards that apply to the call and the direction:

- toward the server (the guards on arguments):
  - a call's arguments (a tool's, a prompt's), every string at any depth, object keys too; a blocked
    match answers the call without sending it (a tool error naming the guard for tools, an
    invalid-params error for prompts), redacted matches are replaced by `[REDACTED:<kind>]` in what the
    server receives (a redacted key by its redacted text, numbered `#2`, `#3`... where keys would
    collide), flagged ones pass;
  - a retry's answers to a 2026-07-28 server's questions (`inputResponses`), as arguments;
  - a `resources/read`'s URI (a template's expansion included), and a subscription's (`guard_uri`): a guard
    that blocks or redacts refuses the read (a redacted URI would name another resource, and a server may
    act on whatever it names); whatever was found, the audit line, the logs and the spans show the URI
    redacted (`Verdict.target`, `observe.otel.SHOWN_TARGET`);
  - the client's answers to a server's questions during the call (elicitation, sampling; questions.py):
    a blocked answer is not delivered, the server gets the guard's error;
  - `completion/complete`'s value and context arguments (`guard_completion`, which guards the values
    suggested as a result), and a `tasks/update`'s answers (`guard_task_update`): outside the chain, called
    by the endpoint and server/tasks.py;
- toward the client (the guards on results):
  - results: text content, structuredContent, embedded resources, `resources/read` contents and prompt
    messages, every string at any depth, object keys too, but base64 payloads (`data`, `blob`) and the
    protocol's own fields (`_meta`, `requestState`, `type`, `mimeType`, `uri`, `taskId`); a blocked match
    replaces the whole result (a tool error for tools, an error for prompts and resources), redacted ones
    are replaced;
  - a server's questions to the client during the call (an elicitation's message and schema, a sampling
    request's messages; questions.py): a blocked question is not asked, the server gets the guard's error;
  - progress messages, while the call runs, as results are, one by one (each is relayed at once,
    nothing is held back): a match is redacted whether its guard redacts or blocks.

A value with more than `INLINE_SCAN` characters of text is scanned in a worker thread (at most
`SCAN_THREADS` at a time), so that the event loop serves other clients meanwhile; smaller ones, the
common case, are scanned inline (a thread hop would cost more than the scan).

A task's follow-up (`tasks/get`, server/tasks.py) is guarded by `guard_task`: the task's final result
as the call's result would have been (the guards in force now, for the principal and tool of the call
that created it), its `statusMessage`, a failed task's `error` and an `input_required` task's
`inputRequests` as progress messages.

Overlapping matches are one match, handled by the strongest action of the guards that detect any of its
findings (policy/guards.py). Every hit leaves one audit line per guard and detector ("redacted", "blocked"
or "flagged", the guard that handled it as the rule, the kinds and counts and where as the reason), never
the value; the call's own audit line shows its arguments as redacted. With no guard in the policy, a call
passes straight through.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, cast

import anyio
import anyio.to_thread
from mcp.shared.dispatcher import ProgressFnT

from mcp_hub.chain.audit import call_event
from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.chain.questions import GuardedOrigin
from mcp_hub.config import HubConfig
from mcp_hub.errors import Refused
from mcp_hub.guardrails import (
    BINARY_KEYS,
    Detectors,
    Match,
    Scan,
    marker,
    merged,
    redacted,
    scan_texts,
    scan_value,
    texts_of,
)
from mcp_hub.observe.audit_log import AuditLog
from mcp_hub.observe.otel import SHOWN_TARGET
from mcp_hub.policy import PolicySet
from mcp_hub.policy.guards import STRENGTH, CompiledGuard, Guarding

RESULT_SKIP = BINARY_KEYS | {"_meta", "requestState", "type", "mimeType", "uri", "taskId"}
"""Fields of a result that are the protocol's, not content for the model: changing them would break it."""

QUESTION_SKIP = RESULT_SKIP | {"url", "elicitationId", "mode"}
"""Fields of a server's question that are the protocol's: a URL-mode elicitation's address (a sign-in page, its
state and nonce) must reach the client as it is."""
ANSWER_SKIP = RESULT_SKIP | {"action"}
"""Fields of a client's answer that are the protocol's (an elicitation's `action`, a sampled message's `type`)."""

_SENT: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("arguments", "arguments", frozenset()),
    ("inputResponses", "answers", ANSWER_SKIP),
)
"""What a call sends the server, where the audit says it was found, and the protocol's fields in it: its arguments,
and a retry's answers to a 2026-07-28 server's questions."""

_TASK_ASIDES = (("statusMessage", "status message"), ("error", "task's error"), ("inputRequests", "input requests"))
"""What a `tasks/get` answer brings the client besides the result: guarded as messages (see `_guard_message`). A
failed task's `error` (its message and data) and an `input_required` task's questions (an elicitation's message
and schema, a sampling request's messages) reach the person or the model as a result would."""

INLINE_SCAN = 32 * 1024
"""Text (in characters) up to which a value is scanned in the event loop: about 10 ms of the detectors' time."""
SCAN_THREADS = 2
"""How many large values are scanned at once (in worker threads); more wait their turn."""

_SECRET_NAMES = ("password", "passwd", "secret", "token", "authorization", "cookie", "key", "credential")

URI_CALLS = ("resources/read", "skills/get", "resources/directory/read")
"""Calls that name a resource (or a skill's, or a folder of skill files) by its URI: the URI is what they send."""


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


def hub_secrets(config: HubConfig) -> set[str]:
    """Every secret value of `config` worth masking where the hub shows text (six characters or more): those of
    `configured_secrets`, the admin console's keys, the mounts' OAuth client secrets, token keys, signing keys and
    assertions, and the hub's and the console's OpenID Connect client secrets."""
    values = [*configured_secrets(config), *config.admin.keys.values(), *config.auth.api_keys.values()]
    values += [s.auth.client_secret for s in config.servers.values() if s.auth.client_secret]
    for server in config.servers.values():
        auth = server.auth
        values += [
            value
            for value in (auth.token_key, auth.idp_client_secret, auth.id_token, auth.assertion, auth.client_key)
            if value
        ]
    if config.auth.oauth is not None and config.auth.oauth.client_secret:
        values.append(config.auth.oauth.client_secret)
    if config.admin.oidc is not None and config.admin.oidc.client_secret:
        values.append(config.admin.oidc.client_secret)
    return {value for value in values if len(value) >= 6}


_STRENGTH = {"flagged": 1, "redacted": 2, "blocked": 3}
"""Which of what guards did a call's measurement names (`Verdict.guarded`): the strongest."""


class Guardrails:
    def __init__(self, policy: Callable[[], PolicySet], detectors: Detectors, audit: AuditLog) -> None:
        self._policy = policy
        self._detectors = detectors
        self._audit = audit
        self._threads = anyio.CapacityLimiter(SCAN_THREADS)

    @property
    def detectors(self) -> Detectors:
        """The detectors the guards use now: the hub's own secret values, its phone regions."""
        return self._detectors

    def know_secrets(self, values: Iterable[str]) -> None:
        """Look for these secret values too, from now on (a configuration reload added or changed a mount)."""
        self._detectors = self._detectors.knowing(values)

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        policy = self._policy()
        if not policy.has_guards:
            return await call_next(ctx)
        revision = policy.revision
        sending = policy.guarding(ctx.principal, ctx.kind, ctx.mount, ctx.native, "arguments")
        if sending:
            if ctx.method in URI_CALLS:
                self._guard_uri(ctx, sending, revision)
            else:
                ctx, blocked = await self._guard_sent(ctx, sending, revision)
                if blocked is not None:
                    return blocked
        guarding = policy.guarding(ctx.principal, ctx.kind, ctx.mount, ctx.native, "results")
        if guarding or sending:  # the server's questions and their answers, its progress messages (one copy)
            question = functools.partial(self._guard_question, ctx, guarding, revision)
            answer = functools.partial(self._guard_answer, ctx, sending, revision)
            relay = ctx.on_progress
            if guarding and relay is not None:
                relay = self._progress(ctx, guarding, relay, revision)
            ctx = dataclasses.replace(ctx, origin=GuardedOrigin(ctx.origin, question, answer), on_progress=relay)
        shown = ctx.verdict.target
        token = SHOWN_TARGET.set((ctx.native, shown[0])) if shown is not None else None
        try:
            result = await call_next(ctx)
        finally:
            if token is not None:
                SHOWN_TARGET.reset(token)
        if not guarding:
            return result
        return await self._guard_result(ctx, guarding, result, revision)

    async def _guard_sent(
        self, ctx: CallContext, guarding: Guarding, revision: str
    ) -> tuple[CallContext, dict[str, Any] | None]:
        """What a call sends the server: its arguments, and a retry's answers to a 2026-07-28 server's questions
        (`inputResponses`). The call as it goes on (redacted), and a blocked call's tool error (None: not blocked).
        Raises `Refused` for a blocked prompt."""
        changed: dict[str, Any] = {}
        for key, where, skip in _SENT:
            value = ctx.params.get(key)
            if not value or not isinstance(value, Mapping):
                continue
            sent = dict(cast(Mapping[str, Any], value))
            checked, scan = await self._scan(guarding, sent, skip)
            if not scan.hits:
                continue
            if key == "arguments":  # as the audit line may show them: every match redacted
                flagged = any(guarding.handling(match).action != "redact" for _, match in scan.hits)
                ctx.verdict.arguments = (
                    (await self._scan(guarding, sent, skip, everything=True))[0] if flagged else checked
                )
            self._record(ctx, guarding, scan, where, revision)
            blocker = guarding.blocking(match for _, match in scan.hits)
            if blocker is not None:
                return ctx, self._blocked(ctx, blocker, scan, f"the {where}")
            if checked is not sent:  # something was redacted
                changed[key] = checked
        if changed:
            ctx = dataclasses.replace(ctx, params={**ctx.params, **changed})
        return ctx, None

    def guard_uri(self, ctx: CallContext) -> None:
        """A resource URI sent to its server outside a read (`ctx`: a `resources/subscribe`, a URI of a
        `subscriptions/listen` filter), guarded as a read's (see `_guard_uri`). Raises `Refused`."""
        policy = self._policy()
        if policy.has_guards:
            guarding = policy.guarding(ctx.principal, ctx.kind, ctx.mount, ctx.native, "arguments")
            if guarding:
                self._guard_uri(ctx, guarding, policy.revision)

    def _guard_uri(self, ctx: CallContext, guarding: Guarding, revision: str) -> None:
        """The URI a `resources/read` sends the server (a template's expansion included). A URI in which a guard
        that blocks or redacts finds something is refused: a redacted URI would name another resource (or none),
        not the one asked for less a secret. Whatever a guard found, the audit line, the logs and the spans show
        the URI redacted (`Verdict.target`). Raises `Refused`."""
        uri = ctx.native
        matches = merged(self._detectors.find(uri, guarding.detectors))
        if not matches:
            return
        public = ctx.public
        for match in matches:  # the public URI holds the server's, after the mount's prefix
            public = public.replace(uri[match.start : match.end], marker(match.kind))
        ctx.verdict.target = (redacted(uri, matches), public)
        scan = Scan([((), match) for match in matches])
        self._record(ctx, guarding, scan, "resource URI", revision, refused=True)
        refuser = max((guarding.handling(match) for match in matches), key=lambda guard: STRENGTH[guard.action])
        if refuser.action != "flag":
            note = "" if refuser.action == "block" else " (a URI is not redacted: it would name another resource)"
            self._blocked(ctx, refuser, scan, "the resource URI", note)

    async def _guard_question(
        self, ctx: CallContext, guarding: Guarding, revision: str, method: str, params: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """A server's question to the client of the call (an elicitation's message and schema, a sampling request's
        messages), on its way to the person or the model: guarded as a result. Raises `Refused` when blocked."""
        if not guarding:
            return params
        return await self._guard_value(ctx, guarding, revision, params, QUESTION_SKIP, f"{method} question")

    async def _guard_answer(
        self, ctx: CallContext, guarding: Guarding, revision: str, method: str, answer: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """The client's answer to a server's question (an elicitation's content, a sampled message), on its way to
        the server: guarded as arguments. Raises `Refused` when blocked."""
        if not guarding:
            return answer
        return await self._guard_value(ctx, guarding, revision, answer, ANSWER_SKIP, f"answer to {method}")

    async def _guard_value(
        self, ctx: CallContext, guarding: Guarding, revision: str, value: Any, skip: Iterable[str], where: str
    ) -> Any:
        """`value` as it may go on (what the guards redact, redacted), found in `where` (for the audit and the
        error). Raises `Refused` when a guard blocks it (what is not a call's result cannot become a tool error)."""
        checked, scan = await self._scan(guarding, value, skip)
        if not scan.hits:
            return value
        self._record(ctx, guarding, scan, where, revision)
        blocker = guarding.blocking(match for _, match in scan.hits)
        if blocker is not None:
            raise self._refusal(blocker, scan, f"the {where}")
        return checked

    async def guard_completion(
        self, ctx: CallContext, send: Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """`send` a `completion/complete` request (`ctx`, for the prompt or resource template it completes): the
        value of the argument being completed and the context's arguments, on their way to the server, guarded as
        a call's arguments; the values the server suggests, on their way back, as a result. Its answer. Raises
        `Refused` when either is blocked."""
        policy = self._policy()
        if not policy.has_guards:
            return await send(ctx.params)
        sending = policy.guarding(ctx.principal, ctx.kind, ctx.mount, ctx.native, "arguments")
        params = await self._completing(ctx, sending, policy.revision) if sending else ctx.params
        result = await send(params)
        guarding = policy.guarding(ctx.principal, ctx.kind, ctx.mount, ctx.native, "results")
        return await self._guard_result(ctx, guarding, result, policy.revision) if guarding else result

    async def _completing(self, ctx: CallContext, guarding: Guarding, revision: str) -> Mapping[str, Any]:
        """A `completion/complete`'s params as they go on (see `guard_completion`). Raises `Refused`."""
        argument, context = ctx.params.get("argument"), ctx.params.get("context")
        sent: dict[str, Any] = {}
        if isinstance(argument, Mapping) and "value" in argument:
            sent["value"] = cast(Mapping[str, Any], argument)["value"]
        if isinstance(context, Mapping) and "arguments" in context:
            sent["arguments"] = cast(Mapping[str, Any], context)["arguments"]
        checked = await self._guard_value(ctx, guarding, revision, sent, (), "arguments") if sent else sent
        if checked is sent:
            return ctx.params
        params = dict(ctx.params)
        if "value" in sent:
            params["argument"] = {**cast(Mapping[str, Any], argument), "value": checked["value"]}
        if "arguments" in sent:
            params["context"] = {**cast(Mapping[str, Any], context), "arguments": checked["arguments"]}
        return params

    async def guard_task_update(self, ctx: CallContext, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """A `tasks/update` for the task that the call `ctx` created: its answers to the task's questions
        (`inputResponses`), on their way to the server, as that call's arguments (the guards in force now). Its
        params as they go on (redacted). Raises `Refused` when blocked."""
        policy = self._policy()
        responses = params.get("inputResponses")
        if not policy.has_guards or not responses or not isinstance(responses, Mapping):
            return params
        guarding = policy.guarding(ctx.principal, ctx.kind, ctx.mount, ctx.native, "arguments")
        if not guarding:
            return params
        checked = await self._guard_value(ctx, guarding, policy.revision, responses, ANSWER_SKIP, "answers")
        return params if checked is responses else {**params, "inputResponses": checked}

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
            return self._blocked(ctx, blocker, scan, "the result")
        return checked

    async def _guard_message(
        self, ctx: CallContext, guarding: Guarding, message: Any, revision: str, where: str
    ) -> Any:
        """A message on its way to the client outside a result (progress, a task's status, error or questions): a
        match is redacted whether its guard redacts or blocks (such a message cannot be answered with an error)."""
        detectors, names = self._detectors, guarding.detectors
        checked, scan = scan_value(
            message,
            detectors.finder(names),
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

        find = detectors.finder(names)
        texts = texts_of(value, skip, INLINE_SCAN)  # one walk: the size, and the texts to scan inline
        if texts is not None:
            return scan_texts(value, texts, find, redact, skip=skip)
        scan = functools.partial(scan_value, value, find, redact, skip=skip)
        return await anyio.to_thread.run_sync(scan, limiter=self._threads)

    def _blocked(
        self, ctx: CallContext, guard: CompiledGuard, scan: Scan, where: str, note: str = ""
    ) -> dict[str, Any]:
        """The call blocked by `guard`, for what it found in `where`: a tool error for a tool; raises `Refused`
        for the rest."""
        refusal = self._refusal(guard, scan, where, note)
        ctx.verdict.outcome, ctx.verdict.rule, ctx.verdict.reason = "blocked", guard.id, refusal.reason
        if ctx.method == "tools/call":
            return {"content": [{"type": "text", "text": refusal.reason}], "isError": True}
        raise refusal

    def _refusal(self, guard: CompiledGuard, scan: Scan, where: str, note: str = "") -> Refused:
        kinds = ", ".join(sorted(scan.kinds()))
        why = f": {guard.reason}" if guard.reason else ""
        return Refused(f"Blocked by guard {guard.id}: {where} held {kinds}{note}{why}", guard.id)

    def _record(
        self, ctx: CallContext, guarding: Guarding, scan: Scan, where: str, revision: str, *, refused: bool = False
    ) -> None:
        """One audit line per guard and detector: what was found (kinds and counts) and `where`, never the value.
        `refused`: what a redacting guard found cannot be redacted, and is refused ("blocked"). Each detector
        that found a match that overlapping ones merged has its line, under the guard that handled it."""
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
            if refused and action == "redact":
                action = "block"
            counts = ", ".join(f"{kind} x{count}" for kind, count in sorted(kinds.items()))
            done = {"redact": "redacted", "block": "blocked", "flag": "flagged"}[action]
            if _STRENGTH[done] > _STRENGTH.get(ctx.verdict.guarded or "", 0):
                ctx.verdict.guarded = done
            self._audit.record(
                call_event(
                    ctx,
                    arguments=None,
                    outcome=done,
                    rule=guard_id,
                    reason=f"{detector} found {counts} in the {where}",
                    latency_ms=None,
                    policy_revision=revision,
                )
            )
