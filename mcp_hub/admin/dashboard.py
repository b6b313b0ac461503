"""The console's dashboard: the overview, and a page per mount, per tool and per principal.

Drawn from the hub's own metrics as observe/dashboard.py keeps them (the last hour, in 10-second slots;
with `[cluster]`, summed over the replicas): calls per second, error rate, p50/p95 latency, the busiest
tools, the decisions (denials, confirmations, guardrail hits, budget and rate refusals), each mount's
states with its restarts, and who calls what. Each page's live part follows a server-sent event stream
that sends it again, redrawn, every `TICK` seconds (the console's one script swaps it in); the charts are
SVG the server draws (charts.py). `/dashboard/data.json` serves the same numbers to scripts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson
from cachetools import LRUCache
from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_hub.admin import charts
from mcp_hub.admin.pages import e
from mcp_hub.admin.sessions import Session
from mcp_hub.observe.dashboard import TICK, View
from mcp_hub.observe.series import SLOT, SLOTS, Cell, Key

HOUR = SLOTS

WINDOW = 30
"""Slots the headline numbers sum (five minutes)."""

DECISIONS = {
    "denied": "denied",
    "refused": "refused",
    "confirmed": "confirmed",
    "declined": "declined",
    "rate_limited": "rate limited",
    "over_budget": "over budget",
    "blocked": "guard: blocked",
    "redacted": "guard: redacted",
    "flagged": "guard: flagged",
    "cached": "served from cache",
}
"""Decision kinds, in the order shown, as shown."""

_OFF = (
    "<h1>Dashboard</h1><p class=notice>The dashboard is off (<code>[admin] dashboard = false</code>): "
    "the hub keeps no series of its calls. Set it to true (the default) and restart the hub.</p>"
)


@dataclass(frozen=True, slots=True)
class ConsoleParts:
    """What the dashboard's pages use of the console (app.py's `_Pages`): the hub, its layout, its sessions' guards
    and its masking of secrets."""

    hub: Any
    render: Callable[..., Response]
    """(request, title, here, body, session) -> the page in the console's layout, secrets masked."""
    page: Callable[[Callable[[Request, Session], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]]
    """A page's endpoint: its session checked (else the login page)."""
    stream: Callable[
        [Callable[[Request, Session], AsyncIterator[ServerSentEvent]]], Callable[[Request], Awaitable[Response]]
    ]
    """A live stream's endpoint: its session checked."""
    closing: Callable[[Session], Awaitable[bool]]
    """Wait a moment; True when the stream should end (the console closed, the session ended)."""
    masked: Callable[[str], str]
    session: Callable[[Request], Awaitable[Session | None]]


class DashboardPages:
    """The dashboard's routes, rendered through the console (its sessions, layout and masking)."""

    def __init__(self, console: ConsoleParts) -> None:
        self._pages = console
        self._drawn: LRUCache[str, tuple[int, str]] = LRUCache(64)
        """Page (path and query) -> the collection it was drawn in, and its live part as drawn."""

    def routes(self) -> list[Route]:
        page, stream = self._pages.page, self._pages.stream
        routes = [
            Route("/dashboard", page(self._page(self._overview, "Overview", None))),
            Route("/dashboard/events", stream(self._events(self._overview))),
            Route("/dashboard/data.json", self._data),
        ]
        for kind, title in (("mount", "Mount"), ("tool", "Tool"), ("principal", "Principal")):
            live = self._of(kind)
            routes.append(Route(f"/dashboard/{kind}/{{name:path}}/events", stream(self._events(live))))
            routes.append(Route(f"/dashboard/{kind}/{{name:path}}", page(self._page(live, title, kind))))
        return routes

    # -- plumbing ------------------------------------------------------------------------------------

    def _page(
        self, live: Callable[[Request, View], Awaitable[str]], title: str, kind: str | None
    ) -> Callable[[Request, Session], Awaitable[Response]]:
        async def render(request: Request, session: Session) -> Response:
            dashboard = self._pages.hub.dashboard
            if dashboard is None:
                return self._pages.render(request, title, "dashboard", _OFF, session)
            view = await dashboard.view()
            name = request.path_params.get("name")
            heading = f"{title}: {name}" if name else title
            here = f"{_base(request)}/dashboard" + (f"/{kind}/{quote(name, safe='')}" if kind and name else "")
            span = _span(request)
            events = f"{here}/events?minutes={span * SLOT // 60}"
            body = (
                f"<h1>{e(heading)}</h1><p class=muted>{_windows(here, span)}: in {SLOT}-second steps, from the hub's "
                "own metrics; "
                f"live, redrawn every {TICK:g} s. <span id=replicas>{_replicas(view)}</span></p>"
                f'<div id="dashboard-live" data-live="{e(events)}">{await live(request, view)}</div>'
            )
            return self._pages.render(request, heading, "dashboard", body, session)

        return render

    def _events(
        self, live: Callable[[Request, View], Awaitable[str]]
    ) -> Callable[[Request, Session], AsyncIterator[ServerSentEvent]]:
        async def events(request: Request, session: Session) -> AsyncIterator[ServerSentEvent]:
            dashboard = self._pages.hub.dashboard
            if dashboard is None:
                return
            last = None
            page = f"{request.url.path}?{request.url.query}"
            while True:
                drawn = self._drawn.get(page)
                if drawn is not None and drawn[0] == dashboard.generation:
                    html = drawn[1]
                else:  # drawn once per collection, however many pages follow it
                    generation = dashboard.generation
                    html = self._pages.masked(await live(request, await dashboard.view()))
                    self._drawn[page] = (generation, html)
                if html != last:
                    last = html
                    yield ServerSentEvent(html, event="replace")
                for _ in range(round(TICK / 0.5)):
                    if await self._pages.closing(session):
                        return

        return events

    async def _data(self, request: Request) -> Response:
        """The overview's numbers as JSON (for scripts and monitors): the last hour summed, and the hub's calls per
        slot."""
        if await self._pages.session(request) is None:
            return JSONResponse({"error": "log in first"}, status_code=401)
        dashboard = self._pages.hub.dashboard
        if dashboard is None:
            return JSONResponse({"error": "the dashboard is off ([admin] dashboard = false)"}, status_code=404)
        view = await dashboard.view()
        rings, last = view.rings, view.last

        def summed(key: Key) -> dict[str, Any]:
            total = rings.total(key, last, HOUR)
            return {
                "calls": total.calls,
                "errors": total.errors,
                "p50_ms": _ms(total.quantile(0.5)),
                "p95_ms": _ms(total.quantile(0.95)),
                "decisions": total.decisions,
                **({"restarts": total.restarts, "states": sorted(total.states)} if key[0] == "mount" else {}),
            }

        body = {
            "replicas": view.replicas,
            "shared": view.shared,
            "slot_seconds": SLOT,
            "last_slot": last,
            "hub": summed(("hub",)),
            "hub_calls_per_slot": [cell.calls for cell in rings.points(("hub",), last, HOUR)],
            **{
                f"{kind}s": {key[1]: summed(key) for key in sorted(rings.keys(kind))}
                for kind in ("mount", "tool", "principal")
            },
        }
        return Response(self._pages.masked(orjson.dumps(body).decode()), media_type="application/json")

    # -- the pages' live parts -----------------------------------------------------------------------

    async def _overview(self, request: Request, view: View) -> str:
        base, rings, last, span = _base(request), view.rings, view.last, _span(request)
        health = self._pages.hub.health()["servers"]
        mounts = sorted(set(health) | {key[1] for key in rings.keys("mount")})
        parts = [
            _headline(rings.total(("hub",), last, WINDOW)),
            _charts("hub", rings.points(("hub",), last, span), last),
        ]
        row = _decision_chart(rings.points(("hub",), last, span), last)
        busiest = [(m, rings.points(("mount", m), last, span)) for m in mounts]
        calls = {m: [c.calls / SLOT for c in points] for m, points in busiest if any(c.calls for c in points)}
        if calls:
            top = dict(sorted(calls.items(), key=lambda item: -sum(item[1]))[:6])
            p95 = {m: [c.quantile(0.95) for c in points] for m, points in busiest if m in top}
            row += charts.line_chart("mount-calls", "Calls/s by mount", top, _start(last, span), SLOT)
            row += charts.line_chart("mount-p95", "p95 latency by mount", p95, _start(last, span), SLOT, "s")
        parts.append(f'<div class="charts">{row}</div>')
        parts.append('<h2 class="section">Mounts</h2>' + _timelines(base, mounts, rings, last, span))
        parts.append('<div class="columns">')
        parts.append(
            f'<div><h2 class="section">Busiest tools ({_label(span)})</h2>'
            + _table(base, "tool", rings, last, span, 10)
            + "</div>"
        )
        parts.append(
            f'<div><h2 class="section">Decisions ({_label(span)})</h2>'
            + _decisions(rings, last, span, "mount", base)
            + "</div>"
        )
        parts.append("</div>")
        parts.append(
            f'<h2 class="section">Principals ({_label(span)})</h2>' + _table(base, "principal", rings, last, span, 20)
        )
        return "".join(parts)

    def _of(self, kind: str) -> Callable[[Request, View], Awaitable[str]]:
        async def live(request: Request, view: View) -> str:
            name = request.path_params["name"]
            base, rings, last, span = _base(request), view.rings, view.last, _span(request)
            key = (kind, name)
            parts = [_headline(rings.total(key, last, WINDOW)), _charts(kind, rings.points(key, last, span), last)]
            if kind == "mount":
                parts.append(await self._mount(base, name, rings, last, span))
            elif kind == "tool":
                parts.append(_cross(base, rings, last, span, lambda k: k[2] == name, 1, "principal", "Who calls it"))
                total = rings.total(key, last, span)
                parts.append(_outcomes(total, span))
            else:
                parts.append(_cross(base, rings, last, span, lambda k: k[1] == name, 2, "tool", "What they call"))
                total = rings.total(key, last, span)
                parts.append(_outcomes(total, span))
                parts.append(await self._budgets(name))
            return "".join(parts)

        return live

    async def _mount(self, base: str, name: str, rings: Any, last: int, span: int) -> str:
        report = self._pages.hub.health()["servers"].get(name)
        parts = ['<h2 class="section">State</h2>' + _timelines(base, [name], rings, last, span)]
        if report is not None:
            parts.append(
                f'<p>Now <b class="state-{e(report["state"])}" id="mount-state">{e(report["state"])}</b>, '
                f"{e(report.get('restarts', 0))} restart(s) since the hub started."
                + (
                    f' Last error: <code class="last-error">{e(report["last_error"])}</code>'
                    if report.get("last_error")
                    else ""
                )
                + "</p>"
            )
        if report is not None and report.get("sandbox"):
            sandbox = report["sandbox"]
            hit = (
                f' Last limit hit: <b class="state-down">{e(sandbox["limit_hit"])}</b>.'
                if sandbox.get("limit_hit")
                else ""
            )
            parts.append(f'<p id="mount-sandbox">Sandbox: {e(sandbox.get("summary"))}.{hit}</p>')
        catalog = self._pages.hub.catalog
        tools = {k for k in rings.keys("tool") if catalog.mount_of(k[1]) == name}
        parts.append(
            f'<h2 class="section">Its tools ({_label(span)})</h2>' + _table(base, "tool", rings, last, span, 50, tools)
        )
        parts.append(_outcomes(rings.total(("mount", name), last, span), span))
        parts.append(_pins(base, name, self._pages.hub.pins))
        return "".join(parts)

    async def _budgets(self, principal: str) -> str:
        hub = self._pages.hub
        budgets = hub.policy().budgets_for(principal)
        if hub.budgets is None or not budgets:
            return (
                '<h2 class="section">Budgets</h2>'
                "<p class=muted>No budget of calls or cost applies to this principal.</p>"
            )
        rows = "".join(
            f"<tr><td><code>{e(usage.budget.id)}</code></td><td>{usage.used}</td><td>{usage.budget.amount}</td>"
            f"<td>{usage.left}</td><td>{e(usage.renews)}</td></tr>"
            for usage in await hub.budgets.usage(budgets, principal)
        )
        return (
            '<h2 class="section">Budgets</h2><table id="budgets"><thead><tr><th>Budget</th><th>Used</th><th>Of</th>'
            f"<th>Left</th><th>Renews</th></tr></thead><tbody>{rows}</tbody></table>"
        )


def _pins(base: str, mount: str, store: Any) -> str:
    """The mount's pinned tools, with when each was pinned, and its changes waiting for an administrator."""
    if not store.enabled:
        return '<h2 class="section">Pins</h2><p class=muted>Pinning is off.</p>'
    prefix = f"{mount}/"
    pinned = sorted((key, pin) for key, pin in store.pins.items() if key.startswith(prefix))
    pending = sorted((key, change) for key, change in store.pending.items() if key.startswith(prefix))
    rows = [
        f'<tr class="pending" data-key="{e(key)}"><td><code>{e(key)}</code></td>'
        '<td class="pin-flagged">changed, waiting</td>'
        f"<td>{e(change.get('since', ''))}</td><td>{e(change.get('reason') or '')}</td></tr>"
        for key, change in pending
    ]
    pins = "".join(
        f'<tr data-key="{e(key)}"><td><code>{e(key)}</code></td><td class="pin-pinned">pinned</td>'
        f"<td>{e(pin.get('since', ''))}</td></tr>"
        for key, pin in pinned
    )
    waiting = (
        f'<p><a href="{base}/pins">Review the changes</a></p>'
        '<table id="pending"><thead><tr><th>Tool</th><th>Pin</th><th>Since</th><th>Why</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else "<p class=muted>No change waiting for an administrator.</p>"
    )
    listed = (
        f"<details><summary>{len(pinned)} tool(s) pinned</summary>"
        '<table id="pins"><thead><tr><th>Tool</th><th>Pin</th><th>Since</th></tr></thead>'
        f"<tbody>{pins}</tbody></table></details>"
        if pinned
        else "<p class=muted>No tool of this mount is pinned yet.</p>"
    )
    return f'<h2 class="section">Pins</h2>{waiting}{listed}'


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


WINDOWS = {5: "last 5 min", 15: "last 15 min", 60: "last hour"}
"""The windows a page shows (`?minutes=`), in minutes, as named."""


def _span(request: Request) -> int:
    """The slots the page's window covers (`?minutes=` 5, 15 or 60; an hour for anything else)."""
    minutes = request.query_params.get("minutes", "60")
    return (int(minutes) if minutes in ("5", "15") else 60) * 60 // SLOT


def _label(span: int) -> str:
    return WINDOWS.get(span * SLOT // 60, "last hour")


def _windows(path: str, span: int) -> str:
    """Links to the same page over each window, the one shown marked."""
    links = [
        f'<a href="{e(path)}?minutes={minutes}"{" class=here" if minutes * 60 // SLOT == span else ""}>{e(label)}</a>'
        for minutes, label in WINDOWS.items()
    ]
    return '<span class="windows">' + " · ".join(links) + "</span>"


def _start(last: int, span: int) -> float:
    return (last - span + 1) * SLOT


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def _replicas(view: View) -> str:
    if not view.shared:
        return "This replica's own numbers."
    return f"Summed over <b id=replica-count>{view.replicas}</b> replica(s) sharing Redis."


def _latency(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _headline(total: Cell) -> str:
    rate = f"{100 * total.errors / total.calls:.1f} %" if total.calls else "-"
    facts = {
        "calls": (f"{total.calls}", "Calls (5 min)"),
        "rate": (f"{total.calls / (WINDOW * SLOT):.2f}", "Calls/s (5 min)"),
        "errors": (rate, "Error rate (5 min)"),
        "p50": (_latency(total.quantile(0.5)), "p50 latency (5 min)"),
        "p95": (_latency(total.quantile(0.95)), "p95 latency (5 min)"),
        "decided": (f"{sum(total.decisions.values())}", "Decisions (5 min)"),
    }
    items = "".join(
        f"<div><span>{e(label)}</span><b id=head-{name}>{e(value)}</b></div>" for name, (value, label) in facts.items()
    )
    return f'<div class="facts">{items}</div>'


def _charts(prefix: str, points: Sequence[Cell], last: int) -> str:
    start = _start(last, len(points))
    calls = [cell.calls / SLOT for cell in points]
    errors = [100 * cell.errors / cell.calls if cell.calls else None for cell in points]
    latency = {"p50": [c.quantile(0.5) for c in points], "p95": [c.quantile(0.95) for c in points]}
    latest = next((c for c in reversed(points) if c.calls), None)
    return (
        '<div class="charts">'
        + charts.line_chart(
            f"{prefix}-calls",
            "Calls/s",
            {"calls/s": calls},
            start,
            SLOT,
            now_value=f"{sum(calls[-3:]) / 3:.2f}/s over 30 s" if calls else "",
        )
        + charts.line_chart(f"{prefix}-errors", "Error rate", {"errors": errors}, start, SLOT, "%")
        + charts.line_chart(
            f"{prefix}-latency",
            "Latency",
            latency,
            start,
            SLOT,
            "s",
            now_value=f"p95 {_latency(latest.quantile(0.95))}" if latest else "",
        )
        + "</div>"
    )


def _timelines(base: str, mounts: Sequence[str], rings: Any, last: int, span: int) -> str:
    if not mounts:
        return "<p class=muted>No mounts.</p>"
    rows = []
    for mount in mounts:
        slots = [(cell.states, cell.restarts) for cell in rings.points(("mount", mount), last, span)]
        rows.append(
            f'<div class="timeline-row" data-mount="{e(mount)}"><a href="{base}/dashboard/mount/{quote(mount)}">'
            f"{charts.timeline(f'timeline-{mount}', mount, slots, _start(last, span), SLOT)}</a></div>"
        )
    return '<div class="timelines">' + "".join(rows) + "</div>"


def _table(base: str, kind: str, rings: Any, last: int, span: int, limit: int, only: set[Key] | None = None) -> str:
    totals = [(key, rings.total(key, last, span)) for key in (only if only is not None else rings.keys(kind))]
    totals = sorted((t for t in totals if t[1].calls), key=lambda t: (-t[1].calls, t[0]))[:limit]
    if not totals:
        return "<p class=muted>No calls in this window.</p>"
    rows = "".join(
        f'<tr data-{kind}="{e(key[1])}"><td><a href="{base}/dashboard/{kind}/{quote(key[1])}">{e(key[1])}</a></td>'
        f"<td class=calls>{total.calls}</td><td class=errors>{total.errors}</td>"
        f"<td>{_latency(total.quantile(0.5))}</td>"
        f"<td>{_latency(total.quantile(0.95))}</td><td>{sum(total.decisions.values())}</td></tr>"
        for key, total in totals
    )
    return (
        f'<table id="{kind}s"><thead><tr><th>{kind.capitalize()}</th><th>Calls</th><th>Errors</th><th>p50</th>'
        f"<th>p95</th><th>Decisions</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _cross(
    base: str, rings: Any, last: int, span: int, match: Callable[[Key], bool], index: int, kind: str, title: str
) -> str:
    keys = {key for key in rings.keys("principal_tool") if match(key)}
    totals = sorted(((key[index], rings.total(key, last, span)) for key in keys), key=lambda t: -t[1].calls)
    if not totals:
        return f'<h2 class="section">{e(title)}</h2><p class=muted>No calls in this window.</p>'
    rows = "".join(
        f'<tr data-{kind}="{e(name)}"><td><a href="{base}/dashboard/{kind}/{quote(name)}">{e(name)}</a></td>'
        f"<td class=calls>{total.calls}</td><td class=errors>{total.errors}</td>"
        f"<td>{_latency(total.quantile(0.95))}</td>"
        f"<td>{e(_decided(total)) or '-'}</td></tr>"
        for name, total in totals
    )
    return (
        f'<h2 class="section">{e(title)} ({_label(span)})</h2><table id="cross"><thead><tr><th>{kind.capitalize()}</th>'
        f"<th>Calls</th><th>Errors</th><th>p95</th><th>Decisions</th></tr></thead><tbody>{rows}</tbody></table>"
    )


DECISION_GROUPS = {
    "denied": ("denied", "refused"),
    "confirm": ("confirmed", "declined"),
    "guards": ("blocked", "redacted", "flagged"),
    "limits": ("rate_limited", "over_budget"),
}
"""The overview's decision chart: its lines, and the decisions each counts."""


def _decision_chart(points: Sequence[Cell], last: int) -> str:
    lines = {
        name: [float(sum(cell.decisions.get(kind, 0) for kind in kinds)) for cell in points]
        for name, kinds in DECISION_GROUPS.items()
    }
    return charts.line_chart("hub-decisions", "Decisions/10 s", lines, _start(last, len(points)), SLOT)


FAILURES = {
    "tool_error": "tool error (the tool answered isError)",
    "-32000": "the server failed or went away (-32000)",
    "-32001": "the server did not answer in time (-32001)",
    "-32601": "method not found (-32601)",
    "-32602": "invalid params (-32602)",
    "-32603": "internal error (-32603)",
}
"""Error kinds (`error.type`) as shown."""


def _failures(total: Cell) -> str:
    if not total.failures:
        return "<p class=muted>No errors.</p>"
    rows = "".join(
        f'<tr data-error="{e(kind)}"><td>{e(FAILURES.get(kind, kind))}</td><td class=count>{count}</td></tr>'
        for kind, count in sorted(total.failures.items(), key=lambda item: -item[1])
    )
    return f'<table class="failures"><tbody>{rows}</tbody></table>'


def _decided(total: Cell) -> str:
    return ", ".join(f"{DECISIONS.get(kind, kind)} {count}" for kind, count in sorted(total.decisions.items()))


def _outcomes(total: Cell, span: int) -> str:
    """A page's errors by kind and its decisions, side by side."""
    return (
        f'<div class="columns"><div><h2 class="section">Errors ({_label(span)})</h2>{_failures(total)}</div>'
        f'<div><h2 class="section">Decisions ({_label(span)})</h2>{_decision_list(total)}</div></div>'
    )


def _decision_list(total: Cell) -> str:
    if not total.decisions:
        return "<p class=muted>No denials, confirmations, refusals or guardrail hits.</p>"
    items = "".join(
        f'<tr data-decision="{e(kind)}"><td>{e(DECISIONS.get(kind, kind))}</td>'
        f"<td class=count>{total.decisions[kind]}</td></tr>"
        for kind in sorted(total.decisions, key=lambda k: (list(DECISIONS).index(k) if k in DECISIONS else 99, k))
    )
    return f'<table class="decisions"><tbody>{items}</tbody></table>'


def _decisions(rings: Any, last: int, span: int, kind: str, base: str) -> str:
    """The hub's decisions of the last hour by kind, and the mounts they were made on."""
    total = rings.total(("hub",), last, span)
    if not total.decisions:
        return "<p class=muted>No denials, confirmations, refusals or guardrail hits.</p>"
    rows = []
    for decision in sorted(total.decisions, key=lambda k: (list(DECISIONS).index(k) if k in DECISIONS else 99, k)):
        where = []
        for key in sorted(rings.keys(kind)):
            count = rings.total(key, last, span).decisions.get(decision, 0)
            if count:
                where.append(f'<a href="{base}/dashboard/{kind}/{quote(key[1])}">{e(key[1])}</a> {count}')
        rows.append(
            f'<tr data-decision="{e(decision)}"><td>{e(DECISIONS.get(decision, decision))}</td>'
            f"<td class=count>{total.decisions[decision]}</td><td>{', '.join(where)}</td></tr>"
        )
    return (
        '<table id="decisions"><thead><tr><th>Decision</th><th>Count</th><th>Where</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
