"""The U test, the bootstrap CI and the verdict rule, against known values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openmsprof.analysis import stats

# (x, y, U of x, two-sided p with continuity correction, without) — computed with
# scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic") (scipy 1.x)
KNOWN = [
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 0.0, 0.012185780355344813, 0.009023438818080326),
    ([1, 2, 2, 3, 3, 3, 4], [2, 3, 3, 4, 5, 5, 6, 7], 10.5, 0.04393680322463132,
     0.03808405677335917),
    ([3.1, 2.2, 5.5, 1.0, 4.4, 2.2], [2.2, 6.0, 7.5, 3.1, 8.8], 6.5, 0.13954714372531585,
     0.1164565298413952),
    ([5, 1, 4, 2, 3, 9, 8, 7], [6, 10, 11, 12, 2, 3], 15.0, 0.271434521575172,
     0.24423883176376904),
]


@pytest.mark.parametrize(("x", "y", "u", "p", "p_nocc"), KNOWN)
def test_u_test_matches_scipy_reference(x: list[float], y: list[float], u: float, p: float,
                                        p_nocc: float) -> None:
    r = stats.mann_whitney_u(x, y)
    assert r.u == u
    assert r.p == pytest.approx(p, rel=1e-9)
    assert stats.mann_whitney_u(x, y, continuity=False).p == pytest.approx(p_nocc, rel=1e-9)
    assert stats.mann_whitney_u(y, x).p == pytest.approx(p, rel=1e-9)  # symmetric


def test_u_test_by_hand_no_ties() -> None:
    # U = 0, mean 12.5, variance 5*5*11/12; z = (12.5 - 0.5) / sqrt(variance)
    z = 12.0 / math.sqrt(25 * 11 / 12)
    r = stats.mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert r.z == pytest.approx(z)
    assert r.p == pytest.approx(math.erfc(z / math.sqrt(2)))


def test_u_test_all_equal_and_empty() -> None:
    assert stats.mann_whitney_u([1, 1, 1], [1, 1, 1, 1]).p == 1.0
    with pytest.raises(ValueError, match="non-empty"):
        stats.mann_whitney_u([], [1.0])


def test_u_test_against_scipy_when_installed() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.integers(0, 20, rng.integers(2, 40)).astype(float)
        y = rng.integers(0, 25, rng.integers(2, 40)).astype(float)
        ref = scipy_stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic")
        assert stats.mann_whitney_u(x, y).p == pytest.approx(ref.pvalue, rel=1e-9)


def test_rankdata_averages_ties() -> None:
    ranks, ties = stats.rankdata([10, 20, 20, 5, 20])
    assert ranks.tolist() == [2.0, 4.0, 4.0, 1.0, 4.0]
    assert sorted(ties.tolist()) == [1.0, 1.0, 3.0]


def test_bootstrap_ci_covers_the_shift_and_is_reproducible() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(100.0, 5.0, 200)
    y = rng.normal(130.0, 5.0, 200)
    lo, hi = stats.bootstrap_median_diff_ci(x, y)
    assert lo < 30.0 < hi and lo > 25.0 and hi < 35.0
    assert stats.bootstrap_median_diff_ci(x, y) == (lo, hi)


def test_judge_verdicts() -> None:
    rng = np.random.default_rng(2)
    base = rng.normal(1000.0, 20.0, 30)
    assert stats.judge(base, base * 1.5, alpha=0.05, threshold=0.05).verdict == stats.SLOWER
    fast = stats.judge(base, base * 0.5, alpha=0.05, threshold=0.05)
    assert fast.verdict == stats.FASTER and fast.change == pytest.approx(-0.5)
    assert fast.ci_high < 0.0 and fast.p < 1e-6
    # significant but smaller than the threshold → no significant change
    small = stats.judge(base, base * 1.02, alpha=0.05, threshold=0.05)
    assert small.verdict == stats.NO_CHANGE
    assert stats.judge(base, base * 1.02, alpha=0.05, threshold=0.01).verdict == stats.SLOWER
    assert stats.judge(base, base, alpha=0.05, threshold=0.0).verdict == stats.NO_CHANGE
    assert stats.judge(base, [], alpha=0.05, threshold=0.05).verdict == stats.REMOVED
    assert stats.judge([], base, alpha=0.05, threshold=0.05).verdict == stats.ADDED
    assert stats.judge([1.0], [2.0, 3.0], alpha=0.05, threshold=0.05).verdict == stats.TOO_FEW
