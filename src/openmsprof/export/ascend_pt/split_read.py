"""Read a large Kineto trace with both cores: a forked child parses the second half of the events
into ``Columns`` and pipes its state back, while this process parses the first half; the child's
part is then merged (vocabulary codes remapped), giving the columns one serial read would give.

The child only parses and writes to its pipe (no locks, no logging) and leaves with ``os._exit``.
Whenever anything differs from the plain layout (no separator near the middle, a half that does
not parse, a child that fails), the result is None and the caller reads the file serially.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from openmsprof.export.ascend_pt.columns import Columns
from openmsprof.export.fork_worker import ForkWorker, fork_allowed
from openmsprof.sources.kineto_trace import Restart, TraceReader

#: Below this file size a fork costs more than it saves.
MIN_BYTES = 48 << 20


def _child(path: Path, start: int, wfd: int) -> int:  # pragma: no cover - runs in the child
    cols = Columns()
    for block in TraceReader(path, start=start).blocks():
        cols.add_block(block)
    view = memoryview(pickle.dumps(cols.state(), protocol=pickle.HIGHEST_PROTOCOL))
    while view:
        view = view[os.write(wfd, view):]
    return 0


def read(path: Path, size: int | None = None) -> tuple[Columns, int | None] | None:
    """(columns, Kineto base ns) read in two processes; None: not applicable or failed.  ``size``:
    the file's, where the caller has it (a small trace, every window of a training loop, is
    turned away on it before the fork policy reads the machine's CPU count)."""
    if (size if size is not None else path.stat().st_size) < MIN_BYTES or not fork_allowed():
        return None
    split = TraceReader(path).split_point()
    if split is None:
        return None
    worker = ForkWorker.start(lambda w: _child(path, split + 5, w))
    if worker is None:
        return None
    try:
        reader = TraceReader(path, stop=split + 4)
        cols = Columns()
        for block in reader.blocks():
            cols.add_block(block)
        running, worker = worker, None
        data, code = running.result()
        if code != 0:
            return None
        cols.merge(pickle.loads(data))
        return cols, reader.base_ns
    except (Restart, KeyError, TypeError, ValueError, pickle.UnpicklingError):
        return None
    finally:
        if worker is not None:
            worker.kill()
