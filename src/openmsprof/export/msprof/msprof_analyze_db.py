"""``msprof_{YYYYmmddHHMMSS}.db`` in a PROF_ job root (docs/formats.md §2 "modern" layout, §6): the job
database as msprof-analyze reads it.

It is a copy of ``sqlite/msprof.db`` (works from the job's sqlite db alone, whatever framework
made the job) with what the tools key on:
* ``TASK.taskType`` / ``COMPUTE_TASK_INFO.taskType`` name the real executor (``CPU`` …), or
  ``COMMUNICATION`` / ``MEMCPY_ASYNC`` for those kinds of ``export.classify`` (decided from the op
  type, else the name; docs/formats.md decision 1; :mod:`.task_classes`); META_DATA ``EXECUTOR``
  names the executor;
* the msprof tables the recipes query even when empty: ENUM_HCCL_*, COMMUNICATION_OP,
  COMMUNICATION_TASK_INFO, TASK_PMU_INFO, and the (empty: no PyTorch) framework tables
  CONNECTION_IDS / PYTORCH_API that free_analysis and operator_mfu join; no AICORE_FREQ row
  (no AI Core clock is measured, decision 13);
* META_DATA ``openmsprof_overhead`` (JSON) when the recorder left its figures.
Re-export replaces it (older ``msprof_*.db`` of the job are removed) — only when it is stale:
:func:`current_db` keeps the db (and so the layout's stamp) while ``sqlite/msprof.db``, the host
info.json and the overhead figures it was made from are unchanged (``sqlite/tool_facing.json``).
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import orjson

from openmsprof._version import __version__
from openmsprof.config.errors import ProfilingError, StorageError
from openmsprof.export import overhead
from openmsprof.export.hccl_enums import ENUMS
from openmsprof.export.msprof.task_classes import TaskClasses, classify_tasks
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import read_json

__all__ = ["DB_RE", "current_db", "disk_full", "remember", "remove_others", "write_db"]

_SQLITE_FULL = 13


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database or disk is full" (SQLITE_FULL), or an OS full disk."""
    if isinstance(exc, StorageError):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF == _SQLITE_FULL or "is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (28, 122)  # ENOSPC, EDQUOT

DB_RE = re.compile(r"^msprof_\d{14}\.db$")
EXTRA_TABLES = """
CREATE TABLE IF NOT EXISTS COMMUNICATION_OP(opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER,
  groupName INTEGER, opId INTEGER, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER,
  count NUMERIC, opType INTEGER, deviceId INTEGER);
CREATE TABLE IF NOT EXISTS COMMUNICATION_TASK_INFO(name INTEGER, globalTaskId INTEGER, taskType INTEGER,
  planeId INTEGER, groupName INTEGER, notifyId INTEGER, rdmaType INTEGER, srcRank INTEGER, dstRank INTEGER,
  transportType INTEGER, size INTEGER, dataType INTEGER, linkType INTEGER, opId INTEGER, isMaster INTEGER,
  bandwidth NUMERIC);
CREATE TABLE IF NOT EXISTS TASK_PMU_INFO(globalTaskId INTEGER, name INTEGER, value NUMERIC);
CREATE TABLE IF NOT EXISTS AICORE_FREQ(deviceId INTEGER, timestampNs INTEGER, freq INTEGER);
CREATE TABLE IF NOT EXISTS MSTX_EVENTS(startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER,
  category INTEGER, message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER,
  connectionId INTEGER);
CREATE TABLE IF NOT EXISTS CONNECTION_IDS(id INTEGER, connectionId INTEGER);
CREATE TABLE IF NOT EXISTS PYTORCH_API(startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER,
  name INTEGER, sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER,
  callchainId INTEGER, type INTEGER);
"""
#: What this module writes changed (executor task types, no AICORE_FREQ row, the framework tables;
#: 3: analyze/ gets StepTraceTime rows, made after the db):
#: part of the staleness key, so a db made by an older rule is remade.
REVISION = 3


STATE = Path("sqlite") / "tool_facing.json"
#: What the db is made from besides the job's sqlite db (host info, the overhead figures).
_SOURCES = (Path("sqlite") / "msprof.db", Path("host") / "info.json", Path("host") / overhead.FILE)


def _source_key(job: Path) -> list[object]:
    """The version and each source file's identity (size, mtime, inode); absent files too."""
    key: list[object] = [__version__, REVISION]
    for rel in _SOURCES:
        try:
            st = (job / rel).stat()
            key.append([str(rel), st.st_size, st.st_mtime_ns, st.st_ino])
        except OSError:
            key.append([str(rel)])
    return key


def current_db(job: Path) -> Path | None:
    """The job's ``msprof_{ts}.db`` when it was made from the job's present sources, else None."""
    try:
        state = read_json(job / STATE, "tool-facing state")
    except ProfilingError:
        return None
    if not isinstance(state, dict) or state.get("key") != _source_key(job):
        return None
    name = state.get("db")
    path = job / name if isinstance(name, str) and DB_RE.match(name) else None
    return path if path is not None and path.is_file() and not path.is_symlink() else None


def remember(job: Path, db: Path) -> None:
    """Record that ``db`` was made from the job's present sources (see :func:`current_db`)."""
    fs.write_file_atomic(job / STATE, orjson.dumps({"db": db.name, "key": _source_key(job)}))


def _copy_db(src: Path, tmp: Path, final: Path) -> None:
    """``src``'s bytes into the new private file ``tmp`` (the kernel's copy where it can: the job
    db is complete and never rewritten in place, an import renames a new one over it; a db in
    WAL mode goes through SQLite's backup instead).  A full disk raises :class:`StorageError`
    naming ``final``; ``tmp`` is removed on any failure."""
    fd = fs.open_new(tmp, append=False)
    try:
        with open(src, "rb") as f:
            if os.pread(f.fileno(), 20, 0)[18:19] == b"\x02":  # WAL: the -wal file holds part of the data
                os.close(fd)
                fd = -1
                _backup(src, tmp)
                return
            fs.copy_fd(f.fileno(), fd)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        if disk_full(exc):  # fs.copy_fd's (or the WAL backup's) full disk, named as this file's
            raise StorageError(fs.disk_full_message(final, "writing")) from None
        raise
    os.close(fd)


def _backup(src: Path, tmp: Path) -> None:
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    con = sqlite3.connect(tmp)
    try:
        source.backup(con)
    finally:
        con.close()
        source.close()


def write_db(job: Path, stamp: str, classes: TaskClasses | None = None) -> Path:
    """Write ``JOB/msprof_{stamp}.db`` from ``JOB/sqlite/msprof.db`` (imported already);
    ``classes``: that db's :func:`read_classes`, when read already."""
    src = job / "sqlite" / "msprof.db"
    final = job / f"msprof_{stamp}.db"
    tmp = job / f".msprof_{stamp}.db.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    _copy_db(src, tmp, final)
    con = sqlite3.connect(tmp)
    try:
        # a private temporary file, renamed into place when complete: no journal, no syncs
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        with con:
            con.executescript(EXTRA_TABLES)
            for table, rows in ENUMS.items():
                con.execute(f"CREATE TABLE IF NOT EXISTS {table}(id INTEGER PRIMARY KEY, name TEXT)")
                con.executemany(f"INSERT OR IGNORE INTO {table} VALUES (?,?)", rows)
            executor = classify_tasks(con, classes)
            con.executemany("INSERT INTO META_DATA VALUES (?,?)", [("EXECUTOR", executor)])
            figures = overhead.read_job(job)
            if figures:
                con.execute("INSERT INTO META_DATA VALUES (?,?)", (overhead.KEY, orjson.dumps(figures).decode()))
            # no AICORE_FREQ row: no AI Core clock was measured (docs/formats.md decision 13)
            _drop_if_empty(con, "STEP_TIME")
    except BaseException as exc:
        con.close()
        tmp.unlink(missing_ok=True)
        if disk_full(exc):  # one line naming the file and the free space, not SQLite's traceback
            raise StorageError(fs.disk_full_message(final, "writing")) from None
        raise
    con.close()
    os.replace(tmp, final)
    remove_others(job, final)
    return final


def _drop_if_empty(con: sqlite3.Connection, table: str) -> None:
    """Drop an empty ``table``: msprof-analyze's cluster_time_summary LEFT JOINs tasks to STEP_TIME
    when the table exists, and an empty one gives every task a NULL step that its per-step
    grouping drops (then ``reset_index() … 'name'``); without it every task is step -1."""
    if con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() \
            and con.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None:
        con.execute(f"DROP TABLE {table}")


def remove_others(job: Path, db: Path) -> None:
    """Remove the job's ``msprof_*.db`` files other than ``db`` (older stamps)."""
    for old in job.iterdir():
        if DB_RE.match(old.name) and old.name != db.name and not old.is_symlink():
            old.unlink(missing_ok=True)
