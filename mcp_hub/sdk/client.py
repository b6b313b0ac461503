"""SDK internals: the client side (sessions, transports, the stdio spawn)."""

from __future__ import annotations

SURFACE: tuple[str, ...] = ()
"""What this module names, as "module:qualified.name"."""
