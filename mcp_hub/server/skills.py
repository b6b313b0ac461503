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
by page: a cursor of the hub names the mount and that mount's own cursor, so each upstream page is
asked for when the client asks for it and nothing is kept between requests. An entry is shown when
the caller may see its `SKILL.md` as a resource (the policy, and the curated endpoint's selection);
its manifest passes as the server sent it (URIs given the hub's form; digests, sizes, frontmatter
untouched). A mount that fails to answer is left out of that listing (logged): the extension lets a
listing be partial, and a client can still `skills/get` a skill it knows the URI of.

There is no list_changed notification of skills in the extension: a server's skill files are resources,
and its `notifications/resources/list_changed` reaches the hub's clients as the other lists' do.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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


def encode_cursor(mount: str, inner: str | None) -> str:
    data = json.dumps({"m": mount, "c": inner}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str | None]:
    """The mount and that mount's own cursor in a cursor of `encode_cursor`. Raises `InvalidCursor`."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, RecursionError):
        raise InvalidCursor(cursor) from None
    if not isinstance(data, dict) or not isinstance(data.get("m"), str) or not isinstance(data.get("c"), str | None):
        raise InvalidCursor(cursor)
    if encode_cursor(data["m"], data["c"]) != cursor:
        raise InvalidCursor(cursor)
    return data["m"], data["c"]


class SkillListing:
    """`skills/list` at one endpoint: the skills of the mounts serving them, as the caller may see them."""

    def __init__(self, router: Router, mounts: Callable[[], Sequence[str]], selection: Selection) -> None:
        self._router = router
        self._mounts = mounts
        """The mounts, in order (enabled or not: the router knows which have declared the extension)."""
        self._selection = selection

    def serving(self) -> list[str]:
        """The mounts that serve skills (declared the extension when they connected), in mount order."""
        return [m for m in self._mounts() if self._router.skills_settings(m) is not None]

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
            mount, inner = decode_cursor(cursor)
            if mount not in mounts:
                raise InvalidCursor(cursor)
            position = mounts.index(mount)
        shown: list[dict[str, Any]] = []
        following: str | None = None
        for _ in range(_PAGES_PER_REQUEST):
            if position >= len(mounts):
                break
            mount = mounts[position]
            page, inner = await self._page(mount, inner, origin)
            shown += [
                self._router.map_skill(mount, entry)
                for entry in page
                if isinstance(entry, dict)
                and isinstance(entry.get("uri"), str)
                and self._selection.visible(policy, principal, "resource", mount, entry["uri"])
            ]
            if inner is None:
                position += 1
            following = encode_cursor(mounts[position], inner) if position < len(mounts) else None
            if shown:
                break
        result: dict[str, Any] = {"skills": shown}
        if following is not None:
            result["nextCursor"] = following
        if modern:  # the extension's listing carries the base protocol's cache hints from 2026-07-28 on
            result |= {"ttlMs": 0, "cacheScope": "private"}
        return result

    async def _page(self, mount: str, cursor: str | None, origin: Origin) -> tuple[list[Any], str | None]:
        """One page of a mount's own listing and its next cursor; nothing (and no cursor) when it fails."""
        try:
            params = {"cursor": cursor} if cursor else {}
            result = await self._router.forward("skills/list", mount, params, origin=origin)
        except (HubError, MCPError) as exc:
            logger.warning("skills/list: %s answered no listing (%s); its skills are left out", mount, exc)
            return [], None
        skills = result.get("skills")
        following = result.get("nextCursor")
        if not isinstance(following, str) or not following:
            following = None
        return (skills if isinstance(skills, list) else []), following


__all__ = ["SKILLS_EXTENSION", "SKILL_CALLS", "SkillListing", "skills_settings"]
