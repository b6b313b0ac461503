"""The whole of cut results, kept in the cache store for the principal that received them, read page by page.

A cut result is one entry of the store (`CacheStore.put`, so with `[cluster]` one Redis string
`mcp-hub:cache:result:ID`, gone after `[results] ttl`), its value JSON: the principal it was kept for, the
budget it was cut to, and its parts (shaping.py's `Part`). ID is 32 random hex digits (128 bits): a link
cannot be guessed, and a link that is known is still refused to any other principal.

A part is read by its link, `hub://results/ID/PART` (`hub://results/ID`: its first part), from a
character offset (`?offset=N`, or the `read_result` tool's `offset`): a page is the text from there that
fits the budget the result was cut to; following each page's next offset to the end gives back the part's
text exactly. A part without text (an image, a blob) is read whole.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import orjson

from mcp_hub import wire
from mcp_hub.cache.store import CacheStore
from mcp_hub.errors import NotKept
from mcp_hub.results.shaping import SCHEME, Part, link
from mcp_hub.results.tokens import Tokens

PREFIX = "result:"
_URI = re.compile(r"^hub://results/(?P<id>[0-9a-f]{32})(?:/(?P<part>[A-Za-z0-9_-]+))?$")
PAGE_ROOM = 100
"""Tokens of a page's budget left for what comes with it (the read tool's note)."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a kept part: its text from `offset` to `end` of `total` characters (or the whole blob)."""

    uri: str
    mime_type: str
    text: str | None
    blob: str | None
    offset: int
    end: int
    total: int

    @property
    def next_uri(self) -> str | None:
        """The link of the next page; None at the end."""
        if self.text is None or self.end >= self.total:
            return None
        return f"{self.uri}?offset={self.end}"


def new_id() -> str:
    return secrets.token_hex(16)


class KeptResults:
    def __init__(self, store: CacheStore, ttl: float, counter: Tokens) -> None:
        self.store = store
        self.ttl = ttl
        self._counter = counter

    async def keep(self, result_id: str, principal: str, budget: int, parts: tuple[Part, ...]) -> None:
        value = wire.dumps({"principal": str(principal), "budget": budget, "parts": [p.to_json() for p in parts]})
        await self.store.put(PREFIX + result_id, value, self.ttl)

    async def page(self, principal: str, uri: str, offset: int | None = None) -> Page:
        """The page of the kept part `uri` names (`?offset=N` in it, or `offset`) for `principal`. Raises
        `NotKept`."""
        split = urlsplit(uri)
        base = f"{split.scheme}://{split.netloc}{split.path}"
        match = _URI.match(base)
        if match is None:
            raise NotKept(f"{uri!r} is not a link to a kept result (they look like {SCHEME}<32 hex digits>/<part>)")
        if offset is None:
            given = parse_qs(split.query).get("offset", ["0"])[0]
            if not given.isdigit():
                raise NotKept(f"offset {given!r} in {uri!r} is not a character offset (a whole number from 0)")
            offset = int(given)
        if offset < 0:
            raise NotKept(f"offset {offset} is not a character offset (a whole number from 0)")
        result_id, name = match["id"], match["part"]
        stored = await self.store.get(PREFIX + result_id)
        if stored is None:
            raise NotKept(
                f"{link(result_id)} is not kept: it expired, or the hub that kept it restarted; call the tool again"
            )
        kept = orjson.loads(stored.value)
        if kept["principal"] != str(principal):
            raise NotKept(
                f"{link(result_id)} was kept for another principal: only the principal that received a result "
                "can read it"
            )
        parts = [Part.from_json(part) for part in kept["parts"]]
        part = parts[0] if name is None else next((p for p in parts if p.name == name), None)
        if part is None:
            named = ", ".join(link(result_id, p.name) for p in parts)
            raise NotKept(f"{link(result_id)} has no part {name!r}; its parts: {named}")
        uri = link(result_id, part.name)
        if part.text is None:
            return Page(uri, part.mime_type, None, part.blob, 0, 0, 0)
        text = part.text
        if offset > len(text):
            raise NotKept(f"offset {offset} is past the end of {uri} ({len(text):,} characters)")
        page = self._counter.head(text[offset:], max(int(kept["budget"]) - PAGE_ROOM, 1))
        if not page and offset < len(text):
            page = text[offset]  # at least one character: a page always moves on
        return Page(uri, part.mime_type, page, None, offset, offset + len(page), len(text))
