"""Administrators' logins: the key check, and the sessions, kept on the server, with their CSRF tokens.

An administrator logs in with a key, or signs in through the organisation's identity provider (sso.py): a
person's session keeps their issuer, subject and name or email, and a fingerprint of the `[admin.oidc]`
settings that made them an administrator; it ends at once when those change or go (a live reload). It keeps
what the identity provider issued them (ID token, access token, refresh token), sealed (Fernet) under a key made
from the session's cookie, which the store never holds: only a request bearing the cookie can read them, not
whoever reads Redis; and when the provider last vouched for them (sso.py asks again after `recheck_minutes`).

An administrator logs in with a key of `[admin] keys` as the hub has it now (the keys apply on a live
reload); the key is compared by its SHA-256 digest, with every key compared, so the time taken tells
nothing about which one matched (or how much of one).

The session cookie holds only the session's id, 32 random bytes; what the session is (the administrator,
its CSRF token, when it expires, and a fingerprint of the key it logged in with) is kept on the server,
under the SHA-256 of the id, for as long as the session lasts: in this process's memory, or, with
`[cluster] redis`, in Redis, where every replica reads it (`mcp-hub:admin-session:...`, expiring with
the session). So a session ends at once, on every replica: at logout (its record is deleted), and when
the key it logged in with leaves `[admin] keys` or changes (each request compares the record's key
fingerprint with the administrator's key in force, and deletes a record that no longer matches).

While Redis is down (see mcp_hub/cluster.py), the sessions kept there are not readable: those
administrators log in again, and that session is kept in this replica's memory until Redis answers again,
when the sessions kept in memory meanwhile are dropped.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import anyio
from cryptography.fernet import Fernet, InvalidToken
from starlette.requests import Request

from mcp_hub.cluster import KEY_PREFIX, TIMEOUT, Cluster, errors
from mcp_hub.observe.audit_log import Administrator

COOKIE = "mcp_hub_admin"
"""The session cookie (HttpOnly, SameSite=Strict, path /admin): the session's id."""

LOGIN_COOKIE = "mcp_hub_admin_login"
"""The login form's CSRF token (double submit: the form and this cookie carry the same value)."""


@dataclass(frozen=True)
class Session:
    admin: str
    csrf: str
    expires: float
    key: str
    """The fingerprint of the key the administrator logged in with (`fingerprint`)."""
    name: str
    """Where the session is kept: the SHA-256 of its id (never the id itself)."""
    issuer: str | None = None
    """A person signed in through the identity provider (sso.py): its issuer, their subject there, and their
    name and email as it gave them ("Alice Admin <alice@example.com>"); None for a key's login."""
    subject: str | None = None
    person: str | None = None
    tokens: Mapping[str, str] = field(default_factory=dict, repr=False)
    """What the identity provider issued the person (`id_token`, `access_token`, `refresh_token`, each when given):
    kept sealed with the session, under a key made from its cookie, so that only a request bearing the cookie can
    read them (not whoever reads the store)."""
    checked: float | None = None
    """When the identity provider last said the person is an administrator (the console's wall clock)."""
    cookie: str = field(default="", repr=False)
    """The cookie the session was read with (never kept): what its tokens are unsealed and sealed again with."""

    @property
    def id_token(self) -> str | None:
        """The ID token the person signed in with: the `id_token_hint` of their sign-out at the identity provider."""
        return self.tokens.get("id_token")

    @property
    def who(self) -> Administrator:
        """The administrator, as the audit log names them."""
        return Administrator(self.admin, issuer=self.issuer, subject=self.subject, person=self.person)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def fingerprint(key: str) -> str:
    """What a session keeps of the key it logged in with: enough to tell it changed, not to find it."""
    return hashlib.sha256(b"mcp-hub admin key\0" + key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Sessions:
    """The console's sessions. `keys()`: the administrators' keys in force (name -> key)."""

    def __init__(
        self,
        keys: Callable[[], Mapping[str, str]],
        hours: float,
        cluster: Cluster | None = None,
        *,
        sso: Callable[[], str | None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keys = keys
        self._sso = sso
        """The fingerprint of the single sign-on settings in force (`sso.fingerprint`); None: it is off."""
        self._digests: tuple[Mapping[str, str] | None, list[tuple[str, bytes]]] = (None, [])
        self._lifetime = hours * 3600
        self._clock = clock
        self._store = store(cluster, clock)

    @property
    def lifetime(self) -> int:
        return int(self._lifetime)

    def admin_of(self, key: str) -> str | None:
        """The administrator whose key this is, or None."""
        keys = self._keys()
        if self._digests[0] is not keys:  # the keys changed (a reload): their digests, once
            self._digests = (keys, [(name, _digest(value)) for name, value in keys.items()])
        given = _digest(key)
        found = None
        for name, digest in self._digests[1]:  # every key compared
            if hmac.compare_digest(given, digest):
                found = name
        return found

    async def begin(self, admin: str, key: str) -> str:
        """A new session for `admin`, who just logged in with `key`: its cookie's value."""
        cookie = secrets.token_urlsafe(32)
        record = {
            "a": admin,
            "c": secrets.token_urlsafe(24),
            "e": self._clock() + self._lifetime,
            "k": fingerprint(key),
        }
        await self._store.put(_name(cookie), json.dumps(record, separators=(",", ":")).encode(), self._lifetime)
        return cookie

    async def begin_signed_in(
        self,
        admin: str,
        *,
        issuer: str,
        subject: str,
        person: str | None,
        sso: str,
        tokens: Mapping[str, str] | None = None,
    ) -> str:
        """A new session for a person the identity provider vouched for (sso.py), made an administrator by the
        single sign-on settings whose fingerprint is `sso`, with the tokens it issued them: its cookie's value."""
        cookie = secrets.token_urlsafe(32)
        now = self._clock()
        record = {
            "a": admin,
            "c": secrets.token_urlsafe(24),
            "e": now + self._lifetime,
            "k": sso,
            "i": issuer,
            "s": subject,
            "p": person,
            "o": _seal(cookie, tokens or {}),
            "ck": now,
        }
        await self._store.put(_name(cookie), json.dumps(record, separators=(",", ":")).encode(), self._lifetime)
        return cookie

    async def checked_again(self, session: Session, tokens: Mapping[str, str]) -> Session:
        """`session`, which the identity provider vouched for again just now with `tokens`, kept so."""
        now = self._clock()
        record = {
            "a": session.admin,
            "c": session.csrf,
            "e": session.expires,
            "k": session.key,
            "i": session.issuer,
            "s": session.subject,
            "p": session.person,
            "o": _seal(session.cookie, tokens),
            "ck": now,
        }
        await self._store.put(session.name, json.dumps(record, separators=(",", ":")).encode(), session.expires - now)
        return replace(session, tokens=dict(tokens), checked=now)

    async def again(self, session: Session) -> Session | None:
        """`session` as it is kept now (None: it ended)."""
        return await self._find(session.name, session.cookie)

    async def read(self, cookie: str | None) -> Session | None:
        """The session a cookie names; None when there is none (never was, logged out, expired, or its key is
        no longer the administrator's)."""
        if not cookie or len(cookie) > 128:
            return None
        return await self._find(_name(cookie), cookie)

    async def current(self, session: Session) -> bool:
        """Whether `session` still holds (a live stream asks as it goes)."""
        return await self._find(session.name) is not None

    async def end(self, session: Session) -> None:
        """Log out: the session is gone, on every replica."""
        await self._store.delete(session.name)

    async def _find(self, name: str, cookie: str = "") -> Session | None:
        value = await self._store.get(name)
        if value is None:
            return None
        try:
            record = json.loads(value)
            session = Session(
                str(record["a"]),
                str(record["c"]),
                float(record["e"]),
                str(record["k"]),
                name,
                *(None if record.get(key) is None else str(record[key]) for key in ("i", "s", "p")),
                tokens=_unsealed(cookie, record["o"]) if cookie and record.get("o") else {},
                checked=float(record["ck"]) if record.get("ck") is not None else None,
                cookie=cookie,
            )
        except (ValueError, KeyError, TypeError):
            return None
        if session.issuer is not None:  # signed in: the settings that made them an administrator still hold
            held = self._sso()
        else:
            key = self._keys().get(session.admin)
            held = None if key is None else fingerprint(key)
        if session.expires <= self._clock() or held is None or not hmac.compare_digest(held, session.key):
            await self._store.delete(name)  # expired, or what it logged in with was removed or changed
            return None
        return session


def _token_key(cookie: str) -> Fernet:
    digest = hashlib.sha256(b"mcp-hub admin session tokens\0" + cookie.encode("utf-8", "surrogatepass")).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _seal(cookie: str, tokens: Mapping[str, str]) -> str:
    """`tokens`, encrypted under a key made from the session's cookie (which the store never holds)."""
    return _token_key(cookie).encrypt(json.dumps(dict(tokens)).encode()).decode()


def _unsealed(cookie: str, sealed: object) -> dict[str, str]:
    try:
        found = json.loads(_token_key(cookie).decrypt(str(sealed).encode()))
    except (InvalidToken, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _name(cookie: str) -> str:
    return hashlib.sha256(cookie.encode("utf-8", "surrogatepass")).hexdigest()


def store(cluster: Cluster | None, clock: Callable[[], float] = time.time, kind: str = "admin-session") -> Records:
    """Where records live while they last: in this process's memory, or in the cluster's Redis (under
    `mcp-hub:KIND:...`)."""
    return _Shared(cluster, KEY_PREFIX + kind + ":") if cluster is not None else _Memory(clock)


class Records(Protocol):
    """Records kept by name until they expire (sessions here; sign-ins under way in sso.py)."""

    async def put(self, name: str, value: bytes, ttl: float) -> None: ...
    async def get(self, name: str) -> bytes | None: ...
    async def take(self, name: str) -> bytes | None:
        """The record, deleted as it is read: good once, whatever the replica."""
        ...

    async def delete(self, name: str) -> None: ...


class _Memory:
    """Sessions in this process's memory: name -> (record, when it expires)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._records: dict[str, tuple[bytes, float]] = {}
        self._clock = clock

    async def put(self, name: str, value: bytes, ttl: float) -> None:
        now = self._clock()
        for old in [old for old, (_, until) in self._records.items() if until <= now]:
            del self._records[old]
        self._records[name] = (value, now + ttl)

    async def get(self, name: str) -> bytes | None:
        found = self._records.get(name)
        return found[0] if found is not None and found[1] > self._clock() else None

    async def take(self, name: str) -> bytes | None:
        value = await self.get(name)
        self._records.pop(name, None)
        return value

    async def delete(self, name: str) -> None:
        self._records.pop(name, None)

    def clear(self) -> None:
        self._records.clear()


class _Shared:
    """Sessions in the cluster's Redis, expiring with them; in this replica's memory while Redis is down."""

    def __init__(self, cluster: Cluster, prefix: str) -> None:
        self._cluster = cluster
        self._prefix = prefix
        self._local = _Memory()
        cluster.on_recovered.append(self._recovered)

    async def put(self, name: str, value: bytes, ttl: float) -> None:
        if self._cluster.up:
            try:
                with anyio.fail_after(TIMEOUT):
                    await self._cluster.client.set(self._prefix + name, value, px=max(1, int(ttl * 1000)))
                return
            except errors() as exc:  # a TimeoutError is an OSError
                self._cluster.failed(exc)
        await self._local.put(name, value, ttl)

    async def get(self, name: str) -> bytes | None:
        if self._cluster.up:
            try:
                with anyio.fail_after(TIMEOUT):
                    value = await self._cluster.client.get(self._prefix + name)
                return value if isinstance(value, bytes) else None
            except errors() as exc:
                self._cluster.failed(exc)
        return await self._local.get(name)

    async def take(self, name: str) -> bytes | None:
        if self._cluster.up:
            try:
                with anyio.fail_after(TIMEOUT):
                    value = await self._cluster.client.getdel(self._prefix + name)
                return value if isinstance(value, bytes) else None
            except errors() as exc:
                self._cluster.failed(exc)
        return await self._local.take(name)

    async def delete(self, name: str) -> None:
        await self._local.delete(name)
        if self._cluster.up:
            try:
                with anyio.fail_after(TIMEOUT):
                    await self._cluster.client.delete(self._prefix + name)
            except errors() as exc:
                self._cluster.failed(exc)

    async def _recovered(self) -> None:
        """Redis answers again: the sessions begun meanwhile, here only, end."""
        self._local.clear()


def same(given: str | None, expected: str) -> bool:
    """Whether a submitted CSRF token is the expected one (constant time)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def address_of(request: Request) -> str | None:
    """The network address of the browser behind a console request, as uvicorn gives it (a trusted proxy's
    `X-Forwarded-For` taken: `[http] forwarded_allow_ips`), for the audit line; None when it has none."""
    return request.client.host if request.client else None
