"""The fast timeline path: the forked device pass, compact Perfetto-safe tids, split flow passes.

Every check runs the real exporter on real SQLite databases; the parallel path forks a real
child process.
"""

from __future__ import annotations

import bisect
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from openmsprof.config.errors import RawDataError, StorageError
from openmsprof.export import jobdb as dbmod
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import trace_passes
from openmsprof.export.msprof.timeline import write_timeline
from openmsprof.export.msprof.trace_fork import DeviceChild
from openmsprof.export.msprof.trace_layout import Style
from openmsprof.export.msprof.trace_writer import TraceWriter
from tests.export.dbfactory import BASE_NS, PID, START_NS, Builder, make_big_db, write_info
from tests.export.trace_checks import (
    flows_outside_x,
    load_events,
    ns,
    overlapping_tracks,
    x_spans,
)
from tests.tmpfs import mount_tmpfs


def export(job: Path, out: Path, **kw: Any) -> list[dict[str, Any]]:
    with JobDB(job / "sqlite" / "msprof.db", job) as db:
        paths = write_timeline(db, out, **kw)
    assert [p.name for p in paths] == ["msprof_0.json"]
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temp file left
    return load_events(paths)


def canon(events: list[dict[str, Any]]) -> list[bytes]:
    return sorted(orjson.dumps(e) for e in events)


@pytest.mark.parametrize("ascend", [False, True])
def test_forked_device_pass_writes_the_same_events(job: Path, tmp_path: Path,
                                                   ascend: bool) -> None:
    one = export(job, tmp_path / "one", parallel=False, ascend_compat=ascend)
    two = export(job, tmp_path / "two", parallel=True, ascend_compat=ascend)
    assert canon(one) == canon(two)
    ph = Counter(e["ph"] for e in two)
    assert ph["s"] == ph["f"] == 9 and ph["X"] > 20


def overlap_job(root: Path) -> Path:
    """Two APIs on one thread that partially overlap; the second launches a task, so its flow
    must start on the overflow lane the second API is drawn on."""
    job = root / "PROF_000003_20240101000000000_00004242ABCDEFGH"
    write_info(job)
    b = Builder(job / "sqlite" / "msprof.db")
    b.meta(START_NS, START_NS + 10_000_000)
    t = START_NS + 1_000_000
    b.api(t, t + 500_000, 20000, PID, 1, "aclmdlExecute")
    b.api(t + 100_000, t + 600_000, 5000, PID, 2, "rtKernelLaunch")  # partial overlap
    b.api(t + 700_000, t + 800_000, 5000, PID, 3, "rtKernelLaunch")
    b.task(t + 610_000, t + 650_000, 1, "conv", "Conv", conn=2)
    b.task(t + 810_000, t + 850_000, 2, "relu", "Relu", conn=3)
    b.close()
    return job


@pytest.mark.parametrize("parallel", [False, True])
def test_flow_starts_on_the_overflow_lane_of_its_api(tmp_path: Path, parallel: bool) -> None:
    events = export(overlap_job(tmp_path), tmp_path / "out", parallel=parallel)
    assert not overlapping_tracks(events)
    assert not flows_outside_x(events)
    lane = next(e["tid"] for e in events if e["name"] == "thread_name"
                and e["args"]["name"].endswith("(overlap 1)"))
    starts = sorted((e["id"], e["tid"]) for e in events if e["ph"] == "s")
    assert starts == [(1, lane), (2, 107)]
    ends = sorted((e["id"], e["tid"]) for e in events if e["ph"] == "f")
    assert ends == [(1, 114), (2, 114)]


def test_compact_tids_and_exact_event_text(job: Path, tmp_path: Path) -> None:
    (path,) = write_timeline(JobDB(job / "sqlite" / "msprof.db", job), tmp_path)
    events = load_events([path])
    assert all(e["tid"] % 100 == e["pid"] for e in events)  # k·100 + sort index
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads[114] == "Stream 0" and threads[214] == "Stream 1"
    assert threads[314] == "Step Trace" and threads[414] == "Stream 1 (overlap 1)"
    raw = path.read_bytes()
    # docs/formats.md §5 keys and order, no spaces; flows HostToDevice with bp:"e" on the f end
    assert (b'{"name":"conv1","pid":14,"tid":114,"ts":124496.789,"dur":200.000,"ph":"X",'
            b'"args":{"Task Id":1,"Model Id":1}}') in raw
    assert (b'{"name":"HostToDevice","pid":7,"tid":107,"ph":"s","cat":"HostToDevice","id":1,'
            b'"ts":124466.789}') in raw
    assert (b'{"name":"HostToDevice","pid":14,"tid":114,"ph":"f","cat":"HostToDevice","id":1,'
            b'"ts":124496.789,"bp":"e"}') in raw


@pytest.fixture
def big(tmp_path: Path) -> Iterator[Path]:
    job = tmp_path / "PROF_000001_20240101000000000_00004242ABCDEFGH"
    (job / "host" / "data").mkdir(parents=True)
    make_big_db(job / "sqlite" / "msprof.db", 20_000, ops_per_api=1)
    yield job


def flow_ends_inside_x(events: list[dict[str, Any]]) -> bool:
    """``flows_outside_x`` for many events: bisect each flow end into its track's spans."""
    spans = x_spans(events)
    for v in spans.values():
        v.sort()
    for e in events:
        if e["ph"] in ("s", "f"):
            t, track = ns(e["ts"]), spans[(e["pid"], e["tid"])]
            i = bisect.bisect_right(track, (t, 1 << 62))
            if not any(s <= t <= end for s, end in track[max(0, i - 8):i]):
                return False
    return True


def test_big_job_parallel_counts_and_size(big: Path, tmp_path: Path) -> None:
    events = export(big, tmp_path / "out", parallel=True)
    ph = Counter(e["ph"] for e in events)
    assert ph["X"] == 40_000 and ph["s"] == ph["f"] == 20_000
    assert sorted(e["id"] for e in events if e["ph"] == "f") == list(range(1, 20_001))
    assert flow_ends_inside_x(events)
    size = (tmp_path / "out" / "msprof_0.json").stat().st_size
    assert size / 80_000 <= 110  # bytes per event (issue 3)


@pytest.mark.fork_policy
def test_killed_child_is_reported_and_cleaned_up(big: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with JobDB(big / "sqlite" / "msprof.db", big) as db:
        w = TraceWriter(out, 0, safe=True, base_ns=BASE_NS)
        ctx = trace_passes.PassContext(db, w, Style(True, BASE_NS, PID), -(1 << 63), 1 << 62)
        child = DeviceChild.start(ctx, 0, out)
        assert child is not None
        os.kill(child.worker.pid, signal.SIGKILL)
        assert child.finish(w) is False  # the caller then runs the pass itself
        assert w.events == 0 and not child.body.exists()
        w.abort()
    assert list(out.iterdir()) == []


@pytest.mark.fork_policy
@pytest.mark.parametrize("size", ["1m", "9m"])
def test_disk_full_in_parallel_export(big: Path, tmp_path: Path, size: str) -> None:
    """1 MiB: the parent's or the child's own writes fail; 9 MiB: both parts fit (≈ 2 + 6.5 MB)
    but appending the child's part to the file does not."""
    for tiny in mount_tmpfs(tmp_path / "tiny", size):
        with JobDB(big / "sqlite" / "msprof.db", big) as db, pytest.raises(
                StorageError, match=r"disk full while writing .*msprof_0\.json.*removed"):
            write_timeline(db, tiny, parallel=True)
        assert list(tiny.iterdir()) == []


@pytest.mark.parametrize("parallel", [False, True])
def test_mixed_executors_name_the_task_type(tmp_path: Path, parallel: bool) -> None:
    job = tmp_path / "PROF_000004_20240101000000000_00004242ABCDEFGH"
    write_info(job)
    b = Builder(job / "sqlite" / "msprof.db")
    b.meta(START_NS, START_NS + 10_000_000)
    t = START_NS + 1_000_000
    b.task(t, t + 1_000, 1, "conv", "Conv", executor="CPU")
    b.task(t + 2_000, t + 3_000, 2, "gemm", "Gemm", executor="CUDA", model=7)
    b.close()
    events = export(job, tmp_path / "out", parallel=parallel)
    args = {e["name"]: e["args"] for e in events if e["ph"] == "X"}
    assert args == {"conv": {"Task Type": "CPU", "Task Id": 1},
                    "gemm": {"Task Type": "CUDA", "Task Id": 2, "Model Id": 7}}
    procs = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert procs == {"Device 0"}


@pytest.mark.parametrize("parallel", [False, True])
def test_database_damaged_mid_table(big: Path, tmp_path: Path, parallel: bool) -> None:
    db_path = big / "sqlite" / "msprof.db"
    size = db_path.stat().st_size
    with db_path.open("r+b") as f:  # garbage over the middle of the data pages
        f.seek(size // 3)
        f.write(os.urandom(size // 3))
    out = tmp_path / "out"
    with JobDB(db_path, big) as db, pytest.raises(RawDataError, match=r"msprof\.db.*unreadable"):
        write_timeline(db, out, parallel=parallel)
    assert list(out.iterdir()) == []


def test_sqlite3_and_apsw_rows_give_the_same_file(job: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("apsw")
    fast = tmp_path / "fast"
    export(job, fast)
    monkeypatch.setattr(dbmod, "_apsw", None)  # the stdlib path, as without apsw installed
    export(job, tmp_path / "std")
    assert (fast / "msprof_0.json").read_bytes() == (tmp_path / "std" / "msprof_0.json").read_bytes()
