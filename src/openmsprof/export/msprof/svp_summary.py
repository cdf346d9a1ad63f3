"""``export summary --layout svp``: seed 002's op_summary, op_statistic and acl_statistic.

op_summary has one row per layer (operator) of the model, in first-execution order, its time
averaged over the profiled executions, then the ``-`` total row the seed describes.  The PMU
ratios (Mac/Vec busy, Dstr, Dtrans, DLD, WLD) need the NPU's counters: ``N/A`` here, as are
the DDR byte counts.  ``Memory Bound`` carries the cost model's *modelled* ratio
(bytes/bandwidth)/(compute time) against the job's measured peaks (> 1 = memory-bound, as the
seed defines it), ``N/A`` for operators the model does not cover (docs/conformance.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openmsprof.export.fmt import NA, ratio, us, us_avg
from openmsprof.export.jobdb import JobDB, open_job
from openmsprof.export.msprof import headers as H
from openmsprof.export.msprof import roofline as R
from openmsprof.export.msprof import summary_host as host
from openmsprof.export.msprof import summary_tasks as tasks
from openmsprof.export.msprof.naming import SUMMARY_DIR
from openmsprof.export.msprof.op_cost_columns import export_peaks
from openmsprof.export.msprof.svp_names import SvpModel, svp_models
from openmsprof.export.msprof.tables import Num, Table, write_csv, write_json
from openmsprof.fileio import fs

__all__ = ["OP_SUMMARY_SVP", "export_svp_summary", "layer_rows", "write_svp_summary"]

OP_SUMMARY_SVP = ["Layer Id", "Ori Layer Name", "Layer Name", "Layer Type", "Time(us)", "Time Ratio",
                  "Mac Busy Ratio", "Mac Ppen Ratio", "Vec Busy Ratio", "Vec Ppen Ratio", "Dstr Ratio",
                  "Dtrans Ratio", "DLD Ratio", "WLD Ratio", "Memory Bound", "DDR Read(byte)",
                  "DDR Write(byte)", "DDR Total(byte)"]
_PMU = [NA] * 8  # Mac/Vec busy and ppen, Dstr, Dtrans, DLD, WLD
_DDR = [NA] * 3


def _memory_bound(db: JobDB) -> dict[tuple[str, str], str]:
    """(layer name, type) → the modelled memory-bound ratio, three significant digits; none
    without peaks (the job's, else this machine's cached ones: an export never measures)."""
    doc = export_peaks(db)
    if not doc:
        return {}
    ceil = R.ceilings(doc)
    out: dict[tuple[str, str], str] = {}
    for r in R.op_roofs(db, ceil):
        mbr = r.roof.memory_bound_ratio
        if mbr is not None:
            out.setdefault((r.name, r.op_type), f"{mbr:.3g}")
    return out


def layer_rows(db: JobDB, m: SvpModel) -> list[list[Any]]:
    """One row per layer (average time per execution) and the ``-`` total row."""
    c = lambda col: tasks._c(db, col)  # noqa: E731
    sql = (f"SELECT {c('name')}, {c('opType')}, SUM(MAX(t.endNs - t.startNs, 0)), MIN(t.startNs)"
           f" FROM {tasks._from(db)} WHERE t.deviceId = ? AND t.modelId = ?"
           f" GROUP BY {c('name')}, {c('opType')} ORDER BY 4")
    rows = db.query(sql, (m.dev, m.model_id))
    per_exec = [(db.text(name), db.text(op), (tot + m.batch_num // 2) // m.batch_num) for name, op, tot, _ in rows]
    total = sum(t for *_, t in per_exec)
    bound = _memory_bound(db) if per_exec else {}
    out: list[list[Any]] = [[i, name, name, op, Num(us(t)), Num(ratio(t, total)), *_PMU,
                             Num(bound[(name, op)]) if (name, op) in bound else NA, *_DDR]
                            for i, (name, op, t) in enumerate(per_exec)]
    out.append(["-", "-", "-", "-", Num(us(total)), Num(ratio(total, total)), *_PMU, NA, *_DDR])
    return out


def op_statistic_rows(db: JobDB, m: SvpModel) -> list[list[Any]]:
    """Seed 002's op_statistic: per operator name and task type, ratio of the model's time."""
    c = lambda col: tasks._c(db, col)  # noqa: E731
    sql = (f"SELECT MIN(t.taskId), MIN(t.streamId), {c('name')}, t.taskType,"
           " SUM(MAX(t.endNs - t.startNs, 0)), COUNT(*), MAX(t.endNs - t.startNs),"
           f" MIN(MAX(t.endNs - t.startNs, 0)) FROM {tasks._from(db)} WHERE t.deviceId = ? AND t.modelId = ?"
           f" GROUP BY {c('name')}, t.taskType ORDER BY 5 DESC")
    rows = db.query(sql, (m.dev, m.model_id))
    total = sum(r[4] for r in rows)
    return [[tid, sid, db.text(name), db.text(tt), Num(ratio(tot, total)), Num(us(tot)), n,
             Num(us_avg(tot, n)), Num(us(max(mx, 0))), Num(us(mn))]
            for tid, sid, name, tt, tot, n, mx, mn in rows]


def _named(table_name: str, file_name: str, header: list[str], rows: Any) -> Table:
    """A Table whose ``{name}_{dev}`` is exactly ``file_name`` (without extension)."""
    stem = Path(file_name).stem
    return Table(table_name, stem[len(table_name) + 1:], header, rows)


def svp_tables(db: JobDB) -> Iterator[Table]:
    acl = [row for t in host.acl_statistic(db) for row in t.rows]
    for m in svp_models(db):
        yield _named("op_summary", m.op_summary(), OP_SUMMARY_SVP, layer_rows(db, m))
        yield _named("op_statistic", m.op_statistic(), H.OP_STATISTIC_S2, op_statistic_rows(db, m))
        if acl:
            yield _named("acl_statistic", m.acl_statistic(), H.ACL_STATISTIC, acl)


def write_svp_summary(db: JobDB, out_dir: Path, fmt: str = "csv") -> list[Path]:
    """Write the seed 002 summary files of an open database into ``out_dir``."""
    fs.make_dir(out_dir)
    written: list[Path] = []
    for table in svp_tables(db):
        if fmt == "json":
            written.extend(write_json(out_dir, table))
        else:
            written.extend(write_csv(out_dir, table))
    return written


def export_svp_summary(job: Path, fmt: str = "csv") -> list[Path]:
    """Import ``job`` if needed and write its seed 002 summary files into ``JOB/summary/``."""
    with open_job(job) as db:
        return write_svp_summary(db, Path(job) / SUMMARY_DIR, fmt)
