"""A torch rank dir read as a job: kernel_details.csv → TASK/COMPUTE_TASK_INFO/STEP_TIME, exact
times, rebuilt when the CSV changes, bad input named in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openmsprof.config.errors import RawDataError
from openmsprof.export.ascend_pt.kernel_job import ensure_kernel_db, rank_dirs_under
from openmsprof.export.jobdb import find_jobs, open_job

HEADER = ("Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),"
          "Block Num,Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,"
          "Output Formats,Executor\n")
ROWS = [
    '3,0,aten::softplus,aten::softplus,AI_VECTOR_CORE,1795503649874079.748\t,55.383,0.000,N/A,'
    '"1,16,32,32;;",float;Scalar;Scalar,N/A,N/A,N/A,N/A,CPU\n',
    '3,0,aten::tanh,aten::tanh,AI_VECTOR_CORE,1795503649874140.579\t,38.037,5.448,N/A,'
    '"1,16,32,32",float,N/A,N/A,N/A,N/A,CPU\n',
    '4,0,aten::mul,aten::mul,AI_VECTOR_CORE,1795503649875000.5\t,15.853,11.137,N/A,'
    '"1,16,32,32;1,16,32,32",float;float,N/A,N/A,N/A,N/A,CPU\n',
]


def _rank(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    rank = tmp_path / "host_1-abcdef_20261124070049820_ascend_pt"
    out = rank / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    (out / "kernel_details.csv").write_text(header + "".join(rows), encoding="utf-8")
    return rank


def test_kernel_rows_become_tasks_with_steps(tmp_path: Path) -> None:
    rank = _rank(tmp_path, ROWS)
    assert find_jobs(tmp_path) == [rank] == rank_dirs_under(rank)
    with open_job(rank) as db:
        rows = db.query("SELECT t.startNs, t.endNs, t.connectionId, c.opType, c.inputShapes,"
                        " c.inputDataTypes FROM TASK t JOIN COMPUTE_TASK_INFO c"
                        " USING (globalTaskId) ORDER BY t.startNs")
        assert [(s, e, k) for s, e, k, *_ in rows] == [
            (1795503649874079748, 1795503649874135131, 3),
            (1795503649874140579, 1795503649874178616, 3),
            (1795503649875000500, 1795503649875016353, 4)]
        assert [db.text(r[3]) for r in rows] == ["aten::softplus", "aten::tanh", "aten::mul"]
        assert db.text(rows[0][4]) == "1,16,32,32;;" and db.text(rows[0][5]) == "float;Scalar;Scalar"
        assert db.query("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY id") == [
            (3, 1795503649874079748, 1795503649874178616),
            (4, 1795503649875000500, 1795503649875016353)]


def test_rebuilt_when_kernel_details_changes(tmp_path: Path) -> None:
    rank = _rank(tmp_path, ROWS[:1])
    db = ensure_kernel_db(rank)
    with open_job(rank) as j:
        assert j.query("SELECT COUNT(*) FROM TASK") == [(1,)]
    csv = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    _rank(tmp_path, ROWS)
    st = db.stat()
    os.utime(csv, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with open_job(rank) as j:
        assert j.query("SELECT COUNT(*) FROM TASK") == [(3,)]
    assert oct(db.stat().st_mode & 0o777) == "0o640"


@pytest.mark.parametrize(("header", "rows", "match"), [
    (HEADER.replace("Duration(us)", "Dur"), ROWS, r"lacks column 'Duration\(us\)'"),
    (HEADER, [ROWS[0].replace("874079.748", "87x079.748")], r"line 2: .*Start Time.* not a number"),
    (HEADER, [ROWS[0], "x" + ROWS[1]], r"line 3: Device_id, Step Id.* not a number"),
    (HEADER, [ROWS[0].replace(",CPU", "")], r"line 2: 15 fields, the header has 16"),
])
def test_bad_kernel_details_is_one_line(tmp_path: Path, header: str, rows: list[str],
                                        match: str) -> None:
    rank = _rank(tmp_path, rows, header)
    with pytest.raises(RawDataError, match=match) as exc:
        ensure_kernel_db(rank)
    assert "\n" not in str(exc.value) and "kernel_details.csv" in str(exc.value)
    assert not (rank / ".openmsprof" / "kernels.db").exists()


def test_symlinked_kernel_details_is_refused(tmp_path: Path) -> None:
    real = _rank(tmp_path / "real", ROWS) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    rank = _rank(tmp_path, [])
    link = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    link.unlink()
    link.symlink_to(real)
    with pytest.raises(RawDataError, match="symbolic link; refused"):
        ensure_kernel_db(rank)
