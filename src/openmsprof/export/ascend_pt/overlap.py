"""Overlap Analysis intervals (Computing / Communication / Communication(Not Overlapped) / Free)
and step_trace_time rows (docs/formats.md §4), vectorised with numpy."""

from __future__ import annotations

import numpy as np

from openmsprof.export.ascend_pt import summary_cols
from openmsprof.export.ascend_pt.framework import Framework

Intervals = tuple[np.ndarray, np.ndarray]  # (starts, ends), sorted, disjoint
STEP_TRACE_HEADER = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                     "Communication", "Free", "Stage", "Bubble",
                     "Communication(Not Overlapped and Exclude Receive)", "Preparing"]


def merge(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Union of intervals."""
    if not len(starts):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_max = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run_max[:-1]
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(len(out_s), np.int64)
    np.maximum.at(out_e, group, e)
    return out_s, out_e


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """Parts of ``a`` not covered by ``b`` (both merged)."""
    if not len(b[0]) or not len(a[0]):
        return a
    # boundaries: walk by combining gaps of b with a
    gaps_s = np.concatenate(([np.iinfo(np.int64).min], b[1]))
    gaps_e = np.concatenate((b[0], [np.iinfo(np.int64).max]))
    return intersect(a, (gaps_s, gaps_e))


def intersect(a: Intervals, b: Intervals) -> Intervals:
    out_s: list[np.ndarray] = []
    out_e: list[np.ndarray] = []
    # for each b interval, clip a intervals that overlap it (searchsorted keeps it O(n log n))
    for bs, be in zip(b[0].tolist(), b[1].tolist(), strict=False):
        lo = np.searchsorted(a[1], bs, side="right")
        hi = np.searchsorted(a[0], be, side="left")
        if hi > lo:
            s = np.maximum(a[0][lo:hi], bs)
            e = np.minimum(a[1][lo:hi], be)
            keep = e > s
            out_s.append(s[keep])
            out_e.append(e[keep])
    if not out_s:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_s), np.concatenate(out_e)


def gaps(a: Intervals) -> Intervals:
    return a[1][:-1].copy(), a[0][1:].copy()


class Overlap:
    """The four Overlap Analysis tracks of one rank."""

    def __init__(self, fw: Framework) -> None:
        k = fw.kernels
        self._build(k.ts, k.ts + k.dur, k.comm)

    @classmethod
    def of_tasks(cls, ts: np.ndarray, end: np.ndarray, comm: np.ndarray) -> Overlap:
        """The tracks of tasks given as start/end ns and a communication mask (a PROF_ job's)."""
        ov = cls.__new__(cls)
        ov._build(np.asarray(ts, np.int64), np.asarray(end, np.int64), np.asarray(comm, bool))
        return ov

    def _build(self, ts: np.ndarray, end: np.ndarray, comm: np.ndarray) -> None:
        self.computing = merge(ts[~comm], end[~comm])
        self.communication = merge(ts[comm], end[comm])
        self.comm_not_overlapped = subtract(self.communication, self.computing)
        busy = merge(ts, end)
        self.busy = busy
        g = gaps(busy)
        keep = g[1] > g[0]
        self.free = (g[0][keep], g[1][keep])

    def tracks(self) -> list[tuple[str, Intervals]]:
        return [("Computing", self.computing), ("Communication", self.communication),
                ("Communication(Not Overlapped)", self.comm_not_overlapped), ("Free", self.free)]


def step_rows(fw: Framework, ov: Overlap, device_id: int) -> list[list[object]]:
    """One row per ProfilerStep (or one row with an empty Step when no steps were recorded)."""
    return window_rows(ov, [(sid, s, e) for sid, s, e in fw.steps], device_id, "")


def window_rows(ov: Overlap, windows: list[tuple[object, int, int]], device_id: int,
                no_step: object) -> list[list[object]]:
    """One step_trace_time row per (step id, start ns, end ns) window; with no window, one row
    with Step ``no_step`` over the busy span (none when nothing ran)."""
    if not windows:
        if not len(ov.busy[0]):
            return []
        windows = [(no_step, int(ov.busy[0][0]), int(ov.busy[1][-1]))]
    lo = np.asarray([w[1] for w in windows], np.int64)
    hi = np.asarray([w[2] for w in windows], np.int64)
    sums = summary_cols.step_sums([ov.computing, ov.communication, ov.comm_not_overlapped, ov.free], ov.busy,
                                  lo, hi)
    return rows_of_sums(windows, sums, device_id)


def rows_of_sums(windows: list[tuple[object, int, int]], sums: list[list[int]], device_id: int) -> list[list[object]]:
    """step_trace_time rows of ``windows`` from their ``summary_cols.step_sums`` (ns)."""
    # Bubble is 0 (no pipeline stages here): Stage is the busy span itself, and Communication(Not Overlapped
    # and Exclude Receive) is Communication(Not Overlapped); every value µs rounded to 3 decimals
    return [[device_id, sid, round(comp / 1000.0, 3), round(not_ov / 1000.0, 3), round((comm - not_ov) / 1000.0, 3),
             round(comm / 1000.0, 3), round(free / 1000.0, 3), round(stage / 1000.0, 3), 0.0,
             round(max(not_ov, 0) / 1000.0, 3), round(preparing / 1000.0, 3)]
            for (sid, _lo, _hi), (comp, comm, not_ov, free, stage, preparing) in zip(windows, sums, strict=True)]
