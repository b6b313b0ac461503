"""What one client request leaves behind: a span, a measurement, an access line.

`RequestObserver` is the outermost middleware of the hub's MCP server and of its
call lane (server/lane.py), so it sees every client request, lists and calls
alike, from receipt to answer, as one span. `CallRecorder`
is the chain link that tells it what the chain knows and the server does not: the
mount, the server's own name, and the policy's verdict (and a resource URI as a guard
redacted it: a span is given its resource URI when the request ends, as the guards left it, and so is the
access line). Neither is installed when
telemetry is off and the access log is disabled.

Outcomes: `ok`; `tool_error` (a tool answered `isError`); the policy's verdict when
it stopped the call (`denied`, `refused`, `rate_limited`, `over_budget`, `declined`); `error` (a
JSON-RPC error, its code in `error.type`); `cancelled`. The measurement of a request also names its
principal (`mcp_hub.principal`), the policy's verdict when it was not a plain allow (`mcp_hub.decision`:
confirmed, declined, cached, denied...) and what the guardrails did to it (`mcp_hub.guard`: blocked,
redacted, flagged), so the console's dashboard (admin/dashboard.py) can show who called what and what was
stopped.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import INVALID_PARAMS
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.observe.otel import CURRENT, Failure, Telemetry, span_name, target_of

access_log = logging.getLogger("mcp_hub.access")
"""One line per client request, at info: method, name, mount, principal, outcome, duration."""

_STOPPED_BY_POLICY = frozenset({"denied", "refused", "rate_limited", "over_budget", "declined"})


@dataclass(slots=True)
class _Request:
    """One client request while it is served; the chain link fills in `call`."""

    call: CallContext | None = None


_REQUEST: ContextVar[_Request | None] = ContextVar("mcp_hub.request", default=None)


class CallRecorder:
    """The chain link: hand the call's context to the request it belongs to."""

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        request = _REQUEST.get()
        if request is not None:
            request.call = ctx
        return await call_next(ctx)


class RequestObserver:
    """Server middleware: a span, a measurement and an access line per client request.

    `principal` and `session` tell who sent a request (see server/origin.py).
    """

    def __init__(
        self,
        telemetry: Telemetry,
        *,
        access: bool,
        principal: Callable[[ServerRequestContext[Any, Any]], str],
        session: Callable[[ServerRequestContext[Any, Any]], str | None],
    ) -> None:
        self._telemetry = telemetry if telemetry.enabled else None
        self._access = access
        self._principal = principal
        self._session = session

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:  # a notification
            return await call_next(ctx)
        telemetry = self._telemetry
        request = _Request()
        request_token = _REQUEST.set(request)
        telemetry_token = CURRENT.set(telemetry) if telemetry is not None and telemetry.upstream else None
        principal = self._principal(ctx)
        target = target_of(ctx.method, ctx.params)
        span = None
        context_token = None
        if telemetry is not None and telemetry.tracer is not None:
            span = telemetry.tracer.start_span(
                span_name(ctx.method, target),
                context=_parent(ctx.params),
                kind=SpanKind.SERVER,
                attributes=self._span_attributes(ctx, principal, target),
            )
            context_token = otel_context.attach(trace.set_span_in_context(span))
        started = time.perf_counter()
        failure: Failure | None = None
        try:
            result = await call_next(ctx)
            if ctx.method == "tools/call" and isinstance(result, dict) and result.get("isError") is True:
                failure = Failure("tool_error")
            return result
        except ValidationError:  # malformed params: answered as invalid params
            failure = Failure(str(INVALID_PARAMS), INVALID_PARAMS, "Invalid request parameters")
            raise
        except BaseException as exc:
            failure = Failure.of(exc)
            raise
        finally:
            elapsed = time.perf_counter() - started
            call = request.call
            outcome = _outcome(call, failure)
            shown = call.verdict.target if call is not None else None
            if shown is not None and call is not None:  # a guard found something in the URI: shown redacted
                target = (target[0], shown[1]) if target is not None else None
                failure = failure.showing((call.native, shown[0])) if failure is not None else None
            if span is not None:
                if call is not None:
                    native = call.native if shown is None else shown[0]
                    span.set_attributes({"mcp_hub.mount": call.mount, "mcp_hub.native_name": native})
                if ctx.method == "resources/read" and target is not None:  # once the guards have looked at it
                    span.set_attribute(target[0], target[1])
                span.set_attribute("mcp_hub.outcome", outcome)
                if failure is not None:
                    failure.mark(span)
                span.end()
            if context_token is not None:
                otel_context.detach(context_token)
            if telemetry is not None and telemetry.request_duration is not None:
                attributes = _metric_attributes(ctx.method, call, outcome, failure)
                attributes["mcp_hub.principal"] = principal
                telemetry.request_duration.record(elapsed, attributes)
            if telemetry_token is not None:
                CURRENT.reset(telemetry_token)
            _REQUEST.reset(request_token)
            if self._access and access_log.isEnabledFor(logging.INFO):
                _log_access(ctx.method, target, call, principal, outcome, failure, elapsed)

    def _span_attributes(
        self, ctx: ServerRequestContext[Any, Any], principal: str, target: tuple[str, str] | None
    ) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "mcp.method.name": ctx.method,
            "mcp.protocol.version": ctx.protocol_version,
            "jsonrpc.request.id": str(ctx.request_id),
            "mcp_hub.principal": principal,
        }
        session = self._session(ctx)
        if session is not None:
            attributes["mcp.session.id"] = session
        if target is not None and ctx.method != "resources/read":  # a URI is set at the end (see `__call__`)
            attributes[target[0]] = target[1]
        if ctx.method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
        return attributes


def _parent(params: Any) -> otel_context.Context | None:
    """The client's trace context from the request's `_meta` (SEP-414), if it sent a valid one."""
    meta = params.get("_meta") if params else None
    if not isinstance(meta, dict) or "traceparent" not in meta:
        return None
    parent = propagate.extract(meta)
    return parent if trace.get_current_span(parent).get_span_context().is_valid else None


def _outcome(call: CallContext | None, failure: Failure | None) -> str:
    if call is not None and call.verdict.outcome in _STOPPED_BY_POLICY:
        return call.verdict.outcome
    if failure is None:
        return "ok"
    if failure.type in ("tool_error", "cancelled"):
        return failure.type
    return "error"


def _metric_attributes(method: str, call: CallContext | None, outcome: str, failure: Failure | None) -> dict[str, Any]:
    """Names only of routed calls: a name the catalog does not know must not become a time series."""
    attributes: dict[str, Any] = {"mcp.method.name": method, "mcp_hub.outcome": outcome}
    if call is not None:
        attributes["mcp_hub.mount"] = call.mount
        if call.verdict.outcome != "allowed":  # confirmed, declined, cached, denied...
            attributes["mcp_hub.decision"] = call.verdict.outcome
        if call.verdict.guarded is not None:
            attributes["mcp_hub.guard"] = call.verdict.guarded
        if call.kind == "tool":
            attributes["gen_ai.tool.name"] = call.public
        elif call.kind == "prompt":
            attributes["gen_ai.prompt.name"] = call.public
    if failure is not None:
        attributes["error.type"] = failure.type
    return attributes


def _log_access(
    method: str,
    target: tuple[str, str] | None,
    call: CallContext | None,
    principal: str,
    outcome: str,
    failure: Failure | None,
    elapsed: float,
) -> None:
    fields: dict[str, Any] = {"method": method}
    if target is not None:
        fields["name"] = target[1]
    if call is not None:
        fields["mount"] = call.mount
    fields["principal"] = principal
    fields["outcome"] = outcome
    if failure is not None and outcome == "error":
        fields["error"] = failure.type
    fields["duration_ms"] = round(elapsed * 1000, 3)
    access_log.info(" ".join(f"{key}={_value(value)}" for key, value in fields.items()), extra={"access": fields})


def _value(value: Any) -> str:
    """A logfmt value: bare when it can be, else a JSON string."""
    text = str(value)
    if text and text.isprintable() and not any(c in text for c in ' "=\\'):
        return text
    return json.dumps(text, ensure_ascii=False)
