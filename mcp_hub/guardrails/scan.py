"""Detectors by name, and a scan of a JSON value (arguments, a result) that redacts in a copy.

The names a policy's `detect` lists: "secrets", "card", "iban", "national_id", "phone", "email",
"hidden", "instructions", and the groups "personal" (card, iban, national_id, phone, email) and "all" (all of
them but "instructions"). The matches of the detectors of values (secrets and personal data) cover the whole
token they lie in; a scan merges overlapping matches into one that keeps what each found (matches.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, cast

from mcp_hub.guardrails.hidden import find_hidden
from mcp_hub.guardrails.instructions import find_instructions
from mcp_hub.guardrails.matches import Match, merged, redacted, whole_token

DETECTORS: tuple[str, ...] = ("secrets", "card", "iban", "national_id", "phone", "email", "hidden", "instructions")
GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"personal": ("card", "iban", "national_id", "phone", "email"), "all": DETECTORS[:-1]}
)
""""all" is every detector but "instructions": wording aimed at a model is ordinary in what tools return (a
README that names `mcp.json`, a page about prompt injection), so a policy that wants it names it."""
NAMES: tuple[str, ...] = DETECTORS + tuple(GROUPS)

WHOLE_TOKENS = frozenset(("secrets", "card", "iban", "national_id", "phone", "email"))
"""Detectors of values (a key, a number, an address) whose matches are widened to the whole token they lie in
(`matches.whole_token`); hidden text and instructions are characters and phrases, reported as found."""
LINE_LOCAL = frozenset(("card", "iban", "national_id"))
"""Detectors whose matches never hold a line break, nor depend on what lies beyond the lines they are in."""
PIECE = 64 * 1024
"""The length of the pieces, whole lines, a long text is given to the `LINE_LOCAL` detectors in: `re` holds the
GIL for a pattern's whole pass over a text, so shorter passes let other threads (the event loop) run between."""

CLEAN_LENGTH = 64
"""Texts up to this length (object keys, enum-like values) in which nothing was found are remembered as clean..."""
CLEAN_KEPT = 4096
"""...this many, per set of detectors: the same few keys (`content`, `type`, `text`, a tool's own fields) are in
every call, and each would otherwise cost every detector's fixed overhead (some 20 microseconds) every time.
Only what holds nothing is kept, so a secret never stays in memory on this account."""

BINARY_KEYS = frozenset(("data", "blob"))
"""Keys of base64 payloads in MCP content (image and audio `data`, a resource's `blob`): not text, not scanned."""


def expand(names: Iterable[str]) -> frozenset[str]:
    """Detector names with the groups replaced by their members. Raises KeyError for an unknown name."""
    out: set[str] = set()
    for name in names:
        if name in GROUPS:
            out.update(GROUPS[name])
        elif name in DETECTORS:
            out.add(name)
        else:
            raise KeyError(name)
    return frozenset(out)


class Detectors:
    """The hub's detectors, with its own secret values (`known`) for the "secrets" detector, and the regions
    (ISO 3166 codes, "US", "GB") whose phone numbers the "phone" detector finds in national form (`regions`;
    without, it finds numbers in international form only). Regions `phonenumbers` does not know are left out.

    The libraries behind the secrets and personal-data detectors (detect-secrets, python-stdnum,
    phonenumbers) take about a tenth of a second to import, so they are imported when a text is first
    looked at with one of them: a hub whose policy has no guards never loads them.
    """

    def __init__(self, known: Iterable[str] = (), regions: Iterable[str] = ()) -> None:
        self._known = tuple(known)
        self.regions = tuple(dict.fromkeys(region.upper() for region in regions))
        self._finders: dict[str, Callable[[str], list[Match]]] = {
            "hidden": find_hidden,
            "instructions": find_instructions,
        }
        self._clean: dict[frozenset[str], dict[str, None]] = {}
        """Short texts in which the detectors (a set of names) found nothing (see `CLEAN_LENGTH`)."""

    def knowing(self, known: Iterable[str]) -> Detectors:
        """These detectors, knowing `known` secret values too (a configuration reload added a mount's)."""
        more = tuple(value for value in dict.fromkeys(known) if value not in self._known)
        return Detectors((*self._known, *more), self.regions) if more else self

    def find(self, text: str, detectors: Collection[str]) -> list[Match]:
        """Every match in `text` of the named detectors, in the order of `DETECTORS`, each widened to the whole
        token it lies in for the `WHOLE_TOKENS` detectors (not merged; see `matches.merged`). A short text in which
        nothing was found is remembered, and not looked at again."""
        if len(text) > CLEAN_LENGTH:
            return self._found(text, detectors)
        names = detectors if isinstance(detectors, frozenset) else frozenset(detectors)
        clean = self._clean.get(names)
        if clean is None:
            clean = self._clean[names] = {}
        elif text in clean:
            return []
        found = self._found(text, names)
        if not found:
            if len(clean) >= CLEAN_KEPT:
                clean.clear()  # (a bound, not an order: the common texts are back after a call or two)
            clean[text] = None
        return found

    def finder(self, detectors: Collection[str]) -> Callable[[str], list[Match]]:
        """`find` with these detectors, as one function for a scan to call on every string and key: a short text
        already found clean is answered without going further."""
        names = detectors if isinstance(detectors, frozenset) else frozenset(detectors)
        clean = self._clean.get(names)
        if clean is None:
            clean = self._clean[names] = {}  # (the same dict `find` fills and clears)
        find = self.find

        def found(text: str) -> list[Match]:
            if len(text) <= CLEAN_LENGTH and text in clean:
                return []
            return find(text, names)

        return found

    def _found(self, text: str, detectors: Collection[str]) -> list[Match]:
        found: list[Match] = []
        for name in DETECTORS:
            if name in detectors:
                matches = self._find(name, text)
                found += [whole_token(text, m) for m in matches] if name in WHOLE_TOKENS else matches
        return found

    def _finder(self, name: str) -> Callable[[str], list[Match]]:
        finder = self._finders.get(name)
        if finder is None:
            from mcp_hub.guardrails import personal, secrets

            pattern = secrets.known_secrets(self._known)
            regions = personal.phone_regions(self.regions)
            self._finders.update(
                {
                    "secrets": lambda text: secrets.find_secrets(text, pattern),
                    "card": personal.find_cards,
                    "iban": personal.find_ibans,
                    "national_id": personal.find_national_ids,
                    "phone": lambda text: personal.find_phones(text, regions),
                    "email": personal.find_emails,
                }
            )
            finder = self._finders[name]
        return finder

    def _find(self, name: str, text: str) -> list[Match]:
        finder = self._finder(name)
        if name not in LINE_LOCAL or len(text) <= PIECE:
            return finder(text)
        found: list[Match] = []
        start = 0
        while start < len(text):
            cut = text.find("\n", start + PIECE)
            end = len(text) if cut < 0 else cut + 1  # the piece ends with its line break
            found += [Match(m.detector, m.kind, m.start + start, m.end + start) for m in finder(text[start:end])]
            start = end
        return found


@dataclass
class Scan:
    """What a scan of one JSON value found: each match (overlapping ones merged) with the JSON path of its
    string."""

    hits: list[tuple[tuple[str | int, ...], Match]] = field(default_factory=list)

    def kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, match in self.hits:
            for kind in match.kinds:
                counts[kind] = counts.get(kind, 0) + 1
        return counts


def scan_value(
    value: Any,
    find: Callable[[str], list[Match]],
    redact: Callable[[Match], bool] | None = None,
    *,
    skip: Collection[str] = BINARY_KEYS,
) -> tuple[Any, Scan]:
    """Scan every string in a JSON value, object keys too, but not the values of keys in `skip` (by default the
    base64 `data`/`blob` payloads); return the value with the matches `redact` selects replaced by
    `[REDACTED:<kind>]` (a copy where something changed, the same object where nothing did) and what was found.

    A key is a value a client or server can put anything in (`{"AKIA...": 1}`): it is scanned as any string,
    once per distinct key in a scan. A redacted key becomes its redacted text; when several keys of one object
    redact to the same text, none of their values is lost: the second is suffixed `#2`, the third `#3`, in the
    object's order. The paths in `Scan.hits` show every key with all of its matches redacted, whatever `redact`
    chose: a path never holds what was found. Overlapping matches are merged first: `redact` sees one match
    with every finding (`Match.found`)."""
    scan = Scan()
    return _walk(value, (), _Keys(find, redact), scan, frozenset(skip)), scan


class _Keys:
    """The detectors, and what they found in each distinct object key of one scan (keys repeat: the same fields
    in every record of a list)."""

    __slots__ = ("_seen", "find", "redact")

    def __init__(self, find: Callable[[str], list[Match]], redact: Callable[[Match], bool] | None) -> None:
        self.find = find
        self.redact = redact
        self._seen: dict[str, tuple[list[Match], str, str] | None] = {}

    def of(self, key: str) -> tuple[list[Match], str, str] | None:
        """(merged matches, the key as sent on, the key as a path shows it) of a key with matches; else None."""
        if key in self._seen:
            return self._seen[key]
        matches = self.find(key)
        found = None
        if matches:
            matches = merged(matches)
            chosen = [m for m in matches if self.redact is not None and self.redact(m)]
            found = (matches, redacted(key, chosen) if chosen else key, redacted(key, matches))
        self._seen[key] = found
        return found


def texts_of(value: Any, skip: Collection[str] = BINARY_KEYS, limit: int | None = None) -> list[str] | None:
    """Every string `scan_value` would scan in a JSON value (object keys too, skipping what it skips), in no
    particular order; None once they hold more than `limit` characters. One walk that both sizes a value and gives
    its texts to the detectors, so that a value in which they find nothing is walked no further."""
    texts: list[str] = []
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _LEAVES:
            continue
        if isinstance(item, str):
            texts.append(item)
            total += len(item)
        elif kind is dict or (kind is not list and isinstance(item, Mapping)):  # dict first: before the ABC
            for key, inner in cast(Mapping[Any, Any], item).items():
                if isinstance(key, str):
                    texts.append(key)
                    total += len(key)
                if key in skip and (isinstance(inner, str) or key not in BINARY_KEYS):
                    continue
                if type(inner) is str:  # the common leaf, taken here rather than through the stack
                    texts.append(inner)
                    total += len(inner)
                elif type(inner) not in _LEAVES:
                    stack.append(inner)
        elif isinstance(item, list | tuple):
            stack += cast(Sequence[Any], item)
        if limit is not None and total > limit:
            return None
    return texts


_LEAVES = frozenset((int, float, bool, type(None)))
"""JSON's values that hold no text (their exact types: a subclass is looked at as `_walk` would)."""


def scan_texts(
    value: Any,
    texts: Iterable[str],
    find: Callable[[str], list[Match]],
    redact: Callable[[Match], bool] | None = None,
    *,
    skip: Collection[str] = BINARY_KEYS,
) -> tuple[Any, Scan]:
    """`scan_value(value, find, redact, skip=skip)` given `texts_of(value, skip)`: the detectors look at each
    distinct text once, and a value in which they find nothing (the common case) is returned as it is, with an
    empty `Scan`, without a second walk; else the walk of `scan_value` is given what they found."""
    found: dict[str, list[Match]] = {}
    for text in texts:
        if text not in found:
            found[text] = find(text)
    if not any(found.values()):
        return value, Scan()
    return scan_value(value, found.__getitem__, redact, skip=skip)


def _walk(
    value: Any,
    path: tuple[str | int, ...],
    keys: _Keys,
    scan: Scan,
    skip: frozenset[str],
) -> Any:
    if isinstance(value, str):
        matches = keys.find(value)
        if not matches:
            return value
        matches = merged(matches)
        scan.hits.extend((path, match) for match in matches)
        redact = keys.redact
        chosen = [m for m in matches if redact is not None and redact(m)]
        return redacted(value, chosen) if chosen else value
    if isinstance(value, (dict, Mapping)):  # dict first: a C check before the ABC
        mapping = cast(Mapping[str, Any], value)
        out: dict[str, Any] | None = None
        renamed = False
        for key, item in mapping.items():
            step, sent = key, key
            found = keys.of(key) if isinstance(key, str) else None
            if found is not None:
                matches, sent, step = found
                scan.hits.extend(((*path, step), match) for match in matches)
                renamed = renamed or sent != key
            if key in skip and (isinstance(item, str) or key not in BINARY_KEYS):
                new = item
            else:
                new = _walk(item, (*path, step), keys, scan, skip)
            if new is not item:
                out = dict(mapping) if out is None else out
                out[key] = new
        if renamed:
            return _renamed(out if out is not None else mapping, keys)
        return value if out is None else out
    if isinstance(value, list | tuple):
        items = cast(Sequence[Any], value)
        new_items = [_walk(item, (*path, index), keys, scan, skip) for index, item in enumerate(items)]
        return value if all(a is b for a, b in zip(new_items, items, strict=True)) else new_items
    return value


def _renamed(mapping: Mapping[str, Any], keys: _Keys) -> dict[str, Any]:
    """`mapping` with its redacted keys as sent on (see `_Keys.of`), in order; a key that would take the place
    of one already there is suffixed `#2`, `#3`... so that no value is lost."""
    out: dict[str, Any] = {}
    for key, item in mapping.items():
        found = keys.of(key) if isinstance(key, str) else None
        sent = found[1] if found is not None else key
        if sent in out or (sent != key and sent in mapping):
            count = 2
            while f"{sent}#{count}" in out or f"{sent}#{count}" in mapping:
                count += 1
            sent = f"{sent}#{count}"
        out[sent] = item
    return out
