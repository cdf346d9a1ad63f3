"""End to end on a real job: a multi-threaded program profiled with openmsprof.start/stop and
imported by the real importer; exported events match the database."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from openmsprof.cli.main import main
from openmsprof.export import overhead
from tests.export.trace_checks import flows_outside_x, load_events, overlapping_tracks

pytest.importorskip("openmsprof.parse.importer")


@pytest.fixture(scope="module")
def real_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.export.realjob import make_real_job

    return make_real_job(tmp_path_factory.mktemp("real"))


def test_timeline_matches_database(real_job: Path) -> None:
    assert main(["export", "timeline", "-dir", str(real_job)]) == 0
    events = load_events(sorted((real_job / "timeline").glob("msprof_*.json")))
    c = sqlite3.connect(real_job / "sqlite" / "msprof.db")
    n = lambda sql: c.execute(sql).fetchone()[0]  # noqa: E731
    ph = Counter(e["ph"] for e in events)
    assert ph["X"] == (n("SELECT COUNT(*) FROM TASK") + n("SELECT COUNT(*) FROM CANN_API")
                       + n("SELECT COUNT(*) FROM STEP_TIME")
                       + n("SELECT COUNT(*) FROM MSTX_EVENTS WHERE eventType IN (1, 2)"))
    assert ph["i"] == n("SELECT COUNT(*) FROM MSTX_EVENTS WHERE eventType IN (0, 3)") == 2
    flows = n("SELECT COUNT(*) FROM TASK t JOIN CANN_API a ON a.connectionId = t.connectionId")
    assert ph["s"] == ph["f"] == flows == 30
    # host usage counters, plus one "Profiling Overhead" counter per figure of the recorder's file
    figures = overhead.read_job(real_job)
    assert figures["records_written"] > 0
    # per process (seed 003 host_sys_usage): a "PID {pid}" counter per CPU and RSS sample
    procs = n("SELECT COUNT(*) FROM OMSP_COUNTER WHERE series IN (2, 5) AND subIndex > 0 AND deviceId < 0")
    assert procs > 0
    assert ph["C"] == (n("SELECT COUNT(*) FROM CPU_USAGE") + n("SELECT COUNT(*) FROM HOST_MEM_USAGE")
                       + procs + len(figures))
    assert {e["name"] for e in events if e["ph"] == "C" and e["name"].startswith("PID ")} == {
        f"PID {p}" for (p,) in c.execute("SELECT DISTINCT subIndex FROM OMSP_COUNTER WHERE series IN (2, 5)"
                                          " AND subIndex > 0")}
    pids = {e["pid"] for e in events if e["ph"] == "M" and e["args"].get("name") == overhead.PROCESS}
    assert {e["name"] for e in events if e["ph"] == "C" and e["pid"] in pids} == set(figures)
    assert not overlapping_tracks(events) and not flows_outside_x(events)
    c.close()


def test_summary_and_show(real_job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "summary", "-dir", str(real_job)]) == 0
    names = {p.name for p in (real_job / "summary").iterdir()}
    assert {"op_summary_0.csv", "op_statistic_0.csv", "api_statistic_host.csv",
            "acl_statistic_host.csv", "task_time_0.csv", "msprof_tx_host.csv"} <= names
    rows = (real_job / "summary" / "op_summary_0.csv").read_text().splitlines()
    assert len(rows) == 31
    assert main(["show", "-dir", str(real_job), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert "AscendCL,aclmdlExecute,10," in out


def test_export_imports_a_never_imported_job(tmp_path: Path) -> None:
    from tests.export.realjob import make_real_job

    job = make_real_job(tmp_path, threads=1, iters=2, imported=False)
    assert not (job / "sqlite" / "msprof.db").exists()
    assert main(["export", "summary", "-dir", str(job)]) == 0
    assert (job / "sqlite" / "msprof.db").is_file()
    assert len((job / "summary" / "task_time_0.csv").read_text().splitlines()) == 1 + 6
