"""Skills (SEP-2640, the `io.modelcontextprotocol/skills` extension) through the hub: `skills/list` merged.

A mount that declares the extension serves Agent Skills: each skill a folder of files, each file a
resource (conventionally `skill://<skill-path>/<file>`). Through the hub a `skill://` URI keeps its
scheme with the mount as the first segment of its path (`skill://docs/pdf/SKILL.md`, naming.py), so
the path still ends in the skill's name as the extension requires, and a client that knows skills
by their scheme knows them here.

`skills/get` and `resources/directory/read` are calls like `resources/read` (router.py): routed by
the URI, through the chain (audit, policy on the URI as a resource, rate limits, guardrails). A
mount that does not declare the extension (or, for folders, `directoryRead`) answers as a server
without the skill or folder would: -32602. The skill files themselves are read with `resources/read`,
untouched, so their bytes and the digests of the entries agree through the hub as they do direct.

`skills/list` (here) is merged from every mount that declares the extension, in mount order, page
by page: a cursor of the hub holds the mount and that mount's own cursor, so each upstream page is
asked for when the client asks for it and nothing is kept between requests. The cursor is sealed
(`Cursors`: Fernet, authenticated encryption): a client can neither read the mount in it nor make
one, and a cursor given to one caller at one endpoint is refused (-32602, as any cursor the hub did
not give) from another caller, at another endpoint, or once its mount is no longer one the caller
lists there. An entry is shown when the caller may see its `SKILL.md` as a resource (the policy, and
the curated endpoint's selection); its manifest passes as the server sent it (URIs given the hub's
form; digests, sizes, frontmatter untouched). A server page's `_meta` is kept (`merge_meta`): a hub
page is one server page unless nothing of that page could be shown, and the `_meta` of the pages a
hub page was made of merge key by key, a key two pages gave different values for left out (neither
server's value describes the merged page). A mount that fails to answer is left out of that listing
(logged): the extension lets a listing be partial, and a client can still `skills/get` a skill it
knows the URI of.

There is no list_changed notification of skills in the extension: a server's skill files are resources,
and its `notifications/resources/list_changed` reaches the hub's clients as the other lists' do.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from mcp.shared.exceptions import MCPError

from mcp_hub.chain.router import Router
from mcp_hub.errors import HubError, InvalidCursor
from mcp_hub.policy import PolicySet
from mcp_hub.server.curated import Selection
from mcp_hub.upstream import SKILLS_EXTENSION, Origin

logger = logging.getLogger("mcp_hub.server")

SKILL_CALLS = ("skills/get", "resources/directory/read")
"""The extension's requests that name one skill or folder by URI: served as calls, like `resources/read`."""

_PAGES_PER_REQUEST = 32
"""How many upstream pages one `skills/list` asks for at most while it has found nothing to show (a server
whose pages are all hidden from the caller must not keep one request going forever)."""


def skills_settings(declared: Sequence[Any]) -> dict[str, Any] | None:
    """The extension's settings the hub declares, from those its mounts declared (None: no mount serves
    skills): `directoryRead` when any does, since the hub sends each folder read to its own mount."""
    settings = [d for d in declared if isinstance(d, Mapping)]
    if not settings:
        return None
    return {"directoryRead": any(s.get("directoryRead") is True for s in settings)}


class Cursors:
    """Sealed `skills/list` cursors: the mount and its server's cursor, for one caller at one endpoint.

    Fernet (cryptography's authenticated encryption) under a key of this process, or the replicas' shared key
    (`use_key`, as parked calls' states are sealed): opaque to the client, and any cursor this hub did not seal,
    altered, or sealed for another caller or endpoint, opens as `InvalidCursor`. Cursors do not expire: a
    listing is resumed, not authorised, by one (the caller's view is checked again on every page)."""

    def __init__(self) -> None:
        self._keys = [secrets.token_bytes(32)]

    def use_key(self, key: bytes) -> None:
        """Seal with `key` from now on (the replicas' shared key), still opening what the old key sealed."""
        if key not in self._keys:
            self._keys.insert(0, key)

    def _fernet(self) -> MultiFernet:
        return MultiFernet(
            [
                Fernet(base64.urlsafe_b64encode(hashlib.sha256(b"mcp-hub skills/list cursor\0" + k).digest()))
                for k in self._keys
            ]
        )

    def seal(self, mount: str, inner: str | None, caller: str, endpoint: str | None) -> str:
        data = json.dumps({"m": mount, "c": inner, "p": caller, "e": endpoint}, separators=(",", ":"))
        return self._fernet().encrypt(data.encode()).decode()

    def open(self, cursor: str, caller: str, endpoint: str | None) -> tuple[str, str | None]:
        """The mount and its server's cursor in `cursor`. Raises `InvalidCursor` for anything this hub did not seal
        for `caller` at `endpoint`."""
        try:
            data = json.loads(self._fernet().decrypt(cursor.encode()))
        except (InvalidToken, ValueError, TypeError):
            raise InvalidCursor(cursor) from None
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("m"), str)
            or not isinstance(data.get("c"), str | None)
            or data.get("p") != caller
            or data.get("e") != endpoint
        ):
            raise InvalidCursor(cursor)
        return data["m"], data["c"]


def merge_meta(metas: Sequence[Any]) -> dict[str, Any] | None:
    """The `_meta` of a hub page made of several server pages: each key one page gave, or that the pages giving
    it agree on; a key pages gave different values for is left out (None: nothing is left)."""
    merged: dict[str, Any] = {}
    clashing: set[str] = set()
    for meta in metas:
        if not isinstance(meta, Mapping):
            continue
        for key, value in meta.items():
            if key in merged and merged[key] != value:
                clashing.add(key)
            merged.setdefault(key, value)
    kept = {key: value for key, value in merged.items() if key not in clashing}
    return kept or None


class SkillListing:
    """`skills/list` at one endpoint: the skills of the mounts serving them, as the caller may see them."""

    def __init__(self, router: Router, mounts: Callable[[], Sequence[str]], selection: Selection) -> None:
        self._router = router
        self._mounts = mounts
        """The mounts, in order (enabled or not: the router knows which have declared the extension)."""
        self._selection = selection
        self.cursors = Cursors()

    def serving(self) -> list[str]:
        """The mounts that serve skills (declared the extension when they connected) and that this endpoint
        selects, in mount order."""
        return [
            m for m in self._mounts() if self._selection.admits_mount(m) and self._router.skills_settings(m) is not None
        ]

    async def list(
        self, params: Mapping[str, Any], principal: str, policy: PolicySet, origin: Origin, *, modern: bool
    ) -> dict[str, Any]:
        """One page of the merged listing. Raises `InvalidCursor` for a cursor this hub did not give, or one
        naming a mount that no longer serves skills."""
        mounts = self.serving()
        cursor = params.get("cursor")
        position, inner = 0, None
        if cursor is not None:
            if not isinstance(cursor, str):
                raise InvalidCursor(repr(cursor))
            mount, inner = self.cursors.open(cursor, principal, self._selection.name)
            if mount not in mounts:  # no longer serving skills, or never one this caller lists here
                raise InvalidCursor(cursor)
            position = mounts.index(mount)
        shown: list[dict[str, Any]] = []
        metas: list[Any] = []
        following: str | None = None
        for _ in range(_PAGES_PER_REQUEST):
            if position >= len(mounts):
                break
            mount = mounts[position]
            page, inner, meta = await self._page(mount, inner, origin)
            metas.append(meta)
            shown += [
                self._router.map_skill(mount, entry)
                for entry in page
                if isinstance(entry, dict)
                and isinstance(entry.get("uri"), str)
                and self._selection.visible(policy, principal, "resource", mount, entry["uri"])
            ]
            if inner is None:
                position += 1
            following = None
            if position < len(mounts):
                following = self.cursors.seal(mounts[position], inner, principal, self._selection.name)
            if shown:
                break
        result: dict[str, Any] = {"skills": shown}
        meta = merge_meta(metas)
        if meta is not None:
            result["_meta"] = meta
        if following is not None:
            result["nextCursor"] = following
        if modern:  # the extension's listing carries the base protocol's cache hints from 2026-07-28 on
            result |= {"ttlMs": 0, "cacheScope": "private"}
        return result

    async def _page(self, mount: str, cursor: str | None, origin: Origin) -> tuple[list[Any], str | None, Any]:
        """One page of a mount's own listing, its next cursor and its `_meta`; nothing (and no cursor) when it
        fails."""
        try:
            params = {"cursor": cursor} if cursor else {}
            result = await self._router.forward("skills/list", mount, params, origin=origin)
        except (HubError, MCPError) as exc:
            logger.warning("skills/list: %s answered no listing (%s); its skills are left out", mount, exc)
            return [], None, None
        skills = result.get("skills")
        following = result.get("nextCursor")
        if not isinstance(following, str) or not following:
            following = None
        return (skills if isinstance(skills, list) else []), following, result.get("_meta")


__all__ = ["SKILLS_EXTENSION", "SKILL_CALLS", "Cursors", "SkillListing", "merge_meta", "skills_settings"]
