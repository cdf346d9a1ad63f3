"""``cluster_step_trace_time.csv`` with msprof-analyze's columns.

Step trace: one ``rank`` row per rank and step (every step_trace_time.csv column but Step and
Device_id, as float, in order), then one ``stage`` row per step with each column's maximum over
the stage's ranks; ``DP/PP/TP Index`` follow when profiler_metadata.json gives a consistent
Megatron layout.
"""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

import duckdb

from openmsprof.cluster.sqlviews import has

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["parallel_index", "step_trace_csv", "step_trace_frame", "step_trace_rows"]



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


def step_trace_rows(con: duckdb.DuckDBPyConnection, distributed_args: dict[str, Any] | None = None,
                    pipeline: bool = False) -> tuple[list[str], list[list[Any]]]:
    """The header and rows of cluster_step_trace_time.csv (``pipeline``: the job has ``pp*`` p2p
    groups); no rows when no rank has a step trace."""
    if not has(con, "step_trace"):
        return [], []
    cur = con.execute("SELECT * FROM step_trace ORDER BY rank, TRY_CAST(step AS BIGINT), step")
    names = [d[0] for d in cur.description]
    data = cur.fetchall()
    ri, si = names.index("rank"), names.index("step")
    cols = [i for i, n in enumerate(names) if n not in ("rank", "step")]
    header = ["Step", "Type", "Index", *(names[i] for i in cols)]
    rows: list[list[Any]] = [[r[si], "rank", str(r[ri]), *(r[i] for i in cols)] for r in data]
    ranks = sorted({int(r[ri]) for r in data})
    index = parallel_index(distributed_args, len(ranks))
    if index is not None and len(index) < len(ranks):
        index = None
    for stage in _stages(ranks, index, pipeline):
        members = set(stage)
        peaks: dict[Any, list[Any]] = {}  # step → each column's maximum over the stage (NULLs skipped)
        for r in data:
            if int(r[ri]) in members:
                top = peaks.setdefault(r[si], [None] * len(cols))
                for j, i in enumerate(cols):
                    v = r[i]
                    if v is not None and v == v and (top[j] is None or v > top[j]):
                        top[j] = v
        rows += [[step, "stage", str(stage), *top] for step, top in peaks.items()]
    if index is not None:
        header += ["DP Index", "PP Index", "TP Index"]
        for row in rows:
            trip = index.get(int(row[2])) if row[1] == "rank" else None
            row += list(trip) if trip else ["NA"] * 3
    return header, rows


def _cell(v: Any) -> Any:
    """A cell as pandas' ``to_csv`` writes it: NULL and NaN empty, floats by their shortest repr."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return v


def step_trace_csv(header: list[str], rows: list[list[Any]]) -> str:
    """cluster_step_trace_time.csv's text (the csv module's minimal quoting, newline line ends)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows([_cell(v) for v in row] for row in rows)
    return buf.getvalue()


def step_trace_frame(con: duckdb.DuckDBPyConnection, distributed_args: dict[str, Any] | None = None,
                     pipeline: bool = False) -> pd.DataFrame:
    """The rows of cluster_step_trace_time.csv as a DataFrame (the notebook's view)."""
    import pandas as pd

    header, rows = step_trace_rows(con, distributed_args, pipeline)
    return pd.DataFrame(rows, columns=header) if header else pd.DataFrame()
