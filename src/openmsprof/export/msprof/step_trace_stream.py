"""StepTraceTime rows of a PROF_ job's device in one pass over its tasks in start order, in the
memory of one block of them, whatever the job's size (``analysis_db``).

Without communication tasks the Computing track is the busy time itself and both Communication
tracks are empty, so a device's rows need only the union of its tasks.  The tasks are read
``BLOCK_ROWS`` at a time in start order (TASK's index on startNs) and merged; each block's merged
intervals but the last (which a later task may still extend) are final, and are added to every
window's sums at once: Computing and Free (the gaps between busy intervals, across blocks too)
add up, and each window's first and last busy time inside it (Stage, Preparing) are kept.  The
rows are those ``overlap.window_rows`` gives from the whole ``Overlap`` of the same tasks
(tests/export/test_step_trace_stream.py).  A communication task ends the pass: the caller
computes that device's rows in memory.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from openmsprof.export.ascend_pt import summary_cols
from openmsprof.export.ascend_pt.overlap import merge, rows_of_sums

__all__ = ["BLOCK_ROWS", "device_rows"]

#: TASK rows read and merged at a time
BLOCK_ROWS = 1 << 16
_EMPTY = np.zeros(0, np.int64)


class _WindowSums:
    """Per window [lo, hi]: Computing and Free so far, and the first / last busy time inside it."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.lo, self.hi = lo, hi
        n = len(lo)
        self.comp, self.free = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.first, self.last = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.seen = np.zeros(n, bool)
        self.prev_end: int | None = None  # the end of the last busy interval added (a gap follows it)

    def add(self, s: np.ndarray, e: np.ndarray) -> None:
        """Final busy intervals (sorted, disjoint), each after every interval added before."""
        if not len(s):
            return
        if self.prev_end is None:
            gs, ge = e[:-1], s[1:]
        else:
            gs, ge = np.concatenate(([self.prev_end], e[:-1])), s
        keep = ge > gs
        sums = np.asarray(summary_cols.step_sums([(s, e), (_EMPTY, _EMPTY), (_EMPTY, _EMPTY), (gs[keep], ge[keep])],
                                                 (s, e), self.lo, self.hi), np.int64).reshape(-1, 6)
        self.comp += sums[:, 0]
        self.free += sums[:, 3]
        # summary_cols._spans' rule: the busy intervals that end after lo and start before hi
        b0 = np.searchsorted(e, self.lo, side="right")
        b1 = np.searchsorted(s, self.hi, side="left")
        inside = b1 > b0
        first = np.maximum(s[np.minimum(b0, len(s) - 1)], self.lo)
        last = np.minimum(e[np.maximum(b1 - 1, 0)], self.hi)
        new = inside & ~self.seen
        self.first[new] = first[new]
        self.last[inside] = last[inside]
        self.seen |= inside
        self.prev_end = int(e[-1])

    def sums(self) -> list[list[int]]:
        """``summary_cols.step_sums``' six columns per window."""
        zero = np.zeros(len(self.lo), np.int64)
        stage = np.where(self.seen, self.last - self.first, 0)
        preparing = np.where(self.seen, self.first - self.lo, 0)
        return np.stack([self.comp, zero, zero, self.free, stage, preparing], 1).tolist()  # type: ignore[no-any-return]


def device_rows(con: sqlite3.Connection, device: int, windows: list[tuple[object, int, int]],
                comm_ids: list[int], no_step: object) -> list[list[object]] | None:
    """The device's StepTraceTime rows (``overlap.window_rows``' for its tasks: one per window;
    none given, one with Step ``no_step`` over the busy span), or None when the device has a
    communication task (a ``comm_ids`` task type)."""
    if not windows:
        lo, hi = con.execute("SELECT min(startNs), max(max(endNs, startNs)) FROM TASK WHERE deviceId = ?",
                             (device,)).fetchone()
        if lo is None:
            return []
        windows = [(no_step, int(lo), int(hi))]
    acc = _WindowSums(np.asarray([w[1] for w in windows], np.int64), np.asarray([w[2] for w in windows], np.int64))
    comm = np.asarray(comm_ids, np.int64)
    cur = con.execute("SELECT startNs, max(endNs, startNs), ifnull(taskType, -1) FROM TASK WHERE deviceId = ? "
                      "ORDER BY startNs", (device,))
    open_s = open_e = _EMPTY  # the last merged interval, which a later task may extend
    while rows := cur.fetchmany(BLOCK_ROWS):
        block = np.asarray(rows, np.int64).reshape(-1, 3)
        if len(comm) and bool(np.isin(block[:, 2], comm).any()):
            cur.close()
            return None
        s, e = merge(np.concatenate((open_s, block[:, 0])), np.concatenate((open_e, block[:, 1])))
        acc.add(s[:-1], e[:-1])
        open_s, open_e = s[-1:], e[-1:]
    acc.add(open_s, open_e)
    return rows_of_sums(windows, acc.sums(), int(device))
