"""Before/after comparison of two profiling jobs (docs/internals.md1, the seed's Mish → LeakyReLU case).

Rows compare total device and API time, every operator type, every operator (matched by name,
then — for renamed or fused operators — by type in execution order) and every API.  Each row's
verdict comes from per-iteration samples (:mod:`openmsprof.analysis.samples`): a two-sided
Mann-Whitney U test at ``alpha`` plus a minimum relative change of the median ``threshold``,
with a bootstrap CI of the median difference (:mod:`openmsprof.analysis.stats`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from openmsprof.analysis.samples import Agg, JobSamples, load_samples
from openmsprof.analysis.stats import Test, judge
from openmsprof.config.errors import ConfigError, PathError
from openmsprof.export.jobdb import find_jobs, open_job

OVERALL, OP_TYPE, OP, API = "overall", "op_type", "op", "api"
DEVICE_TIME, API_TIME = "Total device time", "Total API time"
EMPTY = np.empty(0, dtype=np.float64)


@dataclass(frozen=True)
class Row:
    """One compared item; times in ns, shares in % of the job's device (or API) time."""

    section: str
    name: str
    category: str  # op type (op rows), API level (api rows), else ""
    match: str  # "name", "type" (renamed operator paired by type) or "" (one side only)
    base_count: int
    new_count: int
    base_total_ns: int
    new_total_ns: int
    base_share: float
    new_share: float
    test: Test

    @property
    def delta_total_ns(self) -> int:
        return self.new_total_ns - self.base_total_ns

    @property
    def verdict(self) -> str:
        return self.test.verdict

    def to_dict(self) -> dict[str, Any]:
        t = self.test
        return {
            "section": self.section, "name": self.name, "category": self.category,
            "match": self.match, "base_count": self.base_count, "new_count": self.new_count,
            "base_total_us": self.base_total_ns / 1e3, "new_total_us": self.new_total_ns / 1e3,
            "delta_total_us": self.delta_total_ns / 1e3,
            "base_avg_us": _avg(self.base_total_ns, self.base_count),
            "new_avg_us": _avg(self.new_total_ns, self.new_count),
            "base_share_pct": round(self.base_share, 3), "new_share_pct": round(self.new_share, 3),
            "base_samples": t.n_base, "new_samples": t.n_new,
            "base_median_us": _us(t.median_base), "new_median_us": _us(t.median_new),
            "median_change_pct": _pct(t.change),
            "ci_low_us": _us(t.ci_low), "ci_high_us": _us(t.ci_high),
            "p_value": None if t.p != t.p else float(f"{t.p:.4g}"), "verdict": t.verdict,
        }


@dataclass
class Comparison:
    """The comparison of ``base`` and ``new``; ``verdict`` is the total device time's."""

    base: Path
    new: Path
    alpha: float
    threshold: float
    base_iterations: int
    new_iterations: int
    rows: list[Row] = field(default_factory=list)

    def row(self, section: str, name: str) -> Row:
        for r in self.rows:
            if r.section == section and r.name == name:
                return r
        raise KeyError((section, name))

    def section(self, section: str) -> list[Row]:
        return [r for r in self.rows if r.section == section]

    @property
    def verdict(self) -> str:
        return self.row(OVERALL, DEVICE_TIME).verdict

    def to_rows(self) -> list[dict[str, Any]]:
        """Every row as a flat dict (the CSV/JSON columns)."""
        return [r.to_dict() for r in self.rows]

    def to_dataframe(self) -> Any:
        """The rows as a pandas DataFrame (pandas must be installed)."""
        import pandas as pd

        return pd.DataFrame(self.to_rows())


def _avg(total_ns: int, count: int) -> float | None:
    return round(total_ns / count / 1e3, 3) if count else None


def _us(ns: float) -> float | None:
    return None if ns != ns else round(ns / 1e3, 3)


def _pct(change: float) -> float | None:
    if change != change:
        return None
    return round(100.0 * change, 3) if abs(change) != float("inf") else None


def resolve_job(path: Path | str, what: str) -> Path:
    """The single job at ``path`` (a job dir, or a folder holding exactly one job)."""
    jobs = find_jobs(Path(path))
    if len(jobs) != 1:
        raise PathError(f"{what} {str(path)!r} holds {len(jobs)} jobs; pass one PROF_* directory")
    return jobs[0].absolute()


def _row(section: str, name: str, category: str, match: str, b: Agg | None, n: Agg | None,
         b_all: int, n_all: int, alpha: float, threshold: float) -> Row:
    bs = b.samples if b is not None else EMPTY
    ns = n.samples if n is not None else EMPTY
    bc, bt = (b.count, b.total_ns) if b is not None else (0, 0)
    nc, nt = (n.count, n.total_ns) if n is not None else (0, 0)
    return Row(section, name, category, match, bc, nc, bt, nt,
               100.0 * bt / b_all if b_all else 0.0, 100.0 * nt / n_all if n_all else 0.0,
               judge(bs, ns, alpha=alpha, threshold=threshold))


def _match_ops(base: dict[str, Agg], new: dict[str, Agg]) -> list[tuple[str, str, Agg | None,
                                                                         Agg | None]]:
    """(label, match, base, new): same name first, then leftovers paired by type in order."""
    out: list[tuple[str, str, Agg | None, Agg | None]] = [
        (k, "name", base[k], new[k]) for k in base if k in new]
    left_b = {k: v for k, v in base.items() if k not in new}
    left_n = {k: v for k, v in new.items() if k not in base}
    for op_type in sorted({v.op_type for v in left_b.values()} & {v.op_type for v in left_n.values()}):
        bs = sorted((k for k, v in left_b.items() if v.op_type == op_type), key=lambda k: left_b[k].first_ns)
        ns = sorted((k for k, v in left_n.items() if v.op_type == op_type), key=lambda k: left_n[k].first_ns)
        for kb, kn in zip(bs, ns, strict=False):
            out.append((f"{kb} → {kn}", "type", left_b.pop(kb), left_n.pop(kn)))
    out += [(k, "", v, None) for k, v in left_b.items()]
    out += [(k, "", None, v) for k, v in left_n.items()]
    return out


def _size(a: Agg | None) -> int:
    return a.total_ns if a is not None else 0


def compare_samples(b: JobSamples, n: JobSamples, *, alpha: float = 0.05,
                    threshold: float = 0.05) -> Comparison:
    """Compare two loaded jobs (see :func:`compare_jobs`)."""
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"--alpha must be between 0 and 1 (exclusive), got {alpha}")
    if not 0.0 <= threshold < 10.0:
        raise ConfigError(f"--threshold must be a fraction between 0 and 10, got {threshold}")
    kw = {"alpha": alpha, "threshold": threshold}
    cmp = Comparison(b.job, n.job, alpha, threshold, b.iterations, n.iterations)
    bt, nt = b.total_ns, n.total_ns
    dev_b = Agg(sum(a.count for a in b.op_types.values()), bt, b.per_iteration)
    dev_n = Agg(sum(a.count for a in n.op_types.values()), nt, n.per_iteration)
    cmp.rows.append(_row(OVERALL, DEVICE_TIME, "", "name", dev_b, dev_n, bt, nt, **kw))
    if b.apis or n.apis:
        api_b = Agg(sum(a.count for a in b.apis.values()), b.api_total_ns, b.launch)
        api_n = Agg(sum(a.count for a in n.apis.values()), n.api_total_ns, n.launch)
        cmp.rows.append(_row(OVERALL, API_TIME, "", "name", api_b, api_n,
                             b.api_total_ns, n.api_total_ns, **kw))
    types = sorted(b.op_types.keys() | n.op_types.keys(),
                   key=lambda k: (-max(_size(b.op_types.get(k)), _size(n.op_types.get(k))), k))
    for k in types:
        bo, no = b.op_types.get(k), n.op_types.get(k)
        cmp.rows.append(_row(OP_TYPE, k, k, "name" if bo and no else "", bo, no, bt, nt, **kw))
    ops = _match_ops(b.ops, n.ops)
    ops.sort(key=lambda m: (-max(_size(m[2]), _size(m[3])), m[0]))
    for label, match, bo, no in ops:
        one = bo if bo is not None else no
        cat = one.op_type if one is not None else ""
        cmp.rows.append(_row(OP, label, cat, match, bo, no, bt, nt, **kw))
    apis = sorted(b.apis.keys() | n.apis.keys(),
                  key=lambda k: (-max(_size(b.apis.get(k)), _size(n.apis.get(k))), k))
    for key in apis:
        ba, na = b.apis.get(key), n.apis.get(key)
        cmp.rows.append(_row(API, key[1], key[0], "name" if ba and na else "", ba, na,
                             b.api_total_ns, n.api_total_ns, **kw))
    return cmp


def compare_jobs(base: Path | str, new: Path | str, *, alpha: float = 0.05,
                 threshold: float = 0.05) -> Comparison:
    """Compare job ``new`` against job ``base`` (importing either first if needed).

    ``alpha`` is the significance level of the per-row U tests; ``threshold`` the minimum
    relative change of the per-iteration median (0.05 = 5 %) for a "faster"/"slower" verdict.
    """
    loaded = []
    for path, what in ((base, "base job"), (new, "new job")):
        with open_job(resolve_job(path, what)) as db:
            loaded.append(load_samples(db))
    return compare_samples(loaded[0], loaded[1], alpha=alpha, threshold=threshold)
