"""Keep the C allocator's freed large blocks for the next message instead of returning them at once.

glibc serves a block of 128 KiB or more (the bytes of a 1 MB tool result as read, the text parsed
from them, the JSON written out again) with fresh pages from the kernel, and gives them back as soon
as the block is freed; its adaptive threshold then keeps a heap top of only twice the largest such
block. A hub relaying 1 MB results thus faulted every page in again for every result: about 1,000
page faults and 2-3 ms of kernel time per result relayed over stdio, more than the relaying itself.

`keep_freed_memory()` fixes both thresholds: blocks under `MMAP_THRESHOLD` come from the heap, and
up to `TRIM_THRESHOLD` of free memory at its top is kept for reuse. Larger messages still get pages
of their own. On other C libraries (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import sys

logger = logging.getLogger(__name__)

MMAP_THRESHOLD = 8 * 1024 * 1024
"""Blocks from this size up get pages of their own, returned to the kernel when freed. orjson reserves
about seven times a string's length to write it (`wire`): 8 MiB keeps a 1 MB result's buffer in the heap."""
TRIM_THRESHOLD = 16 * 1024 * 1024
"""Free memory at the heap's top kept for reuse before the rest goes back to the kernel."""

GLIBC = "libc.so.6"
"""glibc's shared library, by the name every glibc on Linux gives it."""

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Set glibc's thresholds for the whole process; whether they were set (False: not glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = _libc()
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # not glibc: mallopt's parameters may differ
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not done:
        logger.debug("mallopt refused the allocator thresholds")
    return done


def _libc() -> ctypes.CDLL:
    """The C library: glibc by its name on Linux, else the one `ctypes.util` finds (which runs
    `ldconfig -p` in a child process, a cost every start would pay)."""
    try:
        return ctypes.CDLL(GLIBC)
    except OSError:
        from ctypes.util import find_library

        name = find_library("c")
        if name is None:
            raise
        return ctypes.CDLL(name)
