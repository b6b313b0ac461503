"""Pythons of their own for servers the tests' Python cannot run (another Python version, other pins)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path


def interpreter(version: str) -> str | None:
    """A `python{version}` that runs: on PATH, else one pyenv installed; None when there is none. (pyenv's shim on
    PATH exists whether or not that version is selected, and then fails.)"""
    pyenv = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")), reverse=True)
    for candidate in (shutil.which(f"python{version}"), *pyenv):
        if candidate is not None and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return None


def python_with(folder: Path, requirements: Path, base: str) -> Path:
    """`folder/bin/python`, a venv of the Python `base` with `requirements` installed; made when missing or stale.

    As test_corpus.py's Python of the SDK 1.x servers: built under a name of its own and renamed into place, it
    records the requirements it holds (a changed file makes a new one); this Python's pip installs into it."""
    wanted = requirements.read_text(encoding="utf-8")
    python = folder / "bin" / "python"

    def current() -> bool:
        stamp = folder / "requirements.txt"
        return python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == wanted

    if current():
        return python
    building = folder.with_name(f"{folder.name}.{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    subprocess.run([base, "-m", "venv", "--without-pip", str(building)], check=True, stdin=subprocess.DEVNULL)
    pip = [sys.executable, "-m", "pip", "--python", str(building / "bin" / "python")]
    subprocess.run(
        [*pip, "install", "-q", "--no-compile", "--requirement", str(requirements)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    (building / "requirements.txt").write_text(wanted, encoding="utf-8")
    stale = folder.with_name(f"{folder.name}.stale.{os.getpid()}")
    if folder.exists() and not current():
        folder.rename(stale)
    if not folder.exists():
        with contextlib.suppress(OSError):  # another run may put its own in place first: that one is used
            building.rename(folder)
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(stale, ignore_errors=True)
    return python
