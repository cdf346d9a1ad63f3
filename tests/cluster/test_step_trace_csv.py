"""cluster_step_trace_time.csv is written without pandas (its import was most of a step_trace +
communication run's CPU): the text must be what pandas' ``to_csv`` writes for the same frame, as
msprof-analyze (which writes this file with pandas) and the previous implementation did.  The
reference below is that pandas implementation; 300 random step traces (NULLs, NaNs, huge and tiny
floats, odd step names, pipeline stages, Megatron indices) must give identical bytes."""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pandas as pd

from openmsprof.cluster import views_step


def _pandas_reference(con: duckdb.DuckDBPyConnection, args: dict[str, Any] | None, pipeline: bool) -> str:
    df = con.execute("SELECT * FROM step_trace ORDER BY rank, TRY_CAST(step AS BIGINT), step").df()
    df = df.sort_values("rank", kind="stable")
    cols = [c for c in df.columns if c not in ("rank", "step")]
    rows = pd.DataFrame({"Step": df["step"], "Type": "rank", "Index": df["rank"].astype(str)})
    out = pd.concat([rows.reset_index(drop=True), df[cols].reset_index(drop=True)], axis=1)
    ranks = sorted(int(r) for r in df["rank"].unique())
    index = views_step.parallel_index(args, len(ranks))
    if index is not None and len(index) < len(ranks):
        index = None
    parts = [out]
    for stage in views_step._stages(ranks, index, pipeline):
        part = df[df["rank"].isin(stage)].groupby("step", sort=False)[cols].max().reset_index()
        part.insert(1, "Type", "stage")
        part.insert(2, "Index", str(stage))
        parts.append(part.rename(columns={"step": "Step"}))
    out = pd.concat(parts, ignore_index=True)
    if index is not None:
        trip = [index.get(int(i)) if t == "rank" else None for t, i in zip(out["Type"], out["Index"], strict=False)]
        for pos, name in enumerate(("DP Index", "PP Index", "TP Index")):
            out[name] = [t[pos] if t else "NA" for t in trip]
    return out.to_csv(index=False)


COLS = ["Computing", "Communication(Not Overlapped)", "Overlapped", "Free", "Stage", "Bubble"]


def _value(rnd: random.Random) -> float | None:
    k = rnd.random()
    if k < 0.1:
        return None
    if k < 0.15:
        return float("nan")
    return rnd.choice([0.0, 1.0, 1e16, 1e-5, 123456.789, rnd.uniform(0, 1e7), -2.5, 1e21, 21518164.224])


def test_step_trace_csv_is_what_pandas_writes() -> None:
    rnd = random.Random(26)
    for _ in range(300):
        n = rnd.choice([1, 2, 4, 8])
        rows = [(r, step, *(_value(rnd) for _ in COLS))
                for r in range(n) for step in rnd.sample(["1", "2", "3", "10", "x", ""], rnd.randint(1, 4))]
        frame = pd.DataFrame(rows, columns=["rank", "step", *COLS]).astype({"rank": "int32"})
        con = duckdb.connect()
        con.register("frame", frame)
        con.execute("CREATE TABLE step_trace AS SELECT * FROM frame")
        args = rnd.choice([None, {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 2,
                                  "data_parallel_size": max(n // 2, 1), "world_size": n},
                           {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1,
                            "data_parallel_size": max(n // 2, 1), "world_size": n}])
        pipeline = rnd.random() < 0.5
        header, out = views_step.step_trace_rows(con, args, pipeline)
        assert views_step.step_trace_csv(header, out) == _pandas_reference(con, args, pipeline), (n, args, pipeline)
        con.close()


def test_no_step_trace_no_rows() -> None:
    con = duckdb.connect()
    assert views_step.step_trace_rows(con) == ([], [])
