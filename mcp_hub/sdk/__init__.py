"""The SDK's internals the hub relies on, in one place.

The hub serves and sends requests past some of the SDK's generic steps (server/ and upstream/ say
which and why). What those paths need of the SDK beyond its public API (a private name, a state
write, a patched function) is written here and nowhere else, each as a named function:

```
sdk/server.py   the serving side: dispatcher, transports, session manager, stdio server
sdk/runner.py   the runner's steps a call is served with, and its span middleware
sdk/client.py   the client side: sessions, transports, the stdio spawn
```

Each module lists what it names in `SURFACE` ("module:qualified.name"); tests/test_sdk_surface.py
resolves every entry, so an SDK release that renames one fails that test rather than a user's
install, and pyproject.toml pins `mcp` to the minor versions the test has verified. Patches are
applied once, by `install()`, when the hub starts. A fast path that finds its part missing switches
itself off and says so once (`unavailable`).
"""

from __future__ import annotations

import importlib
import logging

logger = logging.getLogger("mcp_hub.sdk")

MODULES = ("server", "runner", "client", "process")
"""The modules of this package that name SDK internals."""

_said: set[str] = set()


def surface() -> list[str]:
    """Every SDK internal the hub names, as "module:qualified.name"."""
    found: list[str] = []
    for name in MODULES:
        found.extend(getattr(importlib.import_module(f"{__name__}.{name}"), "SURFACE", ()))
    return found


def install() -> None:
    """Apply the hub's patches to the SDK, once; calling it again changes nothing."""
    for name in MODULES:
        apply = getattr(importlib.import_module(f"{__name__}.{name}"), "install", None)
        if apply is not None:
            apply()


def unavailable(feature: str, missing: str) -> None:
    """Say, once per feature, that a fast path is off because the SDK lacks `missing`."""
    if feature not in _said:
        _said.add(feature)
        logger.warning("%s is off: this mcp release has no %s; requests take the SDK's own path", feature, missing)


def resolve(entry: str) -> object:
    """The object an entry of `SURFACE` names; raises `LookupError` when the SDK has no such thing."""
    module_name, _, qualified = entry.partition(":")
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise LookupError(f"{entry}: no module {module_name}") from exc
    for part in qualified.split("."):
        if hasattr(found, part):
            found = getattr(found, part)
        elif isinstance(found, type) and _set_in_init(found, part):
            return found  # an instance attribute: the class that sets it
        else:
            raise LookupError(f"{entry}: no {part!r}")
    return found


def _set_in_init(cls: type, name: str) -> bool:
    """Whether `cls` (or a base) sets attribute `name` on its instances in `__init__` or declares it."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        code = getattr(init, "__code__", None)
        if code is not None and name in code.co_names:
            return True
        if name in getattr(klass, "__annotations__", {}) or name in getattr(klass, "__slots__", ()):
            return True
    return False
