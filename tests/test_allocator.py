"""The allocator keeps freed large blocks: relaying one large message after another faults no pages in."""

from __future__ import annotations

import platform
import resource
import subprocess
from typing import Any

import pytest

from mcp_hub.allocator import keep_freed_memory

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")


def _page_faults_relaying(messages: int, size: int) -> int:
    """Minor page faults while making and dropping `messages` buffers of `size` bytes, a few per message,
    as relaying a large result does (the bytes read, the text parsed, the JSON written)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for i in range(messages):
        read = bytes([65 + i % 26]) * size
        text = read.decode()
        written = text.encode()
        del read, text, written
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_large_blocks_are_reused_once_the_thresholds_are_set() -> None:
    assert keep_freed_memory()
    _page_faults_relaying(3, 1_000_000)  # the heap grows to its working size once
    pages = 1_000_000 // resource.getpagesize()
    # Without the thresholds each 1 MB buffer is fresh pages: about 3 x 244 faults per message.
    assert _page_faults_relaying(50, 1_000_000) < pages


def test_finding_glibc_starts_no_child_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `mcp-hub serve` sets the thresholds first: finding the C library must not run `ldconfig -p`
    (what `ctypes.util.find_library` does) in a child process."""
    started: list[Any] = []
    real = subprocess.Popen.__init__

    def record(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
        started.append(args)
        real(self, args, *rest, **options)

    monkeypatch.setattr(subprocess.Popen, "__init__", record)
    assert keep_freed_memory()
    assert started == []
