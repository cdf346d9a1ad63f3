"""Real inputs: a two-rank torch.distributed (gloo, loopback) run, compared with msprof-analyze;
and pyACL-style ``PROF_*`` jobs recorded by openmsprof and read through its importer."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pandas as pd
import pytest

from openmsprof.cluster import run_cluster
from tests.cluster.agree import json_diffs, step_trace_diffs
from tests.cluster.conftest import msprof_analyze

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def gloo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.collector.conftest import free_port
    from tests.torch.test_cluster import REPO, WORKER

    root = tmp_path_factory.mktemp("gloo")
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, "-c", WORKER.format(repo=str(REPO))], cwd=root,
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for r in (0, 1)]
    for p in procs:
        _out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-2000:]
    return root / "cluster"


def test_gloo_run_agrees_with_msprof_analyze(gloo: Path, tmp_path: Path) -> None:
    ours = run_cluster(gloo, ["all"], tmp_path / "ours").output
    theirs = msprof_analyze(gloo, tmp_path / "ma")
    n, diffs = step_trace_diffs(ours / "cluster_step_trace_time.csv", theirs / "cluster_step_trace_time.csv")
    assert n == 2 * 2 * 12 and not diffs, diffs[:5]
    for name in ("cluster_communication.json", "cluster_communication_matrix.json", "communication_group.json"):
        n, diffs = json_diffs(ours / name, theirs / name)
        assert n > 0 and not diffs, (name, diffs[:5])


def test_gloo_wait_transfer_and_slow_rank(gloo: Path, tmp_path: Path) -> None:
    out = run_cluster(gloo, ["slow_rank"], tmp_path).output / "slow_rank"
    df = pd.read_csv(out / "wait_transfer.csv")
    assert len(df) == 2 * 2 * 4  # 4 all_reduces per step, 2 steps, both ranks (p2p send/recv excluded)
    assert ((df["wait_ms"] + df["transfer_ms"]) - (df["end_us"] - df["start_us"]) / 1000).abs().max() < 1e-6
    assert (df[df["rank"] == df["last_rank"]]["wait_ms"] == 0).all()
    report = orjson.loads((out / "slow_rank.json").read_bytes())
    slow = report["slow_rank"]
    assert slow["rank"] in (0, 1) and slow["imposed_wait_ms"] == pytest.approx(
        df[(df["last_rank"] == slow["rank"])]["wait_ms"].sum())
    if slow["cause"].get("op"):  # the cause is an operator that rank really ran
        rank_dir = next(d for d in gloo.iterdir() if (d / f"profiler_info_{slow['rank']}.json").exists())
        kd = pd.read_csv(rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
        assert slow["cause"]["op"] in set(kd["Name"])
    assert report["clock_alignment"]["hosts"] and report["clock_alignment"]["cross_host"] is None


def test_prof_jobs(tmp_path: Path) -> None:
    from tests.export.realjob import make_real_job

    root = tmp_path / "jobs"
    root.mkdir()
    jobs = [make_real_job(root, iters=3) for _ in range(2)]
    run = run_cluster(root, ["all"], tmp_path / "o", workers=1)
    assert not run.problems and [p["kind"] for p in run.partials] == ["prof", "prof"]
    steps = pd.read_csv(run.output / "cluster_step_trace_time.csv")
    assert len(steps) == 2 and (steps["Computing"] > 0).all() and (steps["Free"] >= 0).all()
    stats = pd.read_csv(run.output / "compute_op_sum" / "rank_stats_by_optype.csv")
    for rank, job in enumerate(jobs):
        con = sqlite3.connect(job / "sqlite" / "msprof.db")
        (count,) = con.execute("SELECT count(*) FROM TASK").fetchone()
        con.close()
        assert stats[stats["Rank"] == rank]["Count"].sum() == count
    assert set(stats["OpType"]) == {"Conv", "Relu", "Gemm"}
