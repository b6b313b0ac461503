"""SDK internals: the runner's steps a call is served with, and its span middleware."""

from __future__ import annotations

SURFACE: tuple[str, ...] = ()
"""What this module names, as "module:qualified.name"."""
