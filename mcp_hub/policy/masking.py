"""Masking argument values for audit records and explanations."""

from __future__ import annotations

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
    globs = tuple(compile_glob(pattern, ignore_case=True) for pattern in patterns)
    return _mask_object(arguments, globs)


def _mask_object(value: Mapping[Any, Any], globs: tuple[re.Pattern[str], ...]) -> dict[Any, Any]:
    return {
        key: MASK if any(glob.match(str(key)) for glob in globs) else _mask(item, globs) for key, item in value.items()
    }


def _mask(value: Any, globs: tuple[re.Pattern[str], ...]) -> Any:
    if isinstance(value, Mapping):
        return _mask_object(cast(Mapping[Any, Any], value), globs)
    if isinstance(value, list | tuple):
        return [_mask(item, globs) for item in cast(Sequence[Any], value)]
    return value
