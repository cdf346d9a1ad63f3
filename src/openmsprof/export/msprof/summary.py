"""``export summary``: the job database → ``JOB/summary/{name}_{dev}.csv|json`` (FORMATS §4).

Each file is written only when its data exists; CSVs split above 1,000,000 data rows.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

from openmsprof.config.errors import ConfigError
from openmsprof.export.db import JobDB, open_job
from openmsprof.export.msprof import summary_host as host
from openmsprof.export.msprof import summary_tasks as tasks
from openmsprof.export.msprof.naming import SUMMARY_DIR
from openmsprof.export.msprof.tables import Table, write_table
from openmsprof.recorder import fs

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


def write_summary(db: JobDB, out_dir: Path, *, fmt: str = "csv", s2: bool = False) -> list[Path]:
    """Write every summary of an open database into ``out_dir``; returns the written paths."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    fs.make_dir(out_dir)
    written: list[Path] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for table in iter_tables(db, s2=s2):
            written.extend(write_table(out_dir, table, fmt))
    finally:
        if gc_was_enabled:
            gc.enable()
    return written


def export_summary(job: Path, *, fmt: str = "csv", s2: bool = False) -> list[Path]:
    """Import ``job`` if needed and write ``JOB/summary/``."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    with open_job(job) as db:
        return write_summary(db, Path(job) / SUMMARY_DIR, fmt=fmt, s2=s2)
