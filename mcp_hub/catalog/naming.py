"""Public names: how the hub names what its mounts offer, and how it reads the names back.

Every mounted server has a *mount* name matching ``^[a-z][a-z0-9-]{0,31}$``. Because a
mount name never contains ``_`` or ``+``, those two characters can separate it from
whatever follows without ambiguity:

Tools and prompts
    ``github`` + ``create_issue`` -> ``github_create_issue``. Everything before the
    first ``_`` is the mount. Names must also be accepted by LLM function-calling
    APIs (:data:`PUBLIC_NAME_RE`), so a name that is too long or has other
    characters (``files.read``, ``über``, ``""``) gets a *shortened* form instead:
    invalid characters become ``-``, the tail is cut, and the first hex digits of
    ``sha256(f"{mount}\\0{native}")`` are appended, e.g. ``github_files-read-1a2b3c4d``.
    The ``github_`` prefix is always kept whole. Mounts configured as unprefixed
    show native names as they are, so their names may collide with others;
    :func:`assign_names` resolves every collision deterministically. Shortened names
    cannot be parsed back, so callers keep the mapping it returns and look names up.

Resources and resource templates
    ``everything`` + ``test://static/resource/{id}`` ->
    ``everything+test://static/resource/{id}``. The prefix is literal text, so it
    also works for RFC 6570 templates, and :func:`split_uri` inverts it exactly.
    An MCP Apps page (a ``ui://`` URI) keeps its scheme, which hosts require of
    it: the prefix goes after ``ui://``, ``apps`` + ``ui://demo/app.html`` ->
    ``ui://apps+demo/app.html``. :func:`map_ui_references` gives the ``ui://``
    references a tool or a tool result makes in ``_meta`` their public URIs.
    A skill's file (a ``skill://`` URI, extension ``io.modelcontextprotocol/skills``)
    keeps its scheme too, and the mount becomes the first segment of its skill path:
    ``docs`` + ``skill://pdf/SKILL.md`` -> ``skill://docs/pdf/SKILL.md``. A ``/``
    rather than a ``+`` because the extension requires the last segment of a skill's
    path to be its name, and lets the segments before it be any prefix.

Pagination cursors
    Opaque url-safe base64 of ``{"o": offset, "r": revision}``. A cursor from an
    older revision of a list is rejected, so clients restart instead of skipping or
    repeating entries.

Everything here is pure: no I/O and nothing from the MCP SDK.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from itertools import count
from typing import Any

from mcp_hub.errors import InvalidCursor

SEPARATOR = "_"
MAX_NAME_LENGTH = 64
PUBLIC_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # use .fullmatch: "$" also matches before a final "\n"

_URI_SEPARATOR = "+"

UI_SCHEME = "ui://"
"""The scheme of MCP Apps pages (extension ``io.modelcontextprotocol/ui``)."""
SKILL_SCHEME = "skill://"
"""The scheme of skills' files (extension ``io.modelcontextprotocol/skills``)."""
UI_META_KEY = "ui"
UI_LEGACY_URI_KEY = "ui/resourceUri"
_MOUNT_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
_INVALID_CHARS_RE = re.compile(r"[^A-Za-z0-9_-]")
_CURSOR_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_DIGEST_LENGTH = 8  # hex chars of the first try; each retry adds 2


def assign_names(
    items: Iterable[tuple[str, str]], unprefixed: Collection[str] = (), taken: Collection[str] = ()
) -> dict[tuple[str, str], str]:
    """The public name of each ``(mount, native)`` pair; call once per kind (tools, prompts).

    The result is injective, every name matches :data:`PUBLIC_NAME_RE`, and it
    depends only on the *set* of pairs. A valid natural name (``mount_native``, or
    ``native`` for a mount in ``unprefixed``) is kept as is. When two natural names
    are equal, which only happens through unprefixed mounts, a prefixed pair keeps
    it, else the first pair in sorted order; the others are shortened like invalid
    names. Shortened names are assigned in sorted order, never take a name already
    given out, and lengthen their digest until they are free.

    `taken`: the names of the other pairs of the kind whose names are their own (`own_name`), left out of
    `items`: the names given are then those all the pairs together would be given, without sorting them all.

    Raises ``ValueError`` for a mount name outside ``^[a-z][a-z0-9-]{0,31}$``.
    """
    pairs = sorted(set(items), key=lambda pair: (pair[0] in unprefixed, pair))
    for mount, _ in pairs:
        check_mount(mount)
    names: dict[tuple[str, str], str] = {}
    used = set(taken)
    for mount, native in pairs:
        natural = _prefix(mount, unprefixed) + native
        if native and PUBLIC_NAME_RE.fullmatch(natural) and natural not in used:
            names[mount, native] = natural
            used.add(natural)
    for mount, native in sorted(set(pairs) - names.keys()):
        name = next(n for n in _shortened(mount, native, _prefix(mount, unprefixed)) if n not in used)
        names[mount, native] = name
        used.add(name)
    return names


def own_name(mount: str, native: str) -> str | None:
    """The public name of a prefixed mount's item when it is the natural one (``mount_native``, valid), else
    None. `assign_names` gives such a pair that name whatever the other pairs are: no other mount's natural
    name starts with this mount's prefix (a mount name has no ``_``), and every other name is chosen around
    it, so a mount's share of a view can be named once, alone."""
    natural = mount + SEPARATOR + native
    return natural if native and PUBLIC_NAME_RE.fullmatch(natural) else None


def check_mount(mount: str) -> None:
    """Raises ``ValueError`` for a mount name outside ``^[a-z][a-z0-9-]{0,31}$``."""
    if not _MOUNT_RE.fullmatch(mount):
        raise ValueError(f"invalid mount name {mount!r}")


def _prefix(mount: str, unprefixed: Collection[str]) -> str:
    return "" if mount in unprefixed else mount + SEPARATOR


def _shortened(mount: str, native: str, prefix: str) -> Iterator[str]:
    """Endless valid candidates for a pair whose natural name is unusable, best first.

    Digests of 8, 10, ... hex chars, as long as ``prefix`` still fits whole. Should
    all of them be taken (only a server naming its tools after their digests can do
    that), the same again with a salted digest, so a free name is always found.
    """
    base = _INVALID_CHARS_RE.sub("-", prefix + native)
    widest = MAX_NAME_LENGTH - len(prefix) - 1
    for salt in count():
        key = f"{mount}\0{native}" + (f"\0{salt}" if salt else "")
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        for length in range(_DIGEST_LENGTH, widest + 1, 2):
            yield f"{base[: MAX_NAME_LENGTH - length - 1]}-{digest[:length]}"


def split_prefixed(public: str) -> tuple[str, str] | None:
    """``"github_create_issue"`` -> ``("github", "create_issue")``; ``None`` without ``_``.

    Only meaningful for natural prefixed names; anything else is found through the
    mapping :func:`assign_names` returns.
    """
    mount, sep, native = public.partition(SEPARATOR)
    return (mount, native) if sep else None


def public_uri(mount: str, uri: str, *, prefixed: bool = True) -> str:
    """The URI (or URI template) clients see: ``f"{mount}+{uri}"``, or ``uri`` if not prefixed;
    a ``ui://`` URI keeps its scheme in front: ``f"ui://{mount}+{rest}"``, and a ``skill://`` URI
    its scheme with the mount as its first segment: ``f"skill://{mount}/{rest}"``."""
    if not prefixed:
        return uri
    if uri.startswith(UI_SCHEME):
        return f"{UI_SCHEME}{mount}{_URI_SEPARATOR}{uri[len(UI_SCHEME) :]}"
    if uri.startswith(SKILL_SCHEME):
        return f"{SKILL_SCHEME}{mount}/{uri[len(SKILL_SCHEME) :]}"
    return f"{mount}{_URI_SEPARATOR}{uri}"


def split_uri(public: str, mounts: Collection[str]) -> tuple[str, str] | None:
    """Inverse of :func:`public_uri` for prefixed mounts: ``(mount, uri)``, or ``None``
    when the text before the first ``+`` (after ``ui://`` in a ``ui://`` URI) is not one
    of ``mounts``, nor (in a ``skill://`` URI) the first segment. The plain forms of a ``ui://`` and
    a ``skill://`` URI (``apps+ui://...``, ``docs+skill://...``) are read too."""
    if public.startswith(UI_SCHEME):
        mount, sep, rest = public[len(UI_SCHEME) :].partition(_URI_SEPARATOR)
        if sep and mount in mounts:
            return mount, UI_SCHEME + rest
    if public.startswith(SKILL_SCHEME):
        mount, sep, rest = public[len(SKILL_SCHEME) :].partition("/")
        if sep and mount in mounts:
            return mount, SKILL_SCHEME + rest
    mount, sep, uri = public.partition(_URI_SEPARATOR)
    return (mount, uri) if sep and mount in mounts else None


def map_ui_references(meta: Mapping[str, Any], to_public: Callable[[str], str]) -> dict[str, Any] | None:
    """``meta`` (a tool's or a tool result's ``_meta``) with the page URIs it names given
    through ``to_public``: ``ui.resourceUri`` and the deprecated flat ``ui/resourceUri``.

    ``None`` when it names none (nothing to change); everything else is kept as it is.
    """
    ui = meta.get(UI_META_KEY)
    nested = isinstance(ui, Mapping) and isinstance(ui.get("resourceUri"), str)
    flat = isinstance(meta.get(UI_LEGACY_URI_KEY), str)
    if not (nested or flat):
        return None
    mapped = dict(meta)
    if nested:
        mapped[UI_META_KEY] = {**ui, "resourceUri": to_public(ui["resourceUri"])}
    if flat:
        mapped[UI_LEGACY_URI_KEY] = to_public(meta[UI_LEGACY_URI_KEY])
    return mapped


def page_uris(meta: Any) -> list[str]:
    """The page URIs a tool's or a tool result's ``_meta`` names (see :func:`map_ui_references`)."""
    named: list[str] = []
    if isinstance(meta, Mapping):
        map_ui_references(meta, lambda uri: named.append(uri) or uri)
    return named


def app_may_call(meta: Any) -> bool:
    """Whether an MCP Apps page may call a tool with this ``_meta``: its ``ui.visibility``
    includes ``"app"``, or is not given (the default is ``["model", "app"]``)."""
    ui = meta.get(UI_META_KEY) if isinstance(meta, Mapping) else None
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    return not isinstance(visibility, list) or "app" in visibility


def links_page(meta: Any) -> bool:
    """Whether a tool with this ``_meta`` names an MCP Apps page."""
    return bool(page_uris(meta))


def encode_cursor(offset: int, revision: str) -> str:
    """An opaque cursor for resuming a list of revision ``revision`` at ``offset``."""
    if offset < 0:
        raise ValueError(f"negative cursor offset {offset}")
    data = json.dumps({"o": offset, "r": revision}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def cursor_revision(cursor: str) -> str:
    """The revision a cursor from :func:`encode_cursor` was issued for.

    Raises :class:`~mcp_hub.errors.InvalidCursor` for any other text.
    """
    if not _CURSOR_RE.fullmatch(cursor):
        raise InvalidCursor(cursor)
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, RecursionError):
        raise InvalidCursor(cursor) from None
    revision = data.get("r") if isinstance(data, dict) else None
    if not isinstance(revision, str):
        raise InvalidCursor(cursor)
    return revision


def decode_cursor(cursor: str, revision: str) -> int:
    """The offset in a cursor from :func:`encode_cursor` for the same ``revision``.

    Raises :class:`~mcp_hub.errors.InvalidCursor` for any other text, and for a
    cursor issued for another revision (the list has changed since).
    """
    if not _CURSOR_RE.fullmatch(cursor):
        raise InvalidCursor(cursor)
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, RecursionError):  # binascii.Error and JSON errors are ValueErrors; deep nesting recurses
        raise InvalidCursor(cursor) from None
    offset = data.get("o") if isinstance(data, dict) else None
    if type(offset) is not int or offset < 0 or encode_cursor(offset, revision) != cursor:
        raise InvalidCursor(cursor)
    return offset
