"""openmsprof cluster on synthetic ranks in our real formats: msprof-analyze's numbers, the
wait/transfer split, and the planted slow rank named with its operator."""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd
import pytest

from openmsprof.cluster import run_cluster
from tests.cluster.agree import json_diffs, step_trace_diffs
from tests.cluster.conftest import SLOW_MS, SLOW_RANK, gen_module, msprof_analyze


@pytest.fixture(scope="module")
def ours(synthetic: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = run_cluster(synthetic, ["all"], tmp_path_factory.mktemp("ours"), workers=2)
    assert not run.problems
    return run.output


def test_agrees_with_msprof_analyze(synthetic: Path, ours: Path, tmp_path: Path) -> None:
    theirs = msprof_analyze(synthetic, tmp_path / "ma")
    n, diffs = step_trace_diffs(ours / "cluster_step_trace_time.csv", theirs / "cluster_step_trace_time.csv")
    assert n == 4 * 3 * 12 and not diffs, diffs[:5]  # 4 ranks x 3 steps x (9 times + DP/PP/TP index)
    for name in ("cluster_communication.json", "cluster_communication_matrix.json", "communication_group.json"):
        n, diffs = json_diffs(ours / name, theirs / name)
        assert n > 0 and not diffs, (name, diffs[:5])


def test_wait_transfer_split(ours: Path) -> None:
    df = pd.read_csv(ours / "slow_rank" / "wait_transfer.csv")
    assert len(df) == 4 * 3 * 8
    elapse = (df["end_us"] - df["start_us"]) / 1000
    assert (df["wait_ms"] + df["transfer_ms"] - elapse).abs().max() < 1e-6
    last = df[df["rank"] == df["last_rank"]]
    assert (last["wait_ms"] == 0).all()
    # in the segment after the planted operator every other rank waits about SLOW_MS for the slow rank
    seg = f"_{8 // 2}_1@"
    planted = df[df["op"].str.contains(seg) & (df["rank"] != SLOW_RANK)]
    assert (planted["last_rank"] == SLOW_RANK).all()
    assert planted["wait_ms"].between(SLOW_MS * 0.9, SLOW_MS * 1.2).all(), planted["wait_ms"].tolist()


def test_slow_rank_and_its_cause(ours: Path) -> None:
    report = orjson.loads((ours / "slow_rank" / "slow_rank.json").read_bytes())
    slow = report["slow_rank"]
    assert slow["rank"] == SLOW_RANK
    assert slow["cause"]["op"] == gen_module().SLOW_OP
    assert slow["cause"]["excess_ms"] == pytest.approx(3 * SLOW_MS, rel=0.1)
    assert report["clock_alignment"]["observed_disagreement_us"] == 0
    votes = pd.read_csv(ours / "slow_rank" / "rank_stats.csv")
    assert set(votes.columns) == {"rankId", "slowAffectCount"}


def test_arrived_last_counts_each_collective_once(ours: Path) -> None:
    """``arrived_last`` of each rank = the collectives (step, op) where that rank's own start is
    the latest, counted here from the per-rank start times (not from the code's last_rank)."""
    df = pd.read_csv(ours / "slow_rank" / "wait_transfer.csv")
    latest = df.groupby(["step", "op"])["start_us"].transform("max")
    last = df[df["start_us"] == latest]
    assert not last.duplicated(["step", "op"]).any()  # no tie for last place in the synthetic ranks
    want = last["rank"].value_counts().to_dict()
    assert sum(want.values()) == 3 * 8  # 3 steps x 8 collectives, each with exactly one last rank
    report = orjson.loads((ours / "slow_rank" / "slow_rank.json").read_bytes())
    assert {int(r["rank"]): int(r["arrived_last"]) for r in report["ranks"]} == {
        r: want.get(r, 0) for r in range(4)}
    assert report["slow_rank"]["arrived_last"] == want[SLOW_RANK]
    votes = pd.read_csv(ours / "slow_rank" / "rank_stats.csv")
    assert dict(zip(votes["rankId"], votes["slowAffectCount"], strict=True)) == want


def test_compute_op_sum(ours: Path, synthetic: Path) -> None:
    stats = pd.read_csv(ours / "compute_op_sum" / "rank_stats_by_optype.csv")
    assert list(stats.columns[:2]) == ["OpType", "TaskType"] and "SumNs" in stats and "Rank" in stats
    kd = pd.read_csv(next(synthetic.glob("*_1000_*")) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    mine = stats[(stats["Rank"] == 0) & (stats["OpType"] == "aten::mm")]
    want = kd[kd["Type"] == "aten::mm"]["Duration(us)"]
    assert int(mine["Count"].iloc[0]) == len(want)
    assert mine["SumNs"].iloc[0] == pytest.approx(want.sum() * 1000, rel=1e-9)
    allstats = pd.read_csv(ours / "compute_op_sum" / "all_stats.csv")
    assert allstats["Count"].sum() == 4 * 3 * 8 * (8000 // 24)
