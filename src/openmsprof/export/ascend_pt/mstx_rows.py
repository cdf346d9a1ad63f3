"""The user's mstx markers (torch_npu ``npu.mstx`` with ``mstx``/``msprof_tx`` on) as MSTX_EVENTS
rows of the torch db, where msprof-analyze's ``mstx_sum`` (and the advisor) read them.

They are recorded into the rank dir's ``PROF_*`` job (raw marker data); that job is imported into
a private temporary directory and its MSTX_EVENTS rows are copied with their texts re-interned.
connectionId: the marker's own id (``NO_TASK`` + index), never the "none" id msprof-analyze skips:
on the CPU no device task answers a marker, so its device time stays empty.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from openmsprof.config.errors import ProfilingError
from openmsprof.parse.importer import import_job

__all__ = ["NO_TASK", "marker_rows"]

NO_TASK = 1 << 40


def _has_markers(job: Path) -> bool:
    return any(p.name.startswith("Mstx") for p in job.glob("*/data/*"))


def marker_rows(rank_dir: Path, intern: Callable[[str], int]) -> Iterator[tuple[int | None, ...]]:
    """MSTX_EVENTS rows of every ``PROF_*`` job in ``rank_dir`` that holds markers."""
    k = 0
    for job in sorted(p for p in rank_dir.glob("PROF_*") if p.is_dir() and not p.is_symlink()):
        if not _has_markers(job):
            continue
        with tempfile.TemporaryDirectory(prefix="openmsprof-mstx-") as tmp:
            try:
                db = import_job(job, progress=False, output=Path(tmp)).db_path
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
            yield start, end, kind, rid, cat, intern(msg), tid, end_tid, intern(domain), NO_TASK + k
            k += 1
