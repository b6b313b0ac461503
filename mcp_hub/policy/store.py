"""The policy in force, and its hot reload.

`PolicyStore()` is what the chain and the endpoint call to get the current
`PolicySet`. `watch()` polls the policy folder (names, sizes and modification
times; a few `stat` calls a second) and loads it again when anything changed.
An invalid edit is rejected with the file, line and reason in the log, and
the last good policy stays in force.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from mcp_hub.errors import ConfigError
from mcp_hub.policy import PolicySet, empty_policy, load_policies

logger = logging.getLogger("mcp_hub.policy")

POLL_INTERVAL = 1.0
"""Seconds between two looks at the policy folder."""


class PolicyStore:
    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._current = load_policies(directory) if directory is not None else empty_policy()
        self._signature = self._stat()
        self.last_error: str | None = None
        """Why the last edit was rejected, while the files still hold it."""

    def __call__(self) -> PolicySet:
        return self._current

    def reload(self) -> bool:
        """Load the files again if they changed; True when a new policy took effect."""
        signature = self._stat()
        if signature == self._signature or self.directory is None:
            return False
        self._signature = signature
        try:
            policy = load_policies(self.directory)
        except ConfigError as exc:
            self.last_error = str(exc)
            logger.error("policy edit rejected, revision %s stays in force: %s", self._current.revision, exc)
            return False
        self.last_error = None
        if policy.revision == self._current.revision:
            return False
        logger.info("policy revision %s in force (was %s)", policy.revision, self._current.revision)
        self._current = policy
        return True

    async def watch(self, on_change: Callable[[], Awaitable[None]]) -> None:
        """Reload whenever the files change, then await `on_change`; until cancelled."""
        while True:
            await anyio.sleep(POLL_INTERVAL)
            if self.reload():
                await on_change()

    def _stat(self) -> tuple[tuple[str, int, int], ...]:
        if self.directory is None:
            return ()
        try:
            files = sorted(self.directory.glob("*.toml"))
            return tuple((f.name, (st := f.stat()).st_mtime_ns, st.st_size) for f in files)
        except OSError:
            return ()
