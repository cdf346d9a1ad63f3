"""Read a large Kineto trace with both cores: a forked child parses the second half of the events
into ``Columns`` and pipes its state back, while this process parses the first half; the child's
part is then merged (vocabulary codes remapped), giving the columns one serial read would give.

The child only parses and writes to its pipe (no locks, no logging) and leaves with ``os._exit``.
Whenever anything differs from the plain layout (no separator near the middle, a half that does
not parse, a child that fails), the result is None and the caller reads the file serially.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import warnings
from pathlib import Path

from openmsprof.export.ascend_pt.columns import Columns
from openmsprof.export.ascend_pt.kineto_reader import Restart, TraceReader

#: Below this file size a fork costs more than it saves.
MIN_BYTES = 48 << 20


def _read_fd(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 1 << 22):
        parts.append(chunk)
    return b"".join(parts)


def _child(path: Path, start: int, wfd: int) -> None:  # pragma: no cover - runs in the child
    status = 1
    try:
        cols = Columns()
        for chunk in TraceReader(path, start=start).chunks():
            cols.add(chunk)
        data = pickle.dumps(cols.state(), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(wfd, view):]
        status = 0
    finally:
        os._exit(status)


def read(path: Path) -> tuple[Columns, int | None] | None:
    """(columns, Kineto base ns) read in two processes; None: not applicable or failed."""
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2 or path.stat().st_size < MIN_BYTES:
        return None
    split = TraceReader(path).split_point()
    if split is None:
        return None
    rfd, wfd = os.pipe()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        return None
    if pid == 0:  # pragma: no cover - the child
        os.close(rfd)
        _child(path, split + 5, wfd)
    os.close(wfd)
    try:
        reader = TraceReader(path, stop=split + 4)
        cols = Columns()
        for chunk in reader.chunks():
            cols.add(chunk)
        data = _read_fd(rfd)
        _pid, status = os.waitpid(pid, 0)
        pid = 0
        if os.waitstatus_to_exitcode(status) != 0:
            return None
        cols.merge(pickle.loads(data))
        return cols, reader.base_ns
    except (Restart, KeyError, TypeError, ValueError, pickle.UnpicklingError):
        return None
    finally:
        os.close(rfd)
        if pid:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
                os.waitpid(pid, 0)
