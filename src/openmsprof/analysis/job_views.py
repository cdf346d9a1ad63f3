"""The report's views computed from one read of the job's tasks (:class:`TaskColumns`, shared
with the pattern rules): operator groups against the roofline, per-iteration device time,
device time by op type and by operator name."""

from __future__ import annotations

import numpy as np

from openmsprof.analysis.patterns import TaskColumns, unique_rows
from openmsprof.analysis.rules_patterns import _columns
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.roofline import Ceilings, OpRoof
from openmsprof.parse.costmodel import op_cost

__all__ = ["columns", "iteration_times", "op_roofs", "totals_by"]


def columns(db: JobDB) -> TaskColumns | None:
    """The job's task columns, read once per open database."""
    return _columns(db)


def op_roofs(db: JobDB, cols: TaskColumns, ceil: Ceilings) -> list[OpRoof]:
    """Groups of identical operators (name, type, shapes, dtypes), total time descending."""
    key = np.stack([cols.name, cols.typ, cols.ish, cols.idt, cols.osh, cols.odt], axis=1)
    uniq, inv = unique_rows(key)
    count = np.bincount(inv, minlength=len(uniq))
    total = np.bincount(inv, weights=cols.dur.astype(np.float64), minlength=len(uniq))
    text = db.text
    out = []
    for k in np.argsort(-total, kind="stable").tolist():
        n, t, i, it, o, ot = (text(int(v)) for v in uniq[k])
        cost = op_cost(t, i, it, o, ot)
        out.append(OpRoof(n, t, i, it, o, ot, int(count[k]), int(total[k]), cost,
                          ceil.roof(cost)))
    return out


def iteration_times(cols: TaskColumns) -> list[float]:
    """Device time of each iteration (execute), µs, in order."""
    return (np.bincount(cols.it_index, weights=cols.dur.astype(np.float64)) / 1e3).tolist()


def totals_by(db: JobDB, ids: np.ndarray, cols: TaskColumns) -> list[tuple[str, int, int]]:
    """(text of id, count, total ns) grouped by the string-id column ``ids``, largest first."""
    uniq, inv = np.unique(ids, return_inverse=True)
    inv = inv.ravel()
    count = np.bincount(inv, minlength=len(uniq))
    total = np.bincount(inv, weights=cols.dur.astype(np.float64), minlength=len(uniq))
    order = np.argsort(-total, kind="stable")
    return [(db.text(int(uniq[k])), int(count[k]), int(total[k])) for k in order.tolist()]
