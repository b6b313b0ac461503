"""Tests for mcp_hub.catalog.naming: public names, resource URIs and pagination cursors."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_hub.catalog.naming import (
    MAX_NAME_LENGTH,
    PUBLIC_NAME_RE,
    SEPARATOR,
    assign_names,
    decode_cursor,
    encode_cursor,
    own_name,
    public_uri,
    split_prefixed,
    split_uri,
)
from mcp_hub.errors import InvalidCursor


def digest(mount: str, native: str, length: int = 8) -> str:
    return hashlib.sha256(f"{mount}\0{native}".encode()).hexdigest()[:length]


def b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# --- assign_names: unit tests -------------------------------------------------------


def test_constants() -> None:
    assert SEPARATOR == "_"
    assert MAX_NAME_LENGTH == 64
    assert PUBLIC_NAME_RE.fullmatch("a" * 64)
    assert not PUBLIC_NAME_RE.fullmatch("a" * 65)
    assert not PUBLIC_NAME_RE.fullmatch("a.b")
    assert not PUBLIC_NAME_RE.fullmatch("")


def test_natural_prefixed_name() -> None:
    assert assign_names([("github", "create_issue")]) == {("github", "create_issue"): "github_create_issue"}


def test_natural_unprefixed_name() -> None:
    names = assign_names([("time", "get_current_time"), ("github", "get_me")], unprefixed={"time"})
    assert names == {("time", "get_current_time"): "get_current_time", ("github", "get_me"): "github_get_me"}


def test_invalid_characters_are_replaced_and_digest_appended() -> None:
    names = assign_names([("github", "files.read"), ("fs", "a/b c"), ("x", "über")])
    assert names == {
        ("github", "files.read"): f"github_files-read-{digest('github', 'files.read')}",
        ("fs", "a/b c"): f"fs_a-b-c-{digest('fs', 'a/b c')}",
        ("x", "über"): f"x_-ber-{digest('x', 'über')}",
    }


def test_unprefixed_invalid_name_is_shortened_without_prefix() -> None:
    assert assign_names([("docs", "search.all")], unprefixed={"docs"}) == {
        ("docs", "search.all"): f"search-all-{digest('docs', 'search.all')}"
    }


def test_long_name_is_truncated_to_64() -> None:
    native = "a" * 70
    name = assign_names([("github", native)])["github", native]
    assert len(name) == MAX_NAME_LENGTH
    assert name == "github_" + "a" * (64 - 7 - 9) + "-" + digest("github", native)


def test_exactly_64_is_natural() -> None:
    native = "a" * (64 - len("github_"))
    assert assign_names([("github", native)])["github", native] == "github_" + native


def test_longest_mount_prefix_is_kept_whole() -> None:
    mount = "m" + "x" * 31
    native = "tool." * 20
    name = assign_names([(mount, native)])[mount, native]
    assert name == f"{mount}_tool-tool-tool-tool-to-{digest(mount, native)}"
    assert len(name) == MAX_NAME_LENGTH


@pytest.mark.parametrize(("unprefixed", "expected"), [((), "github_-"), ({"github"}, "-")])
def test_empty_native_name(unprefixed: set[str], expected: str) -> None:
    assert assign_names([("github", "")], unprefixed) == {("github", ""): expected + digest("github", "")}


def test_duplicate_pairs_map_to_one_name() -> None:
    assert assign_names([("a", "t"), ("a", "t"), ("a", "t.x"), ("a", "t.x")]) == {
        ("a", "t"): "a_t",
        ("a", "t.x"): f"a_t-x-{digest('a', 't.x')}",
    }


@pytest.mark.parametrize("reverse", [False, True])
def test_natural_name_wins_and_shortened_digest_lengthens(reverse: bool) -> None:
    taken = f"files-read-{digest('github', 'files.read')}"
    items = [("github", "files.read"), ("github", taken)]
    names = assign_names(reversed(items) if reverse else items)
    assert names == {
        ("github", taken): f"github_{taken}",
        ("github", "files.read"): f"github_files-read-{digest('github', 'files.read', 10)}",
    }


def test_shortened_names_colliding_lengthen_digest_in_sorted_order() -> None:
    # Same base after truncation; the digests differ, so 8 hex chars already separate them.
    items = [("a", "x" * 70 + "1"), ("a", "x" * 70 + "2")]
    names = assign_names(items)
    assert names == {(m, n): "a_" + "x" * 53 + "-" + digest(m, n) for m, n in items}


def test_unprefixed_collision_first_mount_keeps_natural() -> None:
    names = assign_names([("zed", "search"), ("alpha", "search")], unprefixed={"zed", "alpha"})
    assert names == {("alpha", "search"): "search", ("zed", "search"): f"search-{digest('zed', 'search')}"}


def test_prefixed_wins_over_unprefixed_collision() -> None:
    names = assign_names([("aaa", "github_x"), ("github", "x")], unprefixed={"aaa"})
    assert names == {("github", "x"): "github_x", ("aaa", "github_x"): f"github_x-{digest('aaa', 'github_x')}"}


def test_every_digest_taken_still_finds_a_free_name() -> None:
    # A server naming its tools after the shortened names of another of its tools.
    full = hashlib.sha256(b"m\0a.b").hexdigest()
    candidates = [f"{'m_a-b'[: 63 - n]}-{full[:n]}" for n in range(8, 64 - len("m_"), 2)]
    decoys = [candidate.removeprefix("m_") for candidate in candidates]
    names = assign_names([("m", "a.b"), *(("m", d) for d in decoys)])
    assert {names["m", d] for d in decoys} == {f"m_{d}" for d in decoys}
    assert names["m", "a.b"] not in candidates
    assert names["m", "a.b"].startswith("m_a-b-")
    assert PUBLIC_NAME_RE.fullmatch(names["m", "a.b"])
    assert len(set(names.values())) == len(names)


@pytest.mark.parametrize("mount", ["", "Github", "git_hub", "a+b", "1abc", "a" * 33])
def test_invalid_mount_is_rejected(mount: str) -> None:
    with pytest.raises(ValueError, match="invalid mount name"):
        assign_names([(mount, "tool")])


# --- assign_names: properties -------------------------------------------------------

mount_names = st.from_regex(r"[a-z][a-z0-9-]{0,31}", fullmatch=True)
native_names = st.one_of(
    st.text(max_size=80),
    st.from_regex(r"[A-Za-z0-9_-]{0,70}", fullmatch=True),
    st.sampled_from(["", "search", "x", "x.y", "x-y", "github_x", "a" * 57, "a" * 58]),
)


@st.composite
def name_inputs(draw: st.DrawFn) -> tuple[list[tuple[str, str]], set[str]]:
    """Pairs over a small pool of mounts and natives, so collisions are common."""
    mounts = draw(st.lists(mount_names | st.sampled_from(["github", "x", "a"]), min_size=1, max_size=4))
    natives = draw(st.lists(native_names, min_size=1, max_size=6))
    items = draw(st.lists(st.tuples(st.sampled_from(mounts), st.sampled_from(natives)), max_size=12))
    unprefixed = draw(st.sets(st.sampled_from(mounts)))
    return items, unprefixed


def natural(mount: str, native: str, unprefixed: set[str]) -> str:
    return native if mount in unprefixed else f"{mount}_{native}"


def is_natural_valid(mount: str, native: str, unprefixed: set[str]) -> bool:
    return bool(native) and bool(PUBLIC_NAME_RE.fullmatch(natural(mount, native, unprefixed)))


@given(name_inputs())
def test_names_are_valid_and_injective(inputs: tuple[list[tuple[str, str]], set[str]]) -> None:
    items, unprefixed = inputs
    names = assign_names(items, unprefixed)
    assert names.keys() == set(items)
    assert all(PUBLIC_NAME_RE.fullmatch(name) for name in names.values())
    assert len(set(names.values())) == len(names)
    for (mount, _), name in names.items():
        if mount not in unprefixed:
            assert name.startswith(mount + SEPARATOR)


@pytest.mark.slow
@given(name_inputs(), st.data())
def test_names_are_deterministic_under_permutation(
    inputs: tuple[list[tuple[str, str]], set[str]], data: st.DataObject
) -> None:
    items, unprefixed = inputs
    shuffled = data.draw(st.permutations(items))
    assert assign_names(shuffled, unprefixed) == assign_names(items, unprefixed)


@given(name_inputs())
def test_valid_natural_names_are_preserved(inputs: tuple[list[tuple[str, str]], set[str]]) -> None:
    items, unprefixed = inputs
    names = assign_names(items, unprefixed)
    for mount, native in set(items):
        if is_natural_valid(mount, native, unprefixed):
            candidate = natural(mount, native, unprefixed)
            if mount not in unprefixed:
                # Prefixed natural names never collide with each other and win over unprefixed ones.
                assert names[mount, native] == candidate
            else:
                # Some claimant of the natural name gets it.
                assert candidate in names.values()
                owner = next(pair for pair, name in names.items() if name == candidate)
                assert natural(*owner, unprefixed) == candidate


@pytest.mark.slow
@given(name_inputs())
def test_natural_names_split_back(inputs: tuple[list[tuple[str, str]], set[str]]) -> None:
    items, unprefixed = inputs
    for (mount, native), name in assign_names(items, unprefixed).items():
        if mount not in unprefixed and name == f"{mount}_{native}":
            assert split_prefixed(name) == (mount, native)


# --- split_prefixed -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("public", "expected"),
    [
        ("github_create_issue", ("github", "create_issue")),
        ("my-server_x", ("my-server", "x")),
        ("github_", ("github", "")),
        ("get-time", None),
        ("", None),
    ],
)
def test_split_prefixed(public: str, expected: tuple[str, str] | None) -> None:
    assert split_prefixed(public) == expected


# --- resource URIs ------------------------------------------------------------------


def test_public_uri_examples() -> None:
    assert public_uri("everything", "test://static/resource/1") == "everything+test://static/resource/1"
    assert public_uri("everything", "test://static/resource/{id}") == "everything+test://static/resource/{id}"
    assert public_uri("everything", "file:///a+b", prefixed=False) == "file:///a+b"
    # A skill's file keeps its scheme, the mount first in its path, so the path still ends in the skill's name.
    assert public_uri("docs", "skill://pdf/SKILL.md") == "skill://docs/pdf/SKILL.md"
    assert public_uri("docs", "skill://acme/billing/refunds") == "skill://docs/acme/billing/refunds"
    assert public_uri("docs", "skill://pdf/SKILL.md", prefixed=False) == "skill://pdf/SKILL.md"


@pytest.mark.parametrize(
    ("public", "expected"),
    [
        ("everything+test://static/resource/1", ("everything", "test://static/resource/1")),
        ("everything+a+b", ("everything", "a+b")),
        ("everything+", ("everything", "")),
        ("other+test://x", None),
        ("test://static/resource/1", None),
        ("+everything", None),
        ("skill://github/pdf/SKILL.md", ("github", "skill://pdf/SKILL.md")),
        ("skill://github/a/b/c", ("github", "skill://a/b/c")),
        ("github+skill://pdf/SKILL.md", ("github", "skill://pdf/SKILL.md")),
        ("skill://other/pdf/SKILL.md", None),
        ("skill://github", None),
    ],
)
def test_split_uri(public: str, expected: tuple[str, str] | None) -> None:
    assert split_uri(public, {"everything", "github"}) == expected


@given(mount_names, st.one_of(st.text(), st.text().map("skill://".__add__)), st.sets(mount_names))
def test_uri_round_trip(mount: str, uri: str, others: set[str]) -> None:
    assert split_uri(public_uri(mount, uri), others | {mount}) == (mount, uri)
    assert public_uri(mount, uri, prefixed=False) == uri


@given(mount_names, st.one_of(st.text(), st.text().map("skill://".__add__)), st.sets(mount_names))
def test_uri_of_unknown_mount_is_not_split(mount: str, uri: str, others: set[str]) -> None:
    assert split_uri(public_uri(mount, uri), others - {mount}) is None


# --- cursors ------------------------------------------------------------------------


def test_cursor_round_trip_example() -> None:
    cursor = encode_cursor(50, "rev-1")
    assert all(c.isalnum() or c in "-_" for c in cursor)
    assert json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))) == {"o": 50, "r": "rev-1"}
    assert decode_cursor(cursor, "rev-1") == 50


def test_cursor_from_other_revision_is_rejected() -> None:
    with pytest.raises(InvalidCursor):
        decode_cursor(encode_cursor(10, "rev-1"), "rev-2")


def test_negative_offset_cannot_be_encoded() -> None:
    with pytest.raises(ValueError, match="negative"):
        encode_cursor(-1, "r")


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "!!!",
        "a",
        "é",
        "YWJj\n",
        encode_cursor(1, "r") + "=",  # padding is never issued
        base64.standard_b64encode(json.dumps({"o": 1, "r": "??>"}).encode()).decode(),  # "+" / "/" alphabet
        b64("not json"),
        b64(b"\xff\xfe"),
        b64("[]"),
        b64("null"),
        b64("[" * 100_000),
        b64("1" * 5_000),
        b64('{"o":-1,"r":"r"}'),
        b64('{"o":true,"r":"r"}'),
        b64('{"o":1.0,"r":"r"}'),
        b64('{"o":"1","r":"r"}'),
        b64('{"o":1}'),
        b64('{"o":1,"r":1}'),
        b64('{"o":1,"r":"r","x":0}'),
        b64('{"o": 1, "r": "r"}'),  # not what encode_cursor produces
    ],
)
def test_garbage_cursor_is_rejected(cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor, "r")


@given(st.integers(min_value=0), st.text())
def test_cursor_round_trip(offset: int, revision: str) -> None:
    assert decode_cursor(encode_cursor(offset, revision), revision) == offset


@given(st.integers(min_value=0), st.text(), st.text())
def test_cursor_with_other_revision_is_rejected(offset: int, issued: str, current: str) -> None:
    cursor = encode_cursor(offset, issued)
    if issued == current:
        assert decode_cursor(cursor, current) == offset
    else:
        with pytest.raises(InvalidCursor):
            decode_cursor(cursor, current)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.sampled_from(["o", "r", "x"]) | st.text(), inner),
)


@pytest.mark.slow
@given(st.one_of(st.text(), st.binary().map(b64), json_values.map(lambda v: b64(json.dumps(v)))), st.text())
def test_arbitrary_cursor_raises_only_invalid_cursor(cursor: str, revision: str) -> None:
    try:
        offset = decode_cursor(cursor, revision)
    except InvalidCursor:
        return
    assert cursor == encode_cursor(offset, revision)


@given(name_inputs())
def test_names_around_own_names_equal_names_of_all(inputs: tuple[list[tuple[str, str]], set[str]]) -> None:
    """A view named in parts: the own names of prefixed mounts' items, the rest assigned around them, equal
    the names all the pairs are given together."""
    items, unprefixed = inputs
    own = {
        (mount, native): name
        for mount, native in items
        if mount not in unprefixed and (name := own_name(mount, native)) is not None
    }
    rest = [pair for pair in items if pair not in own]
    assert {**own, **assign_names(rest, unprefixed, taken=own.values())} == assign_names(items, unprefixed)


def test_own_name_is_the_valid_natural_name_only() -> None:
    assert own_name("github", "create_issue") == "github_create_issue"
    assert own_name("github", "") is None
    assert own_name("github", "files.read") is None
    assert own_name("github", "a" * 58) is None  # 65 characters with the prefix
    assert own_name("github", "a" * 57) == "github_" + "a" * 57  # 64: the longest name
