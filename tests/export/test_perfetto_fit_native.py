"""trace_view's Perfetto fit in C (export/ascend_pt/_perfetto_fit.c) against its Python reference
(``perfetto_fit.fit`` with ``_native`` None): known answers on hand-built tracks (nesting, rounding,
equal starts, zero durations, crossing overlaps, several threads, every lane, negative and epoch
times, empty input), the same results on random traces, the Python code where the C code's range
ends, and bad arguments refused with one line naming them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from openmsprof.export.ascend_pt import perfetto_fit
from openmsprof.export.ascend_pt.perfetto_fit import LANE_SHIFT, MAX_LANES, Fitted

native = pytest.importorskip("openmsprof.export.ascend_pt._perfetto_fit",
                             reason="the C extension was not built (no compiler): the Python fit runs")

BASE = 1_795_738_792_495_000_000  # epoch ns of 2026, a whole µs: Perfetto's µs double keeps 0.25 µs
LANE = 1 << LANE_SHIFT


def _fit(how: str, ts: list[int] | np.ndarray, dur: list[int] | np.ndarray, track: list[int] | np.ndarray,
         prio: list[int] | np.ndarray | None = None, stay: list[bool] | np.ndarray | None = None) -> Fitted:
    n = len(ts)
    args = (np.asarray(ts, np.int64), np.asarray(dur, np.int64), np.asarray(track, np.int64),
            np.ones(n, np.int8) if prio is None else np.asarray(prio, np.int8))
    saved = perfetto_fit._native
    perfetto_fit._native = native.fit if how == "native" else None
    try:
        return perfetto_fit.fit(*args, stay=None if stay is None else np.asarray(stay, bool))
    finally:
        perfetto_fit._native = saved


def _summary(f: Fitted) -> tuple[list[int], list[int], int, int, int, dict[int, int]]:
    return f.dur.tolist(), f.track.tolist(), f.shortened, f.shortened_ns, f.moved, f.lanes


@pytest.mark.parametrize("how", ["native", "python"])
def test_known_answers(how: str) -> None:
    # whole µs times (the text path: Perfetto reads them exactly)
    # nested, disjoint, back to back: nothing changes
    assert _summary(_fit(how, [0, 1000, 5000, 6000], [5000, 2000, 1000, 1000], [3, 3, 3, 3])) == (
        [5000, 2000, 1000, 1000], [3, 3, 3, 3], 0, 0, 0, {})
    # equal starts (the longer is the parent, equal ones nest in file order); zero durations
    # inside, at a parent's start and at its end
    assert _summary(_fit(how, [0, 0, 0, 0, 2000, 4000], [4000, 2000, 2000, 0, 0, 0], [1] * 6)) == (
        [4000, 2000, 2000, 0, 0, 0], [1] * 6, 0, 0, 0, {})
    # a crossing overlap: the lower priority moves to lane 1 (either order of the two); on a tie
    # the later one moves; two ``stay`` events both stay, the later one clipped to the other's end
    assert _summary(_fit(how, [0, 500_000], [1000_000, 1000_000], [7, 7], prio=[0, 1])) == (
        [1000_000, 1000_000], [7 + LANE, 7], 0, 0, 1, {7 + LANE: 7})
    assert _summary(_fit(how, [0, 500_000], [1000_000, 1000_000], [7, 7], prio=[1, 0])) == (
        [1000_000, 1000_000], [7, 7 + LANE], 0, 0, 1, {7 + LANE: 7})
    assert _summary(_fit(how, [0, 500_000], [1000_000, 1000_000], [7, 7], prio=[1, 1])) == (
        [1000_000, 1000_000], [7, 7 + LANE], 0, 0, 1, {7 + LANE: 7})
    assert _summary(_fit(how, [0, 500_000], [1000_000, 1000_000], [7, 7], stay=[True, True])) == (
        [1000_000, 500_000], [7, 7], 1, 500_000, 0, {})
    # several threads: the same crossing pair on threads 2 and 9, a nested pair on thread 5
    assert _summary(_fit(how, [0, 0, 0, 3000, 3000, 1000], [5000, 5000, 5000, 5000, 5000, 1000],
                         [2, 9, 5, 2, 9, 5])) == (
        [5000] * 5 + [1000], [2, 9, 5, 2 + LANE, 9 + LANE, 5], 0, 0, 2, {2 + LANE: 2, 9 + LANE: 9})
    # negative times (text "-5.000" ...): a crossing pair and a nested child
    assert _summary(_fit(how, [-5000, -4000, -4000], [2000, 3000, 500], [0, 0, 0])) == (
        [2000, 3000, 500], [0, LANE, 0], 0, 0, 1, {LANE: 0})
    # a staircase of 10 events, each crossing all the others: one per lane up to the last lane,
    # where the tenth is clipped to the ninth's end
    f = _fit(how, [1000 * i for i in range(10)], [10_000] * 10, [4] * 10)
    assert _summary(f) == ([10_000] * 9 + [9000], [4 + min(i, MAX_LANES) * LANE for i in range(10)], 1, 1000, 9,
                           {4 + k * LANE: 4 for k in range(1, MAX_LANES + 1)})
    # empty input
    assert _summary(_fit(how, [], [], [])) == ([], [], 0, 0, 0, {})


@pytest.mark.parametrize("how", ["native", "python"])
def test_known_answers_on_perfettos_grid(how: str) -> None:
    """Epoch times: Perfetto reads BASE + 100 ns as BASE and BASE + 1100 as BASE + 1000 (0.25 µs
    doubles), BASE + 130 as BASE + 320 (.25 µs, × 1000 on the 256 ns grid of doubles near 1.8e18)."""
    # a child truly ending with its parent starts later on the grid: cut to the parent's end there
    assert _summary(_fit(how, [BASE + 100, BASE + 130], [1000, 970], [1, 1])) == (
        [1000, 680], [1, 1], 1, 290, 0, {})
    # the next slice truly starts where this ends but earlier on the grid: this one ends there
    assert _summary(_fit(how, [BASE, BASE + 1100], [1100, 500], [1, 1])) == ([1000, 500], [1, 1], 1, 100, 0, {})
    # a track id above 2^22: lanes go above it
    big = (1 << 30) + 5
    assert _summary(_fit(how, [BASE, BASE + 500_000], [1000_000, 1000_000], [big, big])) == (
        [1000_000, 1000_000], [big, big + (1 << 31)], 0, 0, 1, {big + (1 << 31): big})


def _random(rng: np.random.Generator, case: int) -> tuple[np.ndarray, ...]:
    """Trees, crossing overlaps, ties, zero and negative durations, back-to-back runs, up to four
    threads, around 0, negative or epoch times."""
    base = [BASE, 0, -(10**12), BASE - 10**9][case % 4]
    ts: list[int] = []
    dur: list[int] = []
    trk: list[int] = []
    for track in rng.choice([0, 1, 7, 40_000, (1 << 22) - 1], size=int(rng.integers(1, 5)), replace=False).tolist():
        t = base + int(rng.integers(0, 10**6))
        for _ in range(int(rng.integers(1, 30))):
            kind = int(rng.integers(0, 5))
            if kind == 0:  # a tree: children nested, sticking out by a few ns, or touching
                span = int(rng.integers(500, 20_000))
                ev = [(t, span)]
                c = t + int(rng.integers(0, 300))
                for _ in range(int(rng.integers(0, 6))):
                    length = int(rng.integers(0, span // 2 + 1))
                    ev.append((c, length + int(rng.integers(-3, 4))))
                    c += length + int(rng.integers(-200, 600))
            elif kind == 1:  # crossing overlaps
                ev = [(t + int(rng.integers(0, 4000)), int(rng.integers(-5, 4000))) for _ in range(int(rng.integers(2, 12)))]
            elif kind == 2:  # ties
                d = int(rng.integers(0, 3000))
                ev = [(t, d), (t, d), (t, int(rng.integers(0, 3000))), (t, 0)]
            elif kind == 3:  # back to back
                ev = []
                c = t
                for _ in range(int(rng.integers(2, 8))):
                    d = int(rng.integers(0, 2000))
                    ev.append((c, d))
                    c += d
            else:  # a staircase deeper than the lanes
                ev = [(t + 100 * i, 5000) for i in range(int(rng.integers(2, 14)))]
            ts += [s for s, _ in ev]
            dur += [d for _, d in ev]
            trk += [track] * len(ev)
            t = max(s + max(d, 0) for s, d in ev) + int(rng.integers(-500, 3000))
    n = len(ts)
    perm = rng.permutation(n)  # input order is not sweep order
    return (np.asarray(ts, np.int64)[perm], np.asarray(dur, np.int64)[perm], np.asarray(trk, np.int64)[perm],
            rng.integers(0, 3, n).astype(np.int8), rng.random(n) < 0.3)


def test_random_traces_match_the_reference() -> None:
    rng = np.random.default_rng(20261127)
    shortened = moved = lanes = deep = 0
    for case in range(300):
        ts, dur, trk, prio, stay = _random(rng, case)
        keep = stay if case % 3 else None
        # the C code ran (None would mean the Python fallback)
        assert native.fit(ts, dur, trk, prio, keep, np.empty(len(ts), np.int64), np.empty(len(ts), np.int64),
                          LANE_SHIFT, MAX_LANES) is not None
        got = _summary(_fit("native", ts, dur, trk, prio, keep))
        assert got == _summary(_fit("python", ts, dur, trk, prio, keep)), case
        shortened, moved, lanes = shortened + got[2], moved + got[4], lanes + len(got[5])
        deep += any(t >> LANE_SHIFT == MAX_LANES for t in got[5])
    assert shortened > 300 and moved > 300 and lanes > 300 and deep > 20  # every branch was reached


def test_outside_the_native_range_the_python_code_runs() -> None:
    out = np.empty(2, np.int64), np.empty(2, np.int64)
    cases = [  # (ts, dur, track)
        ([1 << 62, (1 << 62) + 10], [100, 100], [0, 0]),  # beyond 2^61 ns
        ([0, 10], [1 << 62, 100], [0, 0]),  # a duration beyond 2^61 ns
        ([0, 5], [100, 100], [1 << 60, 1 << 60]),  # lanes beyond int64
        ([-(10**17), 10**12], [100, 100], [0, 0]),  # the text path beyond a double's 53 bits
    ]
    for ts, dur, trk in cases:
        args = [np.asarray(x, np.int64) for x in (ts, dur, trk)]
        assert native.fit(*args, np.ones(2, np.int8), None, *out, LANE_SHIFT, MAX_LANES) is None
        assert _summary(_fit("native", ts, dur, trk)) == _summary(_fit("python", ts, dur, trk))
    # at the edges of the range (long-double and text paths): the C code runs, and agrees
    edges = [([BASE, 1 << 61], [1 << 61, -(1 << 61)]), ([-(1 << 53) + 2000, (1 << 53) - 2000], [-(1 << 61), 1 << 61])]
    for ts, dur in edges:
        args = [np.asarray(x, np.int64) for x in (ts, dur, [3, 3])]
        assert native.fit(*args, np.ones(2, np.int8), None, *out, LANE_SHIFT, MAX_LANES) is not None
        assert _summary(_fit("native", ts, dur, [3, 3])) == _summary(_fit("python", ts, dur, [3, 3]))
    # priorities wider than int8 are converted when they fit, else the Python code runs
    for prio in (np.asarray([5, 1000]), np.asarray([0.5, 1.0]), np.asarray([2, 1], np.int64)):
        a = perfetto_fit.fit(np.asarray([0, 500]), np.asarray([1000, 1000]), np.zeros(2, np.int64), prio)
        saved = perfetto_fit._native
        perfetto_fit._native = None
        try:
            b = perfetto_fit.fit(np.asarray([0, 500]), np.asarray([1000, 1000]), np.zeros(2, np.int64), prio)
        finally:
            perfetto_fit._native = saved
        assert _summary(a) == _summary(b) and a.moved == 1


def test_bad_arguments_are_refused_with_one_line() -> None:
    n = 4
    i64, pr, st = np.zeros(n, np.int64), np.ones(n, np.int8), np.zeros(n, bool)

    def call(*over: tuple[int, object], shift: int = LANE_SHIFT, lanes: int = MAX_LANES) -> None:
        args: list[object] = [i64, i64.copy(), i64.copy(), pr, st, np.empty(n, np.int64), np.empty(n, np.int64)]
        for k, v in over:
            args[k] = v
        native.fit(*args, shift, lanes)

    bad: list[tuple[type[Exception], str, tuple[int, object]]] = [
        (ValueError, "dur has 3 items where ts has 4", (1, np.zeros(3, np.int64))),
        (ValueError, "stay has 5 items", (4, np.zeros(5, bool))),
        (TypeError, "ts must be a one-dimensional int64", (0, np.zeros(n, np.int32))),
        (TypeError, "track must be a one-dimensional int64", (2, np.zeros(n, np.float64))),
        (TypeError, "priority must be a one-dimensional int8", (3, np.ones(n, np.int64))),
        (TypeError, "stay must be a one-dimensional bool", (4, np.zeros(n, np.int8))),
        (TypeError, "ts must be a one-dimensional int64", (0, np.zeros((2, 2), np.int64))),
        (TypeError, "dur must be a C-contiguous int64", (1, np.zeros(2 * n, np.int64)[::2])),
        (TypeError, "out_dur must be a C-contiguous writable int64", (5, bytes(8 * n))),
        (TypeError, "priority must be a C-contiguous int8", (3, [1, 1, 1, 1])),
        (ValueError, "out_track shares memory with ts", (6, i64)),
    ]
    for kind, msg, over in bad:
        with pytest.raises(kind, match=msg) as info:
            call(over)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="lane_shift must be in"):
        call(shift=62)
    with pytest.raises(ValueError, match="max_lanes in"):
        call(lanes=-1)


def test_threads_share_nothing() -> None:
    """Fits in several threads at once (the GIL released around the C loops) give each thread
    the result of a fit alone."""
    rng = np.random.default_rng(5)
    cases = [_random(rng, c) for c in range(8)]
    want = [_summary(_fit("python", *c)) for c in cases]
    got: list[list[tuple[object, ...]]] = [[] for _ in range(4)]

    def work(k: int) -> None:
        for _ in range(20):
            got[k].append(tuple(_summary(_fit("native", *c)) for c in cases))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == tuple(want) for rows in got for r in rows) and sum(map(len, got)) == 80


def test_the_switch_forces_the_python_code() -> None:
    code = "from openmsprof.export.ascend_pt import perfetto_fit as p; print(p._native is None)"
    env = {k: v for k, v in os.environ.items() if k != "OPENMSPROF_PERFETTO_FIT_PYTHON"}
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    forced = subprocess.run([sys.executable, "-c", code], env={**env, "OPENMSPROF_PERFETTO_FIT_PYTHON": "1"},
                            capture_output=True, text=True, check=True)
    assert (plain.stdout.strip(), forced.stdout.strip()) == ("False", "True")
