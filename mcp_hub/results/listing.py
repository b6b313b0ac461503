"""Tool lists within a budget: a `tools/list` over its endpoint's `max_list_tokens`, shortened until it fits.

The size of a list is the token count (tokens.py, the counter result budgets use) of its tools as compact JSON.
Over the budget, the tools are shortened deterministically, in two steps, each the least that makes the list
fit (a binary search on a length in characters that applies to every tool alike):

1. the descriptions inside the tools' schemas (`inputSchema`, `outputSchema`: the properties', their items',
   nested and `$defs` schemas', the schema's own) are cut to a length, ending in "…"; at length 0 removed;
2. then the tools' own descriptions are cut to a length, ending in `MARKER`, visible to the model.

A tool is never dropped and a schema never broken: only `description` strings change, so each schema keeps
its properties, `required` and types. A list that does not fit even at its smallest is served so, and
`ListBudget` logs a warning once, naming the endpoint and suggesting tool search (`[search] enabled = true`).
Lists are shortened once per listing: `ListBudget.fit` keeps what it made, by listing revision and names.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from mcp_hub.results.tokens import Tokens, tokens

logger = logging.getLogger("mcp_hub.results")

MARKER = "… [shortened by mcp-hub]"
"""What ends a tool description the hub shortened."""

_ELLIPSIS = "…"

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
"""Keywords whose values map names to schemas."""
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
"""Keywords whose values are lists of schemas."""
_SCHEMA_ONES = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
"""Keywords whose values are schemas."""


def list_size(items: Sequence[dict[str, Any]], counter: Tokens | None = None) -> int:
    """A tool list's size in tokens: its tools as compact JSON (keys sorted: the same whatever order they come in),
    counted with `counter` (the hub's by default)."""
    return (counter or tokens()).count(_dumps(items))


def _dumps(items: Sequence[dict[str, Any]]) -> str:
    return json.dumps(list(items), ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _cut(text: str, length: int, marker: str) -> str:
    return text if len(text) <= length else text[:length].rstrip() + marker


def _schema(schema: Any, length: int) -> Any:
    """A copy of a JSON schema with its `description` strings cut to `length` (0: removed); the rest as it is."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description" and isinstance(value, str):
            if length > 0:
                out[key] = _cut(value, length, _ELLIPSIS)
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _schema(sub, length) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_schema(sub, length) for sub in value]
        elif key in _SCHEMA_ONES and isinstance(value, dict):
            out[key] = _schema(value, length)
        else:
            out[key] = value
    return out


def _longest_schema_description(schema: Any) -> int:
    if not isinstance(schema, dict):
        return 0
    longest = len(schema["description"]) if isinstance(schema.get("description"), str) else 0
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            subs: list[Any] = list(value.values())
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            subs = value
        elif key in _SCHEMA_ONES and isinstance(value, dict):
            subs = [value]
        else:
            continue
        longest = max([longest, *(_longest_schema_description(sub) for sub in subs)])
    return longest


def _shortened(tool: dict[str, Any], schema_length: int | None, description_length: int | None) -> dict[str, Any]:
    """`tool` with its schemas' descriptions cut to `schema_length` and its description to `description_length`
    (None: as they are)."""
    out = dict(tool)
    if schema_length is not None:
        for key in ("inputSchema", "outputSchema"):
            if isinstance(out.get(key), dict):
                out[key] = _schema(out[key], schema_length)
    description = out.get("description")
    if description_length is not None and isinstance(description, str) and len(description) > description_length:
        out["description"] = description[:description_length].rstrip() + MARKER
    return out


@dataclass(frozen=True, slots=True)
class Fitted:
    """A tool list fitted to a budget."""

    items: tuple[dict[str, Any], ...]
    """The tools as served: the same objects when the list was within the budget."""
    before: int
    """The list's size in tokens as the servers gave it."""
    after: int
    """Its size as served."""
    fits: bool
    """Whether it is within the budget (False: served at its smallest, still over)."""


def fit(items: Sequence[dict[str, Any]], budget: int, counter: Tokens | None = None) -> Fitted:
    """`items` (tool definitions) shortened until their list is within `budget` tokens (see the module docstring);
    as they are when they already are, or when `budget` is 0."""
    counter = counter or tokens()
    items = tuple(items)
    text = _dumps(items)
    before = counter.count(text)
    if budget <= 0 or before <= budget:
        return Fitted(items, before, before, True)

    def size(schema_length: int | None, description_length: int | None) -> tuple[tuple[dict[str, Any], ...], int]:
        shortened = tuple(_shortened(tool, schema_length, description_length) for tool in items)
        return shortened, counter.count(_dumps(shortened))

    def longest_fitting(upper: int, made: Callable[[int], tuple[tuple[dict[str, Any], ...], int]]) -> Any:
        """The largest length in [0, upper] whose list fits, and that list; None when even 0 does not."""
        smallest = made(0)
        if smallest[1] > budget:
            return None, smallest
        low, high, best = 0, upper, smallest  # made(low) fits; made(high + 1) does not
        while low < high:
            middle = (low + high + 1) // 2
            candidate = made(middle)
            if candidate[1] <= budget:
                low, best = middle, candidate
            else:
                high = middle - 1
        return low, best

    schemas = (tool.get(key) for tool in items for key in ("inputSchema", "outputSchema"))
    schema_upper = max((_longest_schema_description(schema) for schema in schemas), default=0)
    length, (shortened, after) = longest_fitting(schema_upper, lambda n: size(n, None))
    if length is not None:
        return Fitted(shortened, before, after, True)
    description_upper = max((len(t["description"]) for t in items if isinstance(t.get("description"), str)), default=0)
    length, (shortened, after) = longest_fitting(description_upper, lambda n: size(0, n))
    return Fitted(shortened, before, after, length is not None)


class ListBudget:
    """One endpoint's tool list budget (`max_list_tokens`): `fit` shortens a listing once and keeps the result."""

    def __init__(self, endpoint: str, budget: int, counter: Tokens | None = None) -> None:
        self.endpoint = endpoint
        """How the warning names the endpoint: "the hub's endpoint" or "endpoint NAME"."""
        self.budget = budget
        """Tokens; 0: none."""
        self._counter = counter
        self._fitted: LRUCache[Hashable, tuple[dict[str, Any], ...]] = LRUCache(maxsize=32)
        self._warned = False

    def fit(self, revision: str, items: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
        """`items`, the tools of listing `revision`, within the budget (or at their smallest, with a warning once).
        The same revision and names are the same tools: they are shortened once for every principal seeing them."""
        if self.budget <= 0:
            return items
        key = (revision, tuple(tool.get("name") for tool in items))
        kept = self._fitted.get(key)
        if kept is None:
            fitted = fit(items, self.budget, self._counter)
            if not fitted.fits and not self._warned:
                self._warned = True
                logger.warning(
                    "The tool list of %s is %d tokens at its smallest, over its max_list_tokens of %d (it was %d): "
                    "it is served so. Turn on tool search ([search] enabled = true) to list a few tools and find "
                    "the rest on demand.",
                    self.endpoint,
                    fitted.after,
                    self.budget,
                    fitted.before,
                )
            kept = self._fitted[key] = fitted.items
        return kept
