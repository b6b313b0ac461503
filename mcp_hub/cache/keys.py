"""Cache keys: what makes two calls' results differ, written down the same way whatever order it came in.

A key is a digest of a JSON array: the method, who may share the result (a principal, or no one
in particular for a server's "public" result), the mount, the server's own tool name or URI, the
arguments, the tool's definition fingerprint, the policy revision, and the store's generations
(see store.py). JSON with sorted keys makes `{"a": 1, "b": 2}` and `{"b": 2, "a": 1}` one key; a
JSON array keeps the parts apart (no part can run into the next).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson


def canonical(arguments: Mapping[str, Any]) -> bytes:
    """The arguments as JSON with every object's keys sorted, at any depth."""
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:  # beyond orjson (a huge integer): the standard library sorts alike
        return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=repr).encode()


def cache_key(parts: Sequence[str | None], generations: Sequence[int]) -> str:
    """The key of `parts` (strings, or None for "anyone") under `generations`."""
    text = orjson.dumps([*parts, *generations])
    return hashlib.blake2b(text, digest_size=20).hexdigest()
