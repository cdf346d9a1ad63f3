"""Remove openmsprof's own footprint from a framework trace before any export sees it.

The Kineto Python tracer records every frame, ours included: the profiler's ``step``/``_start``/
``_stop`` frames on the user's thread and the whole life of any thread openmsprof started (a
writer or analysis worker: ``threading.py … _bootstrap`` → ``openmsprof/…``).  What the user sees
(trace_view, call stacks, operator_details, statistics, the dbs) must contain none of it; the cost
of profiling is reported separately (``overhead``).

Rules, applied to the columns of ``Columns`` after ``finish``:
1. a ``python_function`` event whose frame file lies inside the openmsprof package is ours;
2. so is every event (Python frame or operator) on the same thread inside one of ours, except
   ``ProfilerStep#N`` annotations (they only start inside ``step``);
3. a thread whose outermost frames are only ``threading.py`` frames around one of ours was started
   by us: all its events go.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__ = ["OWN_FRAME", "drop_own", "is_own_frame"]

OWN_FRAME = re.compile(r"(?:^|[/\\])openmsprof[/\\][^()]*\.py\(\d+\)")
_THREADING = re.compile(r"(?:^|[/\\])threading\.py\(\d+\)")
_PY_COLS = ("py_ts", "py_dur_us", "py_dur", "py_tid", "py_name")
_OP_COLS = ("op_ts", "op_dur", "op_tid", "op_name", "op_annot", "op_args", "op_shape", "op_seq", "op_fwd", "op_ext")


def is_own_frame(name: str) -> bool:
    return OWN_FRAME.search(name) is not None


def _intervals(ts: np.ndarray, end: np.ndarray, tid: np.ndarray, own: np.ndarray,
               threading_frame: np.ndarray) -> dict[int, list[tuple[int, int]]]:
    """Per thread, the time ranges that are ours (rules 1 and 3)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for i in np.flatnonzero(own).tolist():
        t, s, e = int(tid[i]), int(ts[i]), int(end[i])
        same = np.flatnonzero((tid == t) & (ts <= s) & (end >= e) & ~own)
        if len(same) and bool(np.all(threading_frame[same])):
            s, e = int(ts[same].min()), int(end[same].max())
        out.setdefault(t, []).append((s, e))
    return out


def _inside(ts: np.ndarray, end: np.ndarray, tid: np.ndarray,
            ranges: dict[int, list[tuple[int, int]]]) -> np.ndarray:
    mask = np.zeros(len(ts), bool)
    for t, spans in ranges.items():
        on = tid == t
        for s, e in spans:
            mask |= on & (ts >= s) & (end <= e)
    return mask


def _take(cols: Any, names: tuple[str, ...], keep: np.ndarray) -> None:
    for n in names:
        setattr(cols, n, getattr(cols, n)[keep])


def drop_own(cols: Any) -> int:
    """Drop our frames, what runs inside them, and our threads; returns the events removed."""
    if not len(cols.py_ts):
        return 0
    items = cols.py_names.items
    own_code = np.asarray([is_own_frame(n) for n in items], bool)
    own = own_code[cols.py_name]
    if not own.any():
        return 0
    thr = np.asarray([_THREADING.search(n) is not None for n in items], bool)[cols.py_name]
    py_end = cols.py_ts + cols.py_dur
    ranges = _intervals(cols.py_ts, py_end, cols.py_tid, own, thr)
    py_drop = own | _inside(cols.py_ts, py_end, cols.py_tid, ranges)
    steps = np.asarray([n.startswith("ProfilerStep#") for n in cols.names.items] or [False], bool)
    op_drop = _inside(cols.op_ts, cols.op_ts + cols.op_dur, cols.op_tid, ranges) & ~steps[cols.op_name]
    _take(cols, _PY_COLS, ~py_drop)
    if op_drop.any():
        _take(cols, _OP_COLS, ~op_drop)
    return int(py_drop.sum() + op_drop.sum())
