"""Tool names as a provider accepts them, and back: the hub's public names already match
`^[A-Za-z0-9_-]{1,64}$` (OpenAI's and Anthropic's rule; Gemini's also wants a letter or `_` first),
so they pass unchanged; any other name (a hub connected to by URL may be another server) becomes
`<cleaned>-<hash>`, deterministic and unique, and a call under it maps back to the tool's own name."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

NAME_RULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
"""The rule every exported name keeps: OpenAI's and Anthropic's, with Gemini's first character."""


class UnknownToolError(LookupError):
    """A provider's tool call names a tool this catalog did not export."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown tool: {name}")
        self.name = name


def fitted(name: str) -> str:
    """`name` itself when it fits NAME_RULE, else a cleaned, shortened name with a hash of the original."""
    if NAME_RULE.match(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_-") or "tool"
    if not re.match(r"[A-Za-z_]", cleaned):
        cleaned = f"t_{cleaned}"
    return f"{cleaned[: 64 - 9]}-{digest}"


class ToolNames:
    """Both directions between the names a provider sees and the hub's names, for one catalog."""

    def __init__(self, names: Iterable[str]) -> None:
        self._out: dict[str, str] = {}
        self._back: dict[str, str] = {}
        for name in names:
            exported = fitted(name)
            if exported in self._back and self._back[exported] != name:  # a hash collision: practically never
                raise ValueError(f"tools {self._back[exported]!r} and {name!r} export as the same name {exported!r}")
            self._out[name], self._back[exported] = exported, name

    def exported(self, name: str) -> str:
        return self._out[name]

    def original(self, exported: str) -> str:
        """The hub's name of a tool the provider called; UnknownToolError for a name not exported."""
        try:
            return self._back[exported]
        except KeyError:
            raise UnknownToolError(exported) from None
