"""Session lifecycle, job layout, permissions, locks and multi-threaded markers."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import openmsprof
from openmsprof import mstx
from openmsprof.config.errors import (
    ACL_ERROR_PROF_ALREADY_RUN,
    ACL_ERROR_PROF_NOT_RUN,
    ConfigError,
    PathError,
    SessionError,
)
from openmsprof.recorder import rawread, session
from openmsprof.recorder.records import Kind


def _records(job: Path) -> np.ndarray:
    return rawread.read_all_records(job / "host" / "data")


def test_four_threads_every_marker_with_thread_ids_and_order(out_dir: Path, backend: str) -> None:
    n = 2500
    tids: dict[int, int] = {}

    def work(i: int) -> None:
        tids[i] = threading.get_native_id()
        for _j in range(n):
            mstx.mark(f"t{i}")
            mstx.range_push("inner")
            mstx.range_pop()

    with openmsprof.profile(output=out_dir) as prof:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert prof.job is not None
    recs = _records(prof.job)
    strings = rawread.read_strings(prof.job / "host" / "data")
    ids = {v: k for k, v in strings.items()}
    for i in range(4):
        mine = recs[(recs["kind"] == Kind.MARK) & (recs["a"] == ids[f"t{i}"])]
        assert len(mine) == n
        assert set(mine["tid"].tolist()) == {tids[i]}
        assert np.all(np.diff(mine["t0"]) >= 0), "marks of one thread must keep their order"
        pushes = recs[(recs["kind"] == Kind.PUSH) & (recs["tid"] == tids[i])]
        pops = recs[(recs["kind"] == Kind.POP) & (recs["tid"] == tids[i])]
        assert len(pushes) == len(pops) == n
    threads_named = recs[recs["kind"] == Kind.THREAD]
    assert {tids[i] for i in range(4)} <= set(threads_named["tid"].tolist())


def test_layout_and_private_modes_whatever_the_umask(out_dir: Path, backend: str) -> None:
    with openmsprof.profile(output=out_dir) as prof:
        mstx.mark("x")
    job = prof.job
    assert job is not None and job.name.startswith("PROF_")
    parts = job.name.split("_")
    assert len(parts) == 4 and len(parts[1]) == 6 and len(parts[2]) == 17 and parts[3][-8:].isupper()
    for name in ("info.json", "sample.json", "start_info", "end_info", "host_start.log"):
        assert (job / "host" / name).is_file(), name
    start = json.loads((job / "host" / "start_info").read_text())
    assert all(isinstance(v, str) for v in start.values())
    assert int(start["collectionTimeBegin"]) > 1_600_000_000_000_000
    info = json.loads((job / "host" / "info.json").read_text())
    for key in ("platform_version", "pid", "hostname", "CPU", "DeviceInfo", "memoryTotal", "netCard"):
        assert key in info
    for p in [job, *job.rglob("*")]:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o750 if p.is_dir() else 0o640), (p, oct(mode))


def test_a_device_dir_gets_its_config_files_and_the_jobs_end_info(out_dir: Path) -> None:
    """``device_dir(dev)`` creates ``device_{dev}/`` with its config files; stop writes its
    ``end_info.{dev}`` (the host's end time) through the job dir's fd."""
    s = session.start(output=out_dir)
    try:
        s.device_dir(3)
    finally:
        session.stop()
    dev = s.root / "device_3"
    for name in ("info.json.3", "sample.json.3", "start_info.3", "dev_start.log.3", "end_info.3"):
        assert (dev / name).is_file(), name
    assert json.loads((dev / "info.json.3").read_text())["devices"] == "3"
    end = json.loads((dev / "end_info.3").read_text())
    assert end["collectionTimeEnd"] == json.loads((s.root / "host" / "end_info").read_text())["collectionTimeEnd"]


def test_a_note_after_stop_never_reaches_a_file_that_reused_the_logs_fd(out_dir: Path, tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """After ``stop()`` collection.log's fd number is free: a late ``note`` goes to the logger
    alone, never into whatever the application opened on that number; the job's dir fds are
    refused the same way."""
    s = session.start(output=out_dir)
    numbers = (s.files.log_fd, s.files.host_fd, s.files.root_fd)
    session.stop()
    log_before = (s.root / "host" / "collection.log").read_bytes()
    victims = []
    for n in numbers:  # the application's files land on the very numbers the session used
        fd = os.open(tmp_path / f"app{n}.txt", os.O_WRONLY | os.O_CREAT, 0o600)
        if fd != n:
            os.dup2(fd, n)
            os.close(fd)
        victims.append(n)
    try:
        with caplog.at_level("INFO", logger="openmsprof"):
            s.note("a late note")
        with pytest.raises(PathError):
            s.files.write_host_file("late.json", b"{}")
        assert "a late note" in caplog.text
    finally:
        for n in victims:
            os.close(n)
    assert all((tmp_path / f"app{n}.txt").read_bytes() == b"" for n in numbers)
    assert (s.root / "host" / "collection.log").read_bytes() == log_before
    assert not (s.root / "host" / "late.json").exists()


def test_start_twice_and_stop_without_start(out_dir: Path) -> None:
    with pytest.raises(SessionError) as e:
        session.stop()
    assert e.value.code == ACL_ERROR_PROF_NOT_RUN
    openmsprof.start(output=out_dir)
    with pytest.raises(SessionError) as e2:
        openmsprof.start(output=out_dir / "other")
    assert e2.value.code == ACL_ERROR_PROF_ALREADY_RUN
    assert "already running" in str(e2.value)
    openmsprof.stop()


def test_second_profiler_on_same_output_gets_clear_error(out_dir: Path) -> None:
    openmsprof.start(output=out_dir)
    code = (
        "import openmsprof, sys\n"
        "try:\n    openmsprof.start(output=sys.argv[1])\n"
        "except openmsprof.SessionError as e:\n    print('ERR', e); sys.exit(3)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(out_dir)], capture_output=True, text=True, timeout=60)
    openmsprof.stop()
    assert r.returncode == 3, r.stderr
    assert "in use by another profiler" in r.stdout


@pytest.mark.parametrize("bad", ["out\nx", "a;rm -rf", "x/../y", "tab\there", "q'uote", "$HOME/x"])
def test_hostile_output_paths_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(PathError) as e:
        openmsprof.start(output=str(tmp_path) + "/" + bad)
    assert "\n" not in str(e.value)
    assert session.current() is None


def test_symlinked_output_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(PathError, match="symbolic link"):
        openmsprof.start(output=link / "sub")
    assert list(real.iterdir()) == []


def test_unwritable_output_clear_error(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        import os

        if os.access(ro, os.W_OK):  # root ignores modes: use a path under a file instead
            target = tmp_path / "afile"
            target.write_text("x")
            with pytest.raises(PathError):
                openmsprof.start(output=target / "sub")
        else:
            with pytest.raises(PathError, match="not writable"):
                openmsprof.start(output=ro)
    finally:
        ro.chmod(0o700)


def test_unknown_switch_is_config_error(out_dir: Path) -> None:
    with pytest.raises(ConfigError, match="no_such_switch"):
        openmsprof.start(output=out_dir, no_such_switch=True)


def test_marker_off_records_nothing(out_dir: Path, backend: str) -> None:
    mstx.mark("before")  # no session: nothing recorded, nothing raised
    with openmsprof.profile(output=out_dir, msproftx=False) as prof:
        mstx.mark("ignored")
    assert prof.job is not None
    recs = _records(prof.job)
    assert not np.any(recs["kind"] == Kind.MARK)


def test_cross_thread_range(out_dir: Path, backend: str) -> None:
    with openmsprof.profile(output=out_dir) as prof:
        rid = mstx.range_start("load")
        t = threading.Thread(target=mstx.range_end, args=(rid,))
        t.start()
        t.join()
    assert prof.job is not None
    recs = _records(prof.job)
    starts = recs[recs["kind"] == Kind.RANGE_START]
    ends = recs[recs["kind"] == Kind.RANGE_END]
    assert len(starts) == len(ends) == 1
    assert starts["t1"][0] == ends["t1"][0] == rid
    assert starts["tid"][0] != ends["tid"][0]


def test_decorator_and_context_manager(out_dir: Path, backend: str) -> None:
    rng = mstx.mstx_range("work")

    @rng
    def f(x: int) -> int:
        return x + 1

    with openmsprof.profile(output=out_dir) as prof:
        assert f(1) == 2
        with rng:
            pass
    assert prof.job is not None
    recs = _records(prof.job)
    assert int(np.sum(recs["kind"] == Kind.PUSH)) == 2
    assert int(np.sum(recs["kind"] == Kind.POP)) == 2
