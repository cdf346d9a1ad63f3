"""Every accepted switch does what it says or is reported "not supported here" (issue 23).

Each field of ProfileConfig (what ``openmsprof.profile(**kw)``, acl.json, the pyACL bits, TF's
profiling_options, torch's experimental_config and the msprof command line map onto) is run
with a non-default value in a real session; either a concrete effect on the job is checked
(:data:`EFFECTS`: a raw record, a summary column, a timeline process, a log line) or the
session's one-line "not supported here" warning names it (:data:`REPORTED`).

The spellings (tests/config/test_switch_spellings.py) map every key each entry point accepts,
taken from that entry point's own table, onto these fields, so a key added later without an
effect check or a report fails there."""

from __future__ import annotations

import csv
import dataclasses
import gc
import itertools
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import openmsprof
from openmsprof import mstx
from openmsprof.config.model import ProfileConfig
from openmsprof.export.msprof.summary_export import export_summary
from openmsprof.export.msprof.timeline import export_timeline
from openmsprof.parse.importer import import_job
from openmsprof.recorder import core, rawfile, rawread
from openmsprof.recorder.records import Kind
from openmsprof.sources import emit

NOT_SWITCHES = {"unsupported", "notes", "explicit", "source"}

#: a non-default value per key
VALUES: dict[str, Any] = dict(
    switch=False, output=None, devices=[0, 1], acl_api=False, runtime_api=True, task_time="l2",
    aic_metrics="PipeUtilization", aicpu=True, l2=True, hccl=True, msproftx=False, training_trace=True,
    fp_point="a", bp_point="b", ge_api="l0", host_sys=["cpu", "mem", "disk"], host_sys_usage=["cpu", "mem"],
    host_sys_usage_freq=20, sys_hardware_mem_freq=50, sys_io_sampling_freq=50, sys_interconnection_freq=50,
    dvpp_freq=50, instr_profiling_freq=1000, llc_profiling="write", storage_limit_mb=1, interval=1,
    op_attr=True, task_memory=True, aicore_shape=True, api_stats=True, profiler_level="Level1",
    export_type=["db"], data_simplification=False, record_op_args=True, mstx_domain_include=["kept"],
    mstx_domain_exclude=["dropped"], gc_detect_threshold=0.0)

#: switches a key needs beside it to act (fp/bp points act with training_trace on)
COMPANIONS: dict[str, dict[str, Any]] = {
    "host_sys_usage_freq": {"host_sys_usage": ["cpu"]}, "fp_point": {"training_trace": True},
    "bp_point": {"training_trace": True}}

#: reported "not supported here" on this CPU-only machine (the warning must name the key)
REPORTED = {"task_time", "aic_metrics", "aicpu", "l2", "hccl", "ge_api", "host_sys", "sys_hardware_mem_freq",
            "sys_io_sampling_freq", "sys_interconnection_freq", "dvpp_freq", "instr_profiling_freq",
            "devices", "llc_profiling", "interval", "op_attr", "task_memory", "aicore_shape", "api_stats",
            "profiler_level", "export_type", "data_simplification", "record_op_args"}

STORAGE_MARKS = 200_000  # ~1.8 MB packed (~9 bytes a marker), 6.4 MB fixed: over a 1 MB limit


def _records(job: Path) -> np.ndarray:
    return rawread.read_all_records(job / "host" / "data")


def _kinds(job: Path) -> set[int]:
    return set(_records(job)["kind"].tolist()) if len(_records(job)) else set()


def _workload(key: str) -> None:
    mstx.mark("hello", None)
    mstx.mark("in a kept domain", "kept")
    mstx.mark("in a dropped domain", "dropped")
    t = emit.now_ns()
    emit.record_api("aclmdlExecute", emit.ApiLevel.ACL, t, t + 1000)
    emit.record_api("rtKernelLaunch", emit.ApiLevel.RUNTIME, t, t + 1000)
    if key.startswith("host_sys_usage"):
        time.sleep(0.5)  # a sampling period or two
    if key == "storage_limit_mb":
        for i in range(STORAGE_MARKS):
            mstx.mark("fill", None)
            if i % 1024 == 0:
                time.sleep(0.02)  # flusher cycles see the size grow
    if key in ("training_trace", "fp_point", "bp_point"):
        # one step of 100 us: forward x at 10 us, a at 30 us; gradients b at 50 us, c at 70 us
        t0 = emit.now_ns()
        for k, (name, at) in enumerate((("x", 10), ("a", 30), ("gradients/b", 50), ("gradients/c", 70))):
            emit.record_task(0, 1, name, t0 + at * 1000, t0 + (at + 10) * 1000, k, op_type="MatMul")
        emit.record_step_range(t0, t0 + 100_000, 1)
    if key == "gc_detect_threshold":
        junk: list[Any] = [[] for _ in range(1000)]
        for a, b in itertools.pairwise(junk):
            a.append(b)
            b.append(a)
        del junk
        gc.collect()


def _switch(job: Path | None, out: Path) -> None:
    assert job is None and not out.exists()  # switch=False: the block ran unprofiled


def _acl_api(job: Path | None, _out: Path) -> None:
    assert job is not None and Kind.API not in _kinds(job)  # acl_api=False (runtime_api off too)


def _runtime_api(job: Path | None, _out: Path) -> None:
    assert job is not None and Kind.API in _kinds(job)


def _msproftx(job: Path | None, _out: Path) -> None:
    assert job is not None and Kind.MARK not in _kinds(job)


def _host_sys_usage(job: Path | None, _out: Path) -> None:
    assert job is not None
    recs = _records(job).view(rawfile.COUNTER_DTYPE)
    assert len(recs[recs["kind"] == Kind.COUNTER])


def _output(job: Path | None, out: Path) -> None:
    assert job is not None and job.parent == out


def _storage_limit(job: Path | None, _out: Path) -> None:
    assert job is not None
    log = (job / "host" / "collection.log").read_text()
    assert "storage_limit 1MB reached" in log, log
    marks = int(np.count_nonzero(_records(job)["kind"] == Kind.MARK))
    # collection stopped at the limit, having written up to it: the Python backend's fixed
    # records (32 bytes: ~32 k in 1 MB), the native core's packed blocks that fit under it
    # (~9 bytes a marker: ~110 k)
    assert (60_000 if core.BACKEND == "native" else 16_000) < marks < STORAGE_MARKS, marks


def _mark_messages(job: Path) -> set[str]:
    res = import_job(job, progress=False)
    with sqlite3.connect(res.db_path) as db:
        rows = db.execute("SELECT s.value FROM MSTX_EVENTS m JOIN STRING_IDS s ON s.id = m.message").fetchall()
    return {r[0] for r in rows}


def _domain_include(job: Path | None, _out: Path) -> None:
    assert job is not None
    assert _mark_messages(job) == {"in a kept domain"}


def _domain_exclude(job: Path | None, _out: Path) -> None:
    assert job is not None
    assert _mark_messages(job) == {"hello", "in a kept domain"}


def _step_row(job: Path) -> dict[str, str]:
    export_summary(job)
    files = sorted((job / "summary").glob("step_trace_*.csv"))
    assert files, sorted(p.name for p in (job / "summary").iterdir())
    with files[0].open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1, rows
    return rows[0]


def _us(cell: str) -> float:
    return float(cell)


def _training_trace(job: Path | None, _out: Path) -> None:
    # automatic points: the first forward task (x, 10 us in) and the last gradient (c, ends 80 us)
    assert job is not None
    row = _step_row(job)
    assert abs(_us(row["Data Aug Bound(us)"]) - 10) < 0.01, row
    assert abs(_us(row["Iteration Refresh(us)"]) - 20) < 0.01, row


def _fp_point(job: Path | None, _out: Path) -> None:
    assert job is not None
    row = _step_row(job)
    assert abs(_us(row["Data Aug Bound(us)"]) - 30) < 0.01, row  # FP Start = task a's start


def _bp_point(job: Path | None, _out: Path) -> None:
    assert job is not None
    row = _step_row(job)
    assert abs(_us(row["Iteration Refresh(us)"]) - 40) < 0.01, row  # BP End = task b's end


def _gc(job: Path | None, _out: Path) -> None:
    assert job is not None
    doc = orjson.loads((job / "host" / "gc_events.json").read_bytes())
    assert doc["threshold_ms"] == 0 and doc["events"], doc
    export_timeline(job)
    names: set[str] = set()
    gcs = 0
    for path in (job / "timeline").glob("msprof_*.json"):
        doc = orjson.loads(path.read_bytes())
        for e in doc["traceEvents"] if isinstance(doc, dict) else doc:
            if e.get("name") == "process_name":
                names.add(e["args"]["name"])
            gcs += e.get("name") == "GC" and e.get("ph") == "X"
    assert "Python GC" in names and gcs >= 1, (names, gcs)


EFFECTS: dict[str, Callable[[Path | None, Path], None]] = {
    "switch": _switch, "acl_api": _acl_api, "runtime_api": _runtime_api, "msproftx": _msproftx,
    "host_sys_usage": _host_sys_usage, "host_sys_usage_freq": _host_sys_usage, "output": _output,
    "storage_limit_mb": _storage_limit, "mstx_domain_include": _domain_include,
    "mstx_domain_exclude": _domain_exclude, "training_trace": _training_trace, "fp_point": _fp_point,
    "bp_point": _bp_point, "gc_detect_threshold": _gc}

KEYS = sorted(f.name for f in dataclasses.fields(ProfileConfig) if f.name not in NOT_SWITCHES)


def test_every_key_is_in_exactly_one_table() -> None:
    assert set(VALUES) == set(KEYS)
    for k in KEYS:
        assert (k in EFFECTS) + (k in REPORTED) == 1, k


def run_session(key: str, value: Any, out: Path, caplog: pytest.LogCaptureFixture) -> tuple[Path | None, list[str]]:
    """Run the workload in a real session with ``key=value`` (and its companions); returns the
    job and the warning lines saying "not supported here"."""
    kw = {key: value, **COMPANIONS.get(key, {}), "output": str(out)}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="openmsprof"), openmsprof.profile(**kw) as prof:
        _workload(key)
    notes = [r.getMessage() for r in caplog.records if "not supported here" in r.getMessage()]
    return (Path(prof.job) if prof.job is not None else None), notes


@pytest.mark.parametrize("key", KEYS)
def test_switch_is_applied_or_reported(key: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out"
    job, notes = run_session(key, VALUES[key], out, caplog)
    if key in REPORTED:
        mine = [n for n in notes if f"{key}=" in n]
        assert len(mine) == 1, notes  # one line naming the key
    else:
        EFFECTS[key](job, out)
        assert not [n for n in notes if f"{key}=" in n], notes  # applied, so not reported


def test_plain_session_reports_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The defaults are all applied: no "not supported here" line at all."""
    with caplog.at_level(logging.WARNING, logger="openmsprof"), openmsprof.profile(output=str(tmp_path)):
        _workload("")
    assert not [r for r in caplog.records if "not supported here" in r.getMessage()]


def test_gc_threshold_keeps_only_longer_collections(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A threshold far above any collection records none (the file says so: no events)."""
    job, _ = run_session("gc_detect_threshold", 60_000.0, tmp_path / "out", caplog)
    assert job is not None
    doc = orjson.loads((job / "host" / "gc_events.json").read_bytes())
    assert doc == {"threshold_ms": 60_000.0, "events": [], "dropped": 0}


def test_fp_point_without_training_trace_changes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Without training_trace the FP/BP columns stay N/A (the point acts only with it)."""
    kw = {"fp_point": "a", "output": str(tmp_path / "out")}
    with openmsprof.profile(**kw) as prof:
        _workload("fp_point")
    assert prof.job is not None
    row = _step_row(Path(prof.job))
    assert row["FP Start(us)"] == "N/A" and row["Data Aug Bound(us)"] == "N/A", row
