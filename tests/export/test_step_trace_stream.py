"""StepTraceTime rows of a PROF_ job streamed over its tasks (export/msprof/step_trace_stream.py):
the rows the whole ``Overlap`` of the same tasks gives, at every block size, and a peak memory
that does not grow with the job."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from openmsprof.export.ascend_pt.overlap import Overlap, window_rows
from openmsprof.export.msprof import analysis_db, step_trace_stream

COMM = 7  # STRING_IDS id of 'COMMUNICATION'


def _db(path: Path, tasks: list[tuple[int, int, int, int]], steps: list[tuple[int, int, int, int]] | None) -> sqlite3.Connection:
    """A tool-facing db with what step_trace_rows reads: TASK (start, end, device, type),
    STRING_IDS, STEP_TIME (id, start, end, device) when ``steps`` is not None."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER, taskType INTEGER)")
    con.execute("CREATE INDEX TaskIndex ON TASK(startNs)")
    con.execute("CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT)")
    con.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(COMM, "COMMUNICATION"), (8, "AI_CORE")])
    con.executemany("INSERT INTO TASK VALUES (?,?,?,?)", tasks)
    if steps is not None:
        con.execute("CREATE TABLE STEP_TIME(id INTEGER, startNs INTEGER, endNs INTEGER, modelId INTEGER, "
                    "deviceId INTEGER)")
        con.executemany("INSERT INTO STEP_TIME VALUES (?,?,?,0,?)", steps)
    con.commit()
    return con


def _in_memory(con: sqlite3.Connection) -> list[list[object]]:
    """The rows from every task at once (``Overlap`` + ``window_rows``): the reference."""
    steps = con.execute("SELECT id, startNs, endNs, deviceId FROM STEP_TIME WHERE endNs >= startNs "
                        "ORDER BY startNs, id").fetchall() \
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'STEP_TIME'").fetchone() else []
    rows: list[list[object]] = []
    for (device,) in con.execute("SELECT DISTINCT deviceId FROM TASK ORDER BY deviceId").fetchall():
        t = np.asarray(con.execute("SELECT startNs, max(endNs, startNs), ifnull(taskType, -1) FROM TASK "
                                   "WHERE deviceId = ?", (device,)).fetchall(), np.int64).reshape(-1, 3)
        ov = Overlap.of_tasks(t[:, 0], t[:, 1], t[:, 2] == COMM)
        rows += window_rows(ov, [(str(i), s, e) for i, s, e, d in steps if d in (device, -1)], device, None)
    return rows


def _tasks(rng: random.Random, n: int, devices: int, comm: float) -> list[tuple[int, int, int, int]]:
    base = 1_790_000_000_000_000_000  # epoch ns: past float64's exact integers
    out = []
    t = base
    for _ in range(n):
        t += rng.choice((0, 0, 1, 5, 40, 300))  # ties, touching and gapped starts
        dur = rng.choice((0, 1, 3, 50, 400, 2000))  # zero-length and long (spanning blocks) tasks
        end = t + dur if rng.random() > 0.02 else t - 5  # an end before its start counts as the start
        out.append((t, end, rng.randrange(devices), COMM if rng.random() < comm else rng.choice((8, None))))
    rng.shuffle(out)  # rowid order is not start order
    return out


def _steps(rng: random.Random, tasks: list[tuple[int, int, int, int]], devices: int) -> list[tuple[int, int, int, int]]:
    lo, hi = min(t[0] for t in tasks), max(t[1] for t in tasks)
    out = []
    for i in range(12):
        a = rng.randrange(lo - 500, hi + 500)
        out.append((i, a, a + rng.choice((0, 10, 200, 3000, hi - lo)), rng.choice([*range(devices), -1])))
    out.append((99, hi + 10_000, hi + 20_000, 0))  # nothing busy inside
    return out


@pytest.mark.parametrize("block", [1, 3, 7, 64, step_trace_stream.BLOCK_ROWS])
def test_streamed_rows_equal_the_whole_overlap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(step_trace_stream, "BLOCK_ROWS", block)
    rng = random.Random(block)
    for k, (devices, comm, with_steps) in enumerate([(1, 0.0, False), (1, 0.0, True), (3, 0.0, True),
                                                     (2, 0.05, True), (2, 0.05, False), (1, 0.0, None)]):
        tasks = _tasks(rng, 400, devices, comm)
        steps = _steps(rng, tasks, devices) if with_steps else ([] if with_steps is None else None)
        con = _db(tmp_path / f"{block}_{k}.db", tasks, steps)
        got, want = analysis_db.step_trace_rows(con), _in_memory(con)
        assert got == want, (devices, comm, with_steps)
        assert len(got) >= devices  # (every device has a row: the stream was not empty)


def test_a_communication_task_leaves_the_device_to_the_whole_overlap(tmp_path: Path) -> None:
    rng = random.Random(5)
    tasks = _tasks(rng, 200, 1, 0.0)
    con = _db(tmp_path / "a.db", tasks, None)
    assert step_trace_stream.device_rows(con, 0, [], [COMM], None) is not None
    con.execute("INSERT INTO TASK VALUES (?,?,0,?)", (tasks[0][0], tasks[0][0] + 77, COMM))
    assert step_trace_stream.device_rows(con, 0, [], [COMM], None) is None
    assert analysis_db.step_trace_rows(con) == _in_memory(con)
    assert _in_memory(con)[0][5] > 0  # its Communication column: the task was counted


def test_no_task_no_row(tmp_path: Path) -> None:
    con = _db(tmp_path / "e.db", [], [(1, 10, 20, 0)])
    assert step_trace_stream.device_rows(con, 0, [], [COMM], None) == []
    assert analysis_db.step_trace_rows(con) == []


_PEAK = """
import sqlite3, sys


def hwm():  # this process's peak RSS in KB (VmHWM: ru_maxrss would start at its parent's RSS)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


from openmsprof.export.msprof import analysis_db
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
con.execute("SELECT count(*) FROM STRING_IDS").fetchone()
before = hwm()
rows = analysis_db.step_trace_rows(con)
print(len(rows), (hwm() - before) // 1024)
"""


def test_peak_memory_does_not_grow_with_the_tasks(tmp_path: Path) -> None:
    """1 M disjoint tasks (no step: one row over the busy span).  A tuple a task grew the peak by
    196 MB; streamed, 31 MB (a block, numpy and SQLite's own)."""
    db = tmp_path / "big.db"
    con = _db(db, [], None)
    base = 1_790_000_000_000_000_000
    con.executemany("INSERT INTO TASK VALUES (?,?,0,8)", ((base + 10 * i, base + 10 * i + 4) for i in range(1_000_000)))
    con.commit()
    con.close()
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_PEAK), str(db)], capture_output=True, text=True,
                         check=True, timeout=300)
    n, grew_mb = map(int, out.stdout.split())
    assert n == 1
    assert grew_mb < 60, f"step_trace_rows grew the peak RSS by {grew_mb} MB over 1 M tasks"
