"""Stores reused while the sources are unchanged; the notebook API (DataFrames and SQL)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import openmsprof.cluster as cluster
from openmsprof.cluster import run_cluster
from tests.cluster.conftest import SLOW_RANK, copy_tree


def test_second_run_reuses_stores_until_a_file_changes(synthetic: Path, tmp_path: Path) -> None:
    root = copy_tree(synthetic, tmp_path / "job")
    first = run_cluster(root, ["step_trace"], workers=1)
    assert [p["cached"] for p in first.partials] == [False] * 4
    before = (first.output / "cluster_step_trace_time.csv").read_bytes()
    again = run_cluster(root, ["step_trace"], workers=1)
    assert [p["cached"] for p in again.partials] == [True] * 4
    assert (again.output / "cluster_step_trace_time.csv").read_bytes() == before
    st = next(root.glob("*_1001_*")) / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    text = st.read_text().splitlines()
    cells = text[1].split(",")
    cells[2] = "12345.000"
    st.write_text("\n".join([text[0], ",".join(cells), *text[2:]]) + "\n")
    os.utime(st, ns=(st.stat().st_atime_ns, st.stat().st_mtime_ns + 10**9))
    third = run_cluster(root, ["step_trace"], workers=1)
    assert [p["cached"] for p in third.partials] == [True, False, True, True]
    assert b"12345.0" in (third.output / "cluster_step_trace_time.csv").read_bytes()


def test_load_gives_frames_and_sql(synthetic: Path, tmp_path: Path) -> None:
    with cluster.load(synthetic, output=tmp_path) as c:
        assert c.ranks == [0, 1, 2, 3] and not c.problems
        assert set(c.step_trace["Index"]) == {"0", "1", "2", "3"}
        assert len(c.kernels) == 4 * 3 * 8 * (8000 // 24)
        p99 = c.sql("SELECT rank, quantile_cont(wait_ms, 0.99) AS p99 FROM waits "
                    "WHERE op_name LIKE 'hcom_allReduce%' GROUP BY rank ORDER BY rank")
        assert list(p99["rank"]) == [0, 1, 2, 3]
        assert p99.set_index("rank")["p99"].idxmin() == SLOW_RANK  # the slow rank never waits long
        assert c.slow_rank()["slow_rank"]["rank"] == SLOW_RANK
        assert c.sql("SELECT count(DISTINCT rank) AS n FROM comm_bw")["n"][0] == 4


def test_unknown_mode(tmp_path: Path, synthetic: Path) -> None:
    from openmsprof.config.errors import ConfigError

    with pytest.raises(ConfigError, match="cluster mode 'timeline'"):
        run_cluster(synthetic, ["timeline"], tmp_path)


def test_all_rank_stats_merged_from_ranks_above_the_limit(synthetic: Path, tmp_path: Path) -> None:
    from openmsprof.cluster import opstats, sqlviews

    with cluster.load(synthetic, output=tmp_path) as c:
        con = sqlviews.connect(c.store)
        exact = opstats.compute_op_frames(con)["all_stats"].set_index(["OpType", "TaskType"])
        approx = opstats.compute_op_frames(con, exact_limit=0)["all_stats"].set_index(["OpType", "TaskType"])
        con.close()
    assert (exact["Count"] == approx["Count"]).all() and (exact["SumNs"] / approx["SumNs"] - 1).abs().max() < 1e-9
    assert ((exact["StdNs"] / approx["StdNs"] - 1).abs() < 1e-6).all()
    assert (exact["MinNs"] == approx["MinNs"]).all() and (exact["MaxNs"] == approx["MaxNs"]).all()
    for q in ("Q1Ns", "MedianNs", "Q3Ns"):
        assert ((approx[q] / exact[q] - 1).abs() < 0.02).all(), q
