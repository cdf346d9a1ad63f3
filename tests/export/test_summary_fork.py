"""export summary of a big job writes half of its tables in a forked child: the files are the same
as without the fork, and a child killed mid-way leaves nothing behind (the parent writes them)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsprof.export.jobdb import JobDB, open_job
from openmsprof.export.msprof import summary_fork
from openmsprof.export.msprof.summary_export import write_summary
from openmsprof.export.msprof.tables import Table
from tests.export.dbfactory import make_job


def test_forked_summary_files_equal_the_serial_ones(tmp_path: Path) -> None:
    job = make_job(tmp_path, iterations=20)
    with open_job(job) as db:
        serial = write_summary(db, tmp_path / "serial", parallel=False)
        forked = write_summary(db, tmp_path / "forked", parallel=True)
    assert [p.name for p in serial] == [p.name for p in forked]
    assert {p.name for p in forked} >= {f"{n}_0.csv" for n in ("op_summary", "op_statistic")}
    for a, b in zip(serial, forked, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert not [p for p in (tmp_path / "forked").iterdir() if p.name.startswith(".")]


def _slow(db: JobDB) -> Iterator[Table]:
    def rows() -> Iterator[list[object]]:
        yield [1]
        time.sleep(60)  # the child is killed meanwhile
        yield [2]
    yield Table("task_time", 0, ["a"], rows())


@pytest.mark.fork_policy
def test_killed_child_leaves_no_files_and_reports_failure(tmp_path: Path) -> None:
    job = make_job(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    with open_job(job) as db:
        child = summary_fork.SummaryChild.start(db, out, "csv", {"task_time": _slow})
        assert child is not None
        deadline = time.monotonic() + 30
        while not list(out.glob(".task_time_0.csv.*.tmp")):  # the child is writing
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(child.worker.pid, signal.SIGKILL)
        assert child.finish() is None  # the caller writes the tables itself
    assert list(out.iterdir()) == []


def test_thread_tables_written_beside_the_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """api_statistic is written by a thread of the parent while the child runs (its own
    connection); the same files as the serial route, and the parent writes them itself when the
    thread fails (a full disk in the thread is raised)."""
    import threading

    from openmsprof.config.errors import StorageError

    job = make_job(tmp_path, iterations=20)
    seen: list[str] = []
    real_run = summary_fork.TableThread._run

    def run(self: summary_fork.TableThread) -> None:
        seen.append(threading.current_thread().name)
        real_run(self)

    monkeypatch.setattr(summary_fork.TableThread, "_run", run)
    with open_job(job) as db:
        serial = {p.name: p.read_bytes() for p in write_summary(db, tmp_path / "serial", parallel=False)}
        threaded = {p.name: p.read_bytes() for p in write_summary(db, tmp_path / "threaded", parallel=True)}
        assert seen == ["openmsprof-summary"] and "api_statistic_host.csv" in threaded
        assert threaded == serial

        def broken(self: summary_fork.TableThread) -> None:
            self.error = RuntimeError("boom")

        monkeypatch.setattr(summary_fork.TableThread, "_run", broken)
        fallback = {p.name: p.read_bytes() for p in write_summary(db, tmp_path / "fallback", parallel=True)}
        assert fallback == serial

        def full(self: summary_fork.TableThread) -> None:
            self.error = StorageError("disk full while writing api_statistic_host.csv")

        monkeypatch.setattr(summary_fork.TableThread, "_run", full)
        with pytest.raises(StorageError, match="disk full"):
            write_summary(db, tmp_path / "full", parallel=True)
