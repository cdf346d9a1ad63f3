"""Free space on the file system being written: the floor below which nothing is written, how
much is free, and the one-line message of a full disk.

Collection stops :data:`SPACE_MARGIN` above the floor (docs/formats.md §7.2); the space a session
holds back for its end records is :class:`fs.Reserve`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from openmsprof.fileio.read_guard import escape

__all__ = ["FREE_SPACE_FLOOR", "SPACE_CHECK_BYTES", "SPACE_MARGIN", "disk_full_message", "free_bytes",
           "mount_point"]

#: Below this many free bytes nothing is written (docs/formats.md §7.2: 20 MB).
FREE_SPACE_FLOOR = 20 * 1024 * 1024
#: Collection halts this far above the floor (checked at least every SPACE_CHECK_BYTES written),
#: so a burst between two checks cannot cross the floor.
SPACE_MARGIN = 4 * 1024 * 1024
SPACE_CHECK_BYTES = 2 * 1024 * 1024


def mount_point(path: Path) -> Path:
    """The mount point of the file system holding ``path`` (its nearest existing ancestor)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p.parent != p:
        p = p.parent
    while not os.path.ismount(p) and p.parent != p:
        p = p.parent
    return p


def disk_full_message(path: Path, what: str = "writing") -> str:
    """One line naming the full disk: its mount point, free bytes and the file being written."""
    mnt = mount_point(path)
    return (f"disk full while {what} {escape(path)!r}: the file system at {escape(mnt)!r} has "
            f"{free_bytes(mnt) // 1024} KiB free; nothing was left behind")


def free_bytes(path: Path) -> int:
    """Free bytes for an unprivileged writer on the file system holding ``path``."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 1 << 62
