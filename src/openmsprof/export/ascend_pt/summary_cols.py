"""The per-row columns of the torch summary CSVs (kernel_details, operator_details, step_trace_time,
op_statistic), each in one call: in C (``_summary_cols.c``) where built, else numpy.  The numpy code is the
reference and the fallback (``OPENMSPROF_SUMMARY_COLS_PYTHON=1``, or ``NATIVE = None``, forces
it); the arguments are checked here first, one line naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from openmsprof.config import native_ext
from openmsprof.export.ascend_pt import nesting

__all__ = ["group_stats", "kernel_codes", "op_tree_times", "step_sums"]

#: the C columns (``_summary_cols.c``), None when not built or forced off
NATIVE: Any = native_ext.load("openmsprof.export.ascend_pt._summary_cols", "OPENMSPROF_SUMMARY_COLS_PYTHON")

Intervals = tuple[np.ndarray, np.ndarray]
_I64 = np.dtype(np.int64)


def _int64(name: str, a: Any) -> np.ndarray:
    """``a`` as a contiguous one-dimensional int64 array, or ValueError naming it."""
    if type(a) is np.ndarray and a.dtype == _I64 and a.ndim == 1 and a.flags.c_contiguous:
        return a
    a = np.asarray(a)
    if a.ndim != 1 or not (a.dtype.kind == "i" or (a.dtype.kind == "u" and a.dtype.itemsize < 8)):
        raise ValueError(f"summary columns: {name} is not a one-dimensional integer array "
                         f"({a.dtype}, {a.ndim} dimensions)")
    return a if a.dtype == _I64 and a.flags.c_contiguous else np.ascontiguousarray(a, np.int64)


def _same_len(what: str, *arrays: np.ndarray) -> None:
    lengths = [len(a) for a in arrays]
    if lengths.count(lengths[0]) != len(lengths):
        raise ValueError(f"summary columns: {what} differ in length ({', '.join(map(str, lengths))})")


def kernel_codes(ts: Any, dur: Any, op: Any, op_shape: Any,
                 steps: Sequence[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per kernel (in start order): Wait Time ns (from the previous kernel's end, 0 for the first
    and when they overlap), the shape code of its operator (``op_shape[op]``, 0 without one) and
    its step code (1 + the index in ``steps`` of the step holding its start, 0 outside every
    step; ``steps``: (id, start ns, end ns) by start)."""
    ts, dur, op, op_shape = _int64("ts", ts), _int64("dur", dur), _int64("op", op), _int64("op_shape", op_shape)
    _same_len("ts, dur and op", ts, dur, op)
    n = len(ts)
    start = np.fromiter((s[1] for s in steps), np.int64, len(steps))
    end = np.fromiter((s[2] for s in steps), np.int64, len(steps))
    if NATIVE is not None:  # (it names an operator out of range itself)
        wait, shape, step = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
        NATIVE.kernel_codes(ts, dur, op, op_shape, start, end, wait, shape, step)
        return wait, shape, step
    if n and int(op.max()) >= len(op_shape):
        raise IndexError(f"summary columns: op names operator {int(op.max())} of {len(op_shape)}")
    wait = np.zeros(n, np.int64)
    if n > 1:
        np.maximum(ts[1:] - (ts[:-1] + dur[:-1]), 0, out=wait[1:])
    shape = np.where(op >= 0, op_shape[np.maximum(op, 0)], 0) if n and len(op_shape) else np.zeros(n, np.int64)
    pos = np.searchsorted(start, ts, side="right")  # 1 + the step's index, 0 before all
    ends = np.concatenate(([np.iinfo(np.int64).min], end))
    return wait, shape.astype(np.int64), np.where(ts < ends[pos], pos, 0).astype(np.int64)


def _clip_sum(iv: Intervals, lo: int, hi: int) -> int:
    """Length of the sorted, disjoint ``iv`` inside [lo, hi], 0 if negative (the reference of
    ``_clip_sums`` and of the C loop)."""
    s, e = iv
    i0 = np.searchsorted(e, lo, side="right")
    i1 = np.searchsorted(s, hi, side="left")
    if i1 <= i0:
        return 0
    return int(np.sum(np.minimum(e[i0:i1], hi) - np.maximum(s[i0:i1], lo)).clip(min=0))


def _clip_sums(iv: Intervals, lo: np.ndarray, hi: np.ndarray) -> list[int]:
    """``_clip_sum`` of every window [lo[i], hi[i]] at once: with C(x) the length of the sorted,
    disjoint ``iv`` before x (the lengths of the intervals starting before x, less the part of
    the last one past x), the length inside a window is C(hi) - C(lo) (0 when negative)."""
    s, e = iv
    if not len(s):
        return [0] * len(lo)
    before = np.concatenate(([0], np.cumsum(e - s)))

    def upto(x: np.ndarray) -> np.ndarray:
        j = np.searchsorted(s, x, side="left")
        past = np.where(j > 0, np.maximum(e[np.maximum(j - 1, 0)] - x, 0), 0)
        return before[j] - past  # type: ignore[no-any-return]

    return np.maximum(upto(hi) - upto(lo), 0).tolist()  # type: ignore[no-any-return]


def _spans(busy: Intervals, lo: np.ndarray, hi: np.ndarray) -> tuple[list[int], list[int]]:
    """Per window [lo, hi]: (Stage: first busy start to last busy end inside it, Preparing: window
    start to the first busy start), both 0 where nothing is busy inside."""
    if not len(busy[0]):
        return [0] * len(lo), [0] * len(lo)
    b0 = np.searchsorted(busy[1], lo, side="right")
    b1 = np.searchsorted(busy[0], hi, side="left")
    inside = b1 > b0
    first = np.maximum(busy[0][np.minimum(b0, len(busy[0]) - 1)], lo)
    last = np.minimum(busy[1][np.maximum(b1 - 1, 0)], hi)
    return np.where(inside, last - first, 0).tolist(), np.where(inside, first - lo, 0).tolist()


def step_sums(tracks: Sequence[Intervals], busy: Intervals, lo: Any, hi: Any) -> list[list[int]]:
    """Per window [lo[j], hi[j]]: the lengths of the four sorted, disjoint ``tracks`` inside it,
    then Stage (first busy start to last busy end inside it) and Preparing (window start to the
    first busy start), both 0 where nothing is busy inside: one list of 6 ints per window."""
    lo, hi = _int64("lo", lo), _int64("hi", hi)
    _same_len("lo and hi", lo, hi)
    if len(tracks) != 4:
        raise ValueError(f"summary columns: {len(tracks)} tracks, 4 expected")
    arrays: list[np.ndarray] = []
    for j, (s, e) in enumerate([*tracks, busy]):
        s, e = _int64(f"track {j} starts", s), _int64(f"track {j} ends", e)
        _same_len(f"track {j}'s starts and ends", s, e)
        arrays += [s, e]
    if NATIVE is not None:
        out = np.empty(6 * len(lo), np.int64)
        NATIVE.step_sums(lo, hi, tuple(arrays), out)
        return out.reshape(-1, 6).tolist()  # type: ignore[no-any-return]
    cols = [_clip_sums((arrays[2 * t], arrays[2 * t + 1]), lo, hi) for t in range(4)]
    cols += _spans((arrays[8], arrays[9]), lo, hi)
    return [list(row) for row in zip(*cols, strict=True)]


def op_tree_times(ts: Any, dur: Any, tid: Any, k_op: Any, k_dur: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every operator nested by thread and time (``nesting.parents`` of all of them): per operator
    the summed duration of its direct children, its kernels' duration (``k_op``: each kernel's
    operator, -1 none) and its subtree's kernels' duration (``nesting.op_times``), ns."""
    ts, dur, tid, k_op, k_dur = (_int64("ts", ts), _int64("dur", dur), _int64("tid", tid), _int64("k_op", k_op),
                                 _int64("k_dur", k_dur))
    _same_len("ts, dur and tid", ts, dur, tid)
    _same_len("k_op and k_dur", k_op, k_dur)
    if NATIVE is not None:  # (it names an operator out of range itself)
        n = len(ts)
        child, dev_self, dev_total = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
        NATIVE.op_tree_times(ts, dur, tid, k_op, k_dur, child, dev_self, dev_total)
        return child, dev_self, dev_total
    if len(k_op) and int(k_op.max()) >= len(ts):
        raise IndexError(f"summary columns: k_op names operator {int(k_op.max())} of {len(ts)}")
    every = np.ones(len(ts), bool)
    parent, depth = nesting.parents(ts, dur, tid, every)
    return nesting.op_times(parent, depth, dur, every, k_op, k_dur)


def group_stats(key: Any, dur: Any, size: int) -> np.ndarray:
    """Kernels grouped by ``key`` (0 <= key < size): one row (key, count, total, min, max) per
    group, by total descending, then by first kernel (an int64 array of shape (groups, 5))."""
    key, dur = _int64("key", key), _int64("dur", dur)
    _same_len("key and dur", key, dur)
    if NATIVE is not None:  # (it names a key out of range itself)
        out = np.empty(5 * min(size, len(key)), np.int64)
        groups = NATIVE.group_stats(key, dur, size, out)
        return out[:5 * groups].reshape(-1, 5)
    if not len(key):
        return np.zeros((0, 5), np.int64)
    if int(key.min()) < 0 or int(key.max()) >= size:
        raise IndexError(f"summary columns: a key outside 0..{size - 1} ({int(key.min())}..{int(key.max())})")
    order = np.argsort(key, kind="stable")  # groups in key order, each from its first kernel
    skey = key[order]
    starts = np.flatnonzero(np.concatenate(([True], skey[1:] != skey[:-1])))
    d = dur[order]
    tot = np.add.reduceat(d, starts)
    rows = np.stack([skey[starts], np.diff(np.append(starts, len(key))), tot, np.minimum.reduceat(d, starts),
                     np.maximum.reduceat(d, starts)], axis=1)
    return rows[np.lexsort((order[starts], -tot))]  # type: ignore[no-any-return]
