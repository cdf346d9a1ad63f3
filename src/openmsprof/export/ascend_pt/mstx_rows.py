"""The user's mstx markers and the model's module ranges (torch_npu ``npu.mstx`` with ``mstx``/``msprof_tx`` on) as MSTX_EVENTS
rows of the torch db, where msprof-analyze's ``mstx_sum`` (and the advisor) read them.

They are recorded into the rank dir's ``PROF_*`` job (raw marker data); that job is imported into
a private temporary directory and its MSTX_EVENTS rows are copied with their texts re-interned.
connectionId: the "none" id (4294967295), as torch_npu writes for a host-only marker (no stream):
on the CPU no device task answers a marker.  msprof-analyze's ``mstx_sum`` summarises only markers
a device task answers (marker_ex / ranges with a connection), so it reports none of these
(docs/formats.md, msprof-analyze table).

Module ranges: each ``nn.Module: {name}`` python_function event Kineto recorded (with_stack /
with_modules) becomes a range in domain ``Module`` (message: the module's name), which is what
msprof-analyze's ``module_statistic`` builds its module tree from.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from openmsprof.config.errors import ProfilingError
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.fileio.temp_dirs import private_temp_dir
from openmsprof.parse.importer import import_job

__all__ = ["MODULE_DOMAIN", "NO_TASK", "marker_rows", "module_rows"]

NO_TASK = 4294967295
MODULE_DOMAIN = "Module"
_MODULE = "nn.Module: "
RANGE = 2  # ENUM_MSTX_EVENT_TYPE start/end


def _has_markers(job: Path) -> bool:
    return any(p.name.startswith("Mstx") for p in job.glob("*/data/*"))


def marker_rows(rank_dir: Path, intern: Callable[[str], int]) -> Iterator[tuple[int | None, ...]]:
    """MSTX_EVENTS rows of every ``PROF_*`` job in ``rank_dir`` that holds markers."""
    for job in sorted(p for p in rank_dir.glob("PROF_*") if p.is_dir() and not p.is_symlink()):
        if not _has_markers(job):
            continue
        with private_temp_dir("openmsprof-mstx-") as tmp:  # (a killed analysis's is swept by the next)
            try:
                db = import_job(job, progress=False, output=tmp).db_path
            except ProfilingError:
                continue  # the job's own import reports it; the torch db keeps what it has
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                rows = con.execute(
                    "SELECT m.startNs, m.endNs, m.eventType, m.rangeId, m.category, coalesce(s.value, ''), "
                    "m.globalTid, m.endGlobalTid, coalesce(d.value, 'default') FROM MSTX_EVENTS m "
                    "LEFT JOIN STRING_IDS s ON s.id = m.message LEFT JOIN STRING_IDS d ON d.id = m.domainId "
                    "ORDER BY m.startNs").fetchall()
            finally:
                con.close()
        for start, end, kind, rid, cat, msg, tid, end_tid, domain in rows:
            yield start, end, kind, rid, cat, intern(msg), tid, end_tid, intern(domain), NO_TASK


def module_rows(fw: Framework, intern: Callable[[str], int]) -> Iterator[tuple[int | None, ...]]:
    """MSTX_EVENTS ranges of the ``nn.Module`` python_function events (see the module docstring)."""
    cols = fw.cols
    names = cols.py_names.items
    modules = {c: n[len(_MODULE):] for c, n in enumerate(names) if n.startswith(_MODULE)}
    if not modules or not len(cols.py_ts):
        return
    domain = intern(MODULE_DOMAIN)
    for rid, (ts, dur, tid, name) in enumerate(zip(cols.py_ts.tolist(), cols.py_dur.tolist(), cols.py_tid.tolist(),
                                                   cols.py_name.tolist(), strict=True)):
        text = modules.get(name)
        if text is not None:
            gtid = (fw.pid << 32) | tid
            yield ts, ts + dur, RANGE, rid, None, intern(text), gtid, gtid, domain, NO_TASK
