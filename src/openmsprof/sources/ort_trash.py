"""Ended ONNX Runtime sessions and read profile files, disposed of off the execute path.

Freeing a session with many events takes milliseconds and ORT's profile files are left behind
by ``end_profiling``: the harvest hands both here and the harvester thread empties the trash
(:func:`empty_trash`); :data:`KEEP_ENV` keeps the profile files instead.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

__all__ = ["KEEP_ENV", "discard_profile", "empty_trash", "graveyard"]

#: Keep ONNX Runtime's own profile files in this directory instead of deleting them
#: (to compare against them, e.g. in tests).
KEEP_ENV = "OPENMSPROF_ORT_PROFILE_KEEP"
_trash: list[str] = []
#: ended generations (their sessions), freed by :func:`empty_trash`
graveyard: list[Any] = []


def discard_profile(path: str) -> None:
    """Delete (later, see :func:`empty_trash`) or keep (:data:`KEEP_ENV`) an ORT profile."""
    if not path:
        return
    keep = os.environ.get(KEEP_ENV)
    if keep and os.path.isdir(keep):
        try:
            shutil.move(path, os.path.join(keep, os.path.basename(path)))
        except OSError:
            pass
    else:
        _trash.append(path)


def empty_trash() -> None:
    """Free the ended sessions and delete the profiles read so far (off the execute path: the
    harvester thread calls it)."""
    while graveyard:
        try:
            graveyard.pop()
        except IndexError:
            break
    while _trash:
        try:
            os.unlink(_trash.pop())
        except (OSError, IndexError):
            pass
