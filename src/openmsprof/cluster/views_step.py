"""``cluster_step_trace_time.csv`` (msprof-analyze's columns) and the ``compute_op_sum`` CSVs.

Step trace: one ``rank`` row per rank and step (every step_trace_time.csv column but Step and
Device_id, as float, in order), then one ``stage`` row per step with each column's maximum over
the stage's ranks; ``DP/PP/TP Index`` follow when profiler_metadata.json gives a consistent
Megatron layout.  compute_op_sum: duration statistics (ns) by OpType+TaskType over all ranks, per
rank, and per rank by OpName+OpType+TaskType+InputShapes, sorted by SumNs.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

from openmsprof.cluster.sqlviews import has

__all__ = ["EXACT_LIMIT", "compute_op_frames", "parallel_index", "step_trace_frame"]

EXACT_LIMIT = 16_000_000

STATS = """min(d) AS MinNs, max(d) AS MaxNs, count(*) AS Count, stddev_samp(d) AS StdNs, avg(d) AS MeanNs,
           sum(d) AS SumNs, quantile_cont(d, 0.25) AS Q1Ns, quantile_cont(d, 0.5) AS MedianNs,
           quantile_cont(d, 0.75) AS Q3Ns"""


def parallel_index(args: dict[str, Any] | None, world: int) -> dict[int, tuple[int, int, int]] | None:
    """rank → (DP, PP, TP) index of Megatron's layout, or None when the sizes do not multiply up."""
    if not isinstance(args, dict):
        return None
    try:
        tp = int(args.get("tensor_model_parallel_size", 1))
        pp = int(args.get("pipeline_model_parallel_size", 1))
        dp = int(args.get("data_parallel_size", 1))
        cp = int(args.get("context_parallel_size", 1))
        ws = int(args.get("world_size", world))
    except (TypeError, ValueError):
        return None
    if tp * pp * dp * cp != ws or ws <= 0:
        return None
    return {r: ((r // tp) % dp, r // (tp * dp * cp), r % tp) for r in range(ws)}


def _stages(ranks: list[int], index: dict[int, tuple[int, int, int]] | None, pipeline: bool) -> list[tuple[int, ...]]:
    """Pipeline stages (ranks of one PP index); msprof-analyze writes stage rows only with pp groups."""
    if not pipeline or index is None:
        return []
    by_pp: dict[int, list[int]] = {}
    for r in ranks:
        if r in index:
            by_pp.setdefault(index[r][1], []).append(r)
    return [tuple(v) for _k, v in sorted(by_pp.items())]


def step_trace_frame(con: duckdb.DuckDBPyConnection, distributed_args: dict[str, Any] | None = None,
                     pipeline: bool = False) -> pd.DataFrame:
    """The rows of cluster_step_trace_time.csv (``pipeline``: the job has ``pp*`` p2p groups)."""
    if not has(con, "step_trace"):
        return pd.DataFrame()
    df = con.execute("SELECT * FROM step_trace ORDER BY rank, TRY_CAST(step AS BIGINT), step").df()
    df = df.sort_values("rank", kind="stable")
    cols = [c for c in df.columns if c not in ("rank", "step")]
    rows = pd.DataFrame({"Step": df["step"], "Type": "rank", "Index": df["rank"].astype(str)})
    out = pd.concat([rows.reset_index(drop=True), df[cols].reset_index(drop=True)], axis=1)
    ranks = sorted(int(r) for r in df["rank"].unique())
    index = parallel_index(distributed_args, len(ranks))
    if index is not None and len(index) < len(ranks):
        index = None
    parts = [out]
    for stage in _stages(ranks, index, pipeline):
        part = df[df["rank"].isin(stage)].groupby("step", sort=False)[cols].max().reset_index()
        part.insert(1, "Type", "stage")
        part.insert(2, "Index", str(stage))
        parts.append(part.rename(columns={"step": "Step"}))
    out = pd.concat(parts, ignore_index=True)
    if index is not None:
        trip = [index.get(int(i)) if t == "rank" else None for t, i in zip(out["Type"], out["Index"], strict=False)]
        for pos, name in enumerate(("DP Index", "PP Index", "TP Index")):
            out[name] = [t[pos] if t else "NA" for t in trip]
    return out


def compute_op_frames(con: duckdb.DuckDBPyConnection, exact_limit: int = EXACT_LIMIT) -> dict[str, pd.DataFrame]:
    """all_stats / rank_stats_by_optype / rank_stats_by_opname of msprof-analyze's compute_op_sum.

    Per-rank tables are computed one rank at a time (exact quantiles, bounded memory).  The
    all-rank quantiles are exact up to ``exact_limit`` kernels and t-digest approximations above
    it (holding every duration of 64 M kernels would need 512 MiB)."""
    if not has(con, "kernels"):
        return {}
    base = "(SELECT rank, name, op_type, task_type, input_shapes, dur_us * 1000 AS d FROM kernels " \
           "WHERE task_type IS DISTINCT FROM 'COMMUNICATION' AND dur_us IS NOT NULL {where})"
    total = con.execute("SELECT count(*) FROM kernels").fetchone()[0]  # type: ignore[index]
    stats = STATS if total <= exact_limit else STATS.replace("quantile_cont", "approx_quantile")
    out = {"all_stats": con.execute(
        f"SELECT op_type AS OpType, task_type AS TaskType, {stats} FROM {base.format(where='')} GROUP BY ALL "
        "ORDER BY SumNs DESC, OpType, TaskType").df()}
    by_type, by_name = [], []
    for (rank,) in con.execute("SELECT DISTINCT rank FROM kernels ORDER BY rank").fetchall():
        one = base.format(where=f"AND rank = {int(rank)}")
        by_type.append(con.execute(f"SELECT op_type AS OpType, task_type AS TaskType, {STATS}, rank AS Rank "
                                   f"FROM {one} GROUP BY op_type, task_type, rank").df())
        by_name.append(con.execute(f"SELECT name AS OpName, op_type AS OpType, task_type AS TaskType, "
                                   f"input_shapes AS InputShapes, {STATS}, rank AS Rank FROM {one} "
                                   "GROUP BY name, op_type, task_type, input_shapes, rank").df())
    for key, parts, order in (("rank_stats_by_optype", by_type, ["Rank", "OpType", "TaskType"]),
                              ("rank_stats_by_opname", by_name, ["Rank", "OpName", "OpType", "TaskType", "InputShapes"])):
        df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        if not df.empty:
            df = df.sort_values(["SumNs", *order], ascending=[False] + [True] * len(order), kind="stable")
        out[key] = df.reset_index(drop=True)
    return out
