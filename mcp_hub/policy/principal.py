"""A principal as the policy sees it: a name, and what the caller's credential grants it.

An API key or the stdio user is a plain `str`, its name. An OAuth access token makes a `Principal`:
still that name (it compares, hashes and prints as the name, so rate limits, tasks and the audit
line count one person once, whatever scopes each of their tokens carries), with the token's
scopes and groups, which select a profile ([scopes], [groups]) and satisfy a rule's `scopes`, and
the token's issuer, subject and client id, for the audit line.

What a principal may see depends on its grants as well as its name: a cache of what was shown to
whom keys on `seen_as(principal)`, not on the name alone.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable


class Principal(str):
    """A principal's name, with the scopes and groups its access token grants."""

    scopes: frozenset[str]
    groups: frozenset[str]
    issuer: str | None
    subject: str | None
    client_id: str | None

    def __new__(
        cls,
        name: str,
        *,
        scopes: Iterable[str] = (),
        groups: Iterable[str] = (),
        issuer: str | None = None,
        subject: str | None = None,
        client_id: str | None = None,
    ) -> Principal:
        principal = super().__new__(cls, name)
        principal.scopes = frozenset(scopes)
        principal.groups = frozenset(groups)
        principal.issuer = issuer
        principal.subject = subject
        principal.client_id = client_id
        return principal

    def __repr__(self) -> str:
        return f"Principal({str(self)!r}, scopes={sorted(self.scopes)}, groups={sorted(self.groups)})"


def scopes_of(principal: str) -> frozenset[str]:
    return principal.scopes if isinstance(principal, Principal) else frozenset()


def groups_of(principal: str) -> frozenset[str]:
    return principal.groups if isinstance(principal, Principal) else frozenset()


def seen_as(principal: str) -> Hashable:
    """What decides what `principal` may see: its name, and its scopes and groups when it has any."""
    if isinstance(principal, Principal) and (principal.scopes or principal.groups):
        return (str(principal), principal.scopes, principal.groups)
    return str(principal)


def credential_of(principal: str) -> dict[str, str | None]:
    """The audit line's account of the caller's token: its issuer, subject and client id (None each without one)."""
    if isinstance(principal, Principal):
        return {"issuer": principal.issuer, "subject": principal.subject, "client_id": principal.client_id}
    return {"issuer": None, "subject": None, "client_id": None}
