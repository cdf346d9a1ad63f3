"""Per-iteration samples of one job, the raw material of :mod:`openmsprof.analysis.compare`.

An *iteration* is one model execute: the tasks launched by one API call share its
``connectionId`` (``TASK.connectionId`` ↔ ``CANN_API.connectionId`` of ``aclmdlExecute``).
Tasks without a launching API (``connectionId`` −1) fall into the ``STEP_TIME`` step that
contains them, else into one iteration for the whole job.  For each iteration the device time
of every operator type and every operator name is summed, so repeated executes give
independent samples that a rank test can compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from openmsprof.analysis.patterns import NULL_INT, int64_rows
from openmsprof.config.errors import RawDataError
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import summary_host as host
from openmsprof.export.msprof import summary_tasks as tasks

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Agg:
    """Count and total device time of a group (op type, op name or API), with samples."""

    count: int
    total_ns: int
    values: F64  # the samples (``at`` None: per-call durations of APIs, ns), else the sums of the
    #              iterations ``at`` (ops: the others' are 0)
    op_type: str = ""
    first_ns: int = 0  # offset of the first instance in its iteration (to pair renamed ops)
    at: I64 | None = None
    n_iter: int = 0

    @property
    def samples(self) -> F64:
        """Per-iteration sums over every iteration (ops; 0 where it did not run) or per-call
        durations (APIs), ns: made when asked, so a job holds each operator's iterations where
        it ran, not a dense (operators × iterations) table (3.2 GB at 200 × 2 M)."""
        if self.at is None:
            return self.values
        out = np.zeros(self.n_iter, dtype=np.float64)
        out[self.at] = self.values
        return out


@dataclass
class JobSamples:
    """Everything the comparison needs from one job."""

    job: Path
    iterations: int
    total_ns: int  # sum of every task's duration (= the op_statistic totals)
    per_iteration: F64  # device time of each iteration, ns
    op_types: dict[str, Agg] = field(default_factory=dict)
    ops: dict[str, Agg] = field(default_factory=dict)
    apis: dict[tuple[str, str], Agg] = field(default_factory=dict)
    api_total_ns: int = 0
    launch: F64 = field(default_factory=lambda: np.empty(0))  # durations of launching API calls


def _iteration_keys(db: JobDB, conn: I64, start: I64) -> I64:
    """One key per task: its connection id, else −2−step index, else −1."""
    keys = conn.copy()
    loose = keys < 0
    if loose.any() and db.has("STEP_TIME"):
        steps = np.array(db.query("SELECT startNs, endNs FROM STEP_TIME ORDER BY startNs"),
                         dtype=np.int64).reshape(-1, 2)
        idx = np.searchsorted(steps[:, 0], start[loose], side="right") - 1
        inside = (idx >= 0) & (start[loose] <= steps[np.maximum(idx, 0), 1])
        keys[loose] = np.where(inside, -2 - idx, -1)
    return keys


def _group(labels: I64, it: I64, n_iter: int, dur: I64, start: I64, first: I64,
           names: list[str], types: list[str] | None) -> dict[str, Agg]:
    """Aggregate tasks by the string id ``labels``: counts, totals, per-iteration sums (of the
    iterations where each group ran: summed in task order, as a dense bincount would)."""
    uniq, g = np.unique(labels, return_inverse=True)
    n_groups = uniq.size
    counts = np.bincount(g, minlength=n_groups)
    cells, cell = np.unique(g.astype(np.int64) * n_iter + it, return_inverse=True)  # (group, iteration) pairs
    sums: F64 = np.bincount(cell.ravel(), weights=dur.astype(np.float64), minlength=cells.size).astype(np.float64, copy=False)
    bounds = np.searchsorted(cells // n_iter, np.arange(n_groups + 1))
    offset = start - first[it]
    first_off = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_off, g, offset)
    tot_int = np.zeros(n_groups, dtype=np.int64)
    np.add.at(tot_int, g, dur)  # exact integer totals
    out: dict[str, Agg] = {}
    for k in range(n_groups):
        lo, hi = bounds[k], bounds[k + 1]
        out[names[k]] = Agg(int(counts[k]), int(tot_int[k]), sums[lo:hi],
                            types[k] if types is not None else names[k], int(first_off[k]),
                            cells[lo:hi] % n_iter, n_iter)
    return out


def load_samples(db: JobDB) -> JobSamples:
    """Read ``db``'s tasks and APIs into per-iteration samples; a job without tasks is an error."""
    if not db.has("TASK"):
        raise RawDataError(f"job {str(db.job)!r} holds no device tasks (TASK table is empty); "
                           "profile it with task time on")
    c = tasks._c
    sql = (f"SELECT t.connectionId, t.startNs, MAX(t.endNs - t.startNs, 0),"
           f" COALESCE({c(db, 'name')}, -1), COALESCE({c(db, 'opType')}, -1)"
           f" FROM {tasks._from(db)} ORDER BY t.startNs")
    (n,) = db.query(f"SELECT COUNT(*) FROM {tasks._from(db)}")[0]  # (the rows the query gives)
    arr = int64_rows(db, sql, 5, n)
    conn, start, dur, name_id, type_id = arr.T
    keys = _iteration_keys(db, conn, start)
    iter_keys, it = np.unique(keys, return_inverse=True)
    n_iter = iter_keys.size
    first = np.full(n_iter, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, it, start)
    per_iteration: F64 = np.bincount(it, weights=dur.astype(np.float64),
                                     minlength=n_iter).astype(np.float64)

    text = db.text
    type_ids = np.unique(type_id)
    op_types = _group(type_id, it, n_iter, dur, start, first,
                      [text(int(t)) for t in type_ids], None)
    _use_op_statistic(db, op_types)
    # op names: the type of a name is the type of its first task
    name_ids, first_idx = np.unique(name_id, return_index=True)
    ops = _group(name_id, it, n_iter, dur, start, first, [text(int(n)) for n in name_ids],
                 [text(int(type_id[i])) for i in first_idx])
    out = JobSamples(db.job, n_iter, int(dur.sum()), per_iteration, op_types, ops)
    _load_apis(db, out, set(int(k) for k in iter_keys if k >= 0))
    return out


def _use_op_statistic(db: JobDB, op_types: dict[str, Agg]) -> None:
    """Counts and totals per op type from op_statistic (summed over devices and executors)."""
    sums: dict[str, tuple[int, int]] = {}
    for s in tasks.op_statistic_rows(db):
        n, tot = sums.get(s.op_type, (0, 0))
        sums[s.op_type] = (n + s.calls, tot + s.total_ns)
    for name, (n, tot) in sums.items():
        agg = op_types.get(name)
        if agg is not None:
            op_types[name] = replace(agg, count=n, total_ns=tot)


def _load_apis(db: JobDB, out: JobSamples, launch_ids: set[int]) -> None:
    """API counts/totals from api_statistic, per-call durations (row order), and the launching
    calls; the calls are read as int64 columns, not a tuple each (3 M calls: ~0.5 GB)."""
    if not db.has("CANN_API"):
        return
    stats = host.api_statistic_rows(db)
    (n,) = db.query("SELECT COUNT(*) FROM CANN_API")[0]
    sql = "SELECT COALESCE(type, ?), COALESCE(name, ?), connectionId, COALESCE(MAX(endNs - startNs, 0), ?) FROM CANN_API"
    rows = int64_rows(db, sql, 4, n, (NULL_INT,) * 3)  # (a NULL reads back as NULL did: the level
    dur = rows[:, 3].astype(np.float64)                  # "Api", the name "N/A", a NaN duration)
    dur[rows[:, 3] == NULL_INT] = np.nan
    pairs, pair = np.unique(rows[:, :2], axis=0, return_inverse=True)  # (type, name) ids
    label: dict[tuple[str, str], int] = {}  # (level, name text) -> its index; ids of one text share it
    of_pair = np.empty(len(pairs), dtype=np.int64)
    for k, (typ, name) in enumerate(pairs.tolist()):
        of_pair[k] = label.setdefault((host.level_name(typ), db.text(name)), len(label))
    lab = of_pair[pair.ravel()]
    order = np.argsort(lab, kind="stable")  # (a label's calls keep their row order)
    bounds = np.searchsorted(lab[order], np.arange(len(label) + 1))
    for st in stats:
        at = label.get((st.level, st.name))
        calls = dur[order[bounds[at]:bounds[at + 1]]] if at is not None else np.empty(0, dtype=np.float64)
        out.apis[(st.level, st.name)] = Agg(st.calls, st.total_ns, calls)
    out.api_total_ns = sum(s.total_ns for s in stats)
    out.launch = dur[np.isin(rows[:, 2], np.fromiter(launch_ids, dtype=np.int64, count=len(launch_ids)))]
