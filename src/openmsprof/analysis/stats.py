"""Two-sample statistics for before/after comparisons (numpy only).

* :func:`mann_whitney_u` — the two-sided Mann-Whitney U test, normal approximation with tie
  correction and continuity correction (the same numbers as
  ``scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic")``).
* :func:`bootstrap_median_diff_ci` — a percentile bootstrap confidence interval of
  ``median(y) - median(x)`` (seeded, so a report is reproducible).
* :func:`judge` — the verdict of one comparison at ``alpha`` and a minimum relative effect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FASTER = "faster"
SLOWER = "slower"
NO_CHANGE = "no significant change"
TOO_FEW = "too few samples"
ADDED = "added"
REMOVED = "removed"

Samples = npt.NDArray[np.float64]


def rankdata(values: npt.ArrayLike) -> tuple[Samples, Samples]:
    """Average ranks (1-based) of ``values`` and the sizes of its tie groups."""
    a = np.asarray(values, dtype=np.float64).ravel()
    order = np.argsort(a, kind="mergesort")
    s = a[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]]) if s.size else np.empty(0, np.int64)
    sizes = np.diff(np.r_[starts, s.size])
    avg = starts + (sizes + 1) / 2.0  # ranks of a tie group starts+1 .. starts+size, averaged
    ranks = np.empty(a.size, dtype=np.float64)
    ranks[order] = np.repeat(avg, sizes)
    return ranks, sizes.astype(np.float64)


@dataclass(frozen=True)
class UTest:
    """Result of :func:`mann_whitney_u`: U of the first sample, z score and two-sided p."""

    u: float
    z: float
    p: float


def mann_whitney_u(x: npt.ArrayLike, y: npt.ArrayLike, *, continuity: bool = True) -> UTest:
    """Two-sided Mann-Whitney U test of ``x`` against ``y`` (normal approximation, ties corrected).

    Raises ``ValueError`` when either sample is empty.
    """
    xa = np.asarray(x, dtype=np.float64).ravel()
    ya = np.asarray(y, dtype=np.float64).ravel()
    n1, n2 = xa.size, ya.size
    if n1 == 0 or n2 == 0:
        raise ValueError("mann_whitney_u needs two non-empty samples")
    ranks, ties = rankdata(np.concatenate([xa, ya]))
    n = n1 + n2
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    mu = n1 * n2 / 2.0
    tie_term = float((ties ** 3 - ties).sum()) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0.0:  # every value equal: no evidence of any difference
        return UTest(u1, 0.0, 1.0)
    diff = abs(u1 - mu) - (0.5 if continuity else 0.0)
    z = max(diff, 0.0) / math.sqrt(var)
    p = min(1.0, math.erfc(z / math.sqrt(2.0)))
    return UTest(u1, z, p)


#: values one batch of resamples holds (the draw's indices and values)
DRAW_VALUES = 4_000_000
#: above this many values a sample is resampled m-out-of-n: each resample draws this many
DRAW_SIZE = 20_000


def bootstrap_median_diff_ci(x: npt.ArrayLike, y: npt.ArrayLike, *, confidence: float = 0.95,
                             resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of ``median(y) - median(x)``.

    Resamples are capped so that one draw holds at most ``DRAW_VALUES`` values (large samples
    need few, at least 200).  A sample of more than ``DRAW_SIZE`` values is resampled
    ``DRAW_SIZE`` at a time (the m-out-of-n bootstrap), each resample's median moved from the
    sample's own by its deviation × sqrt(m / n), the spread of a median of n values: so a
    comparison of millions of values holds a few MB, where resampling them whole took GBs.
    """
    xa = np.asarray(x, dtype=np.float64).ravel()
    ya = np.asarray(y, dtype=np.float64).ravel()
    if xa.size == 0 or ya.size == 0:
        raise ValueError("bootstrap_median_diff_ci needs two non-empty samples")
    m_x, m_y = min(xa.size, DRAW_SIZE), min(ya.size, DRAW_SIZE)
    b = max(200, min(resamples, DRAW_VALUES // max(m_x, m_y)))
    rng = np.random.default_rng(seed)
    mx = _resampled_medians(xa, m_x, b, rng)
    my = _resampled_medians(ya, m_y, b, rng)
    tail = (1.0 - confidence) / 2.0 * 100.0
    lo, hi = np.percentile(my - mx, [tail, 100.0 - tail])
    return float(lo), float(hi)


def _resampled_medians(a: Samples, m: int, b: int, rng: np.random.Generator) -> Samples:
    """``b`` bootstrap medians of ``a``, each of ``m`` draws (``m`` < n: rescaled to n draws)."""
    med = np.median(a[rng.integers(0, a.size, (b, m))], axis=1)
    if m == a.size:
        return med  # type: ignore[no-any-return]
    center = float(np.median(a))
    return center + (med - center) * math.sqrt(m / a.size)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Test:
    """One base-vs-new comparison of samples (values in ns)."""

    n_base: int
    n_new: int
    median_base: float
    median_new: float
    ci_low: float
    ci_high: float
    p: float
    change: float  # (median_new - median_base) / median_base; inf when the base median is 0
    verdict: str


def judge(base: npt.ArrayLike, new: npt.ArrayLike, *, alpha: float, threshold: float) -> Test:
    """Compare two samples: significant when p < ``alpha`` and |relative change| ≥ ``threshold``."""
    xa = np.asarray(base, dtype=np.float64).ravel()
    ya = np.asarray(new, dtype=np.float64).ravel()
    nan = float("nan")
    if xa.size == 0 or ya.size == 0:
        verdict = REMOVED if ya.size == 0 and xa.size else ADDED if ya.size else TOO_FEW
        return Test(xa.size, ya.size, _median(xa), _median(ya), nan, nan, nan, nan, verdict)
    mb, mn = float(np.median(xa)), float(np.median(ya))
    change = (mn - mb) / mb if mb else (0.0 if mn == mb else math.inf)
    if xa.size < 2 or ya.size < 2:
        return Test(xa.size, ya.size, mb, mn, nan, nan, nan, change, TOO_FEW)
    p = mann_whitney_u(xa, ya).p
    lo, hi = bootstrap_median_diff_ci(xa, ya, confidence=1.0 - alpha)
    verdict = NO_CHANGE
    if p < alpha and abs(change) >= threshold:
        verdict = SLOWER if change > 0 else FASTER
    return Test(xa.size, ya.size, mb, mn, lo, hi, p, change, verdict)


def _median(a: Samples) -> float:
    return float(np.median(a)) if a.size else float("nan")
