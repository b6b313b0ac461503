"""The merged catalog: every mount's tools, prompts, resources and templates, namespaced.

Each mount's raw listings are kept as the server sent them. Whenever one
changes, the public view of that kind is rebuilt once into an immutable
`View` (public items plus the index back to each item's mount and native
name), so listing and routing never do work proportional to the catalog size
per request: a page is a slice, a lookup is a dict access.

A view is joined from each mount's share of it (`_Part`), kept while the
mount's listing, its prefix and the overrides stay: as the servers of a hub
of many mounts arrive one by one, each arrival makes its own share and joins
the others' as they are, rather than renaming and copying every item again.

Names are those `naming.assign_names` gives the whole kind at once, which is
what makes them collision-free: a prefixed mount's item named naturally
(`naming.own_name`, nearly all of them) is named in its share; the rest
(invalid or too long names, unprefixed mounts) are assigned together at each
join, around the others. Resource URIs and templates get the reversible
`mount+` prefix.

What a server lists is checked here, once, before anything else reads it
(`Catalog.admit`): an item the protocol's own model rejects (a tool without a
name, a tool whose inputSchema is not an object, a resource without a uri, ...),
or a second item of the same name from one server, is left out with a warning
that names the server and the item; the rest of its listing serves. A client
whose SDK validates lists would otherwise reject the whole merged list.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from mcp_hub.catalog import naming
from mcp_hub.catalog.overrides import Overrides

logger = logging.getLogger("mcp_hub.catalog")

KINDS = ("tools", "prompts", "resources", "resource_templates")

Kind = Literal["tool", "prompt", "resource"]
"""What a call addresses (the policy's word for it)."""
NAMED_KINDS = ("tools", "prompts")

_ITEM_KEY = {"tools": "name", "prompts": "name", "resources": "uri", "resource_templates": "uriTemplate"}

_MODELS: Mapping[str, TypeAdapter[Any]] = {
    "tools": TypeAdapter(types.Tool),
    "prompts": TypeAdapter(types.Prompt),
    "resources": TypeAdapter(types.Resource),
    "resource_templates": TypeAdapter(types.ResourceTemplate),
}
"""The protocol's model of each kind's items: what a client's SDK checks each listed item against."""

_NOUN = {"tools": "tool", "prompts": "prompt", "resources": "resource", "resource_templates": "resource template"}


def malformed(kind: str, item: Any) -> str | None:
    """Why a listed item cannot be served (None: it can)."""
    if not isinstance(item, dict):
        return f"not an object but {type(item).__name__}"
    try:
        _MODELS[kind].validate_python(item)
    except ValidationError as exc:
        return "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'item'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
    if kind == "tools" and item["inputSchema"].get("type", "object") != "object":
        return f"inputSchema: its type is {item['inputSchema']['type']!r}, not 'object'"
    return None


def _label(kind: str, position: int, item: Any) -> str:
    key = item.get(_ITEM_KEY[kind]) if isinstance(item, dict) else None
    named = f" {key!r}" if isinstance(key, str) else ""
    return f"{_NOUN[kind]}{named} (item {position + 1})"


@dataclass(frozen=True, slots=True)
class Target:
    """Where a public name leads: the mount and the server's own name for the item."""

    mount: str
    native: str


@dataclass(frozen=True, slots=True)
class View:
    """The public, immutable listing of one kind."""

    items: tuple[dict[str, Any], ...] = ()
    targets: tuple[Target, ...] = ()
    """Where each item leads, position for position."""
    index: Mapping[str, Target] = field(default_factory=lambda: MappingProxyType({}))
    revision: str = "0"


@dataclass(frozen=True, slots=True)
class _Part:
    """One mount's share of a kind's view, made from its listing `listed` (kept while that same list is the
    mount's listing): its public items and where each leads, in the listing's order. Of a named kind, `names`
    maps the public names of `items` to their targets; `pending` are the items whose names depend on the
    other mounts' (`naming.own_name` gives none), with `order` then saying where each of `items` (an int: its
    position in `items`) and of `pending` (a dict: the item) falls in the listing."""

    listed: Sequence[dict[str, Any]] | None
    items: tuple[dict[str, Any], ...] = ()
    targets: tuple[Target, ...] = ()
    names: Mapping[str, Target] = field(default_factory=dict)
    pending: tuple[dict[str, Any], ...] = ()
    order: tuple[int | dict[str, Any], ...] = ()


def page(
    items: Sequence[dict[str, Any]], start: int, size: int, revision: str
) -> tuple[list[dict[str, Any]], str | None]:
    """The page of `items` beginning at `start`, and the cursor of the next page, if any.

    A page holds at most `size` items; a `size` of 0 puts everything from `start` on one page.
    `revision` names the listing the cursor walks (see `naming.encode_cursor`).
    """
    end = start + size if size else len(items)
    next_cursor = naming.encode_cursor(end, revision) if end < len(items) else None
    return list(items[start:end]), next_cursor


class Catalog:
    """All mounts' listings and the public views built from them."""

    def __init__(
        self, mounts: Sequence[str], unprefixed: Collection[str] = (), overrides: Overrides | None = None
    ) -> None:
        self._mounts = tuple(mounts)
        self._unprefixed = frozenset(unprefixed)
        self.overrides = overrides if overrides is not None else Overrides()
        """What the administrator says a model reads of some tools (overrides.py): applied to the public view."""
        self._raw: dict[str, dict[str, list[dict[str, Any]]]] = {m: {} for m in self._mounts}
        self._views: dict[str, View] = {kind: View() for kind in KINDS}
        self._parts: dict[str, dict[str, _Part]] = {kind: {} for kind in KINDS}
        self._natives: dict[str, tuple[View, Mapping[str, tuple[Target, ...]]]] = {}
        self._revisions = itertools.count(1)
        self._skipped: dict[str, dict[str, list[str]]] = {m: {} for m in self._mounts}
        self._watchers: list[Callable[[frozenset[str]], None]] = []

    def watch(self, changed: Callable[[frozenset[str]], None]) -> None:
        """Have `changed` told the kinds whose public view changed, each time some do (synchronously, as they
        change: it must not block)."""
        self._watchers.append(changed)

    def _changed(self, kinds: frozenset[str]) -> frozenset[str]:
        if kinds:
            for watcher in self._watchers:
                watcher(kinds)
        return kinds

    @property
    def mounts(self) -> tuple[str, ...]:
        return self._mounts

    def view(self, kind: str) -> View:
        return self._views[kind]

    def items_of(self, mount: str, kind: str) -> list[dict[str, Any]]:
        return self._raw.get(mount, {}).get(kind, [])

    def listings(self, mount: str) -> dict[str, list[dict[str, Any]]]:
        """The listings a mount has in the catalog, by kind; empty if it has none yet."""
        return dict(self._raw.get(mount, {}))

    def skipped(self, mount: str) -> list[str]:
        """What the mount listed last that is not served, and why (see `admit`)."""
        known = self._skipped.get(mount, {})
        return [line for kind in KINDS for line in known.get(kind, ())]

    def admit(self, mount: str, kind: str, items: Sequence[Any]) -> list[dict[str, Any]]:
        """The items of a mount's listing that can be served: well formed, and the first of their name.

        Each item left out is logged as a warning the first time it is seen, and
        listed in `skipped(mount)` until the mount's next listing of the kind.
        """
        key = _ITEM_KEY[kind]
        kept: list[dict[str, Any]] = []
        seen: set[str] = set()
        skipped: list[str] = []
        for position, item in enumerate(items):
            reason = malformed(kind, item)
            if reason is None and item[key] in seen:
                reason = f"a second {_NOUN[kind]} of the same {key} (the first is served)"
            if reason is not None:
                skipped.append(f"{_label(kind, position, item)}: {reason}")
                continue
            seen.add(item[key])
            kept.append(item)
        known = self._skipped.setdefault(mount, {})
        for line in skipped:
            if line not in known.get(kind, ()):
                logger.warning("server %r: skipped %s", mount, line)
        if skipped:
            known[kind] = skipped
        else:
            known.pop(kind, None)
        return kept

    def update(self, mount: str, listings: Mapping[str, list[dict[str, Any]]]) -> frozenset[str]:
        """Replace some of a mount's listings; return the kinds whose public view changed."""
        return self.update_many({mount: listings})

    def update_many(self, listings: Mapping[str, Mapping[str, list[dict[str, Any]]]]) -> frozenset[str]:
        """Replace listings of several mounts (mount -> kind -> items), rebuilding each kind's view once;
        return the kinds whose public view changed. Mounts the catalog does not have are ignored."""
        touched: set[str] = set()
        for mount, kinds in listings.items():
            raw = self._raw.get(mount)
            if raw is None:
                continue
            for kind, items in kinds.items():
                if raw.get(kind) != items:
                    raw[kind] = items
                    touched.add(kind)
        changed: set[str] = set()
        for kind in sorted(touched):
            view = self._build(kind)
            if view.items != self._views[kind].items:
                self._views[kind] = view
                changed.add(kind)
        return self._changed(frozenset(changed))

    def remount(
        self, mounts: Sequence[str], unprefixed: Collection[str] = (), overrides: Overrides | None = None
    ) -> frozenset[str]:
        """Serve these mounts from now on (a configuration reload): a new one starts with no items, a
        mount no longer named leaves with its items, one kept keeps its items. Every view is rebuilt
        (names may depend on the other mounts, and `overrides` replace the former ones); return the kinds
        whose public view changed."""
        self._mounts = tuple(mounts)
        self._unprefixed = frozenset(unprefixed)
        if overrides is not None:
            self.overrides = overrides
        self._raw = {m: self._raw.get(m, {}) for m in self._mounts}
        self._skipped = {m: self._skipped.get(m, {}) for m in self._mounts}
        self._parts = {kind: {} for kind in KINDS}  # a prefix or an override may have changed
        changed: set[str] = set()
        for kind in KINDS:
            view = self._build(kind)
            if view.items != self._views[kind].items:
                self._views[kind] = view
                changed.add(kind)
        return self._changed(frozenset(changed))

    # -- resolving public names back to their mount --------------------------

    def resolve(self, kind: str, public: str) -> Target | None:
        """The mount and native name behind a public tool or prompt name."""
        return self._views[kind].index.get(public)

    def resolve_uri(self, public: str) -> Target | None:
        """The mount and native URI (or URI template) behind a public resource URI."""
        split = naming.split_uri(public, self._prefixed_mounts())
        if split is not None:
            return Target(*split)
        if len(self._unprefixed) == 1:
            (mount,) = self._unprefixed
            return Target(mount, public)
        return None

    def public_uri(self, mount: str, uri: str) -> str:
        return naming.public_uri(mount, uri, prefixed=mount not in self._unprefixed)

    def mount_of(self, public: str) -> str | None:
        """The mount a public tool/prompt name is addressed to, whether or not it is listed."""
        split = naming.split_prefixed(public)
        if split is not None and split[0] in self._raw and split[0] not in self._unprefixed:
            return split[0]
        if len(self._unprefixed) == 1:
            return next(iter(self._unprefixed))
        return None

    def natives(self, kind: str, native: str) -> tuple[Target, ...]:
        """The tools or prompts whose servers call them `native`, one per mount that lists one (for the callers
        that know only that: MCP Apps pages). Indexed when first asked after the view changed."""
        view = self._views[kind]
        known = self._natives.get(kind)
        if known is None or known[0] is not view:
            by_native: dict[str, tuple[Target, ...]] = {}
            for target in view.targets:
                by_native[target.native] = (*by_native.get(target.native, ()), target)
            known = self._natives[kind] = (view, by_native)
        return known[1].get(native, ())

    def pages_may_call(self, target: Target) -> bool:
        """Whether an MCP Apps page may call this tool: its `_meta.ui.visibility` includes "app", or is not given."""
        tool = next((t for t in self.items_of(target.mount, "tools") if t.get("name") == target.native), None)
        return tool is not None and naming.app_may_call(tool.get("_meta"))

    def names_pages(self, mount: str) -> bool:
        """Whether a mount lists a tool that names an MCP Apps page (`ui://`)."""
        return any(naming.links_page(t.get("_meta")) for t in self.items_of(mount, "tools"))

    def page_owners(self, uri: str) -> list[str]:
        """The mounts whose server lists the `ui://` page `uri` (its own URI), or names it in a tool."""
        if not uri.startswith(naming.UI_SCHEME):
            return []
        owners: list[str] = []
        for mount in self._mounts:
            listed = any(r.get("uri") == uri for r in self.items_of(mount, "resources"))
            if listed or any(uri in naming.page_uris(t.get("_meta")) for t in self.items_of(mount, "tools")):
                owners.append(mount)
        return owners

    def public_meta(self, mount: str, meta: Any) -> Any:
        """A tool's or a tool result's `_meta` with the `ui://` pages it names given their public URIs."""
        if not isinstance(meta, dict):
            return meta
        mapped = naming.map_ui_references(meta, lambda uri: self.public_uri(mount, uri))
        return meta if mapped is None else mapped

    # -- building views -------------------------------------------------------

    def _public_item(self, mount: str, item: dict[str, Any]) -> dict[str, Any]:
        meta = item.get("_meta")
        mapped = self.public_meta(mount, meta)
        return item if mapped is meta else {**item, "_meta": mapped}

    def _shown(self, kind: str, mount: str, item: dict[str, Any], public: str) -> dict[str, Any]:
        """A named item as listed: under its public name, as its overrides show it, its pages' URIs public."""
        key = _ITEM_KEY[kind]
        overrides = self.overrides if kind == "tools" and self.overrides else None
        shown = {**item, key: public}
        if overrides is not None:
            shown = overrides.shown(mount, item[key], shown)
        return self._public_item(mount, shown)

    def _prefixed_mounts(self) -> frozenset[str]:
        return frozenset(self._mounts) - self._unprefixed

    def _part(self, kind: str, mount: str) -> _Part:
        listed = self._raw[mount].get(kind)
        part = self._parts[kind].get(mount)
        if part is None or part.listed is not listed:
            part = self._parts[kind][mount] = self._make_part(kind, mount, listed)
        return part

    def _make_part(self, kind: str, mount: str, listed: Sequence[dict[str, Any]] | None) -> _Part:
        key = _ITEM_KEY[kind]
        entries = [item for item in listed or () if isinstance(item.get(key), str)]
        if kind not in NAMED_KINDS:
            items = tuple({**item, key: self.public_uri(mount, item[key])} for item in entries)
            return _Part(listed, items, tuple(Target(mount, item[key]) for item in entries))
        if entries:
            naming.check_mount(mount)
        if kind == "tools" and self.overrides and listed is not None:
            self.overrides.check(mount, listed)
        prefixed = mount not in self._unprefixed
        shown: list[dict[str, Any]] = []
        names: dict[str, Target] = {}
        pending: list[dict[str, Any]] = []
        order: list[int | dict[str, Any]] = []
        for item in entries:
            public = naming.own_name(mount, item[key]) if prefixed else None
            if public is None:
                pending.append(item)
                order.append(item)
            elif public not in names:  # a server listing the same name twice: first wins
                names[public] = Target(mount, item[key])
                order.append(len(shown))
                shown.append(self._shown(kind, mount, item, public))
        return _Part(
            listed, tuple(shown), tuple(names.values()), names, tuple(pending), tuple(order) if pending else ()
        )

    def _build(self, kind: str) -> View:
        revision = str(next(self._revisions))
        parts = [(mount, self._part(kind, mount)) for mount in self._mounts]
        if kind not in NAMED_KINDS:
            mapped = tuple(item for _, part in parts for item in part.items)
            return View(mapped, tuple(target for _, part in parts for target in part.targets), revision=revision)
        key = _ITEM_KEY[kind]
        assigned: dict[tuple[str, str], str] = {}
        if any(part.pending for _, part in parts):
            taken = {public for _, part in parts for public in part.names}
            pending = ((mount, item[key]) for mount, part in parts for item in part.pending)
            assigned = naming.assign_names(pending, self._unprefixed, taken)
        items: list[dict[str, Any]] = []
        index: dict[str, Target] = {}
        for mount, part in parts:
            if not part.pending:  # its names are its own: no other mount's can equal them
                items.extend(part.items)
                index.update(part.names)
                continue
            for placed in part.order:
                if isinstance(placed, int):
                    item, target = part.items[placed], part.targets[placed]
                    public = item[key]
                else:
                    public, target = assigned[mount, placed[key]], Target(mount, placed[key])
                    if public in index:
                        continue  # a server listing the same name twice: first wins
                    item = self._shown(kind, mount, placed, public)
                index[public] = target
                items.append(item)
        return View(tuple(items), tuple(index.values()), MappingProxyType(index), revision)
