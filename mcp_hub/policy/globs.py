"""Globs in policy files: rule selectors and argument-name masks.

Shell-style globs (`*`, `?`, `[seq]`, `[!seq]`, as `fnmatch`), compiled once to regular
expressions. `*` also matches `/`. Selector globs are case-sensitive (tool names and URIs are);
mask globs are not.

A selector is `MOUNTGLOB/NAMEGLOB`, split at the FIRST `/`: the mount glob never contains
`/` (mount names cannot), the name glob may (`notes/notes://*`). The name is the server's own
name (or URI), before the hub prefixes it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Literal

from mcp_hub.config import MOUNT_NAME_PATTERN, to_mount_name

Kind = Literal["tool", "prompt", "resource"]
KINDS: tuple[Kind, ...] = ("tool", "prompt", "resource")
SELECTOR_FIELDS: Mapping[Kind, str] = MappingProxyType({"tool": "tools", "prompt": "prompts", "resource": "resources"})
"""What selectors select, and the key that lists them in a rule or a guard."""

_GLOB_CHARS = frozenset("*?[")
_MOUNT_GLOB_CHARS = re.compile(r"[a-z0-9*?\[\]!-]+\Z")


def unclosed_bracket(glob: str) -> bool:
    """True when `glob` has a `[` that fnmatch would silently take as a literal character."""
    i, n = 0, len(glob)
    while i < n:
        if glob[i] == "[":
            j = i + 1
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                return True
            i = j
        i += 1
    return False


@lru_cache(maxsize=1024)
def compile_glob(glob: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """`glob` as a regular expression for `.match` (which then matches the whole string)."""
    return re.compile(fnmatch.translate(glob), re.IGNORECASE if ignore_case else 0)


@dataclass(frozen=True, slots=True)
class Selector:
    """One compiled `MOUNTGLOB/NAMEGLOB` selector; `text` is as written in the file."""

    text: str
    mount: re.Pattern[str]
    name: re.Pattern[str]

    @classmethod
    def parse(cls, text: str) -> Selector:
        """Compile a selector that `selector_problem` accepted."""
        mount, _, name = text.partition("/")
        return cls(text, compile_glob(mount), compile_glob(name))

    def matches(self, mount: str, name: str) -> bool:
        return self.mount.match(mount) is not None and self.name.match(name) is not None


def selector_problem(selector: str, field: str) -> str | None:
    """Why `selector` (from the `field` array: tools, prompts or resources) is unusable, and the fix."""
    what = "URI" if field == "resources" else "NAME"
    example = "'notes/notes://*'" if field == "resources" else "'notes/list_*'"
    if not selector:
        return f"an empty selector matches nothing; write MOUNT/{what}, like {example}, or remove it"
    mount, slash, name = selector.partition("/")
    if mount.endswith(":"):  # "notes://x": a URI without its mount
        return f"a resource selector starts with the mount; write '*/{selector}' (any mount) or 'MOUNT/{selector}'"
    if not slash:
        return _no_slash_problem(selector, what, example)
    if not mount:
        return f"the mount before '/' is empty; write '*/{name}' to match every mount"
    if not name:
        return f"the {what.lower()} after '/' is empty; write '{mount}/*' to match everything on mount {mount!r}"
    for part in (mount, name):
        if unclosed_bracket(part):
            return f"unclosed '[' in {part!r}; close it, or write '[[]' for a literal '['"
    if not _could_match_a_mount(mount):
        fixed = to_mount_name(mount) if not _GLOB_CHARS & set(mount) else mount.lower()
        return (
            f"no mount can match {mount!r}: mount names are lowercase letters, digits and '-', starting with "
            f"a letter; write '{fixed}/{name}'"
        )
    return None


def _no_slash_problem(selector: str, what: str, example: str) -> str:
    hint = f"write '*/{selector}' to match it on every mount"
    head, underscore, tail = selector.partition("_")
    if what == "NAME" and underscore and tail and MOUNT_NAME_PATTERN.match(head):
        hint += f", or '{head}/{tail}' if {selector!r} is the hub's public name"
    return f"a selector is MOUNT/{what} (a mount glob, '/', the server's own {what.lower()}), like {example}; {hint}"


def _could_match_a_mount(mount: str) -> bool:
    if _GLOB_CHARS & set(mount):
        return _MOUNT_GLOB_CHARS.match(mount) is not None
    return MOUNT_NAME_PATTERN.match(mount) is not None
