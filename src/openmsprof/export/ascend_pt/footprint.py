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


Spans = dict[int, tuple[np.ndarray, np.ndarray]]  # tid → (starts, ends), merged and sorted


def _merge(ts: np.ndarray, end: np.ndarray, tid: np.ndarray) -> Spans:
    """Per thread, the union of the intervals (sorted, disjoint)."""
    out: Spans = {}
    for t in np.unique(tid).tolist():
        on = tid == t
        order = np.argsort(ts[on], kind="stable")
        s, e = ts[on][order], end[on][order]
        run = np.maximum.accumulate(e)
        new = np.ones(len(s), bool)
        new[1:] = s[1:] > run[:-1]
        group = np.cumsum(new) - 1
        ends = np.zeros(int(new.sum()), np.int64)
        np.maximum.at(ends, group, e)
        out[int(t)] = (s[new], ends)
    return out


def _inside(ts: np.ndarray, end: np.ndarray, tid: np.ndarray, spans: Spans) -> np.ndarray:
    """Events lying wholly inside one of their thread's spans (a searchsorted per thread)."""
    mask = np.zeros(len(ts), bool)
    for t, (starts, ends) in spans.items():
        on = np.flatnonzero(tid == t)
        if not len(on) or not len(starts):
            continue
        pos = np.searchsorted(starts, ts[on], side="right") - 1
        ok = pos >= 0
        ok[ok] = end[on][ok] <= ends[pos[ok]]
        mask[on] = ok
    return mask


def _top_level(ts: np.ndarray, end: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Events not inside an earlier (or longer, same-start) event of their thread."""
    top = np.zeros(len(ts), bool)
    for t in np.unique(tid).tolist():
        on = np.flatnonzero(tid == t)
        order = on[np.lexsort((-(end[on] - ts[on]), ts[on]))]
        e = end[order]
        prev = np.empty(len(order), np.int64)
        prev[0] = np.iinfo(np.int64).min
        prev[1:] = np.maximum.accumulate(e)[:-1]
        top[order] = ts[order] >= prev
    return top


def _per_root(ts: np.ndarray, end: np.ndarray, on: np.ndarray, mask: np.ndarray, r: np.ndarray) -> np.ndarray:
    """How many events of ``mask`` on the thread lie inside each (disjoint, sorted) root of ``r``."""
    ev = np.flatnonzero(mask & on)
    pos = np.searchsorted(ts[r], ts[ev], side="right") - 1
    ok = (pos >= 0) & (end[ev] <= end[r][np.maximum(pos, 0)])
    return np.bincount(pos[ok], minlength=len(r))


def _our_threads(ts: np.ndarray, end: np.ndarray, tid: np.ndarray, own: np.ndarray, thr: np.ndarray,
                 inside_own: np.ndarray) -> Spans:
    """Rule 3: top-level ``threading.py`` frames holding our frames and no other code of their own."""
    top = _top_level(ts, end, tid) & thr
    roots = np.flatnonzero(top)
    if not len(roots):
        return {}
    keep_roots: list[int] = []
    other = ~own & ~thr & ~inside_own
    for t in np.unique(tid[roots]).tolist():
        r = roots[tid[roots] == t]
        r = r[np.argsort(ts[r])]
        keep_roots += r[(_per_root(ts, end, tid == t, own, r) > 0)
                        & (_per_root(ts, end, tid == t, other, r) == 0)].tolist()
    sel = np.asarray(keep_roots, np.int64)
    return _merge(ts[sel], end[sel], tid[sel]) if len(sel) else {}


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
    ts, end, tid = cols.py_ts, cols.py_ts + cols.py_dur, cols.py_tid
    own_spans = _merge(ts[own], end[own], tid[own])
    inside_own = _inside(ts, end, tid, own_spans)
    threads = _our_threads(ts, end, tid, own, thr, inside_own)
    py_drop = own | inside_own | _inside(ts, end, tid, threads)
    steps = np.asarray([n.startswith("ProfilerStep#") for n in cols.names.items] or [False], bool)
    op_end = cols.op_ts + cols.op_dur
    op_drop = (_inside(cols.op_ts, op_end, cols.op_tid, own_spans) | _inside(cols.op_ts, op_end, cols.op_tid, threads)) \
        & ~steps[cols.op_name]
    _take(cols, _PY_COLS, ~py_drop)
    if op_drop.any():
        _take(cols, _OP_COLS, ~op_drop)
    return int(py_drop.sum() + op_drop.sum())
