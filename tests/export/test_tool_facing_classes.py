"""The tool-facing db's task types (``task_classes``, docs/formats.md decision 1): computing
work keeps its executor, communication and data movement are named so, and only the tasks whose
type changes are rewritten (issue 26: rewriting every TASK and COMPUTE_TASK_INFO row cost more
than the rest of ``export summary``'s copy)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from openmsprof.export.msprof import msprof_analyze_db as tool_facing_db
from openmsprof.export.msprof import task_classes
from tests.export.dbfactory import START_NS, Builder, write_info

STAMP = "20260101000000"
#: (name, opType) of the job's tasks, each with the Task Type the tool-facing db must give it
TASKS = [("Conv_1", "Conv", "CPU"), ("aten::copy_", "aten::copy_", "MEMCPY_ASYNC"),
         ("gloo:all_reduce", "gloo:all_reduce", "COMMUNICATION"), ("Relu_3", "Relu", "CPU"),
         ("hcom_allReduce__1_0_1", "N/A", "COMMUNICATION"), ("MemcpyAsync", "Memcpy", "MEMCPY_ASYNC")]


def _job(root: Path, copies: int = 3) -> Path:
    job = root / "PROF_000001_20260101000000000_CLASSES"
    b = Builder(job / "sqlite" / "msprof.db")
    b.meta(START_NS, START_NS + 10_000_000)
    gid = 0
    for _ in range(copies):
        for name, op, _want in TASKS:
            b.task(START_NS + gid * 1000, START_NS + gid * 1000 + 500, gid, name, op)
            gid += 1
    b.close()
    write_info(job)
    return job


def _types(db: Path, table: str) -> dict[str, list[str | None]]:
    """COMPUTE_TASK_INFO name → the type texts of its tasks in ``table``, in task order."""
    con = sqlite3.connect(db)
    try:
        col = "t.taskType" if table == "TASK" else "c.taskType"
        rows = con.execute(f"SELECT n.value, s.value FROM COMPUTE_TASK_INFO c JOIN TASK t "
                           f"ON t.globalTaskId = c.globalTaskId JOIN STRING_IDS n ON n.id = c.name "
                           f"LEFT JOIN STRING_IDS s ON s.id = {col} ORDER BY c.globalTaskId").fetchall()
    finally:
        con.close()
    out: dict[str, list[str | None]] = {}
    for name, text in rows:
        out.setdefault(name, []).append(text)
    return out


def _count_updates(con: sqlite3.Connection) -> None:
    con.execute("CREATE TEMP TABLE log(tbl TEXT)")
    for table in ("TASK", "COMPUTE_TASK_INFO"):
        con.execute(f"CREATE TEMP TRIGGER log_{table} AFTER UPDATE ON main.{table} "
                    f"BEGIN INSERT INTO log VALUES ('{table}'); END")


def test_each_kind_gets_its_type_and_only_changed_tasks_are_rewritten(tmp_path: Path) -> None:
    job = _job(tmp_path)
    db = tmp_path / "copy.db"
    db.write_bytes((job / "sqlite" / "msprof.db").read_bytes())
    con = sqlite3.connect(db)
    _count_updates(con)
    with con:
        assert task_classes.classify_tasks(con) == "CPU"
    updates = dict(con.execute("SELECT tbl, count(*) FROM log GROUP BY tbl").fetchall())
    con.close()
    # 4 of the 6 names change (2 stay CPU), 3 tasks each: 12 rows of each table, not 18
    assert updates == {"TASK": 12, "COMPUTE_TASK_INFO": 12}
    want = {name: [t] * 3 for name, _op, t in TASKS}
    assert _types(db, "TASK") == _types(db, "COMPUTE_TASK_INFO") == want


def test_the_written_db_and_the_twins_types_agree(tmp_path: Path) -> None:
    job = _job(tmp_path)
    src = sqlite3.connect(job / "sqlite" / "msprof.db")
    classes = task_classes.read_classes(src)
    types = task_classes.engine_types(src)
    src.close()
    assert classes is not None and classes.infos == 18 and sum(r[4] for r in classes.rows) == 18
    assert task_classes.engine_types(classes) == types
    made = tool_facing_db.write_db(job, STAMP, classes)
    assert sorted(set(types.values())) == ["COMMUNICATION", "CPU", "MEMCPY_ASYNC"]
    assert _types(made, "TASK") == {name: [t] * 3 for name, _op, t in TASKS}
    with sqlite3.connect(made) as con:
        assert con.execute("SELECT value FROM META_DATA WHERE name = 'EXECUTOR'").fetchone() == ("CPU",)


@pytest.mark.parametrize("irregular", ["info_type_differs", "orphan_info"])
def test_a_db_not_as_the_import_makes_it_is_rewritten_whole(tmp_path: Path, irregular: str) -> None:
    """A COMPUTE_TASK_INFO row of another type than its task's, or without a task: every row is set
    by its (opType, name) class, as before (an orphan row too, by its pair's class)."""
    job = _job(tmp_path, copies=1)
    db = tmp_path / "copy.db"
    db.write_bytes((job / "sqlite" / "msprof.db").read_bytes())
    con = sqlite3.connect(db)
    with con:
        if irregular == "info_type_differs":
            con.execute("INSERT INTO STRING_IDS VALUES (9999, 'AI_CORE')")
            con.execute("UPDATE COMPUTE_TASK_INFO SET taskType = 9999 WHERE globalTaskId = 0")
        else:
            con.execute("INSERT INTO COMPUTE_TASK_INFO SELECT name, 100, blockNum, mixBlockNum, taskType, opType, "
                        "inputFormats, inputDataTypes, inputShapes, outputFormats, outputDataTypes, outputShapes, "
                        "attrInfo, opState, hf32Eligible FROM COMPUTE_TASK_INFO WHERE globalTaskId = 1")
    _count_updates(con)
    with con:
        task_classes.classify_tasks(con)
    updates = dict(con.execute("SELECT tbl, count(*) FROM log GROUP BY tbl").fetchall())
    orphan = con.execute("SELECT s.value FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON s.id = c.taskType "
                         "WHERE globalTaskId = 100").fetchone()
    con.close()
    infos = 6 if irregular == "info_type_differs" else 7
    assert updates == {"TASK": 6, "COMPUTE_TASK_INFO": infos}
    assert _types(db, "TASK") == _types(db, "COMPUTE_TASK_INFO") == {name: [t] for name, _op, t in TASKS}
    assert orphan == (("MEMCPY_ASYNC",) if irregular == "orphan_info" else None)  # aten::copy_'s class
