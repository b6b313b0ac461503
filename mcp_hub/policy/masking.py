"""Masking argument values for audit records and explanations."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from mcp_hub.policy.globs import compile_glob

MASK = "***"


def mask_arguments(arguments: Mapping[str, Any], patterns: Sequence[str]) -> dict[str, Any]:
    """A copy of `arguments` with the value of every key matching a glob in `patterns` replaced by "***".

    Globs are matched against key names case-insensitively, at any depth: through nested
    objects and through the items of arrays (tuples come back as lists). Other values are
    copied as they are. `arguments` is not modified.
    """
    return _mask_object(arguments, _globs(tuple(patterns)))


@functools.lru_cache(maxsize=64)
def _globs(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern matching a key that any of `patterns` matches (compiled once per list of globs: every call's
    audit line masks with the same few)."""
    if not patterns:
        return re.compile(r"(?!)")  # matches nothing
    either = "|".join(f"(?:{compile_glob(pattern).pattern})" for pattern in patterns)
    return re.compile(either, re.IGNORECASE)


def _mask_object(value: Mapping[Any, Any], globs: re.Pattern[str]) -> dict[Any, Any]:
    return {key: MASK if globs.match(str(key)) else _mask(item, globs) for key, item in value.items()}


def _mask(value: Any, globs: re.Pattern[str]) -> Any:
    if isinstance(value, Mapping):
        return _mask_object(cast(Mapping[Any, Any], value), globs)
    if isinstance(value, list | tuple):
        return [_mask(item, globs) for item in cast(Sequence[Any], value)]
    return value
