"""Perfetto's trace_processor_shell v56 (the real checker) reads every msprof timeline JSON we
write with no error in ``stats`` and no slice dropped: pyACL and TensorFlow ``PROF_`` jobs, the
tool-facing ``mindstudio_profiler_output/msprof_*.json`` (Ascend spelling) and ``timeline/``
in both modes, and a job built with the slice timings that Perfetto's rounding of the Ascend
string ``ts`` would make overlap.  (torch trace_view.json: tests/torch/test_perfetto_trace_view.py.)"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pytest

from openmsprof.export.ascend_pt.perfetto_fit import image_ns
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.timeline import write_timeline
from openmsprof.export.msprof.trace_layout import image
from tests.export.dbfactory import PID, START_NS, Builder, write_info
from tests.refclients import perfetto_errors, query, trace_processor
from tests.tensorflow.helpers import PROGRAMS, jobs, run_py

OPENMSPROF = [sys.executable, "-m", "openmsprof"]


def _export(job: Path, *args: str) -> None:
    res = subprocess.run([*OPENMSPROF, "export", *args, "-dir", str(job)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]


def _timelines(job: Path, tmp: Path) -> list[Path]:
    """The tool-facing msprof JSON, and timeline/msprof_0.json in the Perfetto-safe and the
    Ascend (--ascend-compat) modes (copied aside: both modes write the same name)."""
    _export(job, "summary")
    _export(job, "timeline")
    safe = tmp / "perfetto_safe.json"
    safe.write_bytes((job / "timeline" / "msprof_0.json").read_bytes())
    _export(job, "timeline", "--ascend-compat")
    tool = sorted((job / "mindstudio_profiler_output").glob("msprof_*.json"))
    assert tool
    return [*tool, safe, job / "timeline" / "msprof_0.json"]


def _check(path: Path) -> None:
    assert perfetto_errors(path) == {}, path
    doc = orjson.loads(path.read_bytes())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    x = Counter(e["name"] for e in events if e["ph"] == "X")
    got = {r["name"]: int(r["n"]) for r in query(path, "select name, count(*) n from slice group by name")}
    for name, n in x.items():  # instants are slices too: only X counts are compared
        assert got.get(name) == n, (path.name, name)
    assert sum(x.values()) > 50


@pytest.fixture(scope="module")
def pyacl_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace_processor()
    root = tmp_path_factory.mktemp("acl")
    res = subprocess.run([*OPENMSPROF, "demo", "--output", str(root / "jobs"), "--executes", "40"], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    (job,) = (root / "jobs").glob("PROF_*")
    return job


def test_pyacl_timelines_have_no_perfetto_error(pyacl_job: Path, tmp_path: Path) -> None:
    for path in _timelines(pyacl_job, tmp_path):
        _check(path)


def test_tensorflow_timelines_have_no_perfetto_error(tmp_path: Path) -> None:
    trace_processor()
    pytest.importorskip("tensorflow")
    r = run_py([str(PROGRAMS), "keras", str(tmp_path / "tf")], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (job,) = jobs(tmp_path / "tf")
    for path in _timelines(job, tmp_path):
        _check(path)


def _shift(t: int) -> int:
    return image(t) - t


def _rounding_job(root: Path, n: int) -> Path:
    """``n`` times, on a stream, an API thread and a marker thread: a slice ending exactly where
    the next starts, the next's start rounding earlier in Perfetto than the first's (they
    overlap there); on a second stream, a parent with a child ending at the parent's end, the
    child's start rounding later (it sticks out there).  TF's executor writes tasks < 0.3 µs
    apart (the intermittent ``slice_drop_overlapping_complete_event`` of its tool-facing JSON)."""
    job = root / "PROF_000001_20240101000000000_00004242ABCDEFGH"
    write_info(job)
    b = Builder(job / "sqlite" / "msprof.db")
    b.thread(PID, "MainThread")
    rng = np.random.default_rng(5)
    t, made, gid = START_NS + 1_000_000, 0, 1
    while made < n:
        a, mid = t + int(rng.integers(0, 1000)), t + int(rng.integers(1000, 5000))
        end = mid + int(rng.integers(1000, 5000))
        if _shift(mid) < _shift(a) - 50 and _shift(mid) > _shift(a - 500) + 50:
            b.task(a, mid, gid, "first", "Add", stream=3)
            b.task(mid, end, gid + 1, "next", "Add", stream=3)
            b.task(a - 500, end, gid + 2, "parent", "Add", stream=4)
            b.task(mid, end, gid + 3, "child", "Add", stream=4)
            b.api(a, mid, 5000, PID, gid, "rtFirst")
            b.api(mid, end, 5000, PID, gid + 1, "rtNext")
            b.mstx(a, mid, 2, "range first", PID, range_id=gid)
            b.mstx(mid, end, 2, "range next", PID, range_id=gid + 1)
            gid, made = gid + 4, made + 1
        t += 40_000
    b.meta(START_NS, t + 1_000_000)
    b.close()
    return job


def test_ascend_spelling_keeps_rounded_slices_whole(tmp_path: Path) -> None:
    trace_processor()
    stamps = np.asarray([START_NS + 7919 * k for k in range(2000)])
    assert [image(int(x)) for x in stamps] == image_ns(stamps).tolist()  # one reading, two spellings
    job = _rounding_job(tmp_path, 40)
    with JobDB(job / "sqlite" / "msprof.db", job) as db:
        (path,) = write_timeline(db, tmp_path / "ascend", ascend_compat=True, parallel=False)
    x = [e for e in orjson.loads(path.read_bytes()) if e["ph"] == "X"]
    assert len(x) == 40 * 8 and all(isinstance(e["ts"], str) for e in x)
    _check(path)  # no error, every X a slice
    depth = Counter((r["name"], r["depth"]) for r in query(path, "select name, depth from slice"))
    assert depth[("child", "1")] == 40  # truly nested children stay nested (shortened < 0.5 µs)
    cut = [float(e["dur"]) for e in x if e["name"] == "child"]
    true = {e["ts"]: float(e["dur"]) for e in x if e["name"] == "next"}  # the same span, uncut
    assert all(0 < true[e["ts"]] - float(e["dur"]) < 0.5 for e in x if e["name"] == "child") and len(cut) == 40
