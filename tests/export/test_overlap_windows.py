"""step_trace_time's per-window sums, all windows at once (``summary_cols._clip_sums``, ``_spans``,
and ``summary_cols.step_sums`` in C and numpy), equal the per-window reference on random tracks
and windows, edges included."""

from __future__ import annotations

import numpy as np
import pytest

from openmsprof.export.ascend_pt import overlap, summary_cols
from openmsprof.export.ascend_pt.overlap import Overlap, gaps, merge


def _windows(rng: np.random.Generator, iv: overlap.Intervals, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random windows, half of their edges on interval boundaries (and some empty windows)."""
    edges = np.concatenate((iv[0], iv[1], [0, 10_000])) if len(iv[0]) else np.asarray([0, 10_000])
    pick = rng.random((n, 2)) < 0.5
    a = np.where(pick[:, 0], rng.choice(edges, n), rng.integers(-100, 10_100, n))
    b = np.where(pick[:, 1], rng.choice(edges, n), rng.integers(-100, 10_100, n))
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    hi[::7] = lo[::7]
    return lo.astype(np.int64), hi.astype(np.int64)


def _busy_reference(busy: overlap.Intervals, lo: int, hi: int) -> tuple[int, int]:
    b0 = int(np.searchsorted(busy[1], lo, side="right"))
    b1 = int(np.searchsorted(busy[0], hi, side="left"))
    if b1 <= b0:
        return 0, 0
    first, last = max(int(busy[0][b0]), lo), min(int(busy[1][b1 - 1]), hi)
    return last - first, first - lo


@pytest.mark.parametrize("how", ["numpy", "native"])
def test_all_windows_at_once_equal_one_window_at_a_time(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "native":
        if summary_cols.NATIVE is None:
            pytest.skip("_summary_cols not built")
    else:
        monkeypatch.setattr(summary_cols, "NATIVE", None)
    rng = np.random.default_rng(5)
    for trial in range(300):
        n = int(rng.integers(0, 40))
        ts = rng.integers(0, 10_000, n).astype(np.int64)
        end = ts + rng.integers(0, 600 if trial % 3 else 5, n)
        comm = rng.random(n) < 0.3
        ov = Overlap.of_tasks(ts, end, comm)
        tracks = [iv for _name, iv in ov.tracks()] + [merge(ts, end), gaps(merge(ts, end))]
        lo, hi = _windows(rng, merge(ts, end), 25)
        for iv in tracks:
            want = [summary_cols._clip_sum(iv, a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
            assert summary_cols._clip_sums(iv, lo, hi) == want
        stages, preps = summary_cols._spans(ov.busy, lo, hi)
        assert list(zip(stages, preps, strict=True)) == [_busy_reference(ov.busy, a, b)
                                                          for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
        sums = summary_cols.step_sums(tracks[:4], ov.busy, lo, hi)
        assert sums == [[*(summary_cols._clip_sum(iv, a, b) for iv in tracks[:4]), *_busy_reference(ov.busy, a, b)]
                        for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
