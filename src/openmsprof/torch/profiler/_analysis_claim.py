"""Who analyses a window: the background worker or the training process, never both at once.

The save of a window handed to the worker and the analysis of a rank dir run under an exclusive
``flock`` on ``.{rank dir name}.claim`` beside the rank dir (in the output root, which exists before
the dir), removed by its holder when done; a dir whose ``ASCEND_PROFILER_OUTPUT/analyse.done``
exists is neither saved (its data may be simplified away) nor analysed again.  The worker holds a
claim only to save a window, stage a copy of it and publish the analysed copy (``_analysis_stage``),
so when ``profile.stop()`` takes the windows of a stalled worker over (``_analysis_worker``), the
training process analyses them in place and the worker discards its copies of those.  The CPU time and the place
of each analysis go into the window's ``profiler_info_{rank}.json`` (``openmsprof_overhead``).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from openmsprof.fileio import fs

__all__ = ["claim", "claim_path", "done", "record_overhead"]

_POLL_S = 0.01


def claim_path(rank_dir: Path) -> Path:
    """The lock file of ``rank_dir``'s save and analysis."""
    return rank_dir.parent / f".{rank_dir.name}.claim"


def done(rank_dir: Path) -> bool:
    """The dir's analysis finished (by anyone)."""
    return (rank_dir / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()


def _acquire(rank_dir: Path) -> int | None:
    """The fd of the dir's lock, held exclusively; None while another process holds it."""
    path = claim_path(rank_dir)
    while True:
        fd = fs.open_lock_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:  # a holder that just finished removed the file: ours must be the one at the path
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            os.close(fd)
            continue
        mine = os.fstat(fd)
        if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
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
    try:
        yield not done(rank_dir)
    finally:
        try:
            os.unlink(claim_path(rank_dir))
        except OSError:
            pass
        os.close(fd)


def record_overhead(rank_dir: Path, cpu_s: float, wall_s: float, where: str) -> None:
    """Add the analysis's CPU and wall time and ``where`` it ran to the dir's profiler_info."""
    for p in rank_dir.glob("profiler_info*.json"):
        info = orjson.loads(p.read_bytes())
        over = info.get("openmsprof_overhead") if isinstance(info.get("openmsprof_overhead"), dict) else {}
        over.update({"analysis_cpu_s": round(cpu_s, 6), "analysis_wall_s": round(wall_s, 6),
                     "analysis_where": where})
        info["openmsprof_overhead"] = over
        fs.write_file_atomic(p, orjson.dumps(info, option=orjson.OPT_INDENT_2))
