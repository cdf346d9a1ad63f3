"""The tool-facing layout of a PROF_ job (export/msprof/tool_facing*.py): msprof_{ts}.db,
mindstudio_profiler_output/, analyze/, DeviceInfo keys, the overhead figures."""

from __future__ import annotations

import csv
import re
import sqlite3
from pathlib import Path

import orjson
import pytest

from openmsprof.export import overhead
from openmsprof.export.msprof.msprof_analyze_layout import export_tool_facing
from tests.export.realjob import make_real_job

STAMP = r"\d{14}"


def test_layout_and_classified_task_types(tmp_path: Path) -> None:
    job = make_real_job(tmp_path / "out")
    (job / "host" / overhead.FILE).write_bytes(orjson.dumps(
        {"records_written": 1234, "bytes_written": 56789, "records_dropped": 0, "flusher_cpu_ns": 4_000_000,
         "note": "ignored: not a number"}))
    paths = export_tool_facing(job)
    (db,) = [p for p in job.iterdir() if re.fullmatch(rf"msprof_{STAMP}\.db", p.name)]
    assert db in paths and (job / "analyze" / "communication_analyzer.db").is_file()
    out = job / "mindstudio_profiler_output"
    names = sorted(p.name for p in out.iterdir())
    stamp = db.name[7:21]
    assert f"op_summary_{stamp}.csv" in names and f"msprof_{stamp}.json" in names and "README.txt" in names
    assert all(n == "README.txt" or n.endswith(f"_{stamp}.csv") or n.endswith(f"_{stamp}.json") for n in names)
    with open(out / f"op_summary_{stamp}.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and next(iter(rows[0])) == "Device_id"
    want = {"Conv": "CPU", "Gemm": "CPU", "Relu": "CPU"}  # the real executor (docs/formats.md decision 1)
    assert {r["OP Type"]: r["Task Type"] for r in rows} == want
    con = sqlite3.connect(db)
    try:
        types = {v for (v,) in con.execute("SELECT DISTINCT s.value FROM TASK t JOIN STRING_IDS s ON s.id = t.taskType")}
        assert types == {"CPU"}
        meta = dict(con.execute("SELECT name, value FROM META_DATA"))
        assert meta["EXECUTOR"] == "CPU"
        assert orjson.loads(meta[overhead.KEY]) == {"records_written": 1234, "bytes_written": 56789,
                                                    "records_dropped": 0, "flusher_cpu_ns": 4_000_000}
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"ENUM_HCCL_DATA_TYPE", "COMMUNICATION_OP", "COMMUNICATION_TASK_INFO", "AICORE_FREQ"} <= tables
        assert con.execute("SELECT count(*) FROM AICORE_FREQ").fetchone()[0] == 0  # none measured (decision 13)
    finally:
        con.close()
    # the source db keeps the executor
    src = sqlite3.connect(job / "sqlite" / "msprof.db")
    try:
        assert {v for (v,) in src.execute("SELECT DISTINCT s.value FROM TASK t JOIN STRING_IDS s "
                                          "ON s.id = t.taskType")} == {"CPU"}
    finally:
        src.close()
    events = orjson.loads((out / f"msprof_{stamp}.json").read_bytes())
    assert isinstance(events, list)
    tasks = [e for e in events if e.get("ph") == "X" and "Task Type" in e.get("args", {})]
    assert {e["args"]["Task Type"] for e in tasks} == {"CPU"}
    counters = {e["name"]: e["args"][e["name"]] for e in events if e.get("ph") == "C"
                and e["name"] in ("records_written", "flusher_cpu_ns")}
    assert counters == {"records_written": 1234, "flusher_cpu_ns": 4_000_000}
    readme = (out / "README.txt").read_text()
    assert "executor (real hardware of every task): CPU" in readme and "records_written: 1234" in readme
    host = orjson.loads((job / "host" / "info.json").read_bytes())
    assert host[overhead.KEY]["bytes_written"] == 56789
    for info in job.glob("device_*/info.json.*"):
        dev = orjson.loads(info.read_bytes())["DeviceInfo"][0]
        assert dev["ai_core_num"] >= 1 and "aic_frequency" not in dev


def test_own_timeline_carries_the_overhead_track(tmp_path: Path) -> None:
    from openmsprof.export.msprof.timeline import export_timeline

    job = make_real_job(tmp_path / "out")
    (job / "host" / overhead.FILE).write_bytes(orjson.dumps({"records_written": 77, "flusher_cpu_ns": 5}))
    (path,) = export_timeline(job)
    doc = orjson.loads(path.read_bytes())
    procs = {e["args"]["name"]: e["pid"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    counters = {e["name"]: e["args"][e["name"]] for e in doc["traceEvents"]
                if e.get("ph") == "C" and e["pid"] == procs[overhead.PROCESS]}
    assert counters == {"records_written": 77, "flusher_cpu_ns": 5}


def test_reexport_replaces_stale_stamps(tmp_path: Path) -> None:
    job = make_real_job(tmp_path / "out")
    export_tool_facing(job)
    old = job / "msprof_20000101000000.db"
    old.write_bytes(b"")
    stale = job / "mindstudio_profiler_output" / "op_summary_20000101000000.csv"
    stale.write_text("x")
    export_tool_facing(job)
    assert not old.exists() and not stale.exists()
    assert len([p for p in job.iterdir() if p.name.startswith("msprof_") and p.suffix == ".db"]) == 1


def test_overhead_read_tolerantly(tmp_path: Path) -> None:
    (tmp_path / "host").mkdir()
    assert overhead.read_job(tmp_path) == {}
    (tmp_path / "host" / overhead.FILE).write_text("{not json")
    assert overhead.read_job(tmp_path) == {}
    (tmp_path / "host" / overhead.FILE).write_text('[1, 2]')
    assert overhead.read_job(tmp_path) == {}
    assert overhead.merge({"a": 1, "b": 2.5}, {"a": 2}) == {"a": 3, "b": 2.5}


def test_each_verb_writes_its_half_over_one_kept_db(tmp_path: Path) -> None:
    """export summary writes the merged CSVs, export timeline msprof_{ts}.json; the db is made once
    and kept while the data is unchanged, so both halves carry its stamp."""
    job = make_real_job(tmp_path / "out")
    out = job / "mindstudio_profiler_output"
    paths = export_tool_facing(job, ("summary",))
    db = paths[0]
    stamp = db.name[7:21]
    made = db.stat().st_mtime_ns
    names = {p.name for p in out.iterdir()}
    assert f"op_summary_{stamp}.csv" in names and f"msprof_{stamp}.json" not in names
    export_tool_facing(job, ("timeline",))
    names = {p.name for p in out.iterdir()}
    assert {f"op_summary_{stamp}.csv", f"msprof_{stamp}.json", "README.txt"} <= names
    assert db.stat().st_mtime_ns == made  # kept, not rewritten
    assert f"op_summary_{stamp}.csv" in (out / "README.txt").read_text()
    assert isinstance(orjson.loads((out / f"msprof_{stamp}.json").read_bytes()), list)
    # the data changed (new overhead figures): a new db, with the figures
    (job / "host" / overhead.FILE).write_bytes(orjson.dumps({"records_written": 9}))
    (db2,) = export_tool_facing(job, ("summary",))[:1]
    con = sqlite3.connect(db2)
    try:
        assert orjson.loads(dict(con.execute("SELECT name, value FROM META_DATA"))[overhead.KEY]) == {
            "records_written": 9}
    finally:
        con.close()
    assert [p.name for p in job.glob("msprof_*.db")] == [db2.name]


def test_array_content_found_at_the_ends_as_a_whole_read_finds_it(tmp_path: Path) -> None:
    from openmsprof.export.msprof.merged_output import _inner

    body = b'{"a":1},' * 2000 + b"{}"
    cases = [b"[]", b"[]\n", b"[ ]", b"[{}]", b" [ {} ]\n", b"{}", b"[", b"", b"[" + body + b"]\n",
             b"\n" * 5000 + b"[" + b" " * 5000 + body + b"\n" * 9000 + b"]", b"[" + body, body + b"]"]
    for i, data in enumerate(cases):
        path = tmp_path / f"{i}.json"
        path.write_bytes(data)
        lo, hi = _inner(path)
        s = data.strip()
        want = s[1:-1].strip() if s[:1] == b"[" and s[-1:] == b"]" and len(s) >= 2 else b""
        assert data[lo:hi] == want, (i, lo, hi)


def test_copied_summaries_equal_the_rendered_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables of SAME_IN_BOTH copied from summary/ are the bytes rendering would write."""
    from openmsprof.export.msprof import msprof_analyze_layout as tool_facing
    from openmsprof.export.msprof.merged_output import SAME_IN_BOTH
    from openmsprof.export.msprof.summary_export import export_summary

    copies: list[str] = []
    real_copy = tool_facing._copy
    monkeypatch.setattr(tool_facing, "_copy", lambda s, t: copies.append(s.name) or real_copy(s, t))

    job = make_real_job(tmp_path / "out")
    out = job / "mindstudio_profiler_output"
    rendered = {p.name: p.read_bytes() for p in export_tool_facing(job, ("summary",)) if p.parent == out}
    copied = {p.name: p.read_bytes() for p in export_tool_facing(job, ("summary",), export_summary(job))
              if p.parent == out}
    assert copied == rendered
    assert copies and all(n.startswith(tuple(SAME_IN_BOTH)) for n in copies)


@pytest.mark.parametrize("parallel", [False, True])
def test_timeline_prepares_the_db_while_its_child_renders(tmp_path: Path, parallel: bool) -> None:
    """``export timeline``'s ``meanwhile`` (the tool-facing db's copy) runs once, forked device
    pass or not; the layout then keeps that db and the timeline files are those of a plain run."""
    from openmsprof.export.jobdb import open_job
    from openmsprof.export.msprof.msprof_analyze_layout import prepare_db
    from openmsprof.export.msprof.timeline import write_timeline

    job = make_real_job(tmp_path / "out")
    with open_job(job) as db:
        plain = {p.name: p.read_bytes() for p in write_timeline(db, tmp_path / "plain", parallel=parallel)}
        made: list[Path] = []
        paths = write_timeline(db, tmp_path / "tl", parallel=parallel, meanwhile=lambda: made.append(prepare_db(job)))
    assert {p.name: p.read_bytes() for p in paths} == plain
    (db_path,) = made
    assert db_path.is_file() and list(job.glob("msprof_*.db")) == [db_path]
    assert export_tool_facing(job, ("timeline",))[0] == db_path  # kept, not copied again
