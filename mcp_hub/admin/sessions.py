"""Administrators' logins: the key check, the signed session cookie and its CSRF token.

An administrator logs in with a key of `[admin] keys`; the key is compared by its SHA-256 digest, with
every key compared, so the time taken tells nothing about which one matched (or how much of one). The
session cookie holds the administrator's name, the expiry and the session's CSRF token, signed with
HMAC-SHA256 under a key of this process's own: no session outlives the hub, and a cookie names only
an administrator `[admin] keys` still lists.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

COOKIE = "mcp_hub_admin"
"""The session cookie (HttpOnly, SameSite=Strict, path /admin)."""

LOGIN_COOKIE = "mcp_hub_admin_login"
"""The login form's CSRF token (double submit: the form and this cookie carry the same value)."""


@dataclass(frozen=True)
class Session:
    admin: str
    csrf: str
    expires: float


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class Sessions:
    def __init__(self, keys: Mapping[str, str], hours: float, *, clock: Callable[[], float] = time.time) -> None:
        self._keys = [(name, _digest(key)) for name, key in keys.items()]
        self._lifetime = hours * 3600
        self._secret = secrets.token_bytes(32)
        self._clock = clock

    @property
    def lifetime(self) -> int:
        return int(self._lifetime)

    def admin_of(self, key: str) -> str | None:
        """The administrator whose key this is, or None."""
        given = _digest(key)
        found = None
        for name, digest in self._keys:  # every key compared
            if hmac.compare_digest(given, digest):
                found = name
        return found

    def issue(self, admin: str) -> str:
        """A session cookie's value for `admin`."""
        payload = {"a": admin, "c": secrets.token_urlsafe(24), "e": self._clock() + self._lifetime}
        body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")
        return f"{body}.{self._sign(body)}"

    def read(self, cookie: str | None) -> Session | None:
        """The session a cookie carries; None when it is missing, forged, expired or names no administrator."""
        if not cookie or "." not in cookie:
            return None
        body, signature = cookie.rsplit(".", 1)
        if not hmac.compare_digest(signature.encode(), self._sign(body).encode()):
            return None
        try:
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            session = Session(str(payload["a"]), str(payload["c"]), float(payload["e"]))
        except (ValueError, KeyError, TypeError):
            return None
        if session.expires <= self._clock() or session.admin not in {name for name, _ in self._keys}:
            return None
        return session

    def _sign(self, body: str) -> str:
        mac = hmac.new(self._secret, body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def same(given: str | None, expected: str) -> bool:
    """Whether a submitted CSRF token is the expected one (constant time)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())
