"""The machine's peaks cache file and the lock that keeps one measurement at a time.

A background measurement (:mod:`openmsprof.machine.peaks_child`) holds the lock while it
measures (:func:`measuring`); a reader arriving meanwhile waits for it
(:func:`wait_for_measurement`) rather than starting a second one.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from openmsprof.fileio import fs

__all__ = ["cache_path", "measuring", "open_lock", "wait_for_measurement"]


def cache_path() -> Path:
    """``~/.cache/openmsprof/peaks-{host}.json`` (under :func:`fs.cache_root`)."""
    return fs.cache_root() / f"peaks-{socket.gethostname()}.json"


def _lock_path() -> Path:
    return cache_path().with_suffix(".lock")


def open_lock() -> int:
    path = _lock_path()
    fs.make_dir(path.parent)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, fs.FILE_MODE)


@contextmanager
def measuring(fd: int | None = None) -> Iterator[None]:
    """Hold the machine's measurement lock (``fd``: one already locked, handed over)."""
    if fd is None:
        fd = open_lock()
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)


def wait_for_measurement(timeout_s: float = 20.0) -> None:
    """Return once no other process is measuring (or after ``timeout_s``)."""
    path = _lock_path()
    if not path.exists():
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(0.05)
    finally:
        os.close(fd)
