"""Faults: SIGKILL, full disk, storage limit, torn and foreign raw files, endless markers at exit."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import openmsprof
from openmsprof import mstx
from openmsprof.recorder import rawfile, rawread
from openmsprof.recorder.records import HEADER, RECORDS_MAGIC, Kind, Series
from tests.margins import SIGKILL_LOSS_S
from tests.tmpfs import mount_tmpfs

CHILD_MARKER_LOOP = """
import sys, time, openmsprof
from openmsprof import mstx
openmsprof.start(output=sys.argv[1])
print('ready', flush=True)
while True:
    mstx.mark('tick')
"""


def _job(out: Path) -> Path:
    jobs = sorted(out.glob("PROF_*"))
    assert len(jobs) == 1, jobs
    return jobs[0]


def test_sigkill_loses_at_most_the_flush_bound(out_dir: Path) -> None:
    """The newest marker on disk is at most SIGKILL_LOSS_S older than the kill (<= 1 s promised,
    measured idle and loaded by benchmarks/bench_markers.py)."""
    p = subprocess.Popen([sys.executable, "-c", CHILD_MARKER_LOOP, str(out_dir)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    kill_ns = time.perf_counter_ns()  # CLOCK_MONOTONIC: shared by all processes
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    job = _job(out_dir)
    assert not (job / "host" / "end_info").exists()
    report = rawread.ReadReport()
    recs = rawread.read_all_records(job / "host" / "data", report)
    marks = recs[recs["kind"] == Kind.MARK]
    assert len(marks) > 1000
    lost_ns = kill_ns - int(marks["t0"].max())
    assert lost_ns <= SIGKILL_LOSS_S * 1e9, f"lost {lost_ns / 1e9:.3f} s of records"


def test_thread_that_never_stops_marking_at_shutdown(out_dir: Path, backend: str) -> None:
    code = """
import sys, threading, openmsprof
from openmsprof import mstx
openmsprof.start(output=sys.argv[1])
def spin():
    while True:
        mstx.mark('spin')
threading.Thread(target=spin, daemon=True).start()
import time; time.sleep(0.5)
print('bye')
"""
    r = subprocess.run([sys.executable, "-c", code, str(out_dir)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    job = _job(out_dir)
    assert (job / "host" / "end_info").is_file(), "atexit must close the job"
    recs = rawread.read_all_records(job / "host" / "data")
    assert int(np.sum(recs["kind"] == Kind.MARK)) > 100


def test_storage_limit_stops_collection_app_goes_on(out_dir: Path, backend: str) -> None:
    s = openmsprof.start(output=out_dir, storage_limit_mb=1)  # below the documented 200, allowed in Python
    deadline = time.monotonic() + 20
    while s.collecting and time.monotonic() < deadline:
        for _ in range(6_000):  # under the fallback's per-thread list cap: nothing dropped
            mstx.mark("fill")
        time.sleep(0.25)
    openmsprof.stop()
    assert not s.collecting
    assert "storage_limit" in s.stop_reason
    log = (s.root / "host" / "collection.log").read_text()
    assert "storage_limit 1MB reached" in log


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    yield from mount_tmpfs(tmp_path / "tiny", "24m")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    yield from mount_tmpfs(tmp_path / "small", "40m")


def test_disk_full_stops_collection_with_warning(small_fs: Path, backend: str) -> None:
    # ~37 MB free: above the 20 MB floor at start; markers fill it until collection halts,
    # which happens before the floor is crossed, and the end records are still written.
    tiny_fs = small_fs
    filler = tiny_fs / "filler"
    filler.write_bytes(b"\0" * (3 * 1024 * 1024))
    s = openmsprof.start(output=tiny_fs / "out")
    deadline = time.monotonic() + 30
    while s.collecting and time.monotonic() < deadline:
        for _ in range(20_000):
            mstx.mark("fill")
        time.sleep(0.05)
    openmsprof.stop()
    assert not s.collecting
    assert "20 MB free" in s.stop_reason or "disk full" in s.stop_reason
    recs = rawread.read_all_records(s.root / "host" / "data")
    assert int(np.sum(recs["kind"] == Kind.MARK)) > 0
    assert shutil.disk_usage(tiny_fs).free >= 20 * 1024 * 1024, "the 20 MB floor was crossed"
    assert (s.root / "host" / "end_info").is_file()
    assert not (s.root / "host" / ".openmsprof.reserve").exists()
    assert s.overhead["backend"] == backend


def test_start_refused_when_disk_nearly_full(tiny_fs: Path) -> None:
    (tiny_fs / "filler").write_bytes(b"\0" * (10 * 1024 * 1024))
    with pytest.raises(openmsprof.StorageError, match="20 MB"):
        openmsprof.start(output=tiny_fs / "out")


def test_reader_drops_torn_tail_and_counts_it(out_dir: Path, backend: str) -> None:
    with openmsprof.profile(output=out_dir) as prof:
        for _ in range(100):
            mstx.mark("m")
    assert prof.job is not None
    data = prof.job / "host" / "data"
    slice_path = next(data.glob("Mstx.records.host.slice_0"))
    with open(slice_path, "ab") as f:
        f.write(b"\x01\x02\x03\x04\x05")
    report = rawread.ReadReport()
    recs = rawread.read_all_records(data, report)
    assert int(np.sum(recs["kind"] == Kind.MARK)) == 100
    assert report.dropped_bytes == 5
    assert any("torn tail" in w for w in report.warnings)


def test_reader_skips_unknown_version_and_foreign_files(tmp_path: Path) -> None:
    d = tmp_path / "data"
    d.mkdir()
    (d / "Mstx.records.host.slice_0").write_bytes(HEADER.pack(RECORDS_MAGIC, 99, 32, 0) + b"\0" * 64)
    (d / "Api.records.host.slice_0").write_bytes(os.urandom(200))
    report = rawread.ReadReport()
    recs = rawread.read_all_records(d, report)
    assert len(recs) == 0
    assert report.skipped_files == 2
    assert any("unknown record version 99" in w for w in report.warnings)
    assert any("bad magic" in w for w in report.warnings)


def test_raw_record_size_fixed_or_packed(out_dir: Path, backend: str) -> None:
    """The fallback writes fixed 32-byte records (version 1); the native core packed blocks
    (version 2, docs/formats.md): one 8-byte block header and ~8 bytes a marker."""
    with openmsprof.profile(output=out_dir) as prof:
        for _ in range(1000):
            mstx.mark("m")
    assert prof.job is not None
    path = prof.job / "host" / "data" / "Mstx.records.host.slice_0"
    size = path.stat().st_size
    version = HEADER.unpack(path.read_bytes()[:HEADER.size])[1]
    if backend == "python":
        assert (version, size) == (1, HEADER.size + 1000 * 32)
    else:  # the native core writes the thread's name record into the same slice
        assert version == 2 and size <= HEADER.size + 8 + 1001 * 9
    recs = rawread.read_all_records(path.parent)
    assert int((recs["kind"] == Kind.MARK).sum()) == 1000


def test_host_sampler_writes_cpu_and_memory(out_dir: Path) -> None:
    with openmsprof.profile(output=out_dir, host_sys_usage=["cpu", "mem"], host_sys_usage_freq=20) as prof:
        t_end = time.monotonic() + 4.0  # 80 samples due at 20 Hz: 10x the 8 asserted, for a
        while time.monotonic() < t_end:  # loaded machine's sidecar start-up; keep the GIL busy
            sum(range(1000))
    assert prof.job is not None
    recs = rawread.read_all_records(prof.job / "host" / "data").view(rawfile.COUNTER_DTYPE)
    counters = recs[recs["kind"] == Kind.COUNTER]
    series = set(counters["a"].tolist())
    assert {Series.SYS_CPU_PERCENT, Series.PROC_CPU_PERCENT, Series.SYS_MEM_USED_KB, Series.PROC_RSS_KB} <= series
    proc_cpu = counters[counters["a"] == Series.PROC_CPU_PERCENT]["value"]
    assert len(proc_cpu) >= 8, "20 Hz for 4 s under a busy GIL (sidecar start-up included)"
    assert float(proc_cpu.max()) > 20.0, "the busy loop must show as process CPU"
    rss = counters[counters["a"] == Series.PROC_RSS_KB]["value"]
    assert float(rss.min()) > 1000


def test_sampler_exits_when_parent_is_killed(out_dir: Path) -> None:
    code = (
        "import sys, time, openmsprof\n"
        "openmsprof.start(output=sys.argv[1], host_sys_usage=['cpu'])\n"
        "from openmsprof.sources import host_sampler\n"
        "print(host_sampler._proc.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code, str(out_dir)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    sidecar = int(p.stdout.readline())
    p.kill()
    p.wait(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(sidecar, 0)
        except ProcessLookupError:
            break
        # reap if it became our zombie grandchild (it is re-parented to init, not us)
        time.sleep(0.1)
    else:
        with open(f"/proc/{sidecar}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        assert state == "Z", "sampler still running after its parent was killed"


def test_short_session_still_gets_a_host_sample(out_dir: Path) -> None:
    with openmsprof.profile(output=out_dir, host_sys_usage=["cpu", "mem"]) as prof:
        time.sleep(0.3)  # shorter than the sampler's start-up plus two periods under load
    assert prof.job is not None
    recs = rawread.read_all_records(prof.job / "host" / "data").view(rawfile.COUNTER_DTYPE)
    series = set(recs[recs["kind"] == Kind.COUNTER]["a"].tolist())
    assert {Series.SYS_CPU_PERCENT, Series.SYS_MEM_USED_KB} <= series, "the stop sample covers the session"


def test_host_sampler_skips_a_zombie_child(out_dir: Path) -> None:
    """An exited, not yet reaped child has no memory and no CPU: no per-process sample of it
    (psutil reads a zombie's RSS as 0)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child exits at once and stays a zombie until reaped
        os._exit(0)
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with openmsprof.profile(output=out_dir, host_sys_usage=["cpu", "mem"], host_sys_usage_freq=20) as prof:
            time.sleep(1.0)
        assert prof.job is not None
        recs = rawread.read_all_records(prof.job / "host" / "data").view(rawfile.COUNTER_DTYPE)
        rss = recs[(recs["kind"] == Kind.COUNTER) & (recs["a"] == Series.PROC_RSS_KB)]
        assert len(rss) >= 2 and os.getpid() in set(rss["b"].tolist())
        assert pid not in set(rss["b"].tolist()), "a zombie child was sampled"
        assert float(rss["value"].min()) > 1000
    finally:
        os.waitpid(pid, 0)
