"""The catalog's views as mounts list, one at a time and in any order: each equals the view named and built
from every mount's listing at once (the whole kind given to `assign_names` together)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_hub.catalog.catalog import Catalog, Target
from mcp_hub.catalog.naming import assign_names
from mcp_hub.catalog.overrides import Overrides
from mcp_hub.config import ToolOverride

MOUNTS = ("github", "files", "a", "x-y")

natives = st.one_of(
    st.sampled_from(
        ["search", "read", "files.read", "", "github_search", "files_read", "a" * 57, "a" * 58, "x_y", "über"]
    ),
    st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True),
)
tool = st.builds(lambda name, n: {"name": name, "description": f"d{n}"}, natives, st.integers(0, 3))
listing = st.lists(st.one_of(tool, st.just({"name": 7}), st.just({"description": "no name"})), max_size=6)
updates = st.lists(st.tuples(st.sampled_from(MOUNTS), st.sampled_from(["tools", "prompts"]), listing), max_size=12)
unprefixed_sets = st.sets(st.sampled_from(MOUNTS), max_size=2)

OVERRIDES = Overrides({"github": {"search": ToolOverride(description="searches the hub's repositories")}})


def expected(
    catalog: Catalog, kind: str, unprefixed: set[str], overrides: Overrides
) -> tuple[list[dict[str, Any]], dict[str, Target]]:
    """The view of `kind` built from scratch: every mount's items, named together."""
    entries = [
        (mount, item)
        for mount in catalog.mounts
        for item in catalog.items_of(mount, kind)
        if isinstance(item.get("name"), str)
    ]
    names = assign_names(((mount, item["name"]) for mount, item in entries), unprefixed)
    items: list[dict[str, Any]] = []
    index: dict[str, Target] = {}
    for mount, item in entries:
        public = names[mount, item["name"]]
        if public in index:
            continue
        index[public] = Target(mount, item["name"])
        shown = {**item, "name": public}
        items.append(overrides.shown(mount, item["name"], shown) if kind == "tools" else shown)
    return items, index


def check(catalog: Catalog, unprefixed: set[str], overrides: Overrides) -> None:
    for kind in ("tools", "prompts"):
        items, index = expected(catalog, kind, unprefixed, overrides)
        view = catalog.view(kind)
        assert list(view.items) == items
        assert dict(view.index) == index
        assert list(view.targets) == list(index.values())
        for native in {target.native for target in index.values()}:
            assert catalog.natives(kind, native) == tuple(t for t in index.values() if t.native == native)


@settings(max_examples=150, deadline=None)
@given(updates, unprefixed_sets, st.booleans())
def test_views_built_as_mounts_list_equal_views_built_at_once(
    steps: list[tuple[str, str, list[dict[str, Any]]]], unprefixed: set[str], overridden: bool
) -> None:
    overrides = OVERRIDES if overridden else Overrides()
    catalog = Catalog(MOUNTS, unprefixed, overrides)
    for mount, kind, items in steps:
        catalog.update(mount, {kind: items})
        check(catalog, unprefixed, overrides)


@settings(max_examples=60, deadline=None)
@given(updates, unprefixed_sets, unprefixed_sets)
def test_a_remount_renames_every_share(
    steps: list[tuple[str, str, list[dict[str, Any]]]], before: set[str], after: set[str]
) -> None:
    """A reload that changes which mounts are prefixed, or their overrides, renames what was listed before."""
    catalog = Catalog(MOUNTS, before)
    for mount, kind, items in steps:
        catalog.update(mount, {kind: items})
    catalog.remount(MOUNTS[:3], after, OVERRIDES)
    check(catalog, after & set(MOUNTS[:3]), OVERRIDES)


def test_a_listing_replaced_by_an_equal_one_keeps_the_view() -> None:
    catalog = Catalog(MOUNTS)
    catalog.update("github", {"tools": [{"name": "search"}]})
    view = catalog.view("tools")
    assert catalog.update("github", {"tools": [{"name": "search"}]}) == frozenset()
    assert catalog.view("tools") is view
    assert catalog.update("files", {"tools": [{"name": "read"}]}) == {"tools"}
    assert catalog.view("tools").items[0] is view.items[0]  # github's share was kept, not copied again


def test_an_unprefixed_mount_takes_no_name_a_prefixed_one_owns() -> None:
    """An unprefixed mount listing `github_search` beside the prefixed github's `search`, in either order of
    arrival: github keeps `github_search`, the other is shortened (as `assign_names` gives them together)."""
    for order in (("a", "github"), ("github", "a")):
        catalog = Catalog(("a", "github"), {"a"})
        listings = {"a": [{"name": "github_search"}, {"name": "read"}], "github": [{"name": "search"}]}
        for mount in order:
            catalog.update(mount, {"tools": listings[mount]})
        check(catalog, {"a"}, Overrides())
        assert catalog.resolve("tools", "github_search") == Target("github", "search")
        assert catalog.resolve("tools", "read") == Target("a", "read")
        assert len(catalog.view("tools").items) == 3
