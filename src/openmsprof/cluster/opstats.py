"""msprof-analyze's ``compute_op_sum`` views: operator duration statistics (ns).

Per rank (by OpType+TaskType, and by OpName+OpType+TaskType+InputShapes) they are computed in the
worker right after the rank's kernels are stored (:func:`rank_op_stats`), exact, and kept in the
store; the parent only concatenates them.  The all-rank table scans the kernels (exact) up to
``EXACT_LIMIT`` kernels; above it, it is merged from the per-rank tables without reading a
kernel: counts, sums, extremes, mean and std exact, quartiles from each rank's 101 percentile
points weighted by its count (holding every duration of 64 M kernels would need 512 MiB).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import orjson

from openmsprof.cluster.rank_small import read_small, scan_sql
from openmsprof.cluster.sqlviews import has
from openmsprof.fileio import fs

if TYPE_CHECKING:  # pandas and numpy are imported where a frame is made (not for step_trace / communication)
    import numpy as np
    import pandas as pd

__all__ = ["EXACT_LIMIT", "compute_op_frames", "rank_gaps", "rank_op_stats"]

EXACT_LIMIT = 16_000_000
STATS = """min(d) AS MinNs, max(d) AS MaxNs, count(*) AS Count, stddev_samp(d) AS StdNs, avg(d) AS MeanNs,
           sum(d) AS SumNs, quantile_cont(d, 0.25) AS Q1Ns, quantile_cont(d, 0.5) AS MedianNs,
           quantile_cont(d, 0.75) AS Q3Ns"""
BASE = ("(SELECT rank, name, op_type, task_type, input_shapes, dur_us * 1000 AS d FROM {src} "
        "WHERE task_type IS DISTINCT FROM 'COMMUNICATION' AND dur_us IS NOT NULL)")
BY_TYPE = ("SELECT op_type AS OpType, task_type AS TaskType, {stats}, any_value(rank) AS Rank, "
           "sum(d * d) AS _SumSq, quantile_cont(d, [i / 100 FOR i IN range(101)]) AS _Pct FROM {base} GROUP BY ALL")
BY_NAME = ("SELECT name AS OpName, op_type AS OpType, task_type AS TaskType, input_shapes AS InputShapes, {stats}, "
           "any_value(rank) AS Rank FROM {base} GROUP BY ALL")


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def rank_op_stats(out: Path) -> None:
    """Write ``op_by_type.parquet`` and ``op_by_name.parquet`` next to the rank's kernels.parquet."""
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET threads=1")
        con.execute("SET memory_limit='256MB'")
        base = BASE.format(src=f"read_parquet({_quote(out / 'kernels.parquet')})")
        for name, sql in (("op_by_type", BY_TYPE), ("op_by_name", BY_NAME)):
            tmp = out / f"{name}.parquet.tmp"
            con.execute(f"COPY ({sql.format(stats=STATS, base=base)}) TO {_quote(tmp)} (FORMAT parquet)")
            os.chmod(tmp, fs.FILE_MODE)
            os.replace(tmp, out / f"{name}.parquet")
    finally:
        con.close()


GAPS = """
COPY (
  WITH c AS (SELECT step, op_key, start_us AS w1,
                    lag(start_us + elapse_ms * 1000) OVER (ORDER BY start_us) AS prev_end
             FROM {comm} WHERE type = 'collective'),
  win AS (SELECT step, op_key, coalesce(prev_end, w1 - 1e12) AS w0, w1 FROM c)
  SELECT any_value(k.rank) AS rank, win.step, win.op_key, k.name,
         sum(least(k.start_us + k.dur_us, win.w1) - k.start_us) AS us
  FROM read_parquet({kernels}) k ASOF JOIN win ON k.start_us >= win.w0
  WHERE k.start_us < win.w1 GROUP BY win.step, win.op_key, k.name
) TO {dst} (FORMAT parquet)
"""


def rank_gaps(out: Path) -> None:
    """``gaps.parquet``: per collective of this rank, operator time (µs) by name between its
    previous collective's end and its start — what the slow-rank cause compares across ranks."""
    comm = read_small(out).get("comm")
    if not comm or not (out / "kernels.parquet").exists():
        return
    src = out / ".comm.json"  # (DuckDB reads files: the store keeps the table inside small.json)
    con = duckdb.connect(":memory:")
    try:
        fs.write_file_atomic(src, orjson.dumps(comm))
        con.execute("SET threads=1")
        con.execute("SET memory_limit='256MB'")
        tmp = out / "gaps.parquet.tmp"
        con.execute(GAPS.format(comm=scan_sql("comm", str(src)), kernels=_quote(out / "kernels.parquet"),
                                dst=_quote(tmp)))
        os.chmod(tmp, fs.FILE_MODE)
        os.replace(tmp, out / "gaps.parquet")
    finally:
        con.close()
        src.unlink(missing_ok=True)


def _ranked(con: duckdb.DuckDBPyConnection, view: str, order: list[str]) -> pd.DataFrame:
    import pandas as pd

    if not has(con, view):
        return pd.DataFrame()
    keys = ", ".join(order)
    return con.execute(f"SELECT * EXCLUDE (_SumSq, _Pct) FROM {view} ORDER BY SumNs DESC, {keys}"
                       if view == "op_by_type" else f"SELECT * FROM {view} ORDER BY SumNs DESC, {keys}").df()


def _weighted_quantiles(points: np.ndarray, weights: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    import numpy as np

    order = np.argsort(points, kind="stable")
    p, w = points[order], weights[order]
    cum = np.cumsum(w) - w / 2
    return [float(np.interp(q * w.sum(), cum, p)) for q in qs]


def _merged_all_stats(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """all_stats from the per-rank tables: counts, sums, extremes, mean and std exact; quartiles
    from the ranks' percentile points weighted by their counts (error ≲ 1 percentile)."""
    import numpy as np
    import pandas as pd

    df = con.execute("SELECT OpType, TaskType, MinNs, MaxNs, Count, SumNs, _SumSq, _Pct FROM op_by_type").df()
    rows = []
    for (op, task), g in df.groupby(["OpType", "TaskType"], sort=False, dropna=False):
        n = float(g["Count"].sum())
        total = float(g["SumNs"].sum())
        mean = total / n
        var = (float(g["_SumSq"].sum()) - n * mean * mean) / (n - 1) if n > 1 else float("nan")
        pts = np.concatenate([np.asarray(p, float) for p in g["_Pct"]])
        wts = np.concatenate([np.full(101, c / 101.0) for c in g["Count"]])
        q1, med, q3 = _weighted_quantiles(pts, wts, (0.25, 0.5, 0.75))
        rows.append({"OpType": op, "TaskType": task, "MinNs": g["MinNs"].min(), "MaxNs": g["MaxNs"].max(),
                     "Count": int(n), "StdNs": float(np.sqrt(max(var, 0.0))), "MeanNs": mean, "SumNs": total,
                     "Q1Ns": q1, "MedianNs": med, "Q3Ns": q3})
    out = pd.DataFrame(rows)
    return out.sort_values(["SumNs", "OpType", "TaskType"], ascending=[False, True, True]).reset_index(drop=True)


def compute_op_frames(con: duckdb.DuckDBPyConnection, exact_limit: int = EXACT_LIMIT) -> dict[str, pd.DataFrame]:
    """all_stats / rank_stats_by_optype / rank_stats_by_opname (empty dict without kernels)."""
    if not has(con, "kernels"):
        return {}
    total = con.execute("SELECT sum(Count) FROM op_by_type").fetchone()[0] if has(con, "op_by_type") else 0  # type: ignore[index]
    if total and total > exact_limit:
        all_stats = _merged_all_stats(con)
    else:
        all_stats = con.execute(
            f"SELECT op_type AS OpType, task_type AS TaskType, {STATS} FROM {BASE.format(src='kernels')} "
            "GROUP BY ALL ORDER BY SumNs DESC, OpType, TaskType").df()
    return {"all_stats": all_stats,
            "rank_stats_by_optype": _ranked(con, "op_by_type", ["Rank", "OpType", "TaskType"]),
            "rank_stats_by_opname": _ranked(con, "op_by_name", ["Rank", "OpName", "OpType", "TaskType",
                                                               "InputShapes"])}
