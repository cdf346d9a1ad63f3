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
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ProfilingError
from openmsprof.export import overhead
from openmsprof.export.exportlock import job_lock
from openmsprof.export.jobdb import JobDB, open_job
from openmsprof.export.msprof import headers as H
from openmsprof.export.msprof import msprof_analyze_db as tool_facing_db
from openmsprof.export.msprof.analysis_db import ANALYSIS_DB, write_analysis_db
from openmsprof.export.msprof.naming import SUMMARY_DIR, summary_file
from openmsprof.export.msprof.summary_export import PRODUCERS, export_summary, iter_tables
from openmsprof.export.msprof.summary_task_pass import Twins, twin_types
from openmsprof.export.msprof.tables import Table, write_table
from openmsprof.export.msprof.timeline import write_timeline
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import read_json

__all__ = ["ANALYZE_DIR", "OUTPUT_DIR", "PARTS", "export_tool_facing", "prepare_db"]

OUTPUT_DIR = "mindstudio_profiler_output"
ANALYZE_DIR = "analyze"
_SLICE = "_slice_"
#: The halves of the layout: ``export summary`` writes the first, ``export timeline`` the second.
PARTS = ("summary", "timeline")
_TIMELINE_RE = re.compile(r"msprof_\d{14}\.json")


def _stamp() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime())


#: Summaries that read nothing the tool-facing db changes (the task types): a job's only such
#: per-device CSV, just written by ``export summary``, is the merged file byte for byte.
SAME_IN_BOTH = frozenset({"api_statistic", "msprof_tx", "step_trace", "host_cpu_usage", "host_mem_usage"})
#: Merged tables rendered from the tool-facing db alone (its task types), never copied: the
#: summary's ``meanwhile`` step renders them while its child runs the task pass.
FROM_DB = ("op_statistic", "fusion_op")


def _merged_tables(db: JobDB, stamp: str, names: list[str]) -> list[Table]:
    """One table per summary name with the rows of every device (Device_id-first tables only)."""
    groups: dict[str, list[Table]] = {}
    for t in iter_tables(db, names=names):
        if t.header and t.header[0] == "Device_id":
            groups.setdefault(t.name, []).append(t)
    out = []
    for name, tables in groups.items():
        header = tables[0].header
        same = [t for t in tables if t.header == header]
        # the large per-row tables come as ready CSV lines too (same bytes, several times faster)
        lines = ((lambda same=same: (ln for t in same for ln in t.lines()))  # type: ignore[misc]
                 if all(t.lines is not None for t in same) else None)
        out.append(Table(name, stamp, header, (row for t in same for row in t.rows), lines))
    return out


def _ready_sources(name: str, ready: Iterable[Path], stamp: str) -> list[tuple[Path, str]] | None:
    """The per-device CSV of ``name`` just written from the same data, when it is the only one
    (one device or host) and ``name`` is one of :data:`SAME_IN_BOTH`, with the merged file's
    name for each: ``{name}_{ts}.csv``, or for a sliced one (above 1,000,000 rows, the same
    slicing) each ``{name}_{dev}_slice_{k}.csv`` as ``{name}_slice_{k}_{ts}.csv``."""
    if name not in SAME_IN_BOTH:
        return None
    pattern = re.compile(rf"{re.escape(name)}_(host|\d+)(?:{_SLICE}(\d+))?\.csv")
    found = [(p, m) for p in ready if p.parent.name == SUMMARY_DIR and (m := pattern.fullmatch(p.name))]
    if not found or len({m.group(1) for _, m in found}) != 1 or any(p.is_symlink() for p, _ in found):
        return None
    if len(found) == 1 and found[0][1].group(2) is None:
        return [(found[0][0], summary_file(name, stamp, "csv"))]
    ks = sorted((int(m.group(2)), p) for p, m in found if m.group(2) is not None)
    if len(ks) != len(found) or [k for k, _ in ks] != list(range(len(ks))):
        return None
    return [(p, f"{name}{_SLICE}{k}_{stamp}.csv") for k, p in ks]


def _copy(source: Path, target: Path) -> Path:
    """``source``'s bytes as ``target`` (atomically, private mode, by the kernel where it can)."""
    fs.copy_file_atomic(source, target)
    return target


def _rename_slices(paths: list[Path], stamp: str) -> list[Path]:
    """``{name}_{ts}_slice_{k}.csv`` → ``{name}_slice_{k}_{ts}.csv`` (docs/formats.md §2)."""
    out = []
    for p in paths:
        stem = p.stem
        if _SLICE in stem and stem.startswith(stem.split(f"_{stamp}")[0]):
            name, _, k = stem.partition(f"_{stamp}{_SLICE}")
            target = p.with_name(f"{name}{_SLICE}{k}_{stamp}{p.suffix}")
            os.replace(p, target)
            p = target
        out.append(p)
    return out


def _timeline(db: JobDB, out: Path, stamp: str) -> list[Path]:
    """``msprof_{ts}.json``: the devices' Ascend-spelling timelines (each with the Profiling
    Overhead track when the recorder left figures) as one bare array."""
    tmp = out / f".timeline.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    fs.make_dir(tmp)
    try:
        parts = write_timeline(db, tmp, ascend_compat=True, parallel=False)
        if not parts:
            return []
        target = out / f"msprof_{stamp}.json"
        inners = [(p, _inner(p)) for p in parts]
        (first, (lo, hi)), size = inners[0], parts[0].stat().st_size
        if len(parts) == 1 and lo == 1 and hi < size and _byte_at(first, hi) == b"]":
            # "[" + inner + "]" is the file's head: keep it, drop what follows (a line end)
            os.truncate(first, hi + 1)
            os.replace(first, target)
            return [target]

        def body() -> Iterator[bytes]:
            sep = b""
            for p, (lo, hi) in inners:
                if hi > lo:
                    yield sep
                    sep = b","
                    with open(p, "rb") as f:
                        f.seek(lo)
                        while lo < hi and (data := f.read(min(1 << 22, hi - lo))):
                            lo += len(data)
                            yield data

        fs.write_stream_atomic(target, [b"[", *body(), b"]"])
        return [target]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_WS = b" \t\n\r\x0b\x0c"
_WINDOW = 4096


def _inner(path: Path) -> tuple[int, int]:
    """The byte range of the content of the JSON array in ``path``, as
    ``data.strip()[1:-1].strip()`` finds it ((0, 0): not an array); read at both ends only
    unless white space runs over 4 KiB there."""
    size = path.stat().st_size
    if size <= 3 * _WINDOW:
        return _span(path.read_bytes())
    with open(path, "rb") as f:
        head = f.read(_WINDOW)
        f.seek(size - _WINDOW)
        tail = f.read(_WINDOW)
    a = len(head) - len(head.lstrip(_WS))
    b = len(tail.rstrip(_WS))
    if a >= _WINDOW // 2 or b <= _WINDOW // 2:
        return _span(path.read_bytes())
    if head[a:a + 1] != b"[" or tail[b - 1:b] != b"]":
        return (0, 0)
    lo = a + 1 + len(head[a + 1:]) - len(head[a + 1:].lstrip(_WS))
    hi = size - _WINDOW + len(tail[:b - 1].rstrip(_WS))
    if lo >= _WINDOW or hi <= size - _WINDOW:
        return _span(path.read_bytes())
    return (lo, hi)


def _byte_at(path: Path, offset: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(1)


def _span(data: bytes) -> tuple[int, int]:
    """:func:`_inner` of bytes in memory."""
    a, b = len(data) - len(data.lstrip(_WS)), len(data.rstrip(_WS))
    if b - a < 2 or data[a:a + 1] != b"[" or data[b - 1:b] != b"]":
        return (0, 0)
    inner = data[a + 1:b - 1]
    lo = a + 1 + len(inner) - len(inner.lstrip(_WS))
    return (lo, max(lo, a + 1 + len(inner.rstrip(_WS))))


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
    (those of :data:`SAME_IN_BOTH` are copied rather than rendered again).  ``summary``: writes
    ``JOB/summary/`` once the db is ready, given the twins to write in its task pass (op_summary
    and task_time of this layout, see :mod:`summary_task_pass`) and a step to run meanwhile (the
    db's copy when fresh, then the merged tables of :data:`FROM_DB`, while the summary's child
    renders; what it did not do is done afterwards); its paths count as ``ready``.
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
    classes: tool_facing_db.TaskClasses | None = None

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
                    early[name] = [p for t in _merged_tables(db, stamp, [name])
                                   for p in _rename_slices(write_table(out, t, "csv"), stamp)]
    twins: Twins | None = None
    if summary is not None:
        # a fresh db is copied while the summary's forked child renders (the twins' task types
        # are those the copy will hold, read from the job's own db)
        types: dict[tuple[Any, Any], str] | Callable[[JobDB], dict[tuple[Any, Any], str]] | None
        if fresh:  # read once from the job db, for the twins and the copy's classification
            with JobDB(job / "sqlite" / "msprof.db", job) as jdb:
                classes = tool_facing_db.read_classes(jdb.conn)
            types = tool_facing_db.engine_types(classes)
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
                sources = _ready_sources(name, ready, stamp)
                if twins is not None and name in twins.written:
                    written += _rename_slices(twins.written[name], stamp)
                elif name in early:
                    written += early[name]
                elif sources is not None:
                    written += [_copy(source, out / target) for source, target in sources]
                else:
                    for table in _merged_tables(db, stamp, [name]):
                        written += _rename_slices(write_table(out, table, "csv"), stamp)
        if "timeline" in parts:
            written += _timeline(db, out, stamp)
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
