"""The `mcp-hub` command's entry point (and `python -m mcp_hub`'s).

Importing the hub defines some hundreds of pydantic models, most of them the SDK's types of both
protocol eras; building each one's validator and serializer as its class is defined took 0.2-0.3 s
of the command's 1.5-2 s start-up on a 2-core machine. While the command imports, pydantic builds
them when first used instead (its `defer_build`, as the default of every model defined meanwhile): a
hub then builds those its traffic uses, when it first uses them, and a command such as `mcp-hub
check` few. Validation is the same either way. Models defined after the import are built as they are
defined: the default is restored.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def models_built_on_first_use() -> Iterator[None]:
    """While inside: pydantic models defined without a `defer_build` of their own build on first use.

    The default lives in pydantic's `config_defaults`; with a pydantic that keeps it elsewhere, nothing
    changes (the models build as they are defined)."""
    try:
        from pydantic._internal._config import config_defaults
    except ImportError:
        yield
        return
    if not isinstance(config_defaults, dict):
        yield
        return
    before = config_defaults.get("defer_build", False)
    config_defaults["defer_build"] = True
    try:
        yield
    finally:
        config_defaults["defer_build"] = before


def main() -> None:
    with models_built_on_first_use():
        from mcp_hub.cli import main as run
    run()
