"""Who analyses a window: the background worker or the training process, never both at once.

The save of a window handed to the worker and the analysis of a rank dir run under the dir's
claim: an exclusive open-file-description lock (Linux ``F_OFD_SETLK``) on one byte of
``.openmsprof.claims`` in the output root (the byte is a hash of the rank dir's name), so a claim
creates no file: the claims file is made once per output root and removed by ``tidy`` when no
claim is held (the worker when it leaves, the training process at exit).  Where OFD locks are
missing, an exclusive ``flock`` on ``.{rank dir name}.claim`` beside the rank dir, removed by its
holder.  A dir whose ``ASCEND_PROFILER_OUTPUT/analyse.done`` exists is neither saved (its data may
be simplified away) nor analysed again.  The worker holds a claim only to save a window, stage a
copy of it and publish the analysed copy (``_analysis_stage``), so when ``profile.stop()`` takes
the windows of a stalled worker over (``_analysis_worker``), the training process analyses them
in place and the worker discards its copies of those.  The CPU time and the place of each
analysis go into the window's ``profiler_info_{rank}.json`` (``openmsprof_overhead``).
"""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import os
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from openmsprof.fileio import fs

__all__ = ["CLAIMS_FILE", "claim", "claim_path", "done", "record_overhead", "tidy", "tidy_all"]

_POLL_S = 0.01
#: the claims file of an output root (one byte-range lock per rank dir)
CLAIMS_FILE = ".openmsprof.claims"
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)  # Linux 3.15+
_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", None)
_FLOCK = "hh4xqqi4x"  # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks)
_ofd = _OFD_SETLK is not None and _OFD_GETLK is not None and struct.calcsize(_FLOCK) == 32
_BUSY = (errno.EAGAIN, errno.EACCES)
#: output roots whose claims file this process opened (``tidy_all``)
_roots: set[str] = set()
#: fds of the claims this process holds: a forked child closes its copies (``_after_fork``)
_held: set[int] = set()


def claim_path(rank_dir: Path) -> Path:
    """The lock file of ``rank_dir``'s save and analysis."""
    return rank_dir.parent / CLAIMS_FILE if _ofd else rank_dir.parent / f".{rank_dir.name}.claim"


def done(rank_dir: Path | str) -> bool:
    """The dir's analysis finished (by anyone)."""
    return os.path.exists(f"{os.fspath(rank_dir)}/ASCEND_PROFILER_OUTPUT/analyse.done")


@functools.lru_cache(maxsize=64)  # (a window is claimed two or three times: saved, staged, published)
def _byte(name: str) -> int:
    """The rank dir's byte in the claims file (a 62-bit hash of its name)."""
    return int.from_bytes(hashlib.blake2b(os.fsencode(name), digest_size=8).digest(), "little") >> 2


def _lock(fd: int, start: int, length: int) -> bool:
    """Take the byte range exclusively (False: another open file holds part of it)."""
    assert _OFD_SETLK is not None
    try:
        fcntl.fcntl(fd, _OFD_SETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, start, length, 0))
    except OSError as exc:
        if exc.errno in _BUSY:
            return False
        raise
    return True


def _tidying(fd: int, start: int) -> bool:
    """The lock in the way of ``start`` is a ``tidy``'s (the whole file, held for microseconds)."""
    assert _OFD_GETLK is not None
    got = fcntl.fcntl(fd, _OFD_GETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, start, 1, 0))
    kind, _, _, length, _ = struct.unpack(_FLOCK, got)
    return kind != fcntl.F_UNLCK and length == 0


def _open(path: str) -> int:
    """The claims file's fd (made when missing; never through a link)."""
    try:
        return os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # made here; a link in its place is refused with one line
        return fs.open_lock_file(Path(path))


def _same(path: str | Path, fd: int) -> bool:
    """``path`` is still the file ``fd`` has open (a ``tidy`` or holder may have removed it)."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


def _acquire(rank_dir: Path) -> int | None:
    """The fd of the dir's lock, held exclusively; None while another process holds it."""
    global _ofd
    parent, name = os.path.split(os.fspath(rank_dir))
    parent = parent or "."
    byte = _byte(name)
    while True:
        path = f"{parent}/{CLAIMS_FILE}" if _ofd else f"{parent}/.{name}.claim"  # (``claim_path``)
        fd = _open(path) if _ofd else fs.open_lock_file(Path(path))
        try:
            if _ofd:
                _roots.add(parent)
                got = _lock(fd, byte, 1)
            else:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                got = True
        except BlockingIOError:
            got = False
        except OSError:
            if not _ofd:
                os.close(fd)
                raise
            os.close(fd)  # no OFD locks on this kernel or file system: a lock file per claim
            _ofd = False
            continue
        if not got:
            try:
                tidying = _ofd and _tidying(fd, byte)
            except OSError:
                tidying = False
            os.close(fd)
            if tidying:
                time.sleep(0.001)
                continue
            return None
        if _same(path, fd):  # (a holder or ``tidy`` that just finished may have removed the file)
            return fd
        os.close(fd)


@contextmanager
def claim(rank_dir: Path, wait_s: float = 0.0) -> Iterator[bool | None]:
    """Hold the dir's save and analysis, waiting up to ``wait_s`` for another holder.  Yields
    True: do them now; False: it is analysed already; None: another process holds it.  Raises
    PathError if the lock file cannot be made."""
    deadline = time.monotonic() + wait_s
    while (fd := _acquire(rank_dir)) is None and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    if fd is None:
        yield None
        return
    _held.add(fd)
    try:
        yield not done(rank_dir)
    finally:
        _held.discard(fd)
        if not _ofd:  # (the claims file stays: ``tidy`` removes it when no claim is held)
            try:
                os.unlink(claim_path(rank_dir))
            except OSError:
                pass
        os.close(fd)  # releases the lock


def tidy(root: Path) -> bool:
    """Remove the output ``root``'s claims file if no claim is held in it; whether it is gone."""
    path = root / CLAIMS_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return not os.path.lexists(path)
    try:
        if _ofd and _lock(fd, 0, 0) and _same(path, fd):  # the whole file: no claim held
            os.unlink(path)
            return True
    except OSError:
        pass
    finally:
        os.close(fd)
    return False


def tidy_all() -> None:
    """``tidy`` every output root this process claimed in."""
    for root in list(_roots):
        if tidy(Path(root)):
            _roots.discard(root)


def _after_fork() -> None:
    """A forked child (a DataLoader worker) closes its copies of the claims held at the fork: the
    claim stays its parent's, released when the parent closes it."""
    for fd in list(_held):
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()
    _roots.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def record_overhead(rank_dir: Path, cpu_s: float, wall_s: float, where: str,
                    read: tuple[str, dict[str, Any]] | None = None) -> None:
    """Add the analysis's CPU and wall time and ``where`` it ran to the dir's profiler_info
    (``read``: its name and document as the analysis read them, ``analysis.analyse_dir_info``;
    else every ``profiler_info*.json`` of the dir is read)."""
    d = os.fspath(rank_dir)
    if read is not None:
        _add_overhead(f"{d}/{read[0]}", read[1], cpu_s, wall_s, where)
        return
    for name in os.listdir(d):  # (the names ``profiler_info*.json`` matches)
        if name.startswith("profiler_info") and name.endswith(".json"):
            p = f"{d}/{name}"
            with open(p, "rb") as f:
                _add_overhead(p, orjson.loads(f.read()), cpu_s, wall_s, where)


def _add_overhead(path: str, info: dict[str, Any], cpu_s: float, wall_s: float, where: str) -> None:
    over = info.get("openmsprof_overhead")
    over = over if isinstance(over, dict) else {}
    over.update({"analysis_cpu_s": round(cpu_s, 6), "analysis_wall_s": round(wall_s, 6),
                 "analysis_where": where})
    info["openmsprof_overhead"] = over
    fs.write_file_atomic(Path(path), orjson.dumps(info, option=orjson.OPT_INDENT_2))
