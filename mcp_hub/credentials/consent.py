"""The hub's consent page, before a person's sign-in goes to a `mode = "user"` mount's authorization server.

The hub signs in to that authorization server as one client (its static `client_id`) for whichever MCP
client asks. An authorization server that remembers a person's earlier approval of the hub's client
approves again without a word, so, without a step of the hub's own, anyone could hand a person a sign-in
link made for themselves and get that person's account connected in their own name (the "confused
deputy" of the MCP spec's security best practices). The MCP spec asks such a proxy to obtain the
person's consent for each client before forwarding them to the third-party authorization server.

So the link a client is given (`ask`) opens the hub's page, `GET /oauth/consent/ID` (ID opaque, good
once and for `LOGIN_SECONDS`; with replicas, `REPLICA.RANDOM`, naming the replica that keeps it, to which
the others forward the page, see `issue_as`), which names the MCP client asking, the person (principal) the hub will
act for, the server and its authorization server, the scopes asked, and where the authorization server
sends the browser back. Allow and Deny post the form back to the same address with a token the page
carries (CSRF); a post from another origin, or without the page's token, is refused. Only on Allow does
the hub begin the authorization (its `state` and PKCE are made then, `Asked.allow`) and send the browser
there, setting a cookie (`COOKIE`) that binds this browser to that `state`: the callback takes the code
only from a browser that brings it (`bound`). Deny forgets the sign-in (`Asked.deny`); nothing is kept.

A consent given is remembered per (principal, client, mount, browser) in the mount's token file
(connections.py), once the sign-in it allowed completes; when the browser that opens the page brings
the cookie of a browser in which that person allowed that client at that mount before, the page sends
it on at once. Remembering the consent without the browser would not do: a person whose consent for
their own client is on record could hand someone else their own link, and that browser, sent on at
once to an authorization server that approves again without asking, would connect its account in
their name. Revoking the connection forgets the consents.

The cookie is HttpOnly and SameSite=Lax (it comes back on the authorization server's redirect, a
top-level navigation), random (the hub keeps only its SHA-256), one value for all of a browser's
sign-ins, and lives `BROWSER_SECONDS` from the last. When the hub's `redirect_uri` is https it is
`__Host-mcp-hub-sign-in`, with `Secure` and `Path=/` (the prefix requires both, and keeps a sibling
host from setting it); on plain http (a loopback hub, as in tests) it is `mcp-hub-sign-in`, its path
limited to the hub's `/oauth` paths.

Every page here is served with `X-Frame-Options: DENY` and CSP `frame-ancestors 'none'` (it cannot be
framed, so it cannot be clicked through), `Cache-Control: no-store` and no referrer, and escapes all
it shows.
"""

from __future__ import annotations

import hashlib
import html
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_hub.config import USER_CALLBACK_PATH

LOGIN_SECONDS = 600.0
"""How long a sign-in link stays good."""
BROWSER_SECONDS = 90 * 24 * 3600
"""How long a browser keeps its binding cookie (and so the consents given in it), from its last sign-in."""
ASKED_MAX = 4096
"""Consent pages open at once (the oldest is dropped beyond that)."""
CONSENT_PATH = "/oauth/consent"
"""Where the hub shows its consent page (`CONSENT_PATH/ID`), beside `/oauth/callback`."""
COOKIE = "mcp-hub-sign-in"
"""The binding cookie's name on plain http; `__Host-` before it on https."""
FORM_MAX = 16 * 1024
"""The largest consent form taken, in bytes."""

_HEADERS = {
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
}
_VALUE = re.compile(r"[A-Za-z0-9_-]{43}")
"""What a binding cookie's value looks like (`secrets.token_urlsafe(32)`)."""


@dataclass(eq=False)
class Asked:
    """A person's consent, asked: what the page shows, and what Allow and Deny do."""

    principal: str
    client: str
    """The MCP client asking: its OAuth client id, or the API key's name (`client_of`)."""
    server: str
    issuer: str
    scope: str | None
    redirect_uri: str
    """The hub's `/oauth/callback`, where the authorization server sends the browser back."""
    on_record: Callable[[str], bool]
    """Whether the person's consent for this client and mount, given in the browser whose binding (its cookie
    value's SHA-256) is given, is on record (asked when the page is opened)."""
    allow: Callable[[str], Awaitable[str]]
    """Begin the authorization for the browser whose binding (the cookie value's SHA-256) is given: the
    authorization server's URL to send it to."""
    deny: Callable[[], None]
    expires_at: float = field(default_factory=lambda: time.monotonic() + LOGIN_SECONDS)
    """On `time.monotonic()`'s clock."""
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    """The token the page's form carries back."""


_ASKED: OrderedDict[str, Asked] = OrderedDict()
"""consent ID -> the consent it asks (every mount's, for the one page)."""

_REPLICA = ""
"""With replicas (`[cluster]`): this replica's id and a dot, before each consent ID and `state` made here."""


def issue_as(replica: str | None) -> None:
    """Begin the consent IDs and `state`s made from now on with `replica`'s id and a dot (`[cluster]`: the other
    replicas send a browser that brings one to it, server/http/replicas.py); None: random alone."""
    global _REPLICA
    _REPLICA = f"{replica}." if replica else ""


def new_id() -> str:
    """A new consent ID or `state`: random, after this replica's id and a dot with replicas (`issue_as`)."""
    return _REPLICA + secrets.token_urlsafe(32)


def ask(asked: Asked) -> str:
    """The address of the page that asks the person `asked` (the sign-in link a client is given)."""
    _forget_expired()
    while len(_ASKED) >= ASKED_MAX:
        _ASKED.popitem(last=False)
    consent_id = new_id()
    _ASKED[consent_id] = asked
    return f"{_oauth_base(asked.redirect_uri)}{CONSENT_PATH.removeprefix('/oauth')}/{consent_id}"


def client_of(principal: str) -> str:
    """The MCP client a principal's request comes through, as consent names and remembers it: the client id
    of its OAuth access token (an OAuth caller's principal, a `policy.Principal`, is a `str` that carries its
    token's `client_id`), `api-key:NAME` for an API key, "stdio" for the local user."""
    if hasattr(principal, "client_id"):
        client_id = getattr(principal, "client_id", None)
        issuer = getattr(principal, "issuer", None) or "an unnamed issuer"
        return str(client_id) if client_id else f"an OAuth client of {issuer} (no client id)"
    return "stdio" if principal == "stdio" else f"api-key:{principal}"


def bound(request: Request, redirect_uri: str, binding: str) -> bool:
    """Whether the browser of `request` brings the cookie whose SHA-256 is `binding`."""
    value = request.cookies.get(_cookie_name(redirect_uri))
    return value is not None and secrets.compare_digest(_digest(value), binding)


def page(status: int, text: str, *, body: str = "") -> Response:
    """A plain page of the hub's sign-in (`text` escaped; `body`, already escaped HTML, after it)."""
    document = f"<!doctype html><meta charset=utf-8><title>mcp-hub</title><p>{html.escape(text)}</p>{body}"
    return HTMLResponse(document, status_code=status, headers=_HEADERS)


async def show(request: Request) -> Response:
    """`GET /oauth/consent/ID`: the consent page, or, with consent on record, the authorization server."""
    asked = _find(request)
    if asked is None:
        return _unknown()
    value = request.cookies.get(_cookie_name(asked.redirect_uri), "")
    if _VALUE.fullmatch(value) and asked.on_record(_digest(value)):
        _ASKED.pop(request.path_params["consent_id"], None)
        return await _allow(request, asked, status=302)
    return _consent_page(asked)


async def decide(request: Request) -> Response:
    """`POST /oauth/consent/ID`: the person's Allow or Deny, from the page (its CSRF token, same origin)."""
    asked = _find(request)
    if asked is None:
        return _unknown()
    origin = request.headers.get("origin")
    if origin is not None and _origin(origin) != _origin(asked.redirect_uri):
        return page(403, "This form was sent from another site; nothing was done.")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_MAX:
            return page(413, "This form is too large; nothing was done.")
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    token = (form.get("csrf") or [""])[0]
    if not secrets.compare_digest(token.encode(), asked.csrf.encode()):
        return page(403, "This form lacks the page's CSRF token; nothing was done. Open the sign-in link again.")
    decision = (form.get("decision") or [""])[0]
    if decision not in ("allow", "deny"):
        return page(400, "Choose Allow or Deny.")
    _ASKED.pop(request.path_params["consent_id"], None)  # good once
    if decision == "deny":
        asked.deny()
        return page(200, f"You denied {asked.client} access to {asked.server} as {asked.principal}. Nothing was kept.")
    return await _allow(request, asked, status=303)


def consent_routes() -> list[BaseRoute]:
    """The consent page's routes (`CONSENT_PATH/ID`)."""
    return [
        Route(f"{CONSENT_PATH}/{{consent_id}}", endpoint=show, methods=["GET"]),
        Route(f"{CONSENT_PATH}/{{consent_id}}", endpoint=decide, methods=["POST"]),
    ]


async def _allow(request: Request, asked: Asked, *, status: int) -> Response:
    """Begin the authorization and send the browser there, bound to it by the cookie."""
    name = _cookie_name(asked.redirect_uri)
    value = request.cookies.get(name, "")
    if not _VALUE.fullmatch(value):
        value = secrets.token_urlsafe(32)
    target = await asked.allow(_digest(value))
    response = RedirectResponse(target, status_code=status, headers=_HEADERS)
    secure = name.startswith("__Host-")
    response.set_cookie(
        name,
        value,
        max_age=BROWSER_SECONDS,
        path="/" if secure else _oauth_path(asked.redirect_uri),
        secure=secure,
        httponly=True,
        samesite="lax",
    )
    return response


def _consent_page(asked: Asked) -> Response:
    e = html.escape
    scopes = asked.scope.split() if asked.scope else []
    listed = "".join(f"<li><code>{e(s)}</code></li>" for s in scopes) or "<li>the server's default scopes</li>"
    body = (
        "<style>body{font-family:sans-serif;max-width:40em;margin:2em auto}dt{font-weight:bold}"
        "button{font-size:1.1em;margin-right:1em}</style>"
        f"<h1>Allow <span id=client>{e(asked.client)}</span> to act at "
        f"<span id=server>{e(asked.server)}</span> as you?</h1>"
        "<dl>"
        f"<dt>MCP client asking</dt><dd id=client-id>{e(asked.client)}</dd>"
        f"<dt>You, as the hub knows you</dt><dd id=principal>{e(asked.principal)}</dd>"
        f"<dt>Server</dt><dd id=mount>{e(asked.server)}</dd>"
        f"<dt>Its authorization server</dt><dd id=issuer>{e(asked.issuer)}</dd>"
        f"<dt>Scopes asked</dt><dd><ul id=scopes>{listed}</ul></dd>"
        f"<dt>Where the authorization server sends you back</dt><dd id=redirect-uri>{e(asked.redirect_uri)}</dd>"
        "</dl>"
        f"<p>Allow only if you are {e(asked.principal)} and you asked {e(asked.client)} for this just now. "
        "If someone sent you this link, choose Deny.</p>"
        '<form method="post">'
        f'<input type="hidden" name="csrf" value="{e(asked.csrf)}">'
        '<button type="submit" name="decision" value="allow">Allow</button>'
        '<button type="submit" name="decision" value="deny">Deny</button>'
        "</form>"
    )
    return page(200, f"mcp-hub asks before {asked.principal} signs in to {asked.server}.", body=body)


def _find(request: Request) -> Asked | None:
    _forget_expired()
    return _ASKED.get(request.path_params["consent_id"])


def _unknown() -> Response:
    return page(400, "This sign-in link is not known, was already used, or has expired. Start again.")


def _forget_expired() -> None:
    now = time.monotonic()
    for consent_id in [consent_id for consent_id, asked in _ASKED.items() if asked.expires_at <= now]:
        del _ASKED[consent_id]


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _cookie_name(redirect_uri: str) -> str:
    return f"__Host-{COOKIE}" if urlsplit(redirect_uri).scheme == "https" else COOKIE


def _oauth_base(redirect_uri: str) -> str:
    """The hub's `/oauth` address, as a browser reaches it: `redirect_uri` without `/callback`."""
    return redirect_uri.split("?", 1)[0].removesuffix(USER_CALLBACK_PATH.removeprefix("/oauth"))


def _oauth_path(redirect_uri: str) -> str:
    return urlsplit(_oauth_base(redirect_uri)).path or "/"


def _origin(url: str) -> str:
    """The origin of `url` as a browser's `Origin` header names it (no default port)."""
    parts = urlsplit(url.lower())
    try:
        port = parts.port
    except ValueError:
        return url
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None and port != default else "")
