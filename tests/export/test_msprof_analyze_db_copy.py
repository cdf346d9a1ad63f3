"""``msprof_{ts}.db`` starts as a byte copy of the job db (kernel copy, else read/write; a WAL db
through SQLite's backup): the same db whichever route, and a full disk leaves nothing behind."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsprof.config.errors import StorageError
from openmsprof.export.msprof import msprof_analyze_db as tool_facing_db
from tests.export.dbfactory import make_big_db, make_job
from tests.tmpfs import mount_tmpfs

STAMP = "20260101000000"


def _dump(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        return "\n".join(con.iterdump())
    finally:
        con.close()


@pytest.fixture
def job(tmp_path: Path) -> Path:
    return make_job(tmp_path)


def test_kernel_copy_and_read_write_copy_make_the_same_db(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = tool_facing_db.write_db(job, STAMP)
    assert oct(kernel.stat().st_mode & 0o777) == "0o640"
    dump, raw = _dump(kernel), kernel.read_bytes()
    assert "EXECUTOR" in dump and "ENUM_HCCL" in dump
    kernel.unlink()
    monkeypatch.delattr(os, "copy_file_range", raising=False)  # a system without the kernel copy
    plain = tool_facing_db.write_db(job, STAMP)
    assert plain.read_bytes() == raw
    assert sorted(p.name for p in job.iterdir() if p.name.startswith(".msprof_")) == []


def test_a_wal_job_db_is_copied_through_sqlite(job: Path) -> None:
    """A db left in WAL mode keeps part of its data in ``-wal``: a byte copy would lose it."""
    reference = tool_facing_db.write_db(job, STAMP)
    expected = _dump(reference)
    reference.unlink()
    src = job / "sqlite" / "msprof.db"
    con = sqlite3.connect(src)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("INSERT INTO META_DATA VALUES ('WAL_ONLY', 'x')")
    con.commit()
    assert os.pread(os.open(src, os.O_RDONLY), 20, 0)[18] == 2 and (job / "sqlite" / "msprof.db-wal").stat().st_size
    copied = tool_facing_db.write_db(job, "20260101000001")
    con.close()
    got = _dump(copied)
    assert "WAL_ONLY" in got
    assert got.replace("""INSERT INTO "META_DATA" VALUES('WAL_ONLY','x');\n""", "") == expected


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from mount_tmpfs(tmp_path / "disk", "3m")


def test_disk_full_during_the_copy_names_it_and_leaves_nothing(small_disk: Path) -> None:
    job = small_disk / "PROF_000001_20240101000000000_00004242ABCDEFGH"
    (job / "host" / "data").mkdir(parents=True)
    make_big_db(job / "sqlite" / "msprof.db", 15_000)
    size = (job / "sqlite" / "msprof.db").stat().st_size
    assert 1 << 20 < size < 3 << 20 < 2 * size  # fits once, not twice
    before = sorted(p.name for p in job.iterdir())
    with pytest.raises(StorageError, match=rf"disk full while writing .*msprof_{STAMP}\.db"):
        tool_facing_db.write_db(job, STAMP)
    assert sorted(p.name for p in job.iterdir()) == before
