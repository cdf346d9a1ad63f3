"""A read-only torch rank dir is analysed all the same: its kernel database goes to the user's
cache (keyed by the source's path, size and mtime), else to a temporary file.

Read-only for real: as root (who ignores permission bits) the rank dir is bind-mounted onto
itself and remounted read-only, so every write fails with EROFS; as another user its
directories lose their write bits.  The test checks that a write really fails first."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from openmsprof.analysis import advisor
from openmsprof.export.ascend_pt.kernel_job import KERNEL_DB, ensure_kernel_db, user_cache_db
from openmsprof.export.jobdb import open_job

from .test_kernel_job import ROWS, _rank


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    if os.geteuid() != 0:
        dirs = [path, *(p for p in path.rglob("*") if p.is_dir())]
        for d in dirs:
            d.chmod(0o555)
        try:
            yield
        finally:
            for d in dirs:
                d.chmod(0o755)
        return
    bind = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"root without mount rights here: {bind.stderr.decode().strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr.decode().strip()}")
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


def _assert_unwritable(path: Path) -> None:
    with pytest.raises(OSError):
        (path / "probe").write_text("x")


def test_read_only_rank_dir_uses_the_user_cache(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    rank = _rank(tmp_path / "runs", ROWS)
    cache = tmp_path / "cache"
    monkeypatch.setenv("OPENMSPROF_CACHE", str(cache))
    with read_only(rank):
        _assert_unwritable(rank)
        db = ensure_kernel_db(rank)
        src = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        assert db == user_cache_db(src) and db.is_relative_to(cache)
        assert not (rank / KERNEL_DB).exists()
        built = db.stat().st_mtime_ns
        assert ensure_kernel_db(rank) == db and db.stat().st_mtime_ns == built  # reused
        with open_job(rank) as j:
            assert j.query("SELECT COUNT(*) FROM TASK") == [(3,)]
            assert j.job == rank
        doc = advisor.report(rank, "top_ops")
        assert doc["findings"][0]["evidence"]["op_type"] == "aten::softplus"
        assert oct(db.stat().st_mode & 0o777) == "0o640"


def test_read_only_rank_dir_and_cache_use_a_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = tmp_path / "runs"
    rank = _rank(runs, ROWS)
    monkeypatch.setenv("OPENMSPROF_CACHE", str(runs / "cache"))  # on the read-only mount too
    with read_only(runs):
        _assert_unwritable(rank)
        db = ensure_kernel_db(rank)
        assert not db.is_relative_to(runs)
        with open_job(rank) as j:
            assert j.query("SELECT COUNT(*) FROM STEP_TIME") == [(2,)]
        db.unlink()
