"""Curated endpoints: what an `[endpoints.NAME]` table lets its clients see of the hub (`Selection`).

An endpoint is a view of the one catalog, not a catalog of its own: an item is served at the
endpoint when the endpoint selects it (`Selection.admits`) AND the caller's policy profile lets it
see it (`Selection.visible`). Lists, searches, completions, subscriptions and calls all ask
`visible`, so a call of an item outside the view is answered like a call of an unknown one.

A selection is the mounts of `servers` (all when omitted), narrowed per kind by policy selectors
(`MOUNT/NAME` globs on the server's own names and URIs, as in policy files; a leading `!`
excludes): with no including selector of a kind, every item of that kind on the selected mounts.
The hub's own endpoint (`/mcp`, or stdio without `--endpoint`) selects everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_hub.catalog.catalog import View
from mcp_hub.config import EndpointSettings, HubConfig
from mcp_hub.errors import ConfigError
from mcp_hub.policy import PolicySet
from mcp_hub.policy.globs import Selector, selector_problem
from mcp_hub.search import ToolSearch

_SELECTOR_FIELD = {"tool": "tools", "prompt": "prompts", "resource": "resources", "resource_template": "resources"}
"""Which of the table's selector arrays selects items of a policy kind (templates: as resources)."""

_POLICY_KIND = {
    "tools": "tool",
    "prompts": "prompt",
    "resources": "resource",
    "resource_templates": "resource_template",
}
"""The policy kind of a catalog kind."""


def selections(config: HubConfig) -> dict[str, Selection]:
    """The `[endpoints.NAME]` tables of `config`, compiled. Raises `ConfigError` for a selector that is not
    one (naming the file, the key and the fix, as the policy files' selectors are checked)."""
    for name, settings in config.endpoints.items():
        for field in ("tools", "prompts", "resources"):
            for index, selector in enumerate(getattr(settings, field)):
                problem = selector_problem(selector.removeprefix("!"), field)
                if problem is not None:
                    raise ConfigError(config.path, f"endpoints.{name}.{field}[{index}]", problem)
    return {name: Selection(name, settings) for name, settings in config.endpoints.items()}


class _Globs:
    """One selector array, compiled: includes (none: everything) and `!` excludes."""

    def __init__(self, selectors: Sequence[str]) -> None:
        self.include = tuple(Selector.parse(s) for s in selectors if not s.startswith("!"))
        self.exclude = tuple(Selector.parse(s[1:]) for s in selectors if s.startswith("!"))

    def admits(self, mount: str, name: str) -> bool:
        if self.include and not any(s.matches(mount, name) for s in self.include):
            return False
        return not any(s.matches(mount, name) for s in self.exclude)


class Selection:
    """What one endpoint serves of the catalog: `name` None and no settings for the hub's own endpoint,
    which selects everything."""

    def __init__(self, name: str | None = None, settings: EndpointSettings | None = None) -> None:
        self.name = name
        settings = settings if settings is not None else EndpointSettings()
        self.everything = settings == EndpointSettings()
        self.search = settings.search
        """Tool search on (True) or off (False) here, whatever else says; None: as `ToolSearch.active` says."""
        self.instructions = settings.instructions
        self.max_result_tokens = settings.max_result_tokens
        """The endpoint's result budget (tokens; 0: none), or None: as the hub's `[results]` says."""
        self.max_list_tokens = settings.max_list_tokens
        """The budget of the endpoint's `tools/list` (tokens; 0: none), or None: as the hub's `[results]` says."""
        self._mounts = frozenset(settings.servers) if settings.servers is not None else None
        self._globs = {field: _Globs(getattr(settings, field)) for field in ("tools", "prompts", "resources")}

    def admits(self, kind: str, mount: str, native: str) -> bool:
        """Whether the endpoint selects the item (`kind`: a policy kind; `native`: the server's own name or URI)."""
        if self.everything:
            return True
        if self._mounts is not None and mount not in self._mounts:
            return False
        return self._globs[_SELECTOR_FIELD[kind]].admits(mount, native)

    def admits_mount(self, mount: str) -> bool:
        """Whether the endpoint selects anything of `mount` (its `servers`, all when omitted)."""
        return self._mounts is None or mount in self._mounts

    def visible(self, policy: PolicySet, principal: str, kind: str, mount: str, native: str) -> bool:
        """Whether `principal` sees the item here: the endpoint selects it and the policy lets it see it."""
        return self.admits(kind, mount, native) and policy.visible(principal, kind, mount, native)

    def searching(self, search: ToolSearch | None, principal: str, policy: PolicySet) -> bool:
        """Whether `principal` lists the search and call tools here: as the endpoint's `search` says, else as
        the hub's `[search]` and the principal's profile say (`ToolSearch.active`)."""
        if search is None:
            return False
        return self.search if self.search is not None else search.active(principal, policy)

    def selected(self, kind: str, view: View) -> tuple[dict[str, Any], ...]:
        """The items of a catalog view (`kind`: tools, prompts, resources, resource_templates) selected here."""
        if self.everything:
            return view.items
        policy_kind = _POLICY_KIND[kind]
        return tuple(
            item
            for item, target in zip(view.items, view.targets, strict=True)
            if self.admits(policy_kind, target.mount, target.native)
        )
