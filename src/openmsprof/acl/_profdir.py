"""The directory ONNX Runtime writes its profiles (and the saved optimised graphs) to.

A RAM disk when one with room is there (a subscribed model writes and reads one profile per
execute), else the temp dir; one directory per process, named after its pid, removed at exit,
and swept by the next process when its owner died without cleaning up (a SIGKILL).
"""

from __future__ import annotations

import os
import shutil

from openmsprof.fileio import temp_dirs

SHM = "/dev/shm"
SHM_MIN_FREE = 1 << 30
_PREFIX = "openmsprof-ort-"
_root: str | None = None


def path() -> str:
    """Where ORT writes its profiles: a RAM disk when one with room is there (a subscribed
    model writes and reads one file per execute), else the temp dir."""
    global _root
    if _root is None or not os.path.isdir(_root):
        base = None
        try:
            if shutil.disk_usage(SHM).free >= SHM_MIN_FREE and os.access(SHM, os.W_OK):
                base = SHM
        except OSError:
            pass
        _root = temp_dirs.make(_PREFIX, base)  # (after sweeping those of dead processes)
    return _root


def sweep(base: str) -> None:
    """Remove the profile directories of our processes that died without cleaning up (a
    SIGKILL): on a RAM disk they would hold memory until reboot."""
    temp_dirs.sweep(base, _PREFIX)


def remove() -> None:
    if _root is not None:
        shutil.rmtree(_root, ignore_errors=True)
