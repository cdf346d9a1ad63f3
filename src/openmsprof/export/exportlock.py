"""One export of a job at a time: ``export timeline``, ``export summary`` and the tool-facing
layout they share (``mindstudio_profiler_output/``, ``msprof_{ts}.db``) rewrite and clean the same
files, so concurrent exports of one job (other processes, other threads) are serialized on an
exclusive ``flock`` of ``JOB/.export.lock``.  Re-entrant within a process (a verb's library
calls nest), and a forked child inherits its parent's hold."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from openmsprof.config.errors import PathError
from openmsprof.fileio import fs

__all__ = ["LOCK_NAME", "WAIT_S", "job_lock"]

LOCK_NAME = ".export.lock"
#: how long an export waits for another one of the same job before giving up (one line)
WAIT_S = 1800.0
log = logging.getLogger("openmsprof")
_held: dict[str, int] = {}  # job path -> depth of this process's hold
_mutex = threading.RLock()


@contextmanager
def job_lock(job: Path, wait_s: float | None = None) -> Iterator[None]:
    """Hold ``job``'s export lock for the block (waits for another export; PathError after
    ``wait_s``, default :data:`WAIT_S`)."""
    key = os.path.abspath(job)
    with _mutex:  # threads of one process: one at a time, the holder may nest
        if _held.get(key, 0) > 0:
            _held[key] += 1
            try:
                yield
            finally:
                _held[key] -= 1
            return
        fd = fs.open_lock_file(Path(key) / LOCK_NAME)
        try:
            _acquire(fd, key, WAIT_S if wait_s is None else wait_s)
            _held[key] = 1
            try:
                yield
            finally:
                _held.pop(key, None)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _acquire(fd: int, job: str, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            pass
        if not said:
            log.warning("openmsprof: another export of %s is running; waiting for it", fs.escape(job))
            said = True
        if time.monotonic() >= deadline:
            raise PathError(f"another export of {fs.escape(job)!r} has run for over {wait_s:.0f} s; "
                            "try again when it is done")
        time.sleep(0.05)
