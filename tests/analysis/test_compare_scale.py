"""``compare`` at scale: per-iteration samples kept sparse (analysis/samples.py) and the bootstrap
CI of large samples drawn m-out-of-n (analysis/stats.py).  Two 10 M-record jobs took 12.5 GB and
did not finish in 14 minutes; they now take 0.86 GB and 52 s (benchmarks/README.md, session 19)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np

from openmsprof.analysis import samples, stats


def test_sparse_samples_equal_the_dense_table() -> None:
    """Every operator's samples, densified, equal its row of the (operators × iterations) table
    the dense bincount built, bit for bit (the same sums in the same order)."""
    rng = np.random.default_rng(7)
    for n_tasks, n_groups, n_iter in ((1, 1, 1), (500, 7, 40), (20_000, 50, 3_000), (3_000, 300, 5)):
        labels = rng.integers(0, n_groups, n_tasks).astype(np.int64) * 3 + 1  # string ids, not 0..n
        it = rng.integers(0, n_iter, n_tasks).astype(np.int64)
        dur = rng.choice([0, 1, 7, 1_000, 123_456_789], n_tasks).astype(np.int64)
        start = np.sort(rng.integers(0, 10**9, n_tasks)).astype(np.int64)
        first = np.full(n_iter, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, it, start)
        uniq = np.unique(labels)
        names = [f"op{u}" for u in uniq.tolist()]
        got = samples._group(labels, it, n_iter, dur, start, first, names, None)
        g = np.unique(labels, return_inverse=True)[1].ravel()
        dense = np.bincount(g * n_iter + it, weights=dur.astype(np.float64),
                            minlength=uniq.size * n_iter).reshape(uniq.size, n_iter)
        assert list(got) == names
        for k, name in enumerate(names):
            agg = got[name]
            assert agg.samples.dtype == np.float64 and np.array_equal(agg.samples, dense[k]), name
            assert agg.count == int((g == k).sum()) and agg.total_ns == int(dur[g == k].sum())
            assert agg.at is not None and len(agg.at) <= agg.count  # only the iterations it ran in


def test_bootstrap_ci_of_large_samples_has_the_width_of_n() -> None:
    """300 k values a side (m-out-of-n): the CI holds the true shift and is as wide as the median
    difference's spread at n (not at the 20 k values a resample draws: √15 ≈ 3.9 times wider)."""
    rng = np.random.default_rng(3)
    n, sigma = 300_000, 5.0
    x = rng.normal(100.0, sigma, n)
    y = rng.normal(101.0, sigma, n)
    lo, hi = stats.bootstrap_median_diff_ci(x, y)
    expected = 2 * 1.96 * math.sqrt(math.pi / 2) * sigma * math.sqrt(2 / n)
    assert lo < 1.0 < hi
    assert 0.7 * expected < hi - lo < 1.4 * expected, (hi - lo, expected)
    assert stats.bootstrap_median_diff_ci(x, y) == (lo, hi)  # seeded


def test_small_samples_draw_as_before() -> None:
    """Up to ``DRAW_SIZE`` values the resamples are whole draws, as they always were."""
    rng = np.random.default_rng(4)
    x, y = rng.normal(10, 1, 5_000), rng.normal(11, 1, 7_000)
    b = max(200, min(2000, stats.DRAW_VALUES // 7_000))
    g = np.random.default_rng(0)
    mx = np.median(x[g.integers(0, x.size, (b, x.size))], axis=1)
    my = np.median(y[g.integers(0, y.size, (b, y.size))], axis=1)
    want = np.percentile(my - mx, [2.5, 97.5])
    assert stats.bootstrap_median_diff_ci(x, y) == (float(want[0]), float(want[1]))


_PEAK = """
import sys
import numpy as np
from openmsprof.analysis import stats


def hwm():  # this process's peak RSS in KB
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


rng = np.random.default_rng(1)
x, y = rng.normal(100, 5, 1_000_000), rng.normal(100, 5, 1_000_000)
before = hwm()
stats.bootstrap_median_diff_ci(x, y)
print((hwm() - before) // 1024)
"""


def test_bootstrap_memory_of_a_million_values() -> None:
    """Resampling 1 M values whole, 200 times, held 3.2 GB; m-out-of-n draws hold ~0.1 GB."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_PEAK)], capture_output=True, text=True,
                         check=True, timeout=300)
    grew_mb = int(out.stdout.strip())
    assert grew_mb < 300, f"the bootstrap grew the peak RSS by {grew_mb} MB"
