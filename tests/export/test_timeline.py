"""export timeline: valid Chrome trace JSON whose events match the database, Perfetto-safe."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path

import orjson
import pytest

from openmsprof.config.errors import ConfigError, ProfilingError, RawDataError
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.timeline import export_timeline
from tests.export.dbfactory import BASE_NS, PID, Builder, make_job
from tests.export.trace_checks import flows_outside_x, load_events, overlapping_tracks


def db_counts(job: Path) -> dict[str, int]:
    c = sqlite3.connect(job / "sqlite" / "msprof.db")
    q = lambda sql: c.execute(sql).fetchone()[0]  # noqa: E731
    out = {
        "marks": q("SELECT COUNT(*) FROM MSTX_EVENTS WHERE eventType IN (0, 3)"),
        "ranges": q("SELECT COUNT(*) FROM MSTX_EVENTS WHERE eventType IN (1, 2)"),
        "apis": q("SELECT COUNT(*) FROM CANN_API"),
        "tasks": q("SELECT COUNT(*) FROM TASK"),
        "steps": q("SELECT COUNT(*) FROM STEP_TIME"),
        "flows": q("SELECT COUNT(*) FROM TASK t JOIN CANN_API a ON a.connectionId = t.connectionId"),
        "counters": q("SELECT COUNT(*) FROM CPU_USAGE") + q("SELECT COUNT(*) FROM HOST_MEM_USAGE"),
    }
    c.close()
    return out


def test_events_match_database_counts(job: Path) -> None:
    paths = export_timeline(job)
    assert [p.name for p in paths] == ["msprof_0.json"]
    events = load_events(paths)
    n = db_counts(job)
    ph = Counter(e["ph"] for e in events)
    assert ph["i"] == n["marks"]
    assert ph["X"] == n["ranges"] + n["apis"] + n["tasks"] + n["steps"]
    assert ph["s"] == ph["f"] == n["flows"] > 0
    assert ph["C"] == n["counters"]
    by_pid = Counter(e["pid"] for e in events if e["ph"] == "X")
    assert by_pid[7] == n["apis"]  # CANN track
    assert by_pid[14] == n["tasks"] + n["steps"]  # executor track
    assert sum(1 for e in events if e["ph"] == "X" and e["name"].startswith("AscendCL@")) == 3


def test_perfetto_safe_invariants(job: Path) -> None:
    (path,) = export_timeline(job)
    raw = path.read_bytes()
    doc = orjson.loads(raw)
    assert set(doc) == {"traceEvents", "otherData"}
    assert doc["otherData"]["openmsprof_base_ns"] == BASE_NS
    events = doc["traceEvents"]
    assert not overlapping_tracks(events)
    assert not flows_outside_x(events)
    ids = Counter((e["id"], e["ph"]) for e in events if e["ph"] in ("s", "f"))
    assert all(isinstance(i, int) and 0 < i < 2**53 and c == 1 for (i, _), c in ids.items())
    assert sorted(i for i, ph in ids if ph == "s") == list(range(1, len(ids) // 2 + 1))
    assert all(0 <= e["pid"] < 2**31 and 0 <= e["tid"] < 2**31 for e in events)
    owners: dict[int, set[int]] = {}
    for e in events:  # Perfetto keys threads by tid: no tid may appear under two processes
        owners.setdefault(e["tid"], set()).add(e["pid"])
    assert all(len(pids) == 1 for pids in owners.values())
    # numeric ts with exactly three decimals, relative to the base
    assert re.findall(rb'"ts":"', raw) == []
    assert len(re.findall(rb'"ts":\d+\.\d{3}[,}]', raw)) == sum(1 for e in events if "ts" in e)
    # the overlapping cross-thread ranges and tasks went to overflow threads, not dropped
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"Thread 4250 (worker-1) (overlap 1)", "Stream 1 (overlap 1)"} <= names
    procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert procs == {6: "infer.py", 7: "CANN", 9: "CPU Usage", 10: "Memory Usage",
                     14: "CPU Execution"}
    sort = {e["pid"]: e["args"]["sort_index"] for e in events if e["name"] == "process_sort_index"}
    assert sort == {6: 6, 7: 7, 9: 9, 10: 10, 14: 14}


def test_ascend_compat_spelling(job: Path) -> None:
    (path,) = export_timeline(job, ascend_compat=True)
    events = orjson.loads(path.read_bytes())
    assert isinstance(events, list)
    tasks = [e for e in events if e["ph"] == "X" and "Task Id" in e.get("args", {})]
    assert tasks[0]["pid"] == (PID << 10) | (14 << 5) | 0
    assert isinstance(tasks[0]["ts"], str) and tasks[0]["ts"] == "1700000000124496.789"
    assert tasks[0]["args"]["Physic Stream Id"] == 0
    flows = [e for e in events if e["ph"] == "s"]
    assert flows[0]["id"] == str(1 << 32) and flows[0]["name"] == f"HostToDevice{1 << 32}"
    ends = [e for e in events if e["ph"] == "f"]
    assert len({e["id"] for e in flows}) == len(flows) == len(ends)  # unique ids (issue 11)
    assert {e["id"] for e in ends} == {e["id"] for e in flows}
    assert all(isinstance(e["id"], str) for e in flows + ends)
    labels = {e["args"]["labels"] for e in events if e["name"] == "process_labels"}
    assert "NPU 0" in labels


def test_time_window_selects_overlapping_events(job: Path) -> None:
    # iteration 1 spans [125456.789, 126406.789] µs from the base
    (path,) = export_timeline(job, start_us=125400, end_us=126400)
    events = load_events([path])
    tasks = [e["name"] for e in events if e["ph"] == "X" and e["pid"] == 14 and "Task Id"
             in e["args"]]
    assert tasks == ["conv1", "relu1", "fc"]
    assert all(125400 <= e["ts"] < 126400 for e in events if e["ph"] in ("C", "i"))
    assert Counter(e["ph"] for e in events)["s"] == 3


def test_size_split_and_stale_slices_removed(job: Path) -> None:
    whole = load_events(export_timeline(job))
    paths = export_timeline(job, max_size_mb=0.004)
    assert len(paths) > 1 and all(re.fullmatch(r"msprof_0_slice_\d+\.json", p.name) for p in paths)
    parts = [load_events([p]) for p in paths]
    for part in parts:  # every slice opens on its own: it names its processes
        assert any(e["name"] == "process_name" for e in part)
    data = lambda evs: sorted(orjson.dumps(e) for e in evs if e["ph"] != "M")  # noqa: E731
    assert data([e for part in parts for e in part]) == data(whole)
    (again,) = export_timeline(job)
    assert sorted(p.name for p in again.parent.iterdir()) == ["msprof_0.json"]


def test_host_only_and_empty_jobs(tmp_path: Path) -> None:
    b = Builder(tmp_path / "a" / "sqlite" / "msprof.db")
    b.meta(BASE_NS + 5, None)
    b.api(BASE_NS + 10, BASE_NS + 20, 20000, PID, 1, "aclInit")
    b.close()
    (path,) = export_timeline(tmp_path / "a")
    assert path.name == "msprof_host.json"
    assert [e["name"] for e in load_events([path]) if e["ph"] == "X"] == ["AscendCL@aclInit"]
    b = Builder(tmp_path / "b" / "sqlite" / "msprof.db")
    b.meta(BASE_NS, None)
    b.close()
    assert export_timeline(tmp_path / "b") == []
    assert not list((tmp_path / "b" / "timeline").iterdir())


def test_bad_options_and_bad_database(job: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--max-size-mb"):
        export_timeline(job, max_size_mb=0)
    with pytest.raises(ConfigError, match="--end-us"):
        export_timeline(job, start_us=10, end_us=5)
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"\x00garbage" * 512)
    with pytest.raises(RawDataError, match=r"bad\.db"):
        JobDB(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProfilingError, match="not a profiling job"):
        export_timeline(tmp_path / "empty")


def test_event_before_base_keeps_ts_non_negative(tmp_path: Path) -> None:
    job = make_job(tmp_path)
    c = sqlite3.connect(job / "sqlite" / "msprof.db")
    c.execute("UPDATE TASK SET startNs = ? WHERE taskId = 10", (BASE_NS - 1_500,))
    c.commit()
    c.close()
    (path,) = export_timeline(job)
    doc = orjson.loads(path.read_bytes())
    assert doc["otherData"]["openmsprof_base_ns"] == BASE_NS - 1_000_000_000
    assert min(e["ts"] for e in doc["traceEvents"] if "ts" in e) == pytest.approx(999_998.5)
