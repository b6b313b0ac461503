"""The people's tokens toward `mode = "user"` mounts, kept encrypted at rest: one file, one record per
connection, keyed by principal, mount and issuer; and, in the same file, the consents people gave, one
per (principal, MCP client, mount, browser), so that a person's client is not asked again at their next
sign-in in the same browser (credentials/consent.py). Revoking a person's connection forgets their
consents toward that mount too; withdrawing a consent (`withdraw`: the admin console, `mcp-hub connections
withdraw`) forgets it alone, so that the client's next sign-in asks again, and leaves the tokens be. The
clients the hub registered at authorization servers (RFC 7591, registration.py) are kept there too, per
mount and issuer, so that a restarted hub refreshes people's tokens as the client they were issued to.

The whole file is one Fernet token (cryptography's authenticated encryption: AES-128-CBC and
HMAC-SHA256) of a JSON object: `connections`, a list of records, and `consents`, a list of
[principal, client, mount, browser, given_at] (a file written before consents were kept is a bare list of
records; one written before their time was kept has no `given_at`),
so nothing in it, not even who is connected to what, can be read or changed without the key. It is
written whole, to a temporary file then renamed over the old one (a reader never sees half a file),
with mode 0600, under a lock file beside it (`flock`), so that two processes changing it never lose
each other's change. The hub and the CLI (`mcp-hub connections`) share it: each reads it again when
it changed on disk (its size or modification time), so a connection the CLI revoked is gone for the
hub at its next look. The key comes from the mount's `token_key` (write it as ${VAR}); `new_key`
makes one.

Expiry times here are seconds since the epoch (a record outlives the process).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from platformdirs import user_state_path

try:
    import fcntl
except ImportError:  # Windows: no lock between processes
    fcntl = None  # type: ignore[assignment]


def default_path() -> Path:
    """The file a mount keeps its people's tokens in when it names none: `connections` in the hub's state
    folder (platformdirs' `user_state_path`, as the catalog snapshots)."""
    return user_state_path("mcp-hub", appauthor=False) / "connections"


def new_key() -> str:
    """A fresh key for `token_key`."""
    return Fernet.generate_key().decode()


class StoreError(Exception):
    """The token file cannot be read (another key, or damaged) or written."""


@dataclass(frozen=True)
class Connection:
    """One person's tokens toward one mount, as its authorization server issued them."""

    principal: str
    mount: str
    issuer: str
    access_token: str
    refresh_token: str | None = None
    token_type: str = "Bearer"
    expires_at: float | None = None
    """Seconds since the epoch; None: the authorization server gave no lifetime."""
    scope: str | None = None
    connected_at: float = 0.0
    dpop_key: str | None = None
    """The key pair the tokens are bound to (DPoP, dpop.py `ProofKey.private_jwk`); None: bearer tokens."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.principal, self.mount, self.issuer)

    def fresh(self, early: float) -> bool:
        """Whether the access token is still worth sending: before its expiry less `early` seconds (less a tenth
        of its life, for a short-lived one); always, when the authorization server gave no lifetime."""
        if self.expires_at is None:
            return True
        life = self.expires_at - self.connected_at
        return time.time() < self.expires_at - min(early, max(life, 0) * 0.1)

    def __repr__(self) -> str:  # never show the tokens
        return f"Connection(principal={self.principal!r}, mount={self.mount!r}, issuer={self.issuer!r})"


@dataclass(frozen=True)
class Consent:
    """That a person allowed an MCP client to have the hub act as them at a mount, in one browser or more: what
    the console and the CLI show. Which browsers is not said (their cookies' hashes stay in the file)."""

    principal: str
    client: str
    mount: str
    given_at: float
    """Seconds since the epoch of the latest time it was given; 0.0: given before the hub kept the time."""
    browsers: int
    """In how many browsers it was given."""


class ConnectionStore:
    """The records of one token file (see the module docstring). Safe to use from several threads."""

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        try:
            self._fernet = Fernet(key.encode())
        except (ValueError, TypeError) as exc:
            raise StoreError(f"{path}: the token key is not a Fernet key ({exc})") from None
        self._lock = threading.Lock()
        self._records: dict[tuple[str, str, str], Connection] = {}
        self._consents: dict[tuple[str, str, str, str], float] = {}
        """(principal, client, mount, browser) a person allowed, and when: the browser is the SHA-256 of its
        cookie."""
        self._clients: dict[tuple[str, str], dict[str, str]] = {}
        """(mount, issuer) -> the client the hub registered there (RFC 7591: client_id, and client_secret and
        token_endpoint_auth_method when issued), for the people's sign-ins at that mount (registration.py)."""
        self._seen: tuple[int, int] | None = None
        """(size, mtime_ns) of the file when last read or written; None: never read."""

    def get(self, principal: str, mount: str, issuer: str) -> Connection | None:
        with self._lock:
            self._reload()
            return self._records.get((principal, mount, issuer))

    def list(self, principal: str | None = None) -> list[Connection]:
        with self._lock:
            self._reload()
            found = [r for r in self._records.values() if principal is None or r.principal == principal]
        return sorted(found, key=lambda r: r.key)

    def put(self, record: Connection) -> None:
        with self._lock, self._changing():
            self._reload()
            self._records[record.key] = record
            self._write()

    def remove(
        self, principal: str, mount: str | None = None, issuer: str | None = None, *, consents: bool = True
    ) -> list[Connection]:
        """Forget the principal's connections (to `mount`, and at `issuer`, when given); those forgotten. With
        `consents` (a revoke), their consents toward `mount` (every mount, when none) go too."""
        with self._lock, self._changing():
            self._reload()
            gone = [
                r
                for r in self._records.values()
                if r.principal == principal and mount in (None, r.mount) and issuer in (None, r.issuer)
            ]
            for record in gone:
                del self._records[record.key]
            given = [c for c in self._consents if consents and c[0] == principal and mount in (None, c[2])]
            for key in given:
                del self._consents[key]
            if gone or given:
                self._write()
        return gone

    def consented(self, principal: str, client: str, mount: str, browser: str | None = None) -> bool:
        """Whether `principal` allowed `client` to have the hub act as them at `mount` (in `browser`, when
        given; in any browser, when not)."""
        with self._lock:
            self._reload()
            return any(c[:3] == (principal, client, mount) and browser in (None, c[3]) for c in self._consents)

    def consent(self, principal: str, client: str, mount: str, browser: str) -> None:
        """Keep that `principal` allowed `client` to have the hub act as them at `mount`, in `browser`."""
        with self._lock, self._changing():
            self._reload()
            if (principal, client, mount, browser) not in self._consents:
                self._consents[(principal, client, mount, browser)] = time.time()
                self._write()

    def list_consents(self, principal: str | None = None) -> list[Consent]:
        """The consents on record (the principal's, when given), one per person, client and mount."""
        with self._lock:
            self._reload()
            return _grouped((key, at) for key, at in self._consents.items() if principal in (None, key[0]))

    def withdraw(self, principal: str, client: str, mount: str | None = None) -> list[Consent]:
        """Forget that `principal` allowed `client` (at `mount`, when given; in every browser), so that the
        client's next sign-in asks them again; their tokens are kept. The consents forgotten."""
        with self._lock, self._changing():
            self._reload()
            given = [
                (key, at)
                for key, at in self._consents.items()
                if key[:2] == (principal, client) and mount in (None, key[2])
            ]
            for key, _ in given:
                del self._consents[key]
            if given:
                self._write()
        return _grouped(given)

    def registered(self, mount: str, issuer: str) -> dict[str, str] | None:
        """The client the hub registered at `issuer` for `mount`, if it did."""
        with self._lock:
            self._reload()
            found = self._clients.get((mount, issuer))
            return dict(found) if found is not None else None

    def register(self, mount: str, issuer: str, client: Mapping[str, str]) -> None:
        """Keep the client the hub registered at `issuer` for `mount`."""
        with self._lock, self._changing():
            self._reload()
            self._clients[(mount, issuer)] = dict(client)
            self._write()

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Hold the file's lock (`NAME.lock` beside it) while its records are read and written back, so that a
        change by another process (the CLI's revoke, another hub) is never written over."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            handle = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot lock {self.path}: {exc}") from exc
        try:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            os.close(handle)  # releases the lock

    def _stat(self) -> tuple[int, int] | None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        return (stat.st_size, stat.st_mtime_ns)

    def _reload(self) -> None:
        stat = self._stat()
        if stat is not None and stat == self._seen:
            return
        if stat is None:
            self._records, self._consents, self._clients, self._seen = {}, {}, {}, None
            return
        try:
            data = self._fernet.decrypt(self.path.read_bytes())
        except InvalidToken:
            raise StoreError(f"{self.path} cannot be decrypted with this token_key (another key, or damaged)") from None
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        try:
            content: Any = json.loads(data)
            if isinstance(content, list):  # written before consents were kept
                content = {"connections": content, "consents": []}
            records = [Connection(**row) for row in content["connections"]]
            consents = {
                (str(p), str(c), str(m), str(b)): float(at[0]) if at else 0.0 for p, c, m, b, *at in content["consents"]
            }
            clients = {
                (str(mount), str(issuer)): {str(k): str(v) for k, v in client.items()}
                for mount, issuer, client in content.get("clients", [])
            }
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreError(f"{self.path} holds no token records: {exc}") from None
        self._records = {record.key: record for record in records}
        self._consents = consents
        self._clients = clients
        self._seen = stat

    def _write(self) -> None:
        content = {
            "connections": [asdict(r) for r in self._records.values()],
            "consents": sorted([*key, at] for key, at in self._consents.items()),
            "clients": [[*key, client] for key, client in sorted(self._clients.items())],
        }
        data = self._fernet.encrypt(json.dumps(content).encode())
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
            try:
                with os.fdopen(handle, "wb") as file:  # mkstemp makes it 0600
                    file.write(data)
                os.replace(temporary, self.path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise StoreError(f"cannot write {self.path}: {exc}") from exc
        self._seen = self._stat()


def issued_connection(
    principal: str, server: str, issuer: str, issued: Mapping[str, Any], before: Connection | None
) -> Connection:
    """The connection the token endpoint's answer `issued` makes (a refresh keeps the refresh token it was not
    sent a new one for, and the DPoP key its tokens are bound to)."""
    now = time.time()
    expires_in = issued.get("expires_in")
    lifetime = float(expires_in) if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) else None
    refresh = issued.get("refresh_token")
    fresh = Connection(
        principal=principal,
        mount=server,
        issuer=issuer,
        access_token=str(issued["access_token"]),
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        token_type=str(issued.get("token_type") or "Bearer"),
        expires_at=None if lifetime is None else now + lifetime,
        scope=issued.get("scope") if isinstance(issued.get("scope"), str) else None,
        connected_at=now,
    )
    if before is not None:
        fresh = replace(
            fresh,
            refresh_token=fresh.refresh_token or before.refresh_token,
            scope=fresh.scope or before.scope,
            dpop_key=before.dpop_key,
        )
    return fresh


def _grouped(consents: Iterable[tuple[tuple[str, str, str, str], float]]) -> list[Consent]:
    """One `Consent` per (principal, client, mount) of `consents`, by browser: the latest time, how many browsers."""
    found: dict[tuple[str, str, str], tuple[float, int]] = {}
    for (principal, client, mount, _), at in consents:
        latest, browsers = found.get((principal, client, mount), (0.0, 0))
        found[(principal, client, mount)] = (max(latest, at), browsers + 1)
    return [Consent(*key, at, browsers) for key, (at, browsers) in sorted(found.items())]


_STORES: dict[Path, ConnectionStore] = {}
_STORES_LOCK = threading.Lock()


def store_at(path: str | Path | None, key: str) -> ConnectionStore:
    """The one `ConnectionStore` of this process for the file at `path` (None: `default_path()`), so that the
    mounts sharing a file share its records and its lock."""
    resolved = Path(path).expanduser().resolve() if path is not None else default_path()
    with _STORES_LOCK:
        store = _STORES.get(resolved)
        if store is None:
            store = _STORES[resolved] = ConnectionStore(resolved, key)
        return store
