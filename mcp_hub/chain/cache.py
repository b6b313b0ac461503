"""The cache link: calls answered from the results the hub keeps (see mcp_hub/cache/).

It sits after the policy and guardrails links, so every call, a cached one too, is decided by
the policy in force (and counted against its rate limits), and the guardrails look at a kept
result as they look at a fresh one. A call answered from the cache is audited "cached".

What is kept:

- `resources/read`, for as long as a 2026-07-28 server's `ttlMs` says, for the principal who read
  it, or for anyone the policy lets read it when the server said `cacheScope: "public"`.
  (A handshake-era server gives no hints, so its resources are read each time.)
- `tools/call` of a tool whose annotations say `readOnlyHint`, for as long as a policy rule's
  `cache` says, for the principal who called it, keyed by the arguments in canonical form and
  the tool's definition as listed (its fingerprint: a changed definition is a new key).

Never kept: an error (`isError`, or a JSON-RPC error), an `input_required` result, a call that
carries answers or a request state, a task, a call the policy asked a person to confirm, a call
during which its server asked the client something. A
per-client mount's results are kept for the client session that got them.

To 2026-07-28 clients, a `resources/read` answer says how much longer it is fresh (`ttlMs`), and
that it is "public" only when its server said so and no policy is configured (the hub's answers
otherwise depend on who asks: "private").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from mcp_hub.cache import Keep, Lookup, ResultCache, scopes_of
from mcp_hub.cache.keys import canonical
from mcp_hub.catalog.catalog import Catalog
from mcp_hub.catalog.pins import fingerprint
from mcp_hub.chain.context import CallContext, Handler
from mcp_hub.policy import PolicySet
from mcp_hub.upstream import Origin, Upstream

_MAX_TTL = 86_400.0
"""A day, the longest a result is kept whatever its server says (the SDK's cap on `ttlMs`)."""

_NOT_CACHED_PARAMS = ("inputResponses", "requestState", "task")
"""Params of calls that are never answered from the cache: answers to a question, a task."""


class CacheLink:
    def __init__(
        self,
        cache: ResultCache | None,
        catalog: Catalog,
        upstreams: Mapping[str, Upstream],
        policy: Callable[[], PolicySet],
    ) -> None:
        """`cache` None: nothing is kept (`[cache] enabled = false`); answers' hints are still shaped."""
        self._cache = cache
        self._catalog = catalog
        self._upstreams = upstreams
        self._policy = policy
        self._tools: dict[str, tuple[list[dict[str, Any]], dict[str, tuple[bool, str]]]] = {}
        """Per mount: its tool listing, and each tool's (read-only, fingerprint)."""

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        if ctx.method == "resources/read":
            return await self._read(ctx, call_next)
        if ctx.method == "tools/call" and self._cache is not None and ctx.verdict.cache is not None:
            return await self._call_tool(ctx, call_next)
        return await call_next(ctx)

    # -- resources/read ---------------------------------------------------------------

    async def _read(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        upstream = self._upstreams.get(ctx.mount)
        modern = upstream is not None and upstream.modern
        if self._cache is None or not modern or not self._may_serve(ctx):
            return self._hinted(await call_next(ctx), modern)
        lookup = Lookup(
            self._who(ctx),
            ("resources/read", ctx.mount, ctx.native, self._revision(ctx)),
            scopes_of(ctx.mount, "resources", ctx.native),
            shareable=not self._isolated(ctx.mount),
        )

        async def read() -> tuple[dict[str, Any], Keep]:
            watched = _Watched(ctx.origin)
            result = await call_next(dataclasses.replace(ctx, origin=watched))
            kept = _complete(result) and not watched.asked
            return result, Keep(_hinted_ttl(result) if kept else None, _hinted_scope(result))

        served = await self._cache.serve(lookup, read)
        if served.cached:
            self._mark_cached(ctx)
        result = served.result
        if served.remaining is None:
            return self._hinted(result, modern)
        result["ttlMs"] = max(int(served.remaining * 1000), 0)
        result["cacheScope"] = "public" if served.scope == "public" and self._everyone_sees_everything() else "private"
        return result

    def _hinted(self, result: dict[str, Any], modern: bool) -> dict[str, Any]:
        """A result not kept, with its server's hints as the hub may pass them on: a handshake-era server's are
        none (the hub's own, "do not keep", apply); "public" only if the policy shows everyone everything."""
        if not modern:
            result.pop("ttlMs", None)
            result.pop("cacheScope", None)
        elif result.get("cacheScope") == "public" and not self._everyone_sees_everything():
            result["cacheScope"] = "private"
        return result

    def _everyone_sees_everything(self) -> bool:
        return not self._policy().sources

    # -- tools/call -------------------------------------------------------------------

    async def _call_tool(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        ttl = ctx.verdict.cache
        tool = self._tool(ctx.mount, ctx.native)
        if ttl is None or tool is None or not tool[0] or not self._may_serve(ctx) or self._cache is None:
            return await call_next(ctx)
        lookup = Lookup(
            self._who(ctx),
            ("tools/call", ctx.mount, ctx.native, canonical(ctx.arguments).decode(), tool[1], self._revision(ctx)),
            scopes_of(ctx.mount, "tools"),
        )

        async def call() -> tuple[dict[str, Any], Keep]:
            watched = _Watched(ctx.origin)
            result = await call_next(dataclasses.replace(ctx, origin=watched))
            kept = (
                _complete(result) and not watched.asked and result.get("isError") is not True and "task" not in result
            )
            return result, Keep(min(ttl, _MAX_TTL) if kept else None)

        served = await self._cache.serve(lookup, call)
        if served.cached:
            self._mark_cached(ctx)
        return served.result

    def _tool(self, mount: str, name: str) -> tuple[bool, str] | None:
        """(read-only, fingerprint) of the tool as its mount lists it now, or None."""
        listing = self._catalog.items_of(mount, "tools")
        known = self._tools.get(mount)
        if known is None or known[0] is not listing:
            tools: dict[str, tuple[bool, str]] = {}
            for tool in listing:
                annotations = tool.get("annotations")
                read_only = isinstance(annotations, dict) and annotations.get("readOnlyHint") is True
                tools[tool["name"]] = (read_only, fingerprint(tool))
            known = self._tools[mount] = (listing, tools)
        return known[1].get(name)

    # -- both -------------------------------------------------------------------------

    def _may_serve(self, ctx: CallContext) -> bool:
        """Whether the call may be answered from, and kept in, the cache at all."""
        if ctx.verdict.asked or ctx.verdict.outcome != "allowed":
            return False
        return not any(key in ctx.params for key in _NOT_CACHED_PARAMS)

    def _revision(self, ctx: CallContext) -> str:
        """The revision of the policy that decided the call (the one in force, when no policy link did)."""
        return ctx.verdict.revision or self._policy().revision

    def _who(self, ctx: CallContext) -> str:
        """Whose result it is: the principal's; on a per-client mount, that client session's."""
        if self._isolated(ctx.mount):
            return f"{ctx.principal}\x00{ctx.session or ''}"
        return ctx.principal

    def _isolated(self, mount: str) -> bool:
        upstream = self._upstreams.get(mount)
        return upstream is not None and upstream.config.isolation == "per-client"

    @staticmethod
    def _mark_cached(ctx: CallContext) -> None:
        ctx.verdict.outcome = "cached"
        ctx.verdict.reason = "served from the cache" + (f"; {ctx.verdict.reason}" if ctx.verdict.reason else "")


class _Watched:
    """The call's client, as the server reaches it during the call; notes whether the server asked it anything
    (an elicitation, a sampling, its roots): an answer that depends on the client's answers is not kept."""

    def __init__(self, inner: Origin) -> None:
        self._inner = inner
        self.asked = False

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        self.asked = True
        return await self._inner.ask(method, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _complete(result: Mapping[str, Any]) -> bool:
    """A final result (not `input_required`, nor another kind a later era may add)."""
    return result.get("resultType", "complete") == "complete"


def _hinted_ttl(result: Mapping[str, Any]) -> float | None:
    ttl = result.get("ttlMs")
    if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0:
        return min(ttl / 1000, _MAX_TTL)
    return None


def _hinted_scope(result: Mapping[str, Any]) -> Any:
    return "public" if result.get("cacheScope") == "public" else "private"
