"""SDK internals: the serving side (dispatcher, transports, session manager, stdio server)."""

from __future__ import annotations

SURFACE: tuple[str, ...] = ()
"""What this module names, as "module:qualified.name"."""
