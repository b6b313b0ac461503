"""What every link of the chain sees about one call, and how links are composed.

A call flows `recorder -> audit -> policy -> results -> guardrails -> cache -> router`: each link is an object
with `async __call__(ctx, call_next)`, composed once by `compose()` (hub.py,
which adds only the links that have work to do); the router (router.py,
`Router.call`) is the last. The context is frozen; the one thing links tell
each other is the `Verdict`, which the policy and guardrails links fill in and
the audit link reads when the call is over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from mcp.shared.dispatcher import ProgressFnT

from mcp_hub.catalog.catalog import Kind
from mcp_hub.upstream import Origin

Handler = Callable[["CallContext"], Awaitable[dict[str, Any]]]


@dataclass(slots=True)
class Verdict:
    """How the call was decided: filled in by the policy link, read by the audit link."""

    outcome: str = "allowed"
    rule: str | None = None
    reason: str | None = None
    revision: str | None = None
    """The revision of the policy that decided (None: no policy link did)."""
    mask: Sequence[str] | None = None
    """That policy's `[audit] mask_arguments`: the audit record is masked as the deciding policy says."""
    arguments: Mapping[str, Any] | None = None
    """The arguments as the audit record may show them, when a guard found something in them (redacted)."""
    target: tuple[str, str] | None = None
    """(native, public) URI of the resource read as the audit line, the logs and the spans may show them, when a
    guard found something in it (redacted); None: as they are."""
    cache: float | None = None
    """Seconds the policy lets the result of this call be kept, if its tool is read-only (a rule's `cache`)."""
    asked: bool = False
    """The policy asked for a person's confirmation of this call: its result is neither served from, nor
    kept in, the cache."""
    cost: int | None = None
    """What a tool call the policy let through to its server counts against cost budgets, for the audit line."""
    result_budget: int | None = None
    """The result budget the matching policy rules set (`max_result_tokens`; 0: none), or None (chain/results.py)."""
    cut: Mapping[str, Any] | None = None
    """What the result budget cut of the result, for the audit line: its size and where the whole is kept."""
    guarded: str | None = None
    """What the guardrails did to this call, the strongest of what they did: "blocked", "redacted" or "flagged"
    (for the request's measurement: the dashboard counts guardrail hits by it); None: they found nothing."""


@dataclass(frozen=True, slots=True)
class CallContext:
    method: str
    kind: Kind
    mount: str
    native: str
    """The server's own name for the tool or prompt, or its own URI (or URI template)."""
    public: str
    """The name or URI the client used."""
    params: Mapping[str, Any]
    """The request's params with the native name or URI restored."""
    principal: str
    session: str | None
    origin: Origin
    on_progress: ProgressFnT | None = None
    verdict: Verdict = field(default_factory=Verdict)
    via: str | None = None
    """How the call named its target, when not by the hub's public name ("app": an MCP Apps page, by the
    server's own name)."""
    endpoint_budget: int | None = None
    """The `max_result_tokens` of the curated endpoint the call came in at (0: none), or None (chain/results.py)."""
    address: str | None = None
    """The HTTP client's network address (as uvicorn gives it: a trusted proxy's `X-Forwarded-For` taken), for
    the audit line; None over stdio."""

    @property
    def arguments(self) -> Mapping[str, Any]:
        arguments = self.params.get("arguments")
        return arguments if isinstance(arguments, Mapping) else {}


class Link(Protocol):
    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]: ...


def compose(links: Sequence[Link], terminal: Handler) -> Handler:
    """`links[0]` outermost, `terminal` innermost."""
    handler = terminal
    for link in reversed(links):
        handler = partial(link, call_next=handler)
    return handler
