"""``PROF_…/analyze/communication_analyzer.db`` of a PROF_ job's tool-facing layout (docs/formats.md
"Tool-facing layout of a PROF_ job"): the CommAnalyzer*/StepTraceTime tables msprof-analyze's
cluster recipes open for every msprof rank.

CommAnalyzer* stay empty (no collectives in a pyACL / TensorFlow job).  StepTraceTime has one row
per device and ``STEP_TIME`` step (TensorFlow iterations, ``acl.prof`` model executions with
steps), by the same rule as a torch rank's step_trace_time (export/ascend_pt/overlap.py): Computing
= the union of the device's non-communication tasks inside the step, Communication that of its
COMMUNICATION tasks, Free the gaps between busy time, µs; a job without steps gets one row with a
NULL step over the busy span (msprof-analyze reads NULL as step -1, its "no step").  Computed from
the tool-facing ``msprof_{ts}.db`` (task types already classified).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np

from openmsprof.config.errors import StorageError
from openmsprof.export.ascend_pt.overlap import Overlap, window_rows
from openmsprof.export.ascend_pt.torch_db import ANALYSIS_SCHEMA
from openmsprof.export.msprof import msprof_analyze_db as tool_facing_db
from openmsprof.export.msprof import step_trace_stream
from openmsprof.fileio import fs

__all__ = ["ANALYSIS_DB", "step_trace_rows", "write_analysis_db"]

ANALYSIS_DB = Path("analyze") / "communication_analyzer.db"
#: STEP_TIME's deviceId for steps of the host (TensorFlow iterations): they bound every device's tasks
HOST_STEP = -1


def _tables(con: sqlite3.Connection) -> set[str]:
    return {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def step_trace_rows(con: sqlite3.Connection) -> list[list[object]]:
    """StepTraceTime rows (deviceId, step, computing … preparing) of the tool-facing db ``con``."""
    tables = _tables(con)
    if "TASK" not in tables:
        return []
    comm_ids = [i for (i,) in con.execute("SELECT id FROM STRING_IDS WHERE value = 'COMMUNICATION'")] \
        if "STRING_IDS" in tables else []
    steps: list[tuple[int, int, int, int]] = []
    if "STEP_TIME" in tables:
        cols = {r[1] for r in con.execute("PRAGMA table_info(STEP_TIME)")}
        dev = "deviceId" if "deviceId" in cols else str(HOST_STEP)
        steps = con.execute(f"SELECT id, startNs, endNs, {dev} FROM STEP_TIME WHERE endNs >= startNs "
                            "ORDER BY startNs, id").fetchall()
    rows: list[list[object]] = []
    for (device,) in con.execute("SELECT DISTINCT deviceId FROM TASK ORDER BY deviceId").fetchall():
        windows: list[tuple[object, int, int]] = [(str(sid), s, e) for sid, s, e, d in steps
                                                  if d in (device, HOST_STEP)]
        streamed = step_trace_stream.device_rows(con, int(device), windows, comm_ids, None)
        if streamed is not None:  # (no communication task: one pass, a block's memory)
            rows += streamed
            continue
        tasks = _task_columns(con, device)
        ov = Overlap.of_tasks(tasks[:, 0], tasks[:, 1], np.isin(tasks[:, 2], comm_ids))
        rows += window_rows(ov, windows, int(device), None)
    return rows


def _task_columns(con: sqlite3.Connection, device: object) -> np.ndarray:
    """(start, end, taskType or -1) of the device's tasks, one int64 row each, read
    ``step_trace_stream.BLOCK_ROWS`` at a time: 24 bytes a task held, not a Python tuple of three ints (~190 bytes) (a device with
    communication tasks; the others are streamed, ``step_trace_stream``)."""
    cur = con.execute("SELECT startNs, max(endNs, startNs), ifnull(taskType, -1) FROM TASK WHERE deviceId = ?",
                      (device,))
    blocks = []
    while rows := cur.fetchmany(step_trace_stream.BLOCK_ROWS):
        blocks.append(np.asarray(rows, np.int64).reshape(-1, 3))
    if len(blocks) == 1:
        return blocks[0]
    return np.concatenate(blocks) if blocks else np.zeros((0, 3), np.int64)


def write_analysis_db(job: Path, db_path: Path) -> Path:
    """Write ``JOB/analyze/communication_analyzer.db`` from the tool-facing db ``db_path``, atomically."""
    path = job / ANALYSIS_DB
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.close(fs.open_new(tmp, append=False))
    src = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    con = sqlite3.connect(tmp)
    try:
        rows = step_trace_rows(src)
        with con:
            con.executescript(ANALYSIS_SCHEMA)
            con.executemany("INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    except BaseException as exc:
        con.close()
        tmp.unlink(missing_ok=True)
        if tool_facing_db.disk_full(exc):
            raise StorageError(fs.disk_full_message(path, "writing")) from None
        raise
    finally:
        src.close()
    con.close()
    os.replace(tmp, path)
    return path
