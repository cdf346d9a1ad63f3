"""compare_jobs on real jobs: the Mish → LeakyReLU case study, self-comparison, regression."""

from __future__ import annotations

from pathlib import Path

from openmsprof.analysis import stats
from openmsprof.analysis.compare import API, DEVICE_TIME, OP, OP_TYPE, OVERALL, compare_jobs
from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof.summary_tasks import op_statistic_rows
from tests.analysis.conftest import EXECUTES


def _op_total(job: Path) -> int:
    with open_job(job) as db:
        return sum(s.total_ns for s in op_statistic_rows(db))


def test_mish_to_leakyrelu(jobs: dict[str, Path]) -> None:
    cmp = compare_jobs(jobs["mish"], jobs["leakyrelu"])
    types = {r.name: r for r in cmp.section(OP_TYPE)}
    for gone in ("Softplus", "Tanh", "Mul"):
        assert types[gone].new_count == 0 and types[gone].base_count > 0
        assert types[gone].verdict == stats.REMOVED
    assert types["LeakyRelu"].base_count == 0 and types["LeakyRelu"].new_count > 0
    assert types["LeakyRelu"].verdict == stats.ADDED
    assert types["Conv"].match == "name" and types["Conv"].base_count == types["Conv"].new_count
    dev = cmp.row(OVERALL, DEVICE_TIME)
    assert dev.delta_total_ns == _op_total(jobs["leakyrelu"]) - _op_total(jobs["mish"])
    assert dev.base_total_ns == _op_total(jobs["mish"])
    assert dev.test.n_base == dev.test.n_new == cmp.base_iterations == EXECUTES
    # Softplus alone costs more than a whole LeakyReLU iteration: the activation time drops
    assert dev.test.change < -0.3 and cmp.verdict == stats.FASTER
    assert dev.test.ci_high < 0 < dev.test.p < 0.05
    assert abs(sum(r.base_share for r in cmp.section(OP_TYPE)) - 100.0) < 1e-6
    assert abs(sum(r.new_share for r in cmp.section(OP_TYPE)) - 100.0) < 1e-6
    ops = cmp.section(OP)
    assert {r.name for r in ops if r.match == "name"} >= {"gemm_27"}
    renamed = [r for r in ops if r.match == "type"]  # conv fused with the activation: new names
    assert renamed and all(" → " in r.name and r.category for r in renamed)
    assert all(r.new_count == 0 for r in ops if r.category in ("Softplus", "Tanh"))
    apis = {r.name: r for r in cmp.section(API)}
    assert apis["aclmdlExecute"].base_count == apis["aclmdlExecute"].new_count == EXECUTES


def test_job_against_itself_is_no_significant_change(jobs: dict[str, Path]) -> None:
    cmp = compare_jobs(jobs["mish"], jobs["mish"], alpha=0.05, threshold=0.0)
    assert cmp.verdict == stats.NO_CHANGE
    tested = [r for r in cmp.rows if r.test.p == r.test.p]
    assert tested and all(r.test.p == 1.0 and r.verdict == stats.NO_CHANGE for r in tested)
    assert all(r.delta_total_ns == 0 for r in cmp.rows)


def test_wider_model_is_slower(jobs: dict[str, Path]) -> None:
    cmp = compare_jobs(jobs["leakyrelu"], jobs["wide"])
    assert cmp.verdict == stats.SLOWER
    assert cmp.row(OP_TYPE, "Conv").verdict == stats.SLOWER


def test_rows_and_dataframe(jobs: dict[str, Path]) -> None:
    cmp = compare_jobs(jobs["mish"], jobs["leakyrelu"])
    rows = cmp.to_rows()
    assert len(rows) == len(cmp.rows) and rows[0]["name"] == DEVICE_TIME
    assert rows[0]["delta_total_us"] == cmp.rows[0].delta_total_ns / 1e3
    df = cmp.to_dataframe()
    assert list(df.columns) == list(rows[0]) and len(df) == len(rows)
