"""The advisor's rules on real jobs: top op types, long API calls, host gaps, steps."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from openmsprof.analysis import advisor
from openmsprof.analysis.findings import WARNING, Finding
from openmsprof.config.errors import ConfigError, ProfilingError
from openmsprof.export.jobdb import DB_RELPATH
from tests.analysis import advisor_jobs as J


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("advisor_jobs")
    return {"mish": J.mish_job(root), "sleepy": J.sleepy_job(root), "steps": J.steps_job(root)}


def _db(job: Path) -> sqlite3.Connection:
    return sqlite3.connect(job / DB_RELPATH)


def _of(found: list[Finding], rule: str) -> list[Finding]:
    return [f for f in found if f.rule == rule]


def test_top_op_type_is_the_one_with_most_device_time(jobs: dict[str, Path]) -> None:
    found = advisor.analyze(jobs["mish"], ["top_ops"])
    assert {f.rule for f in found} == {"top_ops"}
    top = next(f for f in found if f.evidence["rank"] == 1)
    # Which op type wins is a measurement (Softplus from the decomposed Mish usually, Conv or Tanh
    # on a loaded machine): the rule must agree with the job's own totals, whatever they are.
    with _db(jobs["mish"]) as con:
        totals = con.execute(
            "SELECT s.value, SUM(t.endNs - t.startNs) AS tot FROM TASK t JOIN COMPUTE_TASK_INFO c"
            " ON c.globalTaskId = t.globalTaskId JOIN STRING_IDS s ON s.id = c.opType"
            " GROUP BY s.value ORDER BY tot DESC").fetchall()
    expected, expected_ns = totals[0]
    assert top.evidence["op_type"] == expected
    share = 100.0 * expected_ns / sum(t for _, t in totals)
    assert abs(top.evidence["share_pct"] - share) < 0.01
    assert expected in {"Softplus", "Tanh", "Mul", "Conv"}  # the decomposed Mish or the convolutions
    if share > 30:
        assert top.severity == WARNING
    assert expected in top.summary
    # every linked event is a real TASK row of that op type at the stated time
    with _db(jobs["mish"]) as con:
        for e in top.events:
            row = con.execute(
                "SELECT t.startNs, t.endNs - t.startNs, s.value FROM TASK t JOIN COMPUTE_TASK_INFO"
                " c ON c.globalTaskId = t.globalTaskId JOIN STRING_IDS s ON s.id = c.opType"
                " WHERE t.globalTaskId = ?", (e.id,)).fetchone()
            assert row == (e.start_ns, e.dur_ns, expected)
    assert [e.dur_ns for e in top.events] == sorted((e.dur_ns for e in top.events), reverse=True)


def test_host_gap_between_executes_is_the_sleep(jobs: dict[str, Path]) -> None:
    gaps = _of(advisor.analyze(jobs["sleepy"], "host_gaps"), "host_gaps")
    between = [f for f in gaps if "median_gap_us" in f.evidence]
    assert len(between) == 1
    f = between[0]
    assert f.severity == WARNING and f.evidence["executes"] == J.SLEEPY_EXECUTES
    largest = f.events[0]
    assert largest.table == "GAP"
    assert J.SLEEP_S * 1e9 <= largest.dur_ns <= (J.SLEEP_S + 1.0) * 1e9  # slack for a loaded CI machine
    assert float(f.evidence["largest_gap_us"]) == pytest.approx(largest.dur_ns / 1000)
    with _db(jobs["sleepy"]) as con:  # the gap ends where the next execute's first task starts
        start, conn = con.execute("SELECT startNs, connectionId FROM TASK WHERE globalTaskId = ?",
                                  (largest.id,)).fetchone()
        firsts = con.execute("SELECT connectionId, MIN(startNs) FROM TASK GROUP BY connectionId"
                             " ORDER BY 2").fetchall()
    assert start == largest.start_ns + largest.dur_ns
    assert firsts[J.SLEEP_AFTER] == (conn, start)


def test_model_load_is_a_long_api_call(jobs: dict[str, Path]) -> None:
    found = _of(advisor.analyze(jobs["sleepy"], ["long_api"]), "long_api")
    load = [f for f in found if f.evidence["api"] == "aclmdlLoadFromFile"]
    assert len(load) == 1 and load[0].evidence["long_calls"] == 1
    (e,) = load[0].events
    with _db(jobs["sleepy"]) as con:
        row = con.execute("SELECT c.startNs, c.endNs - c.startNs, s.value FROM CANN_API c JOIN"
                          " STRING_IDS s ON s.id = c.name WHERE c.connectionId = ?",
                          (e.id,)).fetchone()
    assert row == (e.start_ns, e.dur_ns, "aclmdlLoadFromFile")
    warm = [f for f in found if "steady_median_us" in f.evidence]
    assert [f.evidence["api"] for f in warm] == ["aclmdlExecute"]
    assert warm[0].events[0].dur_ns > 2 * float(warm[0].evidence["steady_median_us"]) * 1000


def test_steps_outlier_and_unsupported(jobs: dict[str, Path]) -> None:
    found = advisor.analyze(jobs["steps"])
    assert not _of(found, "top_ops") and not _of(found, "host_gaps")  # no tasks
    (step,) = _of(found, "step_interval")
    assert step.severity == WARNING and step.evidence["steps"] == 8
    assert step.evidence["outliers"] == 1 and step.events[0].id == J.SLOW_STEP
    assert step.events[0].dur_ns >= J.SLOW_STEP_S * 1e9
    assert float(step.evidence["median_us"]) < J.SLOW_STEP_S * 1e6 / 2
    (uns,) = _of(found, "unsupported")
    assert uns.evidence["count"] == 1 and "aic_metrics" in uns.summary


def test_severity_order_and_no_steps(jobs: dict[str, Path]) -> None:
    found = advisor.analyze(jobs["sleepy"])
    ranks = [("critical", "warning", "info").index(f.severity) for f in found]
    assert ranks == sorted(ranks)
    assert not _of(found, "step_interval") and not _of(found, "unsupported")


def test_bad_input(tmp_path: Path, jobs: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="'nope' is not a rule"):
        advisor.analyze(jobs["mish"], "top_ops,nope")
    with pytest.raises(ProfilingError, match="does not exist"):
        advisor.analyze(tmp_path / "missing")
    with pytest.raises(ConfigError, match="holds 3 jobs; give one job"):
        advisor.analyze(jobs["sleepy"].parent.parent)  # the folder of all three jobs
    with pytest.raises(ProfilingError, match="not a profiling job"):
        advisor.analyze(tmp_path)
