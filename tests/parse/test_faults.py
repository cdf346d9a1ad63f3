"""Damaged and unusual input: warnings with counts, clear errors, never a traceback."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from openmsprof.cli.main import main
from openmsprof.config.errors import RawDataError
from openmsprof.parse import schema
from openmsprof.parse.importer import ensure_imported, find_jobs, import_job
from openmsprof.recorder.records import HEADER, RECORDS_MAGIC
from tests.parse.conftest import LOOPS, THREADS, dump_db, make_job, q
from tests.recorder.slice_forms import to_fixed


@pytest.fixture
def small_job(out_dir: Path) -> Path:
    return make_job(out_dir, sampler=False)[0]


def _mstx_slice(job: Path) -> Path:
    return next((job / "host" / "data").glob("Mstx.records.host.slice_0"))


def test_torn_tail_keeps_whole_records(small_job: Path) -> None:
    path = _mstx_slice(small_job)
    to_fixed(path)  # (a torn packed block: tests/recorder/test_packed.py)
    full = import_job(small_job, progress=False)
    whole = (path.stat().st_size - HEADER.size) // 32
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 32 * 10 - 7)  # ten records and a torn one gone
    r = import_job(small_job, progress=False)
    assert r.records == full.records - 11
    assert any("torn tail of 25 bytes" in w for w in r.warnings)
    assert whole > 11


def test_random_bytes_and_unknown_version(small_job: Path) -> None:
    data = small_job / "host" / "data"
    (data / "Api.records.host.slice_7").write_bytes(os.urandom(5000))
    (data / "Mstx.records.host.slice_9").write_bytes(HEADER.pack(RECORDS_MAGIC, 99, 32, 0) + bytes(64))
    (data / "Strings.table.host.slice_5").write_bytes(os.urandom(300))
    r = import_job(small_job, progress=False)
    text = "\n".join(r.warnings)
    assert "Api.records.host.slice_7: not an openmsprof raw file (bad magic); skipped" in text
    assert "Mstx.records.host.slice_9: unknown record version 99" in text
    assert "Strings.table.host.slice_5" in text
    assert q(r.db_path, "SELECT COUNT(*) FROM MSTX_EVENTS WHERE eventType=0")[0][0] == THREADS * LOOPS


def test_valid_header_random_records_do_not_crash(small_job: Path) -> None:
    data = small_job / "host" / "data"
    rnd = HEADER.pack(RECORDS_MAGIC, 1, 32, 0) + os.urandom(32 * 3000)
    (data / "Mstx.records.host.slice_3").write_bytes(rnd)
    r = import_job(small_job, progress=False)
    assert r.records >= 3000
    assert r.warnings  # unknown kinds, orphan pops, bad string ids... counted


def test_empty_channel_and_no_data(out_dir: Path, small_job: Path) -> None:
    data = small_job / "host" / "data"
    (data / "Counter.records.host.slice_0").write_bytes(HEADER.pack(RECORDS_MAGIC, 1, 32, 0))
    assert import_job(small_job, progress=False).rows.get("OMSP_COUNTER", 0) == 0
    for d in (data, small_job / "device_0" / "data"):
        for p in d.iterdir():
            p.unlink()
    r = import_job(small_job, progress=False)
    assert r.records == 0 and any("no profiling records" in w for w in r.warnings)
    assert q(r.db_path, "SELECT COUNT(*) FROM MSTX_EVENTS") == [(0,)]


def test_missing_end_info(small_job: Path) -> None:
    for p in small_job.glob("*/end_info*"):
        p.unlink()
    r = import_job(small_job, progress=False)
    assert q(r.db_path, "SELECT endTimeNs FROM SESSION_TIME_INFO") == [(None,)]
    assert any("no end_info" in w for w in r.warnings)
    last = q(r.db_path, "SELECT MAX(endNs) FROM MSTX_EVENTS")[0][0]
    s = dict(q(r.db_path, "SELECT value, id FROM STRING_IDS"))
    assert q(r.db_path, "SELECT endNs FROM MSTX_EVENTS WHERE message=?", (s["left open"],)) == [(last,)]


def test_older_schema_is_rebuilt(small_job: Path) -> None:
    db = ensure_imported(small_job)
    con = sqlite3.connect(db)
    con.execute("UPDATE META_DATA SET value='0' WHERE name='OPENMSPROF_SCHEMA'")
    con.execute("DELETE FROM MSTX_EVENTS")
    con.commit()
    con.close()
    os.utime(db)  # newer than the raw data: only the version says it is stale
    ensure_imported(small_job)
    assert q(db, "SELECT value FROM META_DATA WHERE name='OPENMSPROF_SCHEMA'") == [(str(schema.OPENMSPROF_SCHEMA),)]
    assert q(db, "SELECT COUNT(*) FROM MSTX_EVENTS")[0][0] > 0
    db.write_bytes(b"not a database at all")
    os.utime(db)
    assert q(ensure_imported(small_job), "SELECT COUNT(*) FROM META_DATA")[0][0] > 0


def test_concurrent_imports(small_job: Path) -> None:
    """Two processes and two threads import the same job at once: one DB, never corrupt."""
    code = "import sys; from openmsprof.parse.importer import import_job; import_job(sys.argv[1], progress=False)"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(small_job)]) for _ in range(2)]
    errors: list[BaseException] = []

    def run() -> None:
        try:
            import_job(small_job, progress=False)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    ts = [threading.Thread(target=run) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert [p.wait(60) for p in procs] == [0, 0] and not errors
    db = small_job / "sqlite" / "msprof.db"
    assert q(db, "PRAGMA integrity_check") == [("ok",)]
    assert sorted(p.name for p in db.parent.iterdir()) == [".import.lock", "msprof.db"]
    before = dump_db(db)
    (db.parent / ".msprof.db.99999999.tmp").write_bytes(b"left by an import killed midway")
    assert dump_db(import_job(small_job, progress=False).db_path) == before
    assert sorted(p.name for p in db.parent.iterdir()) == [".import.lock", "msprof.db"]


def test_not_a_job(tmp_path: Path) -> None:
    with pytest.raises(RawDataError, match="does not exist"):
        find_jobs(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RawDataError, match="is not a profiling job"):
        import_job(tmp_path / "empty")
    (tmp_path / "f").write_text("x")
    with pytest.raises(RawDataError, match="is not a directory"):
        find_jobs(tmp_path / "f")


def test_s2_job_dir_and_folder_of_jobs(out_dir: Path, tmp_path: Path) -> None:
    j1 = make_job(out_dir, sampler=False)[0]
    j2 = make_job(out_dir, sampler=False)[0]
    assert find_jobs(out_dir) == sorted([j1, j2])
    # S2 layout: JOBxxx/ with data/ and info.json.0 directly inside
    s2 = tmp_path / "JOBABCDEF"
    s2.mkdir()
    (s2 / "data").mkdir()
    for p in (j1 / "host" / "data").iterdir():
        (s2 / "data" / p.name).write_bytes(p.read_bytes())
    (s2 / "info.json.0").write_bytes((j1 / "host" / "info.json").read_bytes())
    (s2 / "start_info.0").write_bytes((j1 / "host" / "start_info").read_bytes())
    (s2 / "end_info.0").write_bytes((j1 / "host" / "end_info").read_bytes())
    assert find_jobs(s2) == [s2]
    r = import_job(s2, progress=False)
    assert r.db_path == s2 / "sqlite" / "msprof.db"
    a = q(r.db_path, "SELECT COUNT(*), MIN(startNs) FROM MSTX_EVENTS")
    b = q(ensure_imported(j1), "SELECT COUNT(*), MIN(startNs) FROM MSTX_EVENTS")
    assert a == b


def test_cli(out_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    j1 = make_job(out_dir, sampler=False)[0]
    make_job(out_dir, sampler=False)
    assert main(["import", "-dir", str(out_dir)]) == 0
    out, err = capsys.readouterr()
    assert out.count("records ->") == 2 and "warning:" in err and "unclosed" in err
    assert "importing" not in err and "\x1b[" not in err + out  # no progress bar when not a TTY
    assert all((j / "sqlite" / "msprof.db").is_file() for j in find_jobs(out_dir))
    assert main(["import", "--collection-dir", str(j1), "--output", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / "sqlite" / "msprof.db").is_file()
    capsys.readouterr()
    assert main(["import", "-dir", str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("openmsprof: error: ") and err.count("\n") == 1
    with pytest.raises(SystemExit) as ex:
        main(["import", "-h"])
    assert ex.value.code == 0 and "-dir" in capsys.readouterr().out


def _drop_root(cmd: list[str]) -> list[str]:
    """Root ignores file modes: run without capabilities so a read-only tree is read-only."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot make a directory read-only")
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--", *cmd]


def test_read_only_job(out_dir: Path, tmp_path: Path) -> None:
    job = make_job(out_dir, sampler=False)[0]
    subprocess.run(["chmod", "-R", "a-w", str(job)], check=True)
    try:
        cmd = _drop_root([sys.executable, "-m", "openmsprof", "import", "-dir", str(job)])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert p.returncode == 1, p.stderr
        assert p.stderr.startswith("openmsprof: error: job directory") and "--output" in p.stderr
        assert p.stderr.count("\n") == 1
        other = tmp_path / "db_here"
        p = subprocess.run([*cmd, "--output", str(other)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert q(other / "sqlite" / "msprof.db", "SELECT COUNT(*) FROM MSTX_EVENTS")[0][0] > 0
        assert not (job / "sqlite").exists()
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(job)], check=True)


def test_symlinked_input_refused(small_job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "link").symlink_to(small_job)
    assert main(["import", "-dir", str(tmp_path / "link")]) == 1
    assert "symbolic link" in capsys.readouterr().err


def test_duplicate_connection_ids_are_counted(small_job: Path) -> None:
    import numpy as np

    from openmsprof.recorder.rawfile import GENERIC_DTYPE

    recs = np.zeros(5, dtype=GENERIC_DTYPE)
    recs["kind"], recs["t0"], recs["t1"], recs["b"] = 6, 100, 200, 777  # five APIs, one id
    (small_job / "host" / "data" / "Api.records.host.slice_4").write_bytes(
        HEADER.pack(RECORDS_MAGIC, 1, 32, 0) + recs.tobytes())
    r = import_job(small_job, progress=False)
    assert "4 × CANN_API row with a duplicate key (dropped)" in r.warnings
    assert q(r.db_path, "SELECT COUNT(*) FROM CANN_API WHERE connectionId = 777") == [(1,)]
