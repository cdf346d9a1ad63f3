"""Value-only corruption of a real job's raw records (issue 23): the first and last record of each
kind in each raw file of a real job (markers, ranges, API spans, tasks and their infos, steps,
counters, thread names) gets each impossible value its fields can hold — a time below 0 or past
2^61, an end before its start, a span over 10 days, an enum past its range, a counter that is
NaN, infinite or over 1e18, an unknown series, a sub-index no CPU or PID has, a negative range
id, a string id with no string.  Imported, each corrupted job either gives exactly the tables
of the clean job, or says so in warning lines with a count; the impossible-value line names the
file and the reason.

A plausible value put in place of another (another thread id, an existing string id, another
model or stream id) is indistinguishable from real data and is not a corruption tested here."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openmsprof.parse.importer import import_job
from openmsprof.recorder import core, rawfile
from openmsprof.recorder.records import HEADER, Kind
from tests.hostile.fuzzlib import make_base_job
from tests.recorder import slice_forms

pytestmark = pytest.mark.timeout(900)

NO_STRING = 0xFFFFFFF0
TEN_DAYS_NS = 10 * 86400 * 10**9
#: kind → fields holding string ids
STRING_FIELDS = {Kind.MARK: ("a", "b"), Kind.PUSH: ("a", "b"), Kind.RANGE_START: ("a", "b"), Kind.API: ("a",),
                 Kind.TASK: ("a",), Kind.THREAD: ("a",),
                 Kind.TASK_INFO: ("op_type", "in_shapes", "in_dtypes", "out_shapes", "out_dtypes")}
#: kind → first aux value out of range (MARK: MstxEvent, STEP: StepTag, TASK_INFO: Executor, API: level)
AUX_PAST = {Kind.MARK: 4, Kind.STEP: 2, Kind.TASK_INFO: 3, Kind.API: 0xFFFF}


def _snapshot(job: Path) -> tuple[dict[str, list[str]], list[str]]:
    shutil.rmtree(job / "sqlite", ignore_errors=True)
    res = import_job(job, progress=False)
    tables: dict[str, list[str]] = {}
    with sqlite3.connect(res.db_path) as db:
        for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'"):
            if t != "META_DATA":  # the import's own time and version
                tables[t] = sorted(map(repr, db.execute(f"SELECT * FROM {t}")))
    return tables, res.warnings


def _cases(kind: int, rec: np.ndarray) -> list[tuple[str, Any]]:
    """(field, impossible value) pairs for one record of ``kind`` (``rec`` in its own dtype)."""
    out: list[tuple[str, Any]] = []
    if kind == Kind.COUNTER:
        out += [("ts", -1), ("ts", 1 << 62), ("value", float("nan")), ("value", float("inf")),
                ("value", -1e300), ("a", 0), ("a", 999), ("b", 1 << 31)]
    elif kind not in (Kind.TASK_INFO, Kind.THREAD):
        out += [("t0", -1), ("t0", 1 << 62)]
    if kind in (Kind.API, Kind.TASK, Kind.STEP_RANGE):
        t0 = int(rec["t0"][0])
        out += [("t1", t0 - 1), ("t1", t0 + TEN_DAYS_NS + 1)]
    if kind in (Kind.RANGE_START, Kind.RANGE_END):
        out.append(("t1", -1))
    if kind in AUX_PAST:
        out += [("aux", AUX_PAST[kind]), ("aux", 0xFFFF)]
    out += [(f, NO_STRING) for f in STRING_FIELDS.get(kind, ())]
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]], list[str]]:
    job = slice_forms.fixed_job(make_base_job(tmp_path_factory.mktemp("vc")))  # (records to index)
    tables, warnings = _snapshot(job)
    assert warnings == [] and tables["TASK"] and tables["MSTX_EVENTS"] and tables["OMSP_COUNTER"]
    return job, tables, warnings


@pytest.mark.parametrize("form", ["fixed", pytest.param("packed", marks=pytest.mark.skipif(
    core.ring is None, reason="native core not built (the packed encoder)"))])
def test_every_impossible_value_is_dropped_and_said_or_changes_nothing(
        clean: tuple[Path, dict[str, list[str]], list[str]], form: str) -> None:
    """Each impossible value of each record kind, written back in the fixed form and in the
    packed one (the native flusher's): dropped and said, or nothing changes."""
    job, tables, base_warnings = clean
    files = sorted(p for p in job.glob("*/data/*.records.*") if not p.name.endswith(".done"))
    assert len(files) >= 4
    tried, said, kinds_seen = 0, 0, set()
    for path in files:
        original = path.read_bytes()
        generic = np.frombuffer(original, dtype=rawfile.GENERIC_DTYPE, offset=HEADER.size)
        for kind in sorted(set(generic["kind"].tolist())):
            kinds_seen.add(kind)
            where = np.flatnonzero(generic["kind"] == kind)
            dt = {Kind.COUNTER: rawfile.COUNTER_DTYPE, Kind.TASK_INFO: rawfile.TASKINFO_DTYPE}.get(kind, rawfile.GENERIC_DTYPE)
            records = np.frombuffer(original, dtype=dt, offset=HEADER.size)
            for idx, (field, value) in [(int(i), c) for i in {where[0], where[-1]}
                                        for c in _cases(kind, records[i:i + 1])]:
                bad = records.copy()
                bad[field][idx] = value
                slice_forms.write(path, original[:HEADER.size], bad, form == "packed")
                try:
                    got, warnings = _snapshot(job)
                finally:
                    path.write_bytes(original)
                tried += 1
                new = [w for w in warnings if w not in base_warnings]
                what = f"{path.name} kind {kind} {field}={value!r}"
                assert all("\n" not in w and re.search(r"\d", w) for w in new), (what, new)
                if got != tables:
                    assert new, f"{what}: changed {sorted(k for k in got if got[k] != tables.get(k))} with no warning"
                said += bool(new)
    assert kinds_seen >= {Kind.MARK, Kind.PUSH, Kind.RANGE_START, Kind.API, Kind.TASK, Kind.TASK_INFO,
                          Kind.STEP, Kind.COUNTER}
    assert tried >= 80 and said >= tried // 2, (tried, said)


def test_impossible_value_line_names_file_reason_and_count(clean: tuple[Path, dict[str, list[str]], list[str]],
                                                           tmp_path: Path) -> None:
    job = shutil.copytree(clean[0], tmp_path / "job", ignore=shutil.ignore_patterns("sqlite"))
    (path,) = job.glob("device_0/data/Task.records.0.slice_*[0-9]")
    data = path.read_bytes()
    arr = np.frombuffer(data, dtype=rawfile.GENERIC_DTYPE, offset=HEADER.size).copy()
    tasks = np.flatnonzero(arr["kind"] == Kind.TASK)[:3]
    arr["t1"][tasks[:2]] = arr["t0"][tasks[:2]] - 5  # two ends before their starts
    arr["t0"][tasks[2]] = -7  # one time below 0
    path.write_bytes(data[:HEADER.size] + arr.tobytes())
    _tables, warnings = _snapshot(job)
    lines = [w for w in warnings if "impossible value" in w]
    assert lines == [f"3 × record with an impossible value (dropped) in device_0/data/{path.name}: "
                     "end before start 2, time out of range 1"], warnings
