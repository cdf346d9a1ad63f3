"""Import a raw job into ``JOB/sqlite/msprof.db`` (docs/internals.md "Database").

Streams every slice of every data directory in chunks through :class:`DirConverter`, one
transaction per chunk, indexes last, temp file + rename.  Problems in the data become
warnings with counts in :class:`ImportResult`; only an unusable job raises.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openmsprof.config.errors import PathError, RawDataError
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import escape
from openmsprof.parse import api_groups, op_state, schema
from openmsprof.parse.convert import DirConverter, JobCounters
from openmsprof.parse.db_builder import DB_NAME, DbWriter, ImportLock
from openmsprof.parse.job_tables import write_job_tables
from openmsprof.parse.jobinfo import DataDirInfo, JobInfo, find_jobs, is_job, read_job
from openmsprof.parse.strings import LocalMap, StringIds
from openmsprof.recorder.rawread import (
    ReadReport,
    child_pids,
    iter_record_chunks,
    list_slices,
    read_strings,
)

__all__ = ["ImportResult", "ensure_imported", "find_jobs", "import_job"]

CHUNK_RECORDS = 1 << 16


@dataclass
class ImportResult:
    job_dir: Path
    db_path: Path
    records: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _sqlite_dir(job_dir: Path, output: Path | None) -> Path:
    base = job_dir if output is None else output
    target = base / "sqlite"
    probe = target if target.is_dir() else base
    if not os.access(probe, os.W_OK | os.X_OK):
        if output is None:
            raise PathError(f"job directory {str(probe)!r} is not writable; "
                            "give --output to write the database elsewhere")
        raise PathError(f"output directory {str(probe)!r} is not writable")
    return fs.make_dir(target)


def _progress(enabled: bool | None, total: int) -> tuple[object | None, object | None]:
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                   TimeRemainingColumn(), transient=True, console=Console(stderr=True))
    bar.start()
    return bar, bar.add_task("importing", total=total)


def _summarise(counts: dict[str, int], report: ReadReport) -> list[str]:
    out = list(report.warnings)
    if report.dropped_bytes:
        out.append(f"{report.dropped_bytes} bytes of raw data could not be read")
    if report.dropped_records:
        out.append(f"{report.dropped_records} records in damaged blocks skipped")
    out.extend(f"{n} × {what}" for what, n in sorted(counts.items()))
    return out


def _linked_raw(job: JobInfo) -> list[str]:
    """The raw files and folders of ``job`` that are symbolic links (never read): the
    ``host``/``device_*`` folders themselves, and any entry of their ``data/`` folders."""
    linked = []
    for p in sorted(job.root.iterdir()) if job.root.is_dir() else []:
        if p.is_symlink() and (p.name == "host" or p.name.startswith("device_")):
            linked.append(p.name)
    for d in job.dirs:
        if d.path.is_symlink():
            linked.append(f"{d.path.parent.name}/{d.path.name}")
        elif d.path.is_dir() and not d.path.parent.is_symlink():
            linked += [f"{d.path.parent.name}/{d.path.name}/{p.name}" for p in sorted(d.path.iterdir())
                       if p.is_symlink()]
    return linked


def import_job(job_dir: Path, *, progress: bool | None = None, output: Path | None = None) -> ImportResult:
    """(Re)build the database of one job; returns what was written and any warnings."""
    job_dir = Path(job_dir)
    if not is_job(job_dir):
        find_jobs(job_dir)  # raises the right message for a missing / non-job directory
        raise RawDataError(f"{str(job_dir)!r} holds several jobs; import each one")
    t_start = time.perf_counter()
    sqlite_dir = _sqlite_dir(job_dir, output)
    lock = ImportLock(sqlite_dir)
    try:
        return _import_locked(job_dir, sqlite_dir, progress, t_start)
    finally:
        lock.release()


def _produce(plan: list[tuple[DataDirInfo, LocalMap, list[Any], int]], job: JobInfo, strings: StringIds,
             counters: JobCounters, report: ReadReport, writer: DbWriter, out: queue.Queue[Any],
             stop: threading.Event, advance: Any, groups: api_groups.ApiGroups) -> None:
    """Worker thread: read and convert chunks, hand prepared batches to the writer thread."""

    def put(item: Any) -> None:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    try:
        convs = []
        for d, local, slices, pid in plan:
            off = d.offset_ns if d.offset_ns is not None else job.offset_ns
            conv = DirConverter(d.device_id, pid, off, strings, local, counters, groups)
            convs.append(conv)
            for _src, _dev, _n, path in slices:
                conv.where = escape(f"{path.parent.parent.name}/{path.parent.name}/{path.name}")
                try:
                    for chunk in iter_record_chunks(path, report, CHUNK_RECORDS):
                        put(writer.prepare(conv.feed(chunk)))
                        if stop.is_set():
                            return
                except OSError as exc:
                    report.warnings.append(f"{path.name}: read error {exc.strerror}; rest of file skipped")
                advance(path)
            put(writer.prepare(conv.finish(d.end_mono_ns)))
        for conv in convs:
            put(writer.prepare(conv.close_open()))
        put(None)
    except BaseException as exc:  # handed to the writer thread, re-raised there
        put(exc)


def _import_locked(job_dir: Path, sqlite_dir: Path, progress: bool | None, t_start: float) -> ImportResult:
    job = read_job(job_dir)
    report = ReadReport()
    strings = StringIds()
    counters = JobCounters()
    plan = []
    for d in job.dirs:
        # the session process's stream, then one per process forked during the session (its
        # own string ids; its rows carry its pid in globalTid)
        for pid in [None, *child_pids(d.path)]:
            local = LocalMap(read_strings(d.path, report, pid), strings)
            plan.append((d, local, list_slices(d.path, pid=pid), job.pid if pid is None else pid & 0x7FFFFFFF))
    total = sum(p.stat().st_size for _d, _l, sl, _p in plan for *_x, p in sl)
    writer = DbWriter(sqlite_dir)
    bar, task = _progress(progress, total)

    def advance(path: Path) -> None:
        if bar is not None:
            bar.update(task, advance=path.stat().st_size)  # type: ignore[attr-defined]

    # reading/numpy/list building overlaps with SQLite, which runs without the GIL
    batches: queue.Queue[Any] = queue.Queue(maxsize=3)
    stop = threading.Event()
    groups = api_groups.ApiGroups()
    api_groups.forget(writer.final)
    worker = threading.Thread(target=_produce, name="openmsprof-import", daemon=True,
                              args=(plan, job, strings, counters, report, writer, batches, stop, advance, groups))
    worker.start()
    try:
        while (item := batches.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            writer.write_prepared(item)
        worker.join()
        writer.run(lambda con: op_state.set_op_states(con, strings))
        write_job_tables(writer, job, strings)
        db = writer.commit()
        if "CANN_API" not in writer.duplicates:  # else SQL's groups lack the dropped rows
            api_groups.remember(db, groups)
    except BaseException:
        stop.set()
        worker.join()
        writer.abort()
        raise
    finally:
        if bar is not None:
            bar.stop()  # type: ignore[attr-defined]
    for table, n in writer.duplicates.items():
        counters.add(f"{table} row with a duplicate key (dropped)", n)
    warnings = job.warnings + _summarise(counters.counts, report) + counters.impossible_lines()
    linked = _linked_raw(job)
    if linked:  # refused like a FIFO, but said: one line with the count
        warnings.append(f"{len(linked)} raw file(s) or folder(s) are symbolic links; not read: "
                        + ", ".join(escape(n) for n in linked[:3]) + (", ..." if len(linked) > 3 else ""))
    if job.dropped:
        detail = "; ".join(f"thread {tid}: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                           for tid, kinds in sorted(job.drops.items())[:8])
        warnings.insert(0, f"DROPPED {job.dropped} records at collection (recorder buffers full)"
                        + (f": {detail}" if detail else ""))
    if report.records == 0:
        warnings.append(f"{job_dir.name}: no profiling records in the job")
    return ImportResult(job_dir, db, report.records, dict(writer.rows), warnings,
                        time.perf_counter() - t_start)


def _newest_raw_mtime(job_dir: Path) -> float:
    job = read_job(job_dir)
    newest = 0.0
    for d in job.dirs:
        for p in [d.path, *(d.path.iterdir() if d.path.is_dir() else [])]:
            try:
                newest = max(newest, p.stat().st_mtime)
            except OSError:
                pass
        for p in d.path.parent.glob("end_info*"):
            newest = max(newest, p.stat().st_mtime)
    return newest


def db_schema(db: Path) -> int:
    """``OPENMSPROF_SCHEMA`` of an existing database (0 if unreadable or older)."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT value FROM META_DATA WHERE name='OPENMSPROF_SCHEMA'").fetchone()
        finally:
            con.close()
        return int(row[0]) if row else 0
    except (sqlite3.Error, ValueError):
        return 0


def ensure_imported(job_dir: Path, *, progress: bool | None = False) -> Path:
    """The job's database, (re)built if missing, of an older schema, or older than the raw data."""
    job_dir = Path(job_dir)
    db = job_dir / "sqlite" / DB_NAME
    if (db.is_file() and db_schema(db) == schema.OPENMSPROF_SCHEMA
            and db.stat().st_mtime >= _newest_raw_mtime(job_dir)):
        return db
    return import_job(job_dir, progress=progress).db_path


def import_path(path: Path, *, progress: bool | None = None, output: Path | None = None) -> list[ImportResult]:
    """Import every job at ``path`` (a job or a folder of jobs)."""
    jobs = find_jobs(Path(path))
    results = []
    for j in jobs:
        out = None if output is None else (output if len(jobs) == 1 else output / j.name)
        if out is not None:
            fs.make_dir(out)
        results.append(import_job(j, progress=progress, output=out))
    return results
