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


#: (the environment variables cache_root reads, the path they gave) of the last call; the host
#: name is read once per process (a host renamed meanwhile keeps its file until the process ends)
_kept: list[tuple[tuple[str | None, ...], Path]] = []
_host: list[str] = []


def cache_path() -> Path:
    """``~/.cache/openmsprof/peaks-{host}.json`` (under :func:`fs.cache_root`); computed again
    only when the variables that root depends on changed (the torch analysis asks every window)."""
    env = os.environ
    key = (env.get("OPENMSPROF_CACHE"), env.get("XDG_CACHE_HOME"), env.get("HOME"))
    if _kept and _kept[0][0] == key:
        return _kept[0][1]
    if not _host:
        _host.append(socket.gethostname())
    path = fs.cache_root() / f"peaks-{_host[0]}.json"
    if key[2] is not None:  # (without $HOME the home directory comes from the user database)
        _kept[:] = [(key, path)]
    return path


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
