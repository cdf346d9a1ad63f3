"""Private temp directories tagged with their process's pid, and the sweep of those whose process
died without removing them (a SIGKILL, a crash): ``{prefix}{pid}-{random}`` under the temp dir
(or ``base``), mode 0700; the next process of the same user that makes one of that prefix removes
the dead ones first.  A pid reused by a live process keeps its dir until that one ends."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["make", "private_temp_dir", "sweep"]


def sweep(base: str, prefix: str) -> list[str]:
    """Remove ``base``'s ``{prefix}{pid}-…`` dirs of this user whose process is gone; their names."""
    try:
        entries = os.listdir(base)
    except OSError:
        return []
    gone = []
    uid = os.getuid()
    for name in entries:
        if not name.startswith(prefix):
            continue
        pid = name[len(prefix):].split("-", 1)[0]
        full = os.path.join(base, name)
        try:
            st = os.stat(full, follow_symlinks=False)
            if not pid.isdigit() or st.st_uid != uid or not os.path.isdir(full) or os.path.islink(full):
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(full, ignore_errors=True)
            gone.append(name)
        except OSError:
            pass
    return gone


def make(prefix: str, base: str | None = None) -> str:
    """A new private dir ``{prefix}{pid}-…`` under ``base`` (the temp dir), after the sweep."""
    where = base if base is not None else tempfile.gettempdir()
    sweep(where, prefix)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=where)


@contextmanager
def private_temp_dir(prefix: str, base: str | None = None) -> Iterator[Path]:
    """``make``'s dir for the ``with`` block, removed after it."""
    path = make(prefix, base)
    try:
        yield Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)
