"""perfetto_fit's sweep walks only clusters of two or more events: on random tracks (nested trees,
partial overlaps, ties, zero and negative durations, lanes, ``stay`` events) its result equals the
full sweep's, kept here verbatim as the reference."""

from __future__ import annotations

import numpy as np
import pytest

from openmsprof.export.ascend_pt import perfetto_fit
from openmsprof.export.ascend_pt.perfetto_fit import Fitted, _shorten, fit

BASE = 1_795_738_792_495_000_000  # epoch ns of 2026: the µs text rounds to 0.25 µs in a double


def _reference_sweep(ts: np.ndarray, true_dur: np.ndarray, img: np.ndarray, out: Fitted, idx: np.ndarray,
                     priority: np.ndarray, keep: np.ndarray, last: bool) -> np.ndarray:
    """The sweep before the cluster fast path: every event of the swept tracks, one stack."""
    tracks = np.unique(out.track[idx])
    sel = np.flatnonzero(np.isin(out.track, tracks))
    dur = out.dur
    order = sel[np.lexsort((-true_dur[sel], img[sel], out.track[sel]))]
    trk, im, tt, du, pr, st = (out.track.tolist(), img.tolist(), ts.tolist(), dur.tolist(),
                               np.asarray(priority).tolist(), keep.tolist())
    end = (ts + true_dur).tolist()
    moved: list[int] = []
    stack: list[int] = []
    cur = None
    for e in order.tolist():
        if trk[e] != cur:
            cur, stack = trk[e], []
        s = im[e]
        while True:
            while stack and im[stack[-1]] + du[stack[-1]] <= s:
                stack.pop()
            if not stack or s + du[e] <= im[stack[-1]] + du[stack[-1]]:
                break
            p = stack[-1]
            if end[e] <= end[p]:
                _shorten(du, e, im[p] + du[p] - s)
                break
            if tt[e] >= end[p]:
                _shorten(du, p, s - im[p])
                stack.pop()
                continue
            if last or (st[e] and st[p]):
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
    dur[:] = du
    return np.asarray(sorted(moved), np.int64)


def _tree(rng: np.random.Generator, start: int, span: int, depth: int, out: list[tuple[int, int]]) -> None:
    """Nested slices under [start, start + span): children that end at, before or after (by a few
    ns) their parent's end, like rounded operators."""
    out.append((start, span))
    if depth == 0 or span < 4:
        return
    t = start + int(rng.integers(0, 3))
    for _ in range(int(rng.integers(0, 4))):
        length = int(rng.integers(0, max(1, span // 2)))
        if t + length > start + span + 3:
            break
        _tree(rng, t, length + int(rng.integers(-2, 3)), depth - 1, out)
        t += length + int(rng.integers(-300, 2000))


def _case(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ts, dur, trk = [], [], []
    for track in rng.choice([1, 2, 7, 4_000_000], size=int(rng.integers(1, 4)), replace=False).tolist():
        t = BASE + int(rng.integers(0, 10**6))
        for _ in range(int(rng.integers(1, 40))):
            kind = int(rng.integers(0, 4))
            if kind == 0:  # a lone slice, sometimes touching the previous one
                ev = [(t, int(rng.integers(0, 5000)))]
            elif kind == 1:  # a nested tree
                ev = []
                _tree(rng, t, int(rng.integers(1000, 50_000)), 3, ev)
            elif kind == 2:  # random overlapping slices (partial overlaps)
                ev = [(t + int(rng.integers(0, 3000)), int(rng.integers(-5, 3000))) for _ in range(int(rng.integers(2, 9)))]
            else:  # ties: same start, same or different durations
                d = int(rng.integers(0, 2000))
                ev = [(t, d), (t, d), (t, int(rng.integers(0, 2000)))]
            for s, d in ev:
                ts.append(s)
                dur.append(d)
                trk.append(track)
            t = max(s + max(d, 0) for s, d in ev) + int(rng.integers(-400, 3000))
    n = len(ts)
    prio = rng.integers(0, 2, n).astype(np.int8)
    stay = rng.random(n) < 0.3
    return (np.asarray(ts, np.int64), np.asarray(dur, np.int64), np.asarray(trk, np.int64), prio, stay)


def _same(a: Fitted, b: Fitted) -> None:
    assert a.dur.tolist() == b.dur.tolist()
    assert a.track.tolist() == b.track.tolist()
    assert (a.shortened, a.shortened_ns, a.moved, a.lanes) == (b.shortened, b.shortened_ns, b.moved, b.lanes)


@pytest.mark.parametrize("seed", range(60))
def test_cluster_sweep_equals_the_full_sweep(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(perfetto_fit, "_native", None)  # the Python sweep (the C fit is another test's)
    ts, dur, trk, prio, stay = _case(seed)
    perm = np.random.default_rng(seed + 1000).permutation(len(ts))  # input order is not sweep order
    ts, dur, trk, prio, stay = ts[perm], dur[perm], trk[perm], prio[perm], stay[perm]
    got = fit(ts, dur, trk, prio, stay=stay if seed % 2 else None)
    monkeypatch.setattr(perfetto_fit, "_sweep", _reference_sweep)
    want = fit(ts, dur, trk, prio, stay=stay if seed % 2 else None)
    _same(got, want)


def test_cases_reach_every_branch() -> None:
    """The random cases shorten, move and use lanes, and hold lone events, clusters the sweep
    skips (nested-or-disjoint on the grid) and clusters it walks."""
    shortened = moved = lanes = 0
    lone = skipped = walked = 0
    for seed in range(60):
        ts, dur, trk, prio, stay = _case(seed)
        f = fit(ts, dur, trk, prio, stay=stay if seed % 2 else None)
        shortened, moved, lanes = shortened + f.shortened, moved + f.moved, lanes + len(f.lanes)
        img = perfetto_fit.image_ns(ts)
        order = np.lexsort((-dur, img, trk))
        first, busy = perfetto_fit._clusters(trk[order], img[order], dur[order])
        cid = np.cumsum(first) - 1
        size = np.bincount(cid)[cid]
        lone += int(np.count_nonzero(size == 1))
        skipped += int(np.count_nonzero((size > 1) & ~busy))
        walked += int(np.count_nonzero(busy))
    assert shortened > 50 and moved > 20 and lanes > 5
    assert lone > 100 and skipped > 100 and walked > 100


def test_a_root_over_disjoint_children_is_not_walked() -> None:
    """A step over 1000 disjoint operators (the usual torch window): one cluster, nested on the
    grid, so the sweep walks nothing; one child sticking out by rounding makes it walk it."""
    ts = np.concatenate([[BASE], BASE + 10 + 2000 * np.arange(1000)]).astype(np.int64)
    dur = np.concatenate([[2000 * 1000 + 10], np.full(1000, 1500)]).astype(np.int64)
    img = perfetto_fit.image_ns(ts)
    first, busy = perfetto_fit._clusters(np.zeros(1001, np.int64), img, dur)
    assert int(first.sum()) == 1 and not busy.any()
    dur[0] = int(img[-1] + 1500 - img[0]) - 1  # the last child now ends 1 ns after the root
    first, busy = perfetto_fit._clusters(np.zeros(1001, np.int64), img, dur)
    assert busy.all()


def test_disjoint_and_nested_by_hand() -> None:
    """Hand cases: disjoint slices stay as they are; a child sticking out after rounding is cut
    to its parent's end; a partial overlap of equal priority moves the later slice."""
    ts = np.asarray([BASE, BASE + 1000, BASE + 5000, BASE + 5100, BASE + 9000, BASE + 9500], np.int64)
    dur = np.asarray([1000, 1000, 1000, 900, 1000, 1000], np.int64)
    trk = np.zeros(6, np.int64)
    f = fit(ts, dur, trk, np.ones(6, np.int8))
    img = perfetto_fit.image_ns(ts)
    # the first two touch; the child (index 3) ends with its parent in true ns
    assert int(f.dur[0]) == min(1000, int(img[1] - img[0])) and f.dur[1:3].tolist() == [1000, 1000]
    assert img[3] + f.dur[3] <= img[2] + f.dur[2]
    assert f.track[:4].tolist() == [0, 0, 0, 0]
    assert f.track[5] != 0 and f.track[4] == 0 and f.moved == 1  # 9500 partially overlaps 9000
