"""A real, small tmpfs for disk-full tests (root only; the test is skipped otherwise)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mount_tmpfs(d: Path, size: str) -> Iterator[Path]:
    """Mount a ``size`` tmpfs on ``d`` (created), yield it, unmount.  Use with ``yield from`` in
    a fixture or as ``for mnt in mount_tmpfs(...)`` around a block."""
    d.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)],
                       capture_output=True, timeout=20)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode().strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True, timeout=20)
