"""A result cut to its token budget: what the model gets, and the parts kept whole. Pure: no I/O.

Only a result larger than its budget in bytes is looked at (a token is at least a byte), and only one
larger in tokens is cut. Then, for a `tools/call` result:

- each text block keeps its head: the budget is shared among the text-bearing parts (text blocks and
  `structuredContent`) so that small ones stay whole and the large ones share what is left;
- `structuredContent` is cut by its structure: long arrays keep their first items, long strings their
  first characters, so it stays valid JSON of the same shape (the counts are in the note);
- an image over the pixel budget is downscaled (with Pillow installed), else replaced by a link to it, as is
  an audio block or an image too large to be shown within the budget;
- an embedded resource becomes a link to it;
- a note in plain words, one text block, says what was cut and how big it was, and a `resource_link` to each
  part kept whole (`hub://results/ID/PART`, PART the block's index or `structured`) follows it.

A `resources/read` result keeps the head of each text content; a blob too large for the budget gives way to
a text content saying where it is kept; a last text content (`hub://results/ID`) is the note.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_hub import wire
from mcp_hub.results.tokens import Tokens

SCHEME = "hub://results/"
NOTE_ROOM = 160
"""Tokens left for the note, and for each part it names (about 60 each)."""
PART_ROOM = 60
STRUCTURE_STEPS = ((100, 4000), (50, 2000), (20, 500), (10, 200), (5, 100), (3, 60), (1, 40), (0, 20))
"""(items of an array, characters of a string) kept, tried in turn until structured content fits."""
NOTED = 8
"""How many places cut in structured content the note names (then: "and N more")."""


@dataclass(frozen=True, slots=True)
class Part:
    """A part of a result kept whole: a block's text or data, or `structuredContent` as JSON."""

    name: str
    """Its name in its link: the block's index, or "structured"."""
    source: str
    """Where it was in the result, for the note: "content[2]", "structuredContent", "contents[0]"."""
    mime_type: str
    text: str | None = None
    blob: str | None = None
    """Base64, for an image, audio or a blob."""

    def to_json(self) -> dict[str, Any]:
        kept: dict[str, Any] = {"name": self.name, "source": self.source, "mimeType": self.mime_type}
        if self.text is not None:
            kept["text"] = self.text
        if self.blob is not None:
            kept["blob"] = self.blob
        return kept

    @classmethod
    def from_json(cls, kept: Mapping[str, Any]) -> Part:
        return cls(kept["name"], kept["source"], kept["mimeType"], kept.get("text"), kept.get("blob"))


@dataclass(frozen=True, slots=True)
class Shaped:
    """A result cut to fit: what the client gets, the parts kept whole, and the size of the whole."""

    result: dict[str, Any]
    parts: tuple[Part, ...]
    tokens: int
    """The whole result's tokens (its text, structured content and embedded texts; not images' data)."""
    bytes: int
    """The whole result's size as JSON."""


@dataclass(frozen=True, slots=True)
class Reading:
    """What the note tells the model about reading the rest: the read tool's name and how long the rest is kept."""

    tool: str
    ttl: float


def link(result_id: str, part: str | None = None) -> str:
    return f"{SCHEME}{result_id}" + (f"/{part}" if part is not None else "")


def shape(
    result: dict[str, Any],
    method: str,
    budget: int,
    *,
    counter: Tokens,
    result_id: str,
    reading: Reading,
    max_pixels: int,
) -> Shaped | None:
    """`result` cut to `budget` tokens (None: it fits as it is; see the module docstring)."""
    size = len(wire.dumps(result))
    if size <= budget:
        return None
    if method == "tools/call":
        return _Call(result, budget, counter, result_id, reading, max_pixels, size).shape()
    if method == "resources/read":
        return _Read(result, budget, counter, result_id, reading, size).shape()
    return None


# -- tools/call --------------------------------------------------------------------


class _Call:
    def __init__(
        self,
        result: dict[str, Any],
        budget: int,
        counter: Tokens,
        result_id: str,
        reading: Reading,
        max_pixels: int,
        size: int,
    ) -> None:
        self.result, self.budget, self.counter, self.id = result, budget, counter, result_id
        self.reading, self.max_pixels, self.size = reading, max_pixels, size
        content = result.get("content")
        self.content: list[Any] = list(content) if isinstance(content, list) else []
        self.structured = result.get("structuredContent")
        self.structured_json = wire.dumps(self.structured).decode() if self.structured is not None else None

    def shape(self) -> Shaped | None:
        sizes: dict[str, int] = {}  # text-bearing parts -> tokens
        for index, block in enumerate(self.content):
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                sizes[str(index)] = self.counter.count(block["text"])
        embedded = [i for i, b in enumerate(self.content) if isinstance(b, dict) and b.get("type") == "resource"]
        embedded_tokens = sum(self.counter.count(_resource_text(self.content[i])) for i in embedded)
        if self.structured_json is not None:
            sizes["structured"] = self.counter.count(self.structured_json)
        whole = sum(sizes.values()) + embedded_tokens
        binaries = [i for i, b in enumerate(self.content) if self._too_big(b)]
        if whole <= self.budget and not binaries:
            return None
        room = max(self.budget - NOTE_ROOM - PART_ROOM * (len(sizes) + len(embedded) + len(binaries)), 1)
        for _ in range(4):
            shaped = self._cut(sizes, room, embedded, binaries, whole)
            if self._tokens(shaped.result) <= self.budget or room <= 1:
                return shaped
            room = max(int(room * 0.8), 1)
        return shaped

    def _too_big(self, block: Any) -> bool:
        """An image over the pixel budget (or, without Pillow, over the token budget in bytes), an audio block over
        the token budget in bytes."""
        if not isinstance(block, dict) or block.get("type") not in ("image", "audio"):
            return False
        data = block.get("data")
        if not isinstance(data, str):
            return False
        if block["type"] == "image":
            pixels = _pixels(data)
            if pixels is not None:
                return pixels > self.max_pixels
        return len(data) > self.budget * 4

    def _cut(
        self, sizes: Mapping[str, int], room: int, embedded: Sequence[int], binaries: Sequence[int], whole: int
    ) -> Shaped:
        shares = _shares(sizes, room)
        content = list(self.content)
        parts: list[Part] = []
        said: list[str] = []
        for index, block in enumerate(self.content):
            name = str(index)
            if name in sizes and sizes[name] > shares[name]:
                text = block["text"]
                head = self.counter.head(text, shares[name])
                content[index] = {**block, "text": head}
                parts.append(Part(name, f"content[{index}]", "text/plain", text=text))
                said.append(
                    f"- content[{index}] (text): the first {len(head):,} of {len(text):,} characters are shown "
                    f"({sizes[name]:,} tokens whole); the rest, from offset {len(head)}, is at {link(self.id, name)}."
                )
            elif index in embedded:
                resource = block.get("resource") if isinstance(block.get("resource"), dict) else {}
                original = str(resource.get("uri", ""))
                mime = str(
                    resource.get("mimeType") or ("text/plain" if "text" in resource else "application/octet-stream")
                )
                parts.append(
                    Part(name, f"content[{index}]", mime, text=resource.get("text"), blob=resource.get("blob"))
                )
                content[index] = {
                    "type": "resource_link",
                    "uri": link(self.id, name),
                    "name": original or f"content[{index}]",
                    "mimeType": mime,
                    "description": f"The embedded resource {original}, kept by the hub.",
                }
                said.append(f"- content[{index}] (embedded resource {original}): replaced by a link to it.")
            elif index in binaries:
                smaller = _downscaled(block, self.max_pixels) if block["type"] == "image" else None
                mime = str(block.get("mimeType") or "application/octet-stream")
                parts.append(Part(name, f"content[{index}]", mime, blob=block["data"]))
                if smaller is not None:
                    content[index] = smaller[0]
                    said.append(
                        f"- content[{index}] (image, {smaller[1]}): downscaled to {smaller[2]}; the original is at "
                        f"{link(self.id, name)}."
                    )
                else:
                    content[index] = {
                        "type": "resource_link",
                        "uri": link(self.id, name),
                        "name": f"content[{index}]",
                        "mimeType": mime,
                        "description": f"The {block['type']} of this result, kept by the hub.",
                    }
                    said.append(
                        f"- content[{index}] ({block['type']}, {len(block['data']):,} bytes of base64): replaced "
                        "by a link to it."
                    )
        result = dict(self.result)
        if "structured" in sizes and sizes["structured"] > shares["structured"]:
            assert self.structured_json is not None
            pruned, places = _prune(self.structured, shares["structured"], self.counter)
            result["structuredContent"] = pruned
            parts.append(Part("structured", "structuredContent", "application/json", text=self.structured_json))
            named = "; ".join(places[:NOTED]) + (f"; and {len(places) - NOTED} more" if len(places) > NOTED else "")
            said.append(
                f"- structuredContent: cut by its structure ({named}); the whole JSON "
                f"({sizes['structured']:,} tokens) is at {link(self.id, 'structured')}."
            )
        note = _note(self.budget, whole, self.size, self.counter, said, parts, self.id, self.reading)
        content.append({"type": "text", "text": note})
        for part in parts:
            if part.source.startswith("content[") and any(
                b.get("uri") == link(self.id, part.name) for b in content if isinstance(b, dict)
            ):
                continue  # the block itself became its link
            content.append(
                {
                    "type": "resource_link",
                    "uri": link(self.id, part.name),
                    "name": f"{part.source}, whole",
                    "mimeType": part.mime_type,
                    "size": len((part.text or part.blob or "").encode()),
                }
            )
        result["content"] = content
        return Shaped(result, tuple(parts), whole, self.size)

    def _tokens(self, result: Mapping[str, Any]) -> int:
        counted = 0
        for block in result.get("content") or ():
            if isinstance(block, dict) and block.get("type") == "text":
                counted += self.counter.count(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") == "resource_link":
                counted += PART_ROOM // 2
        if result.get("structuredContent") is not None:
            counted += self.counter.count(wire.dumps(result["structuredContent"]).decode())
        return counted


def _resource_text(block: Mapping[str, Any]) -> str:
    resource = block.get("resource")
    if not isinstance(resource, dict):
        return ""
    text = resource.get("text")
    return text if isinstance(text, str) else str(resource.get("blob", ""))


def _shares(sizes: Mapping[str, int], room: int) -> dict[str, int]:
    """Each part's share of `room` tokens: parts that fit in an equal share keep their size, the others split
    what is left equally."""
    shares: dict[str, int] = {}
    left = room
    ordered = sorted(sizes.items(), key=lambda item: item[1])
    for seen, (name, size) in enumerate(ordered):
        equal = left // (len(ordered) - seen)
        shares[name] = min(size, equal)
        left -= shares[name]
    return shares


def _prune(value: Any, budget: int, counter: Tokens) -> tuple[Any, list[str]]:
    """`value` with its arrays and strings shortened until its JSON is within `budget` tokens, and the places
    shortened ("$.items: the first 20 of 10,000 items")."""
    pruned: Any = None
    places: list[str] = []
    for items, chars in STRUCTURE_STEPS:
        places = []
        pruned = _shortened(value, items, chars, "$", places)
        if counter.count(wire.dumps(pruned).decode()) <= budget:
            break
    return pruned, places


def _shortened(value: Any, items: int, chars: int, path: str, places: list[str]) -> Any:
    if isinstance(value, list):
        if len(value) > items:
            places.append(f"{path}: the first {items} of {len(value):,} items")
        return [_shortened(item, items, chars, f"{path}[{n}]", places) for n, item in enumerate(value[:items])]
    if isinstance(value, dict):
        return {key: _shortened(item, items, chars, f"{path}.{key}", places) for key, item in value.items()}
    if isinstance(value, str) and len(value) > chars:
        places.append(f"{path}: the first {chars} of {len(value):,} characters")
        return value[:chars]
    return value


def _note(
    budget: int,
    whole: int,
    size: int,
    counter: Tokens,
    said: Sequence[str],
    parts: Sequence[Part],
    result_id: str,
    reading: Reading,
) -> str:
    first = next((p for p in parts if p.text is not None), None)
    how = ""
    if first is not None:
        uri = link(result_id, first.name)
        how = (
            f" Read the rest page by page with resources/read of its link (each page's _meta names the next, as "
            f'{uri}?offset=N), or with the {reading.tool} tool, e.g. {{"uri": "{uri}", "offset": N}}.'
        )
    return (
        f"[mcp-hub] This result was cut to fit a budget of {budget:,} tokens: whole, it is {whole:,} tokens "
        f"({size:,} bytes as JSON; counted as {counter.name}). Nothing is lost: the hub keeps the whole for you "
        f"for {_duration(reading.ttl)}.{how}\n" + "\n".join(said)
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return f"{hours} hour" + ("s" if hours != 1 else "")
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute" + ("s" if minutes != 1 else "")
    return f"{seconds:g} seconds"


# -- images ------------------------------------------------------------------------


def _decoded(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _pixels(data: str) -> int | None:
    """An image's pixel count, where Pillow is installed and reads it; else None."""
    try:
        from PIL import Image
    except ImportError:
        return None
    raw = _decoded(data)
    if raw is None:
        return None
    try:
        with Image.open(io.BytesIO(raw)) as image:
            return image.width * image.height
    except Exception:  # not an image Pillow reads (Image.open raises several kinds)
        return None


def _downscaled(block: Mapping[str, Any], max_pixels: int) -> tuple[dict[str, Any], str, str] | None:
    """The image block downscaled within `max_pixels`, its size before and after; None without Pillow or when it
    does not read the image."""
    try:
        from PIL import Image
    except ImportError:
        return None
    raw = _decoded(str(block.get("data", "")))
    if raw is None:
        return None
    try:
        with Image.open(io.BytesIO(raw)) as image:
            before = f"{image.width}x{image.height}"
            scale = math.sqrt(max_pixels / (image.width * image.height))
            size = (max(int(image.width * scale), 1), max(int(image.height * scale), 1))
            kind = image.format or "PNG"
            smaller = image.resize(size)
            out = io.BytesIO()
            smaller.save(out, format=kind)
    except Exception:  # Pillow cannot read or write it: a link instead
        return None
    return {**block, "data": base64.b64encode(out.getvalue()).decode()}, before, f"{size[0]}x{size[1]}"


# -- resources/read ----------------------------------------------------------------


class _Read:
    def __init__(
        self, result: dict[str, Any], budget: int, counter: Tokens, result_id: str, reading: Reading, size: int
    ) -> None:
        self.result, self.budget, self.counter, self.id, self.reading, self.size = (
            result,
            budget,
            counter,
            result_id,
            reading,
            size,
        )
        contents = result.get("contents")
        self.contents: list[Any] = list(contents) if isinstance(contents, list) else []

    def shape(self) -> Shaped | None:
        sizes = {
            str(index): self.counter.count(item["text"])
            for index, item in enumerate(self.contents)
            if isinstance(item, dict) and isinstance(item.get("text"), str)
        }
        blobs = [
            index
            for index, item in enumerate(self.contents)
            if isinstance(item, dict) and isinstance(item.get("blob"), str) and len(item["blob"]) > self.budget * 4
        ]
        whole = sum(sizes.values())
        if whole <= self.budget and not blobs:
            return None
        room = max(self.budget - NOTE_ROOM - PART_ROOM * (len(sizes) + len(blobs)), 1)
        shares = _shares(sizes, room)
        contents = list(self.contents)
        parts: list[Part] = []
        said: list[str] = []
        for index, item in enumerate(self.contents):
            name = str(index)
            mime = str(item.get("mimeType") or "") if isinstance(item, dict) else ""
            if name in sizes and sizes[name] > shares[name]:
                text = item["text"]
                head = self.counter.head(text, shares[name])
                contents[index] = {**item, "text": head}
                parts.append(Part(name, f"contents[{index}]", mime or "text/plain", text=text))
                said.append(
                    f"- contents[{index}] ({item.get('uri')}): the first {len(head):,} of {len(text):,} characters "
                    f"are shown ({sizes[name]:,} tokens whole); the rest, from offset {len(head)}, is at "
                    f"{link(self.id, name)}."
                )
            elif index in blobs:
                parts.append(Part(name, f"contents[{index}]", mime or "application/octet-stream", blob=item["blob"]))
                contents[index] = {
                    "uri": link(self.id, name),
                    "mimeType": "text/plain",
                    "text": f"[mcp-hub] The blob of {item.get('uri')} ({len(item['blob']):,} bytes of base64) is kept "
                    f"at {link(self.id, name)}.",
                }
                said.append(f"- contents[{index}] ({item.get('uri')}, a blob): kept at {link(self.id, name)}.")
        note = _note(self.budget, whole, self.size, self.counter, said, parts, self.id, self.reading)
        contents.append({"uri": link(self.id), "mimeType": "text/plain", "text": note})
        return Shaped({**self.result, "contents": contents}, tuple(parts), whole, self.size)
