"""The column-wise kernel_details reader builds the same database as the line-by-line one
(the fallback for anything it does not accept), on the fixture rows and on generated torch
output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openmsprof.export.ascend_pt import kernel_csv
from openmsprof.export.ascend_pt.kernel_job import ensure_kernel_db
from openmsprof.export.jobdb import open_job

from .test_kernel_job import ROWS, _rank

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gen_cluster import generate


def _content(rank: Path) -> dict[str, Any]:
    with open_job(rank) as db:
        t = db.text
        tasks = [(s, e, d, k, g, t(tt)) for s, e, d, k, g, tt in db.query(
            "SELECT startNs, endNs, deviceId, connectionId, globalTaskId, taskType FROM TASK"
            " ORDER BY globalTaskId")]
        info = [tuple(t(v) if i != 1 else v for i, v in enumerate(r)) for r in db.query(
            "SELECT name, globalTaskId, taskType, opType, inputFormats, inputDataTypes,"
            " inputShapes, outputFormats, outputDataTypes, outputShapes, attrInfo"
            " FROM COMPUTE_TASK_INFO ORDER BY globalTaskId")]
        steps = db.query("SELECT * FROM STEP_TIME ORDER BY id, deviceId")
        meta = db.query("SELECT * FROM SESSION_TIME_INFO")
    return {"tasks": tasks, "info": info, "steps": steps, "session": meta}


def _both(rank: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any]]:
    used: list[bool] = []
    real = kernel_csv.load

    def spy(*a: Any) -> bool:
        used.append(real(*a))
        return used[-1]

    monkeypatch.setattr(kernel_csv, "load", spy)
    ensure_kernel_db(rank)
    fast = _content(rank)
    assert used == [True]  # the column-wise reader built it
    (rank / ".openmsprof" / "kernels.db").unlink()

    def refuse(fd: int, *a: Any) -> bool:
        import os
        os.close(fd)
        return False

    monkeypatch.setattr(kernel_csv, "load", refuse)  # the line-by-line fallback
    ensure_kernel_db(rank)
    return fast, _content(rank)


def test_fixture_rows_same_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = _both(_rank(tmp_path, ROWS), monkeypatch)
    assert fast == slow and len(fast["tasks"]) == 3 and len(fast["steps"]) == 2
    assert fast["tasks"][0][:2] == (1795503649874079748, 1795503649874135131)


@pytest.mark.parametrize("chunk", [1 << 17, 1000])  # one chunk of rows to SQLite; several
def test_generated_rank_same_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       chunk: int) -> None:
    monkeypatch.setattr(kernel_csv, "_CHUNK", chunk)
    generate(tmp_path, ranks=1, events=3000, steps=3)
    (rank,) = sorted(tmp_path.glob("*_ascend_pt"))
    fast, slow = _both(rank, monkeypatch)
    assert fast == slow and len(fast["tasks"]) >= 3000 and len(fast["steps"]) == 3


def test_blank_step_and_no_pandas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [ROWS[0], ROWS[1], "," + ROWS[2].split(",", 1)[1]]  # the last kernel has no step
    fast, slow = _both(_rank(tmp_path, rows), monkeypatch)
    assert fast == slow and [t[3] for t in fast["tasks"]] == [3, 3, -1]
    rank = _rank(tmp_path / "b", ROWS)
    code = ("import sys; from openmsprof.export.ascend_pt.kernel_job import ensure_kernel_db; "
            f"ensure_kernel_db({str(rank)!r}); print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # pyarrow's to_numpy would import it (0.5 s)
