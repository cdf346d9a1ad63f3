"""Test helpers: read a raw job back (API spans, tasks, steps, marks) without the importer."""

from __future__ import annotations

import glob
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path

from openmsprof.recorder.rawfile import TASKINFO_DTYPE
from openmsprof.recorder.rawread import ReadReport, read_all_records, read_strings
from openmsprof.recorder.records import API_LEVEL_CODES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


@dataclass
class Task:
    name: str
    op_type: str
    stream: int
    t0: int
    t1: int
    task_id: int
    model_id: int
    conn: int
    in_shapes: str
    in_dtypes: str


@dataclass
class Job:
    root: Path
    apis: list[tuple[str, int, int, int, int]] = field(default_factory=list)  # name, level, t0, t1, conn
    tasks: list[Task] = field(default_factory=list)
    steps: list[tuple[int, int, int]] = field(default_factory=list)  # ts, index, tag
    marks: list[tuple[int, str]] = field(default_factory=list)  # kind, message
    report: ReadReport = field(default_factory=ReadReport)

    def api_names(self) -> list[str]:
        return [a[0] for a in self.apis]


def read_job(root: Path) -> Job:
    job = Job(root)
    host = root / "host" / "data"
    s = read_strings(host, job.report)
    recs = read_all_records(host, job.report)
    for r in recs:
        k = int(r["kind"])
        if k == 6:
            job.apis.append((s.get(int(r["a"]), ""), int(API_LEVEL_CODES[int(r["aux"])]), int(r["t0"]),
                             int(r["t1"]), int(r["b"])))
        elif k in (1, 2, 4):
            job.marks.append((k, s.get(int(r["a"]), "")))
    for dev in sorted(root.glob("device_*")):
        d = dev / "data"
        ds = read_strings(d, job.report)
        recs = read_all_records(d, job.report)
        infos = {}
        tasks = []
        for i, r in enumerate(recs):
            k = int(r["kind"])
            if k == 8:
                ti = recs[i:i + 1].view(TASKINFO_DTYPE)[0]
                infos[int(ti["task_id"])] = ti
            elif k == 7:
                tasks.append(r)
            elif k == 9:
                job.steps.append((int(r["t0"]), int(r["a"]), int(r["aux"])))
        for r in tasks:
            ti = infos[int(r["b"])]
            job.tasks.append(Task(ds.get(int(r["a"]), ""), ds.get(int(ti["op_type"]), ""), int(r["tid"]),
                                  int(r["t0"]), int(r["t1"]), int(r["b"]), int(r["aux"]),
                                  int(ti["connection_id"]), ds.get(int(ti["in_shapes"]), ""),
                                  ds.get(int(ti["in_dtypes"]), "")))
    job.tasks.sort(key=lambda t: t.t0)
    return job


def jobs_under(path: Path) -> list[Path]:
    return sorted(Path(p) for p in glob.glob(str(path / "PROF_*")))


def import_counts(job: Path) -> tuple[int, int]:
    """Import the job, then count with plain SQL on ``sqlite/msprof.db`` (not through openmsprof)
    its ``aclmdlExecute`` API rows and its device task rows."""
    from openmsprof.parse.importer import import_job

    db = Path(import_job(job, progress=False).db_path)
    assert db == job / "sqlite" / "msprof.db" and db.is_file(), db
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        executes = con.execute("SELECT count(*) FROM CANN_API a JOIN STRING_IDS s ON s.id = a.name "
                               "WHERE s.value = 'aclmdlExecute'").fetchone()[0]
        tasks = con.execute("SELECT count(*) FROM TASK").fetchone()[0]
    finally:
        con.close()
    return int(executes), int(tasks)
