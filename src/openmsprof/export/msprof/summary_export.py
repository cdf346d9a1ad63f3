"""``export summary``: the job database → ``JOB/summary/{name}_{dev}.csv|json`` (docs/formats.md §4).

Each file is written only when its data exists; CSVs split above 1,000,000 data rows.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from openmsprof.config.errors import ConfigError
from openmsprof.export.jobdb import JobDB, open_job
from openmsprof.export.msprof import fusion_op, summary_fork
from openmsprof.export.msprof import summary_host as host
from openmsprof.export.msprof import summary_task_pass as task_tables
from openmsprof.export.msprof import summary_tasks as tasks
from openmsprof.export.msprof.naming import SUMMARY_DIR
from openmsprof.export.msprof.summary_task_pass import Twins
from openmsprof.export.msprof.tables import Table, write_table
from openmsprof.fileio import fs

Producer = Callable[[JobDB], Iterator[Table]]

#: Summary producers in file order; ``op_statistic_s2`` only with ``s2=True``.
PRODUCERS: dict[str, Producer] = {
    "op_summary": tasks.op_summary,
    "op_statistic": tasks.op_statistic,
    "api_statistic": host.api_statistic,
    "acl_statistic": host.acl_statistic,
    "task_time": tasks.task_time,
    "step_trace": host.step_trace,
    "msprof_tx": host.msprof_tx,
    "host_cpu_usage": host.host_cpu_usage,
    "host_mem_usage": host.host_mem_usage,
    "host_process_cpu_usage": host.host_process_cpu_usage,
    "host_process_mem_usage": host.host_process_mem_usage,
    "fusion_op": fusion_op.fusion_op,
    "op_statistic_s2": tasks.op_statistic_s2,
}
FORMATS = ("csv", "json")


def iter_tables(db: JobDB, *, s2: bool = False, names: list[str] | None = None) -> Iterator[Table]:
    """Every summary table with data (lazy rows)."""
    for name, producer in PRODUCERS.items():
        if name == "op_statistic_s2" and not s2 and not (names and name in names):
            continue
        if names and name not in names:
            continue
        yield from producer(db)


def write_summary(db: JobDB, out_dir: Path, *, fmt: str = "csv", s2: bool = False,
                  parallel: bool | None = None, twins: Twins | None = None,
                  meanwhile: Callable[[], None] | None = None) -> list[Path]:
    """Write every summary of an open database into ``out_dir``; returns the written paths (in
    PRODUCERS order).  With CSV, op_summary and task_time come from one task pass
    (:mod:`summary_task_pass`) that also writes ``twins`` (the tool-facing merged tables; their
    paths are added to ``twins.written``).  ``parallel``: a forked child writes the heavy half on
    the second core (the task pass, or ``summary_fork.CHILD_TABLES`` for JSON; None: when it pays,
    see :func:`summary_fork.want_fork`).  Same files either way.  ``meanwhile``: run in this
    process once the child is started (before any table when there is none)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    fs.make_dir(out_dir)
    names = [n for n in PRODUCERS if n != "op_statistic_s2" or s2]
    task_pass: summary_fork.TaskPass | None = None
    if fmt == "csv":
        task_pass = lambda own: task_tables.write_task_tables(own, out_dir, twins)  # noqa: E731
    in_pass = set(task_tables.TABLES) if task_pass is not None else set()
    fork = parallel if parallel is not None else summary_fork.want_fork(db)
    fork = fork and hasattr(os, "fork")
    child_tables = summary_fork.CHILD_TABLES if task_pass is None else summary_fork.PASS_CHILD_TABLES
    forked = [n for n in names if n in child_tables] if fork else []
    written: dict[str, list[Path]] = {}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    child = None
    side: summary_fork.TableThread | None = None
    threaded: list[str] = []
    try:
        if forked or (fork and task_pass is not None):
            child = summary_fork.SummaryChild.start(db, out_dir, fmt, {n: PRODUCERS[n] for n in forked},
                                                    task_pass)
            if child is None:  # the fork policy refused: this process writes every table
                forked = []
            threaded = [n for n in names if n in summary_fork.THREAD_TABLES and n not in forked and n not in in_pass]
            if threaded:  # started after the fork: the child is forked from one thread
                db.strings  # noqa: B018 - built here, read by the thread
                side = summary_fork.TableThread(db, out_dir, fmt, {n: PRODUCERS[n] for n in threaded})
        if meanwhile is not None:
            meanwhile()
        if child is None and task_pass is not None:
            written.update(task_pass(db))
        for name in names:
            if name not in forked and name not in in_pass and name not in threaded:
                written[name] = [p for t in PRODUCERS[name](db) for p in write_table(out_dir, t, fmt)]
        if side is not None:
            running_side, side = side, None
            by_thread = running_side.finish()
            if by_thread is None:  # the thread failed: write its tables here
                by_thread = {n: [p for t in PRODUCERS[n](db) for p in write_table(out_dir, t, fmt)]
                             for n in threaded}
            written.update(by_thread)
        if child is not None:
            running, child = child, None
            done = running.finish()
            if done is None:  # the child failed: write its tables here
                done = dict(task_pass(db)) if task_pass is not None else {}
                for name in forked:
                    done[name] = [p for t in PRODUCERS[name](db) for p in write_table(out_dir, t, fmt)]
            written.update(done)
    finally:
        if side is not None:
            side.thread.join()  # it writes its files whole or not at all
        if child is not None:
            child.cancel()
        if gc_was_enabled:
            gc.enable()
    if twins is not None:
        twins.written.update({k[len("tool_facing_"):]: v for k, v in written.items() if k.startswith("tool_facing_")})
    return [p for n in names for p in written.get(n, [])]


def export_summary(job: Path, *, fmt: str = "csv", s2: bool = False, twins: Twins | None = None,
                   meanwhile: Callable[[], None] | None = None) -> list[Path]:
    """Import ``job`` if needed and write ``JOB/summary/`` (and ``twins``, ``meanwhile``: see
    :func:`write_summary`)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    with open_job(job) as db:
        return write_summary(db, Path(job) / SUMMARY_DIR, fmt=fmt, s2=s2, twins=twins, meanwhile=meanwhile)
