"""The console's pages, rendered on the server: HTML from f-strings, every value through `html.escape`."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

from mcp_hub.admin.audit_view import Filters
from mcp_hub.admin.icons import icons
from mcp_hub.credentials.connections import Connection, Consent

PAGES = (
    ("dashboard", "Dashboard"),
    ("status", "Status"),
    ("catalog", "Catalog"),
    ("pins", "Pins"),
    ("connections", "Connections"),
    ("audit", "Audit"),
    ("explain", "Explain"),
)


def e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def layout(base: str, title: str, here: str, body: str, *, admin: str | None, csrf: str | None) -> str:
    nav = "".join(
        f'<a href="{base}/{page}"{" class=here" if page == here else ""}>{label}</a>' for page, label in PAGES
    )
    who = ""
    if admin is not None and csrf is not None:
        who = (
            f'<div class="who"><span>signed in as <b id="admin-name">{e(admin)}</b></span>'
            f'<form class="inline" method="post" action="{base}/logout">{csrf_field(csrf)}'
            '<button class="quiet" id="logout">Log out</button></form></div>'
        )
    header = f'<header><span class="brand">mcp-hub admin</span><nav>{nav}</nav>{who}</header>' if admin else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(title)} · mcp-hub admin</title>"
        f'<link rel="stylesheet" href="{base}/static/console.css">'
        f'<script src="{base}/static/console.js" defer></script></head>'
        f"<body>{header}<main>{body}</main></body></html>"
    )


def csrf_field(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{e(token)}">'


def login(base: str, token: str, error: str | None, *, sso: str | None = None, keys: bool = True) -> str:
    """The sign-in page: single sign-on (`sso`: what its button names) and the admin key form (`keys`; with single
    sign-on, offered for break-glass use)."""
    problem = f'<p class="error" id="login-error">{e(error)}</p>' if error else ""
    single = ""
    if sso is not None:
        single = f'<a class="button" id="sso" href="{base}/sso/start">Sign in with {e(sso)}</a>'
    form = ""
    if keys or sso is None:
        note = '<p class="muted">Or, for break-glass use, an admin key:</p>' if sso is not None else ""
        form = (
            f'{note}<form class="stack" method="post" action="{base}/login">{csrf_field(token)}'
            '<label>Admin key<input type="password" name="key" id="key" autocomplete="current-password"'
            f'{"" if sso is not None else " autofocus"}></label><button id="login">Log in</button></form>'
        )
    return f'<div class="card login"><h1>mcp-hub admin</h1>{problem}{single}{form}</div>'


def sso_refused(base: str, message: str) -> str:
    """A single sign-on that could not go on: why, and where to start again."""
    return (
        f'<div class="card login"><h1>Sign-in refused</h1><p class="error" id="sso-error">{e(message)}</p>'
        f'<p><a href="{base}/login" id="again">Back to the sign-in page</a></p></div>'
    )


def not_an_administrator(base: str, who: str, claim: str) -> str:
    """A person the identity provider vouched for, who is not an administrator of this hub."""
    return (
        f'<div class="card login"><h1>Not an administrator</h1><p class="error" id="not-admin">'
        f"You signed in as <b>{e(who)}</b>, but you are not an administrator of this hub: its console admits the "
        f"people whose <code>{e(claim)}</code> at the identity provider holds one of the administrators' values, and "
        "yours does not.</p><p>Ask an administrator to add you to the administrators' group at the identity "
        f'provider. Nothing was kept.</p><p><a href="{base}/login" id="again">Back to the sign-in page</a></p></div>'
    )


def signed_in(base: str, who: str) -> str:
    """After single sign-on: on to the console. The page itself goes on (a same-site navigation, which brings the
    session's SameSite=Strict cookie; the redirect from the identity provider would not)."""
    return (
        f'<meta http-equiv="refresh" content="0; url={base}/status"><div class="card login"><h1>Signed in</h1>'
        f'<p id="signed-in">Signed in as <b>{e(who)}</b>.</p><p><a href="{base}/status">Continue to the console</a>'
        "</p></div>"
    )


def signing_out(url: str, label: str) -> str:
    """After the console's sign-out: on to the identity provider's, which sends the browser back to the sign-in
    page (a navigation, which the console's `form-action 'self'` would refuse as the sign-out form's redirect)."""
    return (
        f'<meta http-equiv="refresh" content="0; url={e(url)}"><div class="card login"><h1>Signed out</h1>'
        f'<p id="signed-out">Signed out of the console. Signing you out at {e(label)}...</p>'
        f'<p><a href="{e(url)}" id="provider-sign-out">Continue</a></p></div>'
    )


# -- status ------------------------------------------------------------------------------------------


def status(base: str, facts: Mapping[str, str], live: str) -> str:
    items = "".join(
        f"<div><span>{e(name)}</span><b id=fact-{e(name.lower().replace(' ', '-'))}>{e(value)}</b></div>"
        for name, value in facts.items()
    )
    return (
        f'<h1>Status</h1><div class="facts">{items}</div>'
        f'<div id="status-live" data-live="{base}/status/events">{live}</div>'
    )


def mounts(report: Mapping[str, Any], sessions: Mapping[str, int]) -> str:
    """The live part of the status page: the hub's state and one row per mount."""
    rows = []
    for name, mount in report["servers"].items():
        error = mount.get("last_error") or ""
        waiting = f" <span class=muted>({e(mount['waiting_for'])})</span>" if mount.get("waiting_for") else ""
        rows.append(
            f'<tr id="mount-{e(name)}"><td><b>{e(name)}</b></td>'
            f'<td><span class="state state-{e(mount["state"])}">{e(mount["state"])}</span>{_failing(mount)}</td>'
            f"<td>{e(mount.get('transport'))}</td><td>{e(mount.get('protocol') or '')}"
            f"{_sessions_of(mount.get('sessions') or [])}</td>"
            f'<td class="restarts">{e(mount.get("restarts"))}</td>'
            f"<td>{mount.get('tools', 0)} / {mount.get('prompts', 0)} / {mount.get('resources', 0)}"
            f" / {mount.get('resource_templates', 0)}</td>"
            f"<td>{e(sessions.get(name, 0))}</td>"
            f"{_sandbox_cell(mount.get('sandbox'))}"
            f'<td class="last-error">{e(error)}{waiting}{_stderr_tail(mount.get("stderr_tail") or [])}</td></tr>'
        )
    body = "".join(rows) or '<tr><td colspan="9" class="muted">No mounts.</td></tr>'
    return (
        f'<p>Hub: <b id="hub-status" class="state-{e(report["status"])}">{e(report["status"])}</b></p>'
        "<table><thead><tr><th>Mount</th><th>State</th><th>Transport</th><th>Protocol</th><th>Restarts</th>"
        "<th>Tools / prompts / resources / templates</th><th>Per-client sessions</th><th>Sandbox</th>"
        "<th>Last error</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def _failing(mount: Mapping[str, Any]) -> str:
    """Under a mount's state: how many connection attempts failed in a row, and when it tries again."""
    failures = mount.get("failures") or 0
    if not failures or mount["state"] == "up":
        return ""
    retry = mount.get("next_attempt_in")
    when = (
        f"; next try in {retry:.0f} s"
        if retry is not None
        else "; trying again now"
        if mount["state"] == "starting"
        else ""
    )
    times = "1 attempt" if failures == 1 else f"{failures} attempts"
    return f'<div class="failing">failing: {times} in a row{when}</div>'


def _stderr_tail(lines: Sequence[str]) -> str:
    """The last lines a server that is not up wrote to stderr (masked by the hub), oldest first."""
    if not lines:
        return ""
    return f'<pre class="stderr-tail">{e(chr(10).join(lines))}</pre>'


def _sessions_of(sessions: list[Mapping[str, Any]]) -> str:
    """A mount's sessions: whom each serves, in which era, and why (see upstream/era.py)."""
    items = "".join(
        f"<li>{e(session['serves'])}: <b>{e(session['protocol'] or 'not open')}</b>, {e(session['why'])}</li>"
        for session in sessions
    )
    return f'<ul class="sessions muted">{items}</ul>' if items else ""


def _sandbox_cell(sandbox: Mapping[str, Any] | None) -> str:
    """A stdio mount's sandbox (its summary, and the last limit it hit); nothing for a remote one."""
    if sandbox is None:
        return '<td class="sandbox muted">remote</td>'
    limit = sandbox.get("limit_hit")
    hit = f'<div class="sandbox-limit state-down">{e(limit)}</div>' if limit else ""
    return f'<td class="sandbox sandbox-{e(sandbox["status"])}">{e(sandbox["summary"])}{hit}</td>'


# -- catalog -----------------------------------------------------------------------------------------


def catalog(
    base: str,
    rows: Sequence[Mapping[str, Any]],
    principals: Sequence[str],
    principal: str,
    query: str,
) -> str:
    options = '<option value="">(everything; no principal)</option>' + "".join(
        f'<option value="{e(p)}"{" selected" if p == principal else ""}>{e(p)}</option>' for p in principals
    )
    head = "<th>Kind</th><th>Name</th><th>Mount</th><th>Pin</th><th>Annotations</th>"
    if principal:
        head += f"<th>As {e(principal)}</th>"
    lines = []
    for row in rows:
        annotations = ", ".join(f"{e(k)}={e(json.dumps(v))}" for k, v in (row.get("annotations") or {}).items())
        title = f' <span class="title">{e(row["title"])}</span>' if row.get("title") else ""
        pictures, sources = icons(row.get("icons"))
        cells = (
            f"<td>{e(row['kind'])}</td><td>{pictures}<code>{e(row['name'])}</code>{title}"
            f"<div class=muted>{e((row.get('description') or '')[:160])}</div>{sources}</td>"
            f"<td>{e(row['mount'])}</td><td class='pin pin-{e(row['pin'])}'>{e(row['pin'])}</td><td>{annotations}</td>"
        )
        if principal:
            cells += (
                f"<td><details><summary class='outcome outcome-{e(row['outcome'])}'>{e(row['outcome'])}</summary>"
                f"<pre class=explain>{e(row['explain'])}</pre></details></td>"
            )
        lines.append(f'<tr class="item" data-name="{e(row["name"])}">{cells}</tr>')
    body = "".join(lines) or f'<tr><td colspan="6" class="muted">Nothing matches {e(query)!s}.</td></tr>'
    return (
        "<h1>Catalog</h1>"
        f'<form class="filters" method="get" action="{base}/catalog">'
        f'<label>Search<input type="search" name="q" id="search" value="{e(query)}" placeholder="name, mount, text">'
        "</label>"
        f'<label>View as principal<input list="principals" name="principal" id="principal" value="{e(principal)}">'
        f'<datalist id="principals">{options}</datalist></label>'
        '<button id="apply">Show</button></form>'
        f'<p class="muted">{len(rows)} item(s). Held tools are listed with pin state "held": no client sees them.</p>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


# -- pins --------------------------------------------------------------------------------------------


def diff(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    """A line diff of two tool definitions, as JSON with sorted keys."""
    if new is None:
        return '<p class="muted">The new definition was not recorded.</p>'
    after = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    if old is None:
        note = (
            '<p class="muted">No earlier definition on record (first seen, or pinned before definitions were kept).</p>'
        )
        return note + f'<pre class="diff">{"".join(f"<span class=add>+ {e(line)}</span>" for line in after)}</pre>'
    before = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    out = []
    for line in difflib.unified_diff(before, after, "pinned", "served", n=3, lineterm=""):
        kind = "add" if line.startswith("+") and not line.startswith("+++") else ""
        kind = "del" if line.startswith("-") and not line.startswith("---") else kind
        out.append(f"<span class={kind}>{e(line)}</span>" if kind else f"{e(line)}\n")
    return f'<pre class="diff">{"".join(out) or "(the definitions are the same)"}</pre>'


def pins(
    base: str,
    enabled: bool,
    pending: Mapping[str, Mapping[str, Any]],
    pinned: Mapping[str, Any],
    csrf: str,
    notice: str,
) -> str:
    if not enabled:
        return '<h1>Pins</h1><p class="notice">Pinning is off: set pins = "pins.json" in [policy] of hub.toml.</p>'
    shown = f'<p class="notice" id="notice">{e(notice)}</p>' if notice else ""
    cards = []
    for key, change in sorted(pending.items()):
        old = (pinned.get(key) or {}).get("definition")
        rejected = change.get("rejected")
        state = (
            f'<span class="pin-rejected">rejected by {e(change.get("rejected_by"))} at {e(rejected)}; held</span>'
            if rejected
            else '<span class="pin-changed">awaiting a decision</span>'
        )
        why = change.get("reason") or ("changed since it was pinned" if key in pinned else "first seen")
        actions = (
            f'<form class="inline" method="post" action="{base}/pins/accept">{csrf_field(csrf)}'
            f'<input type="hidden" name="key" value="{e(key)}"><button class="accept">Accept</button></form> '
        )
        if not rejected:
            actions += (
                f'<form class="inline" method="post" action="{base}/pins/reject">{csrf_field(csrf)}'
                f'<input type="hidden" name="key" value="{e(key)}"><button class="reject">Reject</button></form>'
            )
        cards.append(
            f'<div class="card pending" data-key="{e(key)}"><h2><code>{e(key)}</code></h2>'
            f"<p>{e(why)} · since {e(change.get('since'))} · {state}</p>"
            f"{diff(old, change.get('definition'))}<p>{actions}</p></div>"
        )
    body = "".join(cards) or '<p class="muted" id="no-pending">No pending changes.</p>'
    return f"<h1>Pins</h1>{shown}<p class=muted>{len(pinned)} tool(s) pinned; {len(pending)} pending.</p>{body}"


# -- connections -------------------------------------------------------------------------------------


def _when(seconds: float | None) -> str:
    if not seconds:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _expiry(expires_at: float | None, now: float) -> str:
    if expires_at is None:
        return "no expiry"
    left = expires_at - now
    state = f"in {left / 60:.0f} min" if left > 0 else "expired: refreshed at next use"
    return f"{_when(expires_at)} ({state})"


def connections(
    base: str,
    mounts: Sequence[str],
    records: Sequence[Connection],
    principal: str,
    server: str,
    csrf: str,
    notice: str,
    error: str | None,
    now: float,
    consents: Sequence[Consent] = (),
) -> str:
    """The people's sign-ins toward `mode = "user"` and "enterprise" mounts: who, where, at which issuer, since
    and until when, with which scopes; never a token. Then the clients each person allowed on the consent page,
    per mount."""
    if not mounts:
        return (
            '<h1>Connections</h1><p class="notice" id="no-user-mounts">No server has mode = "user" or "enterprise"'
            " in its auth table: nobody signs in to a server through the hub, so there are no connections.</p>"
        )
    shown = f'<p class="notice" id="notice">{e(notice)}</p>' if notice else ""
    shown += f'<p class="error" id="connections-error">{e(error)}</p>' if error else ""
    options = '<option value="">(any)</option>' + "".join(
        f"<option{' selected' if m == server else ''}>{e(m)}</option>" for m in mounts
    )
    lines = []
    for record in records:
        revoke = (
            f'<form class="inline" method="post" action="{base}/connections/revoke">{csrf_field(csrf)}'
            f'<input type="hidden" name="principal" value="{e(record.principal)}">'
            f'<input type="hidden" name="mount" value="{e(record.mount)}">'
            f'<input type="hidden" name="issuer" value="{e(record.issuer)}">'
            '<button class="reject revoke">Revoke</button></form>'
        )
        lines.append(
            f'<tr class="connection" data-principal="{e(record.principal)}" data-mount="{e(record.mount)}">'
            f"<td>{e(record.principal)}</td><td>{e(record.mount)}</td><td>{e(record.issuer)}</td>"
            f"<td>{e(_when(record.connected_at))}</td><td>{e(_expiry(record.expires_at, now))}</td>"
            f"<td>{e(record.scope or '')}</td><td>{revoke}</td></tr>"
        )
    body = "".join(lines) or '<tr><td colspan="7" class="muted" id="no-connections">No connections.</td></tr>'
    return (
        "<h1>Connections</h1>"
        '<p class=muted>Who has signed in to which server through the hub (servers with mode = "user"; with mode'
        ' = "enterprise", the tokens their identity provider approved), as <code>mcp-hub connections</code> lists'
        " them. Revoke forgets the person's tokens at the hub, and the clients"
        " they allowed there: their next"
        " call closes their session with the server and asks them to sign in again; the tokens are revoked at the"
        " authorization server too when it publishes a revocation endpoint (RFC 7009).</p>"
        f"{shown}"
        f'<form class="filters" method="get" action="{base}/connections">'
        f'<label>Principal<input name="principal" id="c-principal" value="{e(principal)}"></label>'
        f'<label>Server<select name="server" id="c-server">{options}</select></label>'
        '<button id="c-filter">Filter</button></form>'
        f'<p class="muted">{len(records)} connection(s).</p>'
        "<table><thead><tr><th>Principal</th><th>Server</th><th>Issuer</th><th>Signed in</th><th>Expires</th>"
        f"<th>Scopes</th><th></th></tr></thead><tbody>{body}</tbody></table>"
        f"{allowed_clients(base, consents, csrf)}"
    )


def allowed_clients(base: str, consents: Sequence[Consent], csrf: str) -> str:
    """The clients each person allowed on the hub's consent page, per server, each with a Withdraw button."""
    lines = []
    for given in consents:
        withdraw = (
            f'<form class="inline" method="post" action="{base}/connections/withdraw">{csrf_field(csrf)}'
            f'<input type="hidden" name="principal" value="{e(given.principal)}">'
            f'<input type="hidden" name="mount" value="{e(given.mount)}">'
            f'<input type="hidden" name="client" value="{e(given.client)}">'
            '<button class="reject withdraw">Withdraw</button></form>'
        )
        lines.append(
            f'<tr class="consent" data-principal="{e(given.principal)}" data-mount="{e(given.mount)}"'
            f' data-client="{e(given.client)}"><td>{e(given.principal)}</td><td>{e(given.mount)}</td>'
            f"<td><code>{e(given.client)}</code></td><td>{e(_when(given.given_at) or 'not recorded')}</td>"
            f"<td>{given.browsers}</td><td>{withdraw}</td></tr>"
        )
    body = "".join(lines) or '<tr><td colspan="6" class="muted" id="no-consents">No consents.</td></tr>'
    return (
        '<h2 class="section">Clients allowed</h2>'
        "<p class=muted>The MCP clients each person allowed on the hub's consent page, per server: the same"
        " client's next sign-in in the same browser is not asked again. Withdraw forgets that consent, in every"
        " browser, so that the client's next sign-in asks the person again; it does not revoke their tokens"
        " (Revoke above does), and a sign-in already made goes on.</p>"
        f'<p class="muted">{len(consents)} consent(s).</p>'
        "<table><thead><tr><th>Principal</th><th>Server</th><th>Client</th><th>Allowed</th><th>Browsers</th>"
        f'<th></th></tr></thead><tbody id="consents">{body}</tbody></table>'
    )


# -- audit -------------------------------------------------------------------------------------------

AUDIT_COLUMNS = ("time", "principal", "method", "mount", "name", "outcome", "rule")


def audit_rows(base: str, events: Iterable[Mapping[str, Any]]) -> str:
    rows = []
    for event in events:
        decision = str(event.get("decision_id") or "")
        cells = "".join(
            f"<td class={column}>{e(event.get(column))}</td>"
            if column != "outcome"
            else f"<td class='outcome outcome-{e(event.get(column))}'>{e(event.get(column))}</td>"
            for column in AUDIT_COLUMNS
        )
        link = f'<a href="{base}/audit/line/{e(decision)}">detail</a>' if decision else ""
        rows.append(f'<tr class="line">{cells}<td>{link}</td></tr>')
    return "".join(rows)


def audit(
    base: str,
    enabled: bool,
    filters: Filters,
    events: Sequence[Mapping[str, Any]],
    offset: int,
    more: bool,
    outcomes: Sequence[str],
) -> str:
    if not enabled:
        return '<h1>Audit</h1><p class="notice">The audit log is off: set file = "audit.jsonl" in [audit].</p>'

    def field(name: str, label: str, kind: str = "text") -> str:
        return (
            f'<label>{label}<input type="{kind}" name="{name}" id="f-{name}" value="{e(getattr(filters, name))}">'
            "</label>"
        )

    choices = '<option value="">(any)</option>' + "".join(
        f"<option{' selected' if o == filters.outcome else ''}>{e(o)}</option>" for o in outcomes
    )
    query = filters.query()
    live = f' data-live="{base}/audit/events?{e(urlencode(query))}"' if offset == 0 else ""
    paging = []
    if offset > 0:
        paging.append(
            f'<a id="newer" href="{base}/audit?{e(urlencode({**query, "offset": max(0, offset - 50)}))}">newer</a>'
        )
    if more:
        paging.append(f'<a id="older" href="{base}/audit?{e(urlencode({**query, "offset": offset + 50}))}">older</a>')
    head = "".join(f"<th>{c}</th>" for c in AUDIT_COLUMNS)
    note = "live: new lines appear on top" if offset == 0 else "an older page (not live)"
    return (
        "<h1>Audit</h1>"
        f'<form class="filters" method="get" action="{base}/audit">'
        f"{field('principal', 'Principal')}{field('mount', 'Mount')}{field('tool', 'Tool (public name)')}"
        f'<label>Outcome<select name="outcome" id="f-outcome">{choices}</select></label>'
        f"{field('since', 'From (UTC)', 'datetime-local')}{field('until', 'Until (UTC)', 'datetime-local')}"
        '<button id="filter">Filter</button></form>'
        f'<p class="muted">Newest first; {note}. {" · ".join(paging)}</p>'
        f"<table><thead><tr>{head}<th></th></tr></thead>"
        f'<tbody id="lines"{live}>{audit_rows(base, events)}</tbody></table>'
    )


def audit_line(base: str, event: Mapping[str, Any] | None) -> str:
    if event is None:
        return f'<h1>Audit line</h1><p class="error">No such line.</p><a href="{base}/audit">back</a>'
    text = json.dumps(event, indent=2, ensure_ascii=False)
    return f'<h1>Audit line</h1><pre id="line">{e(text)}</pre><a href="{base}/audit">back to the log</a>'


# -- explain -----------------------------------------------------------------------------------------


def explain(base: str, csrf: str, form: Mapping[str, str], answer: str | None, error: str | None) -> str:
    kinds = "".join(
        f"<option{' selected' if kind == form.get('kind', 'tool') else ''}>{kind}</option>"
        for kind in ("tool", "prompt", "resource")
    )
    out = f'<p class="error" id="explain-error">{e(error)}</p>' if error else ""
    if answer is not None:
        out += f'<pre id="explanation">{e(answer)}</pre>'
    return (
        "<h1>Explain</h1><p class=muted>How the policy decides one call, as <code>mcp-hub explain</code> tells it."
        " Argument values are shown masked.</p>"
        f'<form class="stack" method="post" action="{base}/explain">{csrf_field(csrf)}'
        f'<label>Principal<input name="principal" id="x-principal" value="{e(form.get("principal", ""))}" required>'
        f'</label><label>Kind<select name="kind" id="x-kind">{kinds}</select></label>'
        f'<label>Target (MOUNT/NAME, or the public name)<input name="target" id="x-target" '
        f'value="{e(form.get("target", ""))}" required></label>'
        f'<label>Arguments (JSON object)<textarea name="args" id="x-args" rows="3">{e(form.get("args", "{}"))}'
        '</textarea></label><button id="explain">Explain</button></form>'
        f"{out}"
    )
