"""The tool-facing layout of a PROF_ job (docs/formats.md §2, seed 003): what ``export`` writes beside the
per-device ``summary/`` and ``timeline/`` so msprof-analyze's ``advisor`` and ``cluster`` (and
MindStudio Insight) read pyACL and TensorFlow jobs:

```
PROF_…/msprof_{YYYYmmddHHMMSS}.db          tool_facing_db (executor task types, HCCL tables)
PROF_…/mindstudio_profiler_output/
    {name}_{ts}.csv                          every Device_id-first summary, rows of all devices
    {name}_slice_{k}_{ts}.csv                above 1,000,000 data rows
    msprof_{ts}.json                         the timeline, Ascend spelling (a bare JSON array)
    README.txt                               what is here, the executor, the overhead figures
PROF_…/analyze/communication_analyzer.db     StepTraceTime per step (analysis_db), empty CommAnalyzer*
device_*/info.json.*                         + DeviceInfo ai_core_num / aiv_num
host/info.json                               + openmsprof_overhead (the recorder's figures)
```
Everything is produced from the job's sqlite db alone (through the tool-facing db copy), so it
is framework-neutral.  The task type columns name the real executor (``export.classify``), as do
README.txt and the db's META_DATA ``EXECUTOR``.

Each verb writes its own half, as msprof's ``export summary`` / ``export timeline`` do: ``summary``
the merged CSVs, ``timeline`` ``msprof_{ts}.json``; the db, ``analyze/`` and README.txt are shared.
The db is made once and kept while the job's data is unchanged (``tool_facing_db.current_db``), so
both halves carry its stamp; when the data changed (a re-import) the db gets a new stamp and files
of older stamps are removed.  A re-export replaces its own half.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ProfilingError
from openmsprof.export import overhead
from openmsprof.export.exportlock import job_lock
from openmsprof.export.jobdb import JobDB, open_job
from openmsprof.export.msprof import headers as H
from openmsprof.export.msprof import merged_output, task_classes
from openmsprof.export.msprof import msprof_analyze_db as tool_facing_db
from openmsprof.export.msprof.analysis_db import ANALYSIS_DB, write_analysis_db
from openmsprof.export.msprof.summary_export import PRODUCERS, export_summary
from openmsprof.export.msprof.summary_task_pass import Twins, twin_types
from openmsprof.export.msprof.tables import write_table
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import read_json

__all__ = ["ANALYZE_DIR", "OUTPUT_DIR", "PARTS", "export_tool_facing", "prepare_db"]

OUTPUT_DIR = "mindstudio_profiler_output"
ANALYZE_DIR = "analyze"
#: The halves of the layout: ``export summary`` writes the first, ``export timeline`` the second.
PARTS = ("summary", "timeline")
_TIMELINE_RE = re.compile(r"msprof_\d{14}\.json")


def _stamp() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime())


#: Merged tables rendered from the tool-facing db alone (its task types), never copied: the
#: summary's ``meanwhile`` step renders them while its child runs the task pass.
FROM_DB = ("op_statistic", "fusion_op")


def _copy(source: Path, target: Path) -> Path:
    """``source``'s bytes as ``target`` (atomically, private mode, by the kernel where it can)."""
    fs.copy_file_atomic(source, target)
    return target


def _readme(out: Path, stamp: str, files: list[Path], executor: str, figures: dict[str, float | int]) -> Path:
    lines = ["openmsprof tool-facing output (msprof-analyze, MindStudio Insight)", "",
             f"export stamp: {stamp}", f"executor (real hardware of every task): {executor}",
             "Task Type / Core Type values name the real executor of each task (CPU ...), or",
             "COMMUNICATION / MEMCPY_ASYNC for those kinds (docs/formats.md, 'Task classification').", "",
             "files:"] + [f"  {p.name}" for p in files]
    if figures:
        lines += ["", "profiling overhead (openmsprof_overhead):"] + [f"  {k}: {v}" for k, v in sorted(figures.items())]
    path = out / "README.txt"
    fs.write_file_atomic(path, ("\n".join(lines) + "\n").encode())
    return path


def _device_info(job: Path) -> None:
    """Give each device info.json the DeviceInfo keys msprof-analyze's advisor requires
    (``ai_core_num``, ``aiv_num``: the host's logical CPUs that run the tasks) when the collection
    did not write them; no ``aic_frequency``: no AI Core clock is measured (decision 13)."""
    host: dict[str, object] = {}
    try:
        loaded = read_json(job / "host" / "info.json", "info.json")
        host = loaded if isinstance(loaded, dict) else {}
    except ProfilingError:
        pass
    cores = host.get("cpuNums") if isinstance(host.get("cpuNums"), int) else (os.cpu_count() or 1)
    for path in sorted(job.glob("device_*/info.json.*")):
        if path.name.endswith((".done", ".complete")) or path.is_symlink():
            continue
        try:
            doc = read_json(path, "device info.json")
        except ProfilingError:
            continue
        infos = doc.get("DeviceInfo") if isinstance(doc, dict) else None
        if not isinstance(infos, list) or not infos or all("ai_core_num" in d for d in infos if isinstance(d, dict)):
            continue
        for d in infos:
            if isinstance(d, dict):
                d.setdefault("ai_core_num", cores)
                d.setdefault("aiv_num", cores)
        try:
            fs.write_file_atomic(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        except TypeError:  # nested deeper than orjson writes: left as it is
            continue


def _host_overhead(job: Path, figures: dict[str, float | int]) -> None:
    """host/info.json gains ``openmsprof_overhead`` (the recorder's figures) when it lacks them."""
    path = job / "host" / "info.json"
    if not figures or path.is_symlink():
        return
    try:
        doc = read_json(path, "info.json")
        if isinstance(doc, dict) and doc.get(overhead.KEY) != figures:
            doc[overhead.KEY] = figures
            fs.write_file_atomic(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    except (ProfilingError, TypeError):  # unreadable, or nested deeper than orjson writes
        return


def _sources(job: Path) -> dict[str, float | int]:
    """Complete the db's other sources (device and host info.json); returns the overhead figures."""
    _device_info(job)
    figures = overhead.read_job(job)
    _host_overhead(job, figures)  # before the db: host/info.json is one of its sources
    return figures


def prepare_db(job: Path) -> Path:
    """Make the job's ``msprof_{ts}.db`` current (of an imported job), as :func:`export_tool_facing`
    would first; ``export timeline`` runs it while its device child renders."""
    job = Path(job)
    with job_lock(job):
        _sources(job)
        db_path = tool_facing_db.current_db(job)
        if db_path is None:
            db_path = tool_facing_db.write_db(job, _stamp())
            tool_facing_db.remember(job, db_path)
        return db_path


def _part(name: str) -> str:
    """The half of the layout a file of ``mindstudio_profiler_output/`` belongs to."""
    return "timeline" if _TIMELINE_RE.fullmatch(name) else "summary"


def export_tool_facing(job: Path, parts: tuple[str, ...] = PARTS, ready: Iterable[Path] = (),
                       summary: Callable[[Twins | None, Callable[[], None] | None], list[Path]] | None = None,
                       ) -> list[Path]:
    """Write ``parts`` of the tool-facing layout of ``job`` (imports it first if needed) with the
    shared files; returns the paths written or kept (db, analyze db, the parts' files, README).
    ``ready``: the CSVs ``export summary`` has just written into ``JOB/summary/`` from the same db
    (those of :data:`merged_output.SAME_IN_BOTH` are copied rather than rendered again).
    ``summary``: writes ``JOB/summary/`` once the db is ready, given the twins to write in its task
    pass (op_summary and task_time of this layout, see :mod:`summary_task_pass`) and a step to run
    meanwhile (the db's copy when fresh, then the merged tables of :data:`FROM_DB`, while the
    summary's child renders; what it did not do is done afterwards); its paths count as ``ready``.
    Serialized with the job's other exports (:mod:`openmsprof.export.exportlock`)."""
    job = Path(job)
    with job_lock(job):
        return _export_tool_facing(job, parts, ready, summary)


def _export_tool_facing(job: Path, parts: tuple[str, ...], ready: Iterable[Path],
                        summary: Callable[[Twins | None, Callable[[], None] | None], list[Path]] | None,
                        ) -> list[Path]:
    with open_job(job):
        pass  # ensures sqlite/msprof.db is current
    out = fs.make_dir(job / OUTPUT_DIR)
    fs.make_dir(job / ANALYZE_DIR)
    figures = _sources(job)
    db_path = tool_facing_db.current_db(job)
    fresh = db_path is None
    stamp = _stamp() if db_path is None else db_path.name[len("msprof_"):-len(".db")]

    made: list[Path] = []
    early: dict[str, list[Path]] = {}
    classes: task_classes.TaskClasses | None = None

    def write_db() -> None:
        made.append(tool_facing_db.write_db(job, stamp, classes))
        tool_facing_db.remember(job, made[0])

    if db_path is None:
        db_path = job / f"msprof_{stamp}.db"
    else:
        tool_facing_db.remove_others(job, db_path)

    def meanwhile() -> None:
        """The db's copy when fresh, then the merged tables only the db gives (op_statistic,
        fusion_op: they read its task types), while the summary's child renders."""
        if fresh:
            write_db()
        if "summary" in parts:
            with JobDB(db_path, job) as db:
                for name in FROM_DB:
                    if name == "op_statistic" and twins is not None:
                        continue  # the task pass gathers it (or leaves it to the loop below)
                    early[name] = [p for t in merged_output.merged_tables(db, stamp, [name])
                                   for p in merged_output.rename_slices(write_table(out, t, "csv"), stamp)]
    twins: Twins | None = None
    if summary is not None:
        # a fresh db is copied while the summary's forked child renders (the twins' task types
        # are those the copy will hold, read from the job's own db)
        types: dict[tuple[Any, Any], str] | Callable[[JobDB], dict[tuple[Any, Any], str]] | None
        if fresh:  # read once from the job db, for the twins and the copy's classification
            with JobDB(job / "sqlite" / "msprof.db", job) as jdb:
                classes = task_classes.read_classes(jdb.conn)
            types = task_classes.engine_types(classes)
        else:
            with JobDB(db_path, job) as db:
                types = twin_types(db)
        twins = Twins(out, stamp, types) if types is not None and "summary" in parts else None
        ready = [*ready, *summary(twins, meanwhile)]
    if fresh and not made:  # no summary, or one that did not run the step
        write_db()
    analysis = job / ANALYSIS_DB
    if analysis.is_symlink() or not analysis.is_file() or analysis.stat().st_mtime_ns < db_path.stat().st_mtime_ns:
        analysis = write_analysis_db(job, db_path)  # its StepTraceTime rows follow the db
    with JobDB(db_path, job) as db:
        written: list[Path] = []
        if "summary" in parts:
            for name in (n for n in PRODUCERS if n != "op_statistic_s2" and H.WRITTEN[n][0] == "Device_id"):
                sources = merged_output.ready_sources(name, ready, stamp)
                if twins is not None and name in twins.written:
                    written += merged_output.rename_slices(twins.written[name], stamp)
                elif name in early:
                    written += early[name]
                elif sources is not None:
                    written += [_copy(source, out / target) for source, target in sources]
                else:
                    for table in merged_output.merged_tables(db, stamp, [name]):
                        written += merged_output.rename_slices(write_table(out, table, "csv"), stamp)
        if "timeline" in parts:
            written += merged_output.merged_timeline(db, out, stamp)
        executor = next((v for (v,) in db.query("SELECT value FROM META_DATA WHERE name = 'EXECUTOR'")), "CPU")
    mine = {p.name for p in written}
    kept = []
    for old in sorted(out.iterdir()):
        if old.name in mine or old.name == "README.txt" or not old.is_file() or old.is_symlink():
            continue
        current = old.name.endswith((f"_{stamp}.csv", f"_{stamp}.json"))
        if current and _part(old.name) not in parts:
            kept.append(old)  # the other verb's half of this stamp
        else:
            old.unlink(missing_ok=True)  # an older stamp, or this half's file not written now
    readme = _readme(out, stamp, written + kept, str(executor), figures)
    return [db_path, analysis, *written, readme]


def export_summary_and_layout(job: Path, parts: tuple[str, ...] = PARTS,
                              fmt: str = "csv") -> tuple[list[Path], list[Path]]:
    """``export summary`` (``JOB/summary/``) and ``parts`` of the tool-facing layout in one go:
    the summary's task pass writes the layout's op_summary/task_time twins as it renders its own.
    Returns (the summary's paths, the layout's paths)."""
    written: list[Path] = []

    def summary(twins: Twins | None, meanwhile: Callable[[], None] | None) -> list[Path]:
        written[:] = export_summary(job, fmt=fmt, twins=twins, meanwhile=meanwhile)
        return written

    layout = export_tool_facing(job, parts, summary=summary)
    return written, layout
