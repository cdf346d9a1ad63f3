"""The task types of the tool-facing db (docs/formats.md decision 1): the executor, or COMMUNICATION / MEMCPY_ASYNC.

``TASK.taskType`` / ``COMPUTE_TASK_INFO.taskType`` of ``msprof_{ts}.db`` name the real executor
of each compute task (``CPU`` …), or ``COMMUNICATION`` / ``MEMCPY_ASYNC`` for those kinds of
``export.classify`` (decided from the op type, else the name), one class per (opType, name)
group: read once from the job's db (:func:`read_classes`), given to the summary's twins
(:func:`engine_types`) and written into the copy (:func:`classify_tasks`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from openmsprof.export import classify

__all__ = ["TaskClasses", "classify_tasks", "engine_types", "read_classes"]


def _string_id(con: sqlite3.Connection, cache: dict[str, int], text: str) -> int:
    sid = cache.get(text)
    if sid is None:
        row = con.execute("SELECT id FROM STRING_IDS WHERE value = ?", (text,)).fetchone()
        if row is None:
            nxt = con.execute("SELECT coalesce(max(id), 0) + 1 FROM STRING_IDS").fetchone()[0]
            con.execute("INSERT INTO STRING_IDS VALUES (?,?)", (nxt, text))
            row = (nxt,)
        sid = cache[text] = int(row[0])
    return sid


def _engine_text(strings: dict[int, str], op: object, name: object, executor: str) -> str:
    """The Task Type of a compute task: its executor, or COMMUNICATION / MEMCPY_ASYNC for those
    kinds (from its op type, else its name; ``classify``)."""
    text = strings.get(op) or strings.get(name) or ""  # type: ignore[call-overload]
    if text in ("", "N/A"):
        text = strings.get(name, "")  # type: ignore[call-overload]
    return classify.core_name(text, executor or "CPU")


@dataclass
class TaskClasses:
    """What classifying a job's tasks needs, read once from its db (:func:`read_classes`)."""

    #: (COMPUTE_TASK_INFO.opType, .name, TASK.taskType, COMPUTE_TASK_INFO.taskType, tasks) groups
    rows: list[tuple[Any, Any, Any, Any, int]]
    #: the texts of the ids in ``rows``
    strings: dict[int, str]
    #: COMPUTE_TASK_INFO's row count
    infos: int


def read_classes(con: sqlite3.Connection) -> TaskClasses | None:
    """The task groups of ``con``'s db (one pass over TASK ⨝ COMPUTE_TASK_INFO); None when it
    has no such tables."""
    tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "COMPUTE_TASK_INFO" not in tables or "TASK" not in tables:
        return None
    rows = con.execute("SELECT c.opType, c.name, t.taskType, c.taskType, count(*) FROM COMPUTE_TASK_INFO c "
                       "JOIN TASK t ON t.globalTaskId = c.globalTaskId GROUP BY 1, 2, 3, 4").fetchall()
    ids = sorted({i for row in rows for i in row[:4] if isinstance(i, int)})
    strings: dict[int, str] = {}
    for k in range(0, len(ids) if "STRING_IDS" in tables else 0, 500):
        part = ids[k:k + 500]
        strings.update(con.execute(f"SELECT id, value FROM STRING_IDS WHERE id IN ({','.join('?' * len(part))})", part))
    (infos,) = con.execute("SELECT count(*) FROM COMPUTE_TASK_INFO").fetchone()
    return TaskClasses(rows, strings, int(infos))


def engine_types(source: sqlite3.Connection | TaskClasses | None) -> dict[tuple[object, object], str]:
    """(opType, name) → the Task Type text ``msprof_analyze_db.write_db`` gives those tasks, read
    from the job's own db (or its :func:`read_classes`), so the tool-facing twins need not wait
    for the copy.  Pairs with a NULL id match no class row there and keep no type (``N/A``)."""
    classes = read_classes(source) if isinstance(source, sqlite3.Connection) else source
    if classes is None:
        return {}
    strings = classes.strings
    return {(op, name): "N/A" if op is None or name is None else
            (_engine_text(strings, op, name, strings.get(tt, "")) or "N/A") for op, name, tt, _, _ in classes.rows}


def classify_tasks(con: sqlite3.Connection, classes: TaskClasses | None = None) -> str:
    """Task types: the executor stays, COMMUNICATION / MEMCPY_ASYNC work is named so; returns the
    executor name(s).  ``classes``: ``con``'s, read already (its copy's source has the same).

    Only the tasks whose type changes are rewritten when the db is as the import makes it (one
    COMPUTE_TASK_INFO row per task, of its task's type, one type per (opType, name)): most jobs
    have none, and rewriting every row of both tables cost more than the rest of the copy.
    Otherwise every row is set as before: by its (opType, name), NULL where no class matches."""
    classes = classes if classes is not None else read_classes(con)
    if classes is None:
        return "CPU"
    strings = classes.strings
    cache: dict[str, int] = {}
    executors = set()
    mapping = []
    for op, name, tt, _, _ in classes.rows:
        executors.add(strings.get(tt, ""))
        mapping.append((op, name, _string_id(con, cache, _engine_text(strings, op, name, strings.get(tt, "")))))
    executor = ",".join(sorted(e for e in executors if e)) or "CPU"
    pairs = [(op, name) for op, name, _, _, _ in classes.rows]
    regular = (len(set(pairs)) == len(pairs) and sum(r[4] for r in classes.rows) == classes.infos
               and all(op is not None and name is not None and tt == ctt for op, name, tt, ctt, _ in classes.rows))
    if regular:
        changed = [m for m, row in zip(mapping, classes.rows, strict=True) if m[2] != row[2]]
        if changed:
            con.execute("CREATE TEMP TABLE cls(op INTEGER, name INTEGER, tt INTEGER, PRIMARY KEY(op, name))")
            con.executemany("INSERT INTO cls VALUES (?,?,?)", changed)
            con.execute("UPDATE COMPUTE_TASK_INFO SET taskType = (SELECT tt FROM cls WHERE cls.op = "
                        "COMPUTE_TASK_INFO.opType AND cls.name = COMPUTE_TASK_INFO.name) "
                        "WHERE (opType, name) IN (SELECT op, name FROM cls)")
            con.execute("UPDATE TASK SET taskType = (SELECT c.taskType FROM COMPUTE_TASK_INFO c "
                        "WHERE c.globalTaskId = TASK.globalTaskId) WHERE globalTaskId IN "
                        "(SELECT globalTaskId FROM COMPUTE_TASK_INFO WHERE (opType, name) IN (SELECT op, name FROM cls))")
        return executor
    con.execute("CREATE TEMP TABLE cls(op INTEGER, name INTEGER, tt INTEGER, PRIMARY KEY(op, name))")
    con.executemany("INSERT OR REPLACE INTO cls VALUES (?,?,?)", mapping)
    con.execute("UPDATE COMPUTE_TASK_INFO SET taskType = (SELECT tt FROM cls WHERE cls.op = COMPUTE_TASK_INFO.opType "
                "AND cls.name = COMPUTE_TASK_INFO.name)")
    con.execute("UPDATE TASK SET taskType = (SELECT c.taskType FROM COMPUTE_TASK_INFO c "
                "WHERE c.globalTaskId = TASK.globalTaskId) "
                "WHERE globalTaskId IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)")
    return executor
