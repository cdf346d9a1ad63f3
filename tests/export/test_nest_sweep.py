"""The operator nesting sweep in C (export/ascend_pt/_nest_sweep.c) against its Python reference
(``nesting.sweep``): the same parents and depths on hand-built traces with known answers and on
random traces with several threads, equal starts, zero durations, back-to-back events, partial
overlaps, negative and huge times; bad columns are refused with one line."""

from __future__ import annotations

import numpy as np
import pytest

from openmsprof.export.ascend_pt import nesting

native = pytest.importorskip("openmsprof.export.ascend_pt._nest_sweep",
                             reason="the C extension was not built (no compiler): the Python sweep runs")


def _parents(ts: list[int], dur: list[int], tid: list[int], how: object) -> tuple[list[int], list[int]]:
    saved = nesting._native
    nesting._native = how  # type: ignore[assignment]
    try:
        p, d = nesting.parents(np.asarray(ts, np.int64), np.asarray(dur, np.int64), np.asarray(tid, np.int64),
                               np.ones(len(ts), bool))
    finally:
        nesting._native = saved
    return p.tolist(), d.tolist()


@pytest.mark.parametrize("how", ["native", "python"])
def test_known_trees(how: str) -> None:
    sweep = native.sweep if how == "native" else None
    # thread 1: A [0,100) holds B [10,50) which holds C [20,30); D [50,60) starts where B ends
    # (a sibling of B, not its child); thread 2: E [5,15) alone; F [200,210) after everything
    ts = [0, 10, 20, 50, 5, 200]
    dur = [100, 40, 10, 10, 10, 10]
    tid = [1, 1, 1, 1, 2, 1]
    assert _parents(ts, dur, tid, sweep) == ([-1, 0, 1, 0, -1, -1], [0, 1, 2, 1, 0, 0])
    # equal starts: the longer one is the parent; a zero-length event at a parent's end is outside it
    assert _parents([0, 0, 100], [100, 50, 0], [7, 7, 7], sweep) == ([-1, 0, -1], [0, 1, 0])


def test_random_traces_match_the_reference() -> None:
    rng = np.random.default_rng(20261127)
    for case in range(300):
        n = int(rng.integers(1, 400))
        threads = int(rng.integers(1, 5))
        base = [0, -(10**12), 1_800_000_000_000_000_000][case % 3]
        ts = base + rng.integers(0, 2_000, n)
        dur = rng.integers(0, 400, n) * (rng.random(n) < 0.95)
        if case % 5 == 0:  # back-to-back runs: each event starts where the previous one ended
            ts = base + np.concatenate(([0], np.cumsum(dur[:-1])))
        tid = rng.integers(0, threads, n) * 1_000_003
        a = _parents(ts.tolist(), dur.tolist(), tid.tolist(), native.sweep)
        b = _parents(ts.tolist(), dur.tolist(), tid.tolist(), None)
        assert a == b, case


def test_bad_columns_are_refused() -> None:
    pos = np.arange(3, dtype=np.int64)
    col = np.zeros(3, np.int64)
    out = np.zeros(3, np.int64)
    with pytest.raises(ValueError, match="differ in length"):
        native.sweep(pos, col, col, np.zeros(2, np.int64), np.ones(3, bool), out, out.copy())
    with pytest.raises(ValueError, match="pos must increase"):
        native.sweep(np.asarray([0, 5], np.int64), col, col, col, np.ones(3, bool), out, out.copy())
    with pytest.raises(ValueError, match="pos must increase"):
        native.sweep(np.asarray([1, 1], np.int64), col, col, col, np.ones(3, bool), out, out.copy())
    with pytest.raises(ValueError, match="whole number"):
        native.sweep(pos, col, col, col, np.ones(3, bool), out, np.zeros(5, np.int32))
    with pytest.raises((TypeError, BufferError)):
        native.sweep(pos, col, col, col, np.ones(3, bool), out, bytes(24))  # read-only
