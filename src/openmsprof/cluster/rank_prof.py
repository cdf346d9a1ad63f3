"""Read one pyACL/TensorFlow ``PROF_*`` job (its ``sqlite/msprof.db``, imported by openmsprof
on first use) into the cluster tables: device tasks as kernels, STEP_TIME as steps.

These jobs have no collectives, so a step's time splits into Computing (the union of its tasks)
and Free (the rest of the step); the communication columns are 0.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from openmsprof.cluster.rank_pt import KERNEL_SCHEMA
from openmsprof.parse.importer import ensure_imported

__all__ = ["STEP_COLUMNS", "read_prof"]

STEP_COLUMNS = ("Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
                "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing")
_TASKS = """
SELECT t.startNs, t.endNs, COALESCE(n.value, ''), COALESCE(o.value, ''), COALESCE(k.value, ''),
       COALESCE(s.value, '')
FROM TASK t
LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId
LEFT JOIN STRING_IDS n ON n.id = c.name
LEFT JOIN STRING_IDS o ON o.id = c.opType
LEFT JOIN STRING_IDS k ON k.id = t.taskType
LEFT JOIN STRING_IDS s ON s.id = c.inputShapes
ORDER BY t.startNs
"""


def _union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of intervals (sorted by start)."""
    if not len(starts):
        return 0
    run_end = np.maximum.accumulate(ends)
    gaps = np.clip(starts[1:] - run_end[:-1], 0, None)
    return int(run_end[-1] - starts[0] - gaps.sum())


def read_prof(rank: int, job: Path) -> tuple[pa.Table, tuple[list[str], list[list[Any]]]]:
    """(kernels, step_trace as (columns, rows)) of one PROF_ job."""
    db = ensure_imported(job, progress=False)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(_TASKS).fetchall()
        steps = con.execute("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs").fetchall()
    finally:
        con.close()
    start = np.array([r[0] for r in rows], np.int64)
    end = np.array([r[1] for r in rows], np.int64)
    if not steps and len(rows):
        steps = [(0, int(start.min()), int(end.max()))]
    step_of = np.full(len(rows), -1, np.int64)
    step_rows = []
    for sid, s0, s1 in steps:
        inside = (start >= s0) & (start < s1)
        step_of[inside] = sid
        comp = _union_ns(start[inside], np.minimum(end[inside], s1)) / 1000
        dur = (s1 - s0) / 1000
        step_rows.append((str(sid), comp, max(dur - comp, 0.0), dur))
    kernels = pa.table({
        "rank": pa.array([rank] * len(rows), pa.int32()),
        "step": pa.array(step_of, pa.int64()),
        "name": pa.array([r[2] for r in rows], pa.string()),
        "op_type": pa.array([r[3] or r[2] for r in rows], pa.string()),
        "task_type": pa.array([r[4] for r in rows], pa.string()),
        "start_us": pa.array(start / 1000, pa.float64()),
        "dur_us": pa.array((end - start) / 1000, pa.float64()),
        "input_shapes": pa.array([r[5] for r in rows], pa.string()),
    }, schema=KERNEL_SCHEMA)
    value = {"Computing": 1, "Free": 2, "Stage": 3}
    steps_out = [[rank, r[0], *(r[value[c]] if c in value else 0.0 for c in STEP_COLUMNS)] for r in step_rows]
    return kernels, (["rank", "step", *STEP_COLUMNS], steps_out)
