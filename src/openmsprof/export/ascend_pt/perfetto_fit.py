"""Keep ``trace_view.json``'s slices whole in Perfetto (docs/formats.md, "Perfetto reads the
Ascend spelling").

Perfetto's JSON importer parses the string epoch-µs ``ts`` as a double: near 1.8e15 µs that keeps
0.25 µs, and ``× 1000`` lands on a 256 ns grid, while ``dur`` stays exact.  A child that ends within
a few hundred ns of its parent's end, or an event that starts right where the previous one ended,
can then stick out of its parent in Perfetto's view, and Perfetto drops it
(``slice_drop_overlapping_complete_event``).  Python-tracer functions can also really overlap an
operator partially (``_record_function_enter_new`` ends after the operator it opened starts).

``fit`` sweeps each track in Perfetto's own view and makes it nested-or-disjoint with the least
change: a slice that is truly nested but sticks out after rounding is shortened to its parent's
end (by < 0.5 µs); a slice that truly ends before the next starts is shortened to that start; a
true partial overlap moves the lower-priority slice (Python functions) to an overflow lane of the
same process.  Operators stay on their thread, as torch_npu's own trace_view writes them: one that
truly overlaps another operator partially (possible only with hand-ended ranges) is clipped to
end at the other's end, nested.  "Truly" always means in the measured times, never in the times
already shortened by the fit (a slice cut to its parent's rounded end keeps its children nested).
Only trace_view's copy changes: the CSVs and db keep the measured values.

``fit`` runs in C (``_perfetto_fit.c``) when that was built and the input is in its range; the
Python code here is the reference and the fallback (``OPENMSPROF_PERFETTO_FIT_PYTHON=1`` forces it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from openmsprof.config import native_ext

__all__ = ["LANE_SHIFT", "Fitted", "fit", "fit_columns", "image_ns"]

#: An overflow lane of thread/stream ``t`` is ``t + lane << LANE_SHIFT`` (lane ≥ 1): Linux tids
#: are below 2^22, and Perfetto keeps tids as 32-bit numbers, so lanes stay below 2^31.
LANE_SHIFT = 22
#: Lanes per track before the last one takes every remaining overlap (shortened to fit).
MAX_LANES = 8
_EXACT_FROM_NS = (1 << 40) * 1000  # above this (µs ≥ 2^40) the long-double path is exact


_ext = native_ext.load("openmsprof.export.ascend_pt._perfetto_fit", "OPENMSPROF_PERFETTO_FIT_PYTHON")
#: ``_perfetto_fit.c``'s ``fit`` (None when not built: the Python code below runs).
_native: Callable[..., tuple[int, int, int, dict[int, int]] | None] | None = _ext.fit if _ext is not None else None


def image_ns(ts_ns: np.ndarray) -> np.ndarray:
    """Perfetto's ns for the ``"%d.%03d"`` µs text of each ns timestamp: the text read as a
    double, then ``× 1000`` truncated (an integral double is scaled exactly)."""
    ts_ns = np.asarray(ts_ns, np.int64)
    if not len(ts_ns):
        return ts_ns.copy()
    if np.finfo(np.longdouble).nmant >= 63 and int(ts_ns.min()) >= _EXACT_FROM_NS:
        # µs ≥ 2^40: double midpoints are multiples of 2^-13 µs and never within the long
        # double's error of a whole-ns value, so this rounds exactly as parsing the text does
        q, r = np.divmod(ts_ns, 1000)
        us = (q.astype(np.longdouble) + r.astype(np.longdouble) / 1000).astype(np.float64)
    else:
        us = np.asarray([float(f"{t // 1000}.{t % 1000:03d}") for t in ts_ns.tolist()], np.float64)
    whole = us == np.floor(us)
    out = (us * 1000).astype(np.int64)
    out[whole] = us[whole].astype(np.int64) * 1000
    return out


@dataclass
class Fitted:
    """Durations (ns) and track ids as trace_view writes them, and what changed."""

    dur: np.ndarray
    track: np.ndarray
    shortened: int = 0
    shortened_ns: int = 0
    moved: int = 0
    lanes: dict[int, int] = field(default_factory=dict)  # lane track id → its base track id


def fit(ts: np.ndarray, dur: np.ndarray, track: np.ndarray, priority: np.ndarray,
        stay: np.ndarray | None = None) -> Fitted:
    """Fit X events (true ns ``ts``/``dur``, ``track`` ids) to Perfetto's view.  On a true
    partial overlap the event of lower ``priority`` moves to an overflow lane (the later one on
    a tie); an event on the last lane is shortened instead.  Two ``stay`` events (a bool per
    event) that truly overlap partially both stay: the later one is clipped to the other's end."""
    ts = np.asarray(ts, np.int64)
    true_dur = np.asarray(dur, np.int64)
    if _native is not None and len(ts):
        done = _fit_native(_native, ts, true_dur, track, priority, stay)
        if done is not None:
            return done
    out = Fitted(true_dur.copy(), np.asarray(track, np.int64).copy())
    if not len(ts):
        return out
    img = image_ns(ts)
    keep = np.zeros(len(ts), bool) if stay is None else np.asarray(stay, bool)
    shift = max(LANE_SHIFT, int(out.track.max()).bit_length())
    pending = np.arange(len(ts))
    for lane in range(MAX_LANES + 1):
        moved = _sweep(ts, true_dur, img, out, pending, priority, keep, last=lane == MAX_LANES)
        if not len(moved):
            break
        out.track[moved] += 1 << shift
        for t in np.unique(out.track[moved]).tolist():
            out.lanes[t] = t & ((1 << shift) - 1)
        out.moved += len(moved) if lane == 0 else 0
        pending = moved
    cut = np.asarray(dur, np.int64) - out.dur
    out.shortened, out.shortened_ns = int(np.count_nonzero(cut)), int(cut.sum())
    return out


def _fit_native(native: Callable[..., tuple[int, int, int, dict[int, int]] | None], ts: np.ndarray,
                true_dur: np.ndarray, track: np.ndarray, priority: np.ndarray, stay: np.ndarray | None) -> Fitted | None:
    """``fit`` in C; None where it does not apply (priorities beyond int8, times or track ids
    outside the C code's range): the Python code runs."""
    pr = np.asarray(priority)
    if pr.dtype != np.int8:
        if pr.dtype.kind not in "biu" or (len(pr) and (int(pr.min()) < -128 or int(pr.max()) > 127)):
            return None
        pr = pr.astype(np.int8)
    out = Fitted(np.empty(len(ts), np.int64), np.empty(len(ts), np.int64))
    got = native(np.ascontiguousarray(ts), np.ascontiguousarray(true_dur), np.ascontiguousarray(track, np.int64),
                 np.ascontiguousarray(pr), None if stay is None else np.ascontiguousarray(stay, bool),
                 out.dur, out.track, LANE_SHIFT, MAX_LANES)
    if got is None:
        return None
    out.shortened, out.shortened_ns, out.moved, out.lanes = got
    return out


_I64 = np.dtype(np.int64)


def fit_columns(ts: np.ndarray, dur: np.ndarray, track: np.ndarray, priority: np.ndarray,
                 stay: np.ndarray | None = None) -> Fitted:
    """``fit`` for ``trace_tracks.fit_trace``'s columns: contiguous int64 times and tracks, int8
    priorities and a bool ``stay`` go to the C code as they are (no conversions); anything else,
    or what the C code declines, takes ``fit``."""
    if _native is not None and len(ts) and all(type(a) is np.ndarray and a.dtype is _I64 and a.flags.c_contiguous
                                               for a in (ts, dur, track)):
        out = Fitted(np.empty(len(ts), np.int64), np.empty(len(ts), np.int64))
        got = _native(ts, dur, track, priority, stay, out.dur, out.track, LANE_SHIFT, MAX_LANES)
        if got is not None:
            out.shortened, out.shortened_ns, out.moved, out.lanes = got
            return out
    return fit(ts, dur, track, priority, stay)


def _sweep(ts: np.ndarray, true_dur: np.ndarray, img: np.ndarray, out: Fitted, idx: np.ndarray,
           priority: np.ndarray, keep: np.ndarray, last: bool) -> np.ndarray:
    """One pass over the events ``idx`` (and the events already on their tracks); returns the
    events to move one lane up.  ``du`` is the fitted duration on Perfetto's grid, ``end`` the
    measured end: the nested/after/partial decisions read only measured times.

    Only clusters (``_clusters``) of two or more events are walked: a lone event pops the whole
    stack and is pushed unchanged, so skipping it changes nothing."""
    tracks = np.unique(out.track[idx])
    sel = np.flatnonzero(np.isin(out.track, tracks))
    dur = out.dur
    order = sel[np.lexsort((-true_dur[sel], img[sel], out.track[sel]))]
    first, busy = _clusters(out.track[order], img[order], dur[order])
    sub = order[busy]
    if not len(sub):
        return np.zeros(0, np.int64)
    im, tt, du, pr, st = (img[sub].tolist(), ts[sub].tolist(), dur[sub].tolist(),
                          np.asarray(priority)[sub].tolist(), keep[sub].tolist())
    end = (ts[sub] + true_dur[sub]).tolist()
    moved: list[int] = []
    stack: list[int] = []
    for e, new in enumerate(first[busy].tolist()):
        if new:
            stack = []
        s = im[e]
        while True:
            while stack and im[stack[-1]] + du[stack[-1]] <= s:
                stack.pop()
            if not stack or s + du[e] <= im[stack[-1]] + du[stack[-1]]:
                break
            p = stack[-1]
            if end[e] <= end[p]:  # truly nested: end at the parent's end
                _shorten(du, e, im[p] + du[p] - s)
                break
            if tt[e] >= end[p]:  # truly after it: the parent ends where this starts
                _shorten(du, p, s - im[p])
                stack.pop()
                continue
            if last or (st[e] and st[p]):  # a true partial overlap, no lane left or both stay
                _shorten(du, e, im[p] + du[p] - s)
                break
            if pr[p] < pr[e]:
                moved.append(p)
                stack.pop()
                continue
            moved.append(e)
            e = -1
            break
        if e >= 0:
            stack.append(e)
    dur[sub] = du
    return np.sort(sub[np.asarray(moved, np.int64)])


def _clusters(track: np.ndarray, img: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For events in sweep order: whether each starts a cluster (the first on its track, or one
    starting at or after every earlier event of its track has ended on Perfetto's grid), and
    whether the sweep must walk its cluster.  Durations only shrink in a sweep, so at a cluster's
    first event the sweep's stack always empties: clusters are independent.  A lone event, and a
    cluster already nested-or-disjoint on the grid (``_laminar``), come out of the sweep unchanged."""
    n = len(track)
    first = np.ones(n, bool)
    if n < 2:
        return first, np.zeros(n, bool)
    first[1:] = track[1:] != track[:-1]
    ends = img + dur
    reach = np.empty(n, np.int64)  # the latest end among the earlier events of the track
    bounds = [*np.flatnonzero(first).tolist(), n]
    for a, b in itertools.pairwise(bounds):
        reach[a] = ends[a]
        if b - a > 1:
            reach[a + 1:b] = np.maximum.accumulate(ends[a:b - 1])
    first[1:] |= img[1:] >= reach[1:]
    cid = np.cumsum(first) - 1
    busy = np.bincount(cid)[cid] >= 2
    if busy.any():
        bad = _crossed(track[busy], img[busy], dur[busy], cid[busy], int(cid[-1]) + 1)
        busy &= bad[cid]
    return first, busy


def _crossed(track: np.ndarray, img: np.ndarray, dur: np.ndarray, cid: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per cluster: True unless its grid intervals are nested-or-disjoint in the sweep's sense
    (an event ends at or before the end of every open event, ``end <= start`` is closed), where
    the sweep neither shortens nor moves anything.  Checked as brackets: ordered by position
    (closes first, opens in sweep order, equal closes innermost first), every close must match
    the last open of its depth.  A cluster with a duration <= 0 is always walked."""
    bad = np.zeros(n_clusters, bool)
    bad[cid[dur <= 0]] = True
    ok = ~bad[cid]
    k = np.flatnonzero(ok)  # sweep rank of each checked event
    m = len(k)
    if not m:
        return bad
    trk = np.concatenate([track[k], track[k]])
    pos = np.concatenate([img[k], img[k] + dur[k]])
    is_open = np.concatenate([np.ones(m, bool), np.zeros(m, bool)])
    tie = np.concatenate([k, -k])
    ev = np.concatenate([k, k])
    seq = np.lexsort((tie, is_open, pos, trk))
    step = np.where(is_open[seq], 1, -1)
    depth = np.cumsum(step)
    level = np.where(step > 0, depth, depth + 1)
    by_level = seq[np.lexsort((np.arange(2 * m), level))]
    opens, closes = by_level[0::2], by_level[1::2]
    if not (is_open[opens].all() and not is_open[closes].any()):  # not brackets: walk them all
        bad[cid[k]] = True
        return bad
    wrong = ev[opens] != ev[closes]
    bad[cid[ev[opens][wrong]]] = True
    bad[cid[ev[closes][wrong]]] = True
    return bad


def _shorten(du: list[int], j: int, new: int) -> None:
    du[j] = max(min(new, du[j]), 0)
