"""The import's C writer (``parse/_bulk_insert.c``) against its fallback, the sqlite3 module's
``executemany``: the same database file byte for byte, the same counts of dropped duplicates,
the same one-line errors; and the C module's own checks on what it is given."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from openmsprof.cli.main import main
from openmsprof.parse import db_builder as writer
from openmsprof.parse.importer import import_job
from tests.tmpfs import mount_tmpfs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

native = writer._native
needs_native = pytest.mark.skipif(native is None, reason="the C writer is not built here")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def raw_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthesized raw job of 150 k records (tasks, APIs, markers, counters, steps): tails of
    every matrix that are not a multiple of the 64 rows a statement binds."""
    import bench_import

    return bench_import.synthesize(tmp_path_factory.mktemp("raw"), 150_001)


def _import_copy(job: Path, into: Path, use_native: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, int], list[str]]:
    copy = into / job.name
    shutil.copytree(job, copy)
    with monkeypatch.context() as m:
        m.setattr(writer, "_native", native if use_native else None)
        r = import_job(copy, progress=False)
    return _sha(r.db_path), r.rows, r.warnings


@needs_native
def test_both_writers_make_the_same_file(raw_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "py").mkdir()
    c = _import_copy(raw_job, tmp_path / "c", True, monkeypatch)
    py = _import_copy(raw_job, tmp_path / "py", False, monkeypatch)
    assert c[1]["TASK"] > 10_000 and c[1]["TASK"] % 64 and c[1]["CANN_API"] > 10_000
    assert c == py


@needs_native
def test_duplicates_are_counted_the_same_by_both(raw_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from openmsprof.recorder.rawfile import GENERIC_DTYPE
    from openmsprof.recorder.records import HEADER, RECORDS_MAGIC

    job = tmp_path / raw_job.name
    shutil.copytree(raw_job, job)
    recs = np.zeros(130, dtype=GENERIC_DTYPE)  # two full statements of 64 and a tail, one id
    recs["kind"], recs["t0"], recs["t1"], recs["b"] = 6, 100, 200, 4_000_000_000  # an id the job lacks
    (job / "host" / "data" / "Api.records.host.slice_9").write_bytes(
        HEADER.pack(RECORDS_MAGIC, 1, 32, 0) + recs.tobytes())
    (tmp_path / "c").mkdir()
    (tmp_path / "py").mkdir()
    c = _import_copy(job, tmp_path / "c", True, monkeypatch)
    py = _import_copy(job, tmp_path / "py", False, monkeypatch)
    assert "129 × CANN_API row with a duplicate key (dropped)" in c[2]
    assert c == py


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from mount_tmpfs(tmp_path / "disk", "6m")


@pytest.mark.parametrize("use_native", [True, False], ids=["c", "python"])
def test_a_disk_that_fills_during_the_inserts_is_named_in_one_line(
        use_native: bool, raw_job: Path, small_disk: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    if use_native and native is None:
        pytest.skip("the C writer is not built here")
    job = Path(shutil.copytree(raw_job, small_disk.parent / raw_job.name))
    out = small_disk / "out"
    monkeypatch.setattr(writer, "_native", native if use_native else None)
    assert main(["import", "-dir", str(job), "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "disk full" in err and str(out) in err, err
    assert sorted(p.name for p in (out / "sqlite").iterdir()) == [".import.lock"]


@needs_native
def test_the_c_module_binds_every_python_type_and_checks_its_input(tmp_path: Path) -> None:
    con = native.Conn(str(tmp_path / "t.db"))
    con.execute("CREATE TABLE t(a, b, c); CREATE TABLE k(id INTEGER PRIMARY KEY, v)")
    rows = [(1, 2.5, "text é"), (None, b"\x00\x01", -(2**63)), (2**63 - 1, float("inf"), "")]
    assert con.insert_rows("INSERT INTO t VALUES (?,?,?)", iter(rows)) == 3
    m = np.arange(15, dtype=np.int64).reshape(5, 3)
    assert con.insert_matrix("INSERT INTO t VALUES (?,?,?)", "INSERT INTO t VALUES (?,?,?), (?,?,?)", 2, m) == 5
    assert con.insert_matrix("INSERT OR IGNORE INTO k VALUES (?,?)", "INSERT OR IGNORE INTO k VALUES (?,?), (?,?)",
                             2, np.array([[1, 1], [1, 2], [2, 3]], dtype=np.int64)) == 2
    with pytest.raises(OverflowError):
        con.insert_rows("INSERT INTO t VALUES (?,?,?)", [(2**63, 0, 0)])
    with pytest.raises(TypeError, match="cannot bind a value of type list"):
        con.insert_rows("INSERT INTO t VALUES (?,?,?)", [([1], 0, 0)])
    with pytest.raises(ValueError, match="binds 3 values, a row has 2"):
        con.insert_rows("INSERT INTO t VALUES (?,?,?)", [(1, 2)])
    with pytest.raises(TypeError, match="int64 matrix"):
        con.insert_matrix("INSERT INTO t VALUES (?,?,?)", "INSERT INTO t VALUES (?,?,?)", 1, m.astype(np.int32))
    with pytest.raises(TypeError, match="int64 matrix"):
        con.insert_matrix("INSERT INTO t VALUES (?)", "INSERT INTO t VALUES (?)", 1, np.arange(3, dtype=np.int64))
    with pytest.raises(ValueError, match="has 3 columns"):
        con.insert_matrix("INSERT INTO k VALUES (?,?)", "INSERT INTO k VALUES (?,?)", 1, m)
    with pytest.raises(ValueError, match="not C-contiguous"):
        con.insert_matrix("INSERT INTO t VALUES (?,?,?)", "INSERT INTO t VALUES (?,?,?)", 1, m[:, ::-1])
    with pytest.raises(native.Error) as caught:
        con.insert_matrix("INSERT INTO k VALUES (?,?)", "INSERT INTO k VALUES (?,?)", 1,
                          np.array([[5, 0], [5, 0]], dtype=np.int64))
    code, message = caught.value.args
    assert code & 0xFF == sqlite3.SQLITE_CONSTRAINT and "UNIQUE" in message
    with pytest.raises(native.Error, match="no such table"):
        con.execute("INSERT INTO missing VALUES (1)")
    con.close()
    con.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        con.execute("SELECT 1")
    check = sqlite3.connect(tmp_path / "t.db")
    assert check.execute("SELECT a, b, c FROM t LIMIT 3").fetchall() == [
        (1, 2.5, "text é"), (None, b"\x00\x01", -(2**63)), (2**63 - 1, float("inf"), "")]
    assert check.execute("SELECT a, b, c FROM t WHERE rowid > 3").fetchall() == [tuple(r) for r in m.tolist()]
    assert check.execute("SELECT * FROM k").fetchall() == [(1, 1), (2, 3), (5, 0)]
    check.close()


def test_the_c_writer_is_refused_for_another_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same library must write the file whichever path runs: a version mismatch (another
    SQLite in the process than the sqlite3 module's) means the fallback."""
    if native is None:
        pytest.skip("the C writer is not built here")
    assert writer._load_native() is native
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 0, 1))
    assert writer._load_native() is None
