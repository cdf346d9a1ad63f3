"""``cluster_step_trace_time.csv`` with msprof-analyze's columns.

Step trace: one ``rank`` row per rank and step (every step_trace_time.csv column but Step and
Device_id, as float, in order), then one ``stage`` row per step with each column's maximum over
the stage's ranks; ``DP/PP/TP Index`` follow when profiler_metadata.json gives a consistent
Megatron layout.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

from openmsprof.cluster.sqlviews import has

__all__ = ["parallel_index", "step_trace_frame"]



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
