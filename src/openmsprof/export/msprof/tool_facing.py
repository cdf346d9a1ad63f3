"""The tool-facing layout of a PROF_ job (FORMATS §2, seed 003): what ``export`` writes beside the
per-device ``summary/`` and ``timeline/`` so msprof-analyze's ``advisor`` and ``cluster`` (and
MindStudio Insight) read pyACL and TensorFlow jobs:

```
PROF_…/msprof_{YYYYmmddHHMMSS}.db          tool_facing_db (engine-class task types, HCCL tables)
PROF_…/mindstudio_profiler_output/
    {name}_{ts}.csv                          every Device_id-first summary, rows of all devices
    {name}_slice_{k}_{ts}.csv                above 1,000,000 data rows
    msprof_{ts}.json                         the timeline, Ascend spelling (a bare JSON array)
    README.txt                               what is here, the executor, the overhead figures
PROF_…/analyze/communication_analyzer.db     (msprof-analyze needs the folder and the db)
device_*/info.json.*                         + DeviceInfo ai_core_num / aiv_num / aic_frequency
host/info.json                               + openmsprof_overhead (the recorder's figures)
```
Everything is produced from the job's sqlite db alone (through the tool-facing db copy), so it
is framework-neutral.  The task type columns use ``export.classify``'s engine classes; README.txt
and the db's META_DATA ``EXECUTOR`` name the real executor.  A re-export replaces the folder's
files (stale ones of older stamps are removed).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import orjson

from openmsprof.config.errors import ProfilingError
from openmsprof.config.files import read_json
from openmsprof.export import hostinfo, overhead
from openmsprof.export.ascend_pt.db import ANALYSIS_SCHEMA
from openmsprof.export.db import JobDB, open_job
from openmsprof.export.msprof import tool_facing_db
from openmsprof.export.msprof.summary import iter_tables
from openmsprof.export.msprof.tables import Table, write_table
from openmsprof.export.msprof.timeline import write_timeline
from openmsprof.recorder import fs

__all__ = ["ANALYZE_DIR", "OUTPUT_DIR", "export_tool_facing"]

OUTPUT_DIR = "mindstudio_profiler_output"
ANALYZE_DIR = "analyze"
_SLICE = "_slice_"


def _stamp() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime())


def _merged_tables(db: JobDB, stamp: str) -> list[Table]:
    """One table per summary name with the rows of every device (Device_id-first tables only)."""
    groups: dict[str, list[Table]] = {}
    for t in iter_tables(db):
        if t.header and t.header[0] == "Device_id":
            groups.setdefault(t.name, []).append(t)
    out = []
    for name, tables in groups.items():
        header = tables[0].header
        same = [t for t in tables if t.header == header]
        out.append(Table(name, stamp, header, (row for t in same for row in t.rows)))
    return out


def _rename_slices(paths: list[Path], stamp: str) -> list[Path]:
    """``{name}_{ts}_slice_{k}.csv`` → ``{name}_slice_{k}_{ts}.csv`` (FORMATS §2)."""
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

        def body() -> object:
            first = True
            for p in parts:
                data = p.read_bytes().strip()
                inner = data[1:-1].strip() if data[:1] == b"[" and data[-1:] == b"]" else b""
                if inner:
                    yield inner if first else b"," + inner
                    first = False

        fs.write_stream_atomic(target, [b"[", *body(), b"]"])  # type: ignore[misc]
        return [target]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _readme(out: Path, stamp: str, files: list[Path], executor: str, figures: dict[str, float | int]) -> Path:
    lines = ["openmsprof tool-facing output (msprof-analyze, MindStudio Insight)", "",
             f"export stamp: {stamp}", f"executor (real hardware of every task): {executor}",
             "Task Type / Core Type values are Ascend engine classes (AI_CORE = matmul/conv/attention,",
             "AI_VECTOR_CORE = other computing, COMMUNICATION, MEMCPY_ASYNC), chosen by openmsprof's",
             "classification (docs/formats.md, 'Task classification'); they do not mean an NPU ran them.", "",
             "files:"] + [f"  {p.name}" for p in files]
    if figures:
        lines += ["", "profiling overhead (openmsprof_overhead):"] + [f"  {k}: {v}" for k, v in sorted(figures.items())]
    path = out / "README.txt"
    fs.write_file_atomic(path, ("\n".join(lines) + "\n").encode())
    return path


def _device_info(job: Path) -> None:
    """Give each device info.json the DeviceInfo keys msprof-analyze's advisor requires
    (``ai_core_num``, ``aiv_num``: the host's logical CPUs that run the tasks; ``aic_frequency``:
    the CPU's nominal MHz) when the collection did not write them."""
    host: dict[str, object] = {}
    try:
        loaded = read_json(job / "host" / "info.json", "info.json")
        host = loaded if isinstance(loaded, dict) else {}
    except ProfilingError:
        pass
    cores = host.get("cpuNums") if isinstance(host.get("cpuNums"), int) else (os.cpu_count() or 1)
    mhz = hostinfo.nominal_mhz(host)
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
                d.setdefault("aic_frequency", mhz)
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


def _analysis_db(job: Path) -> Path:
    """``analyze/communication_analyzer.db``: the CommAnalyzer*/StepTraceTime tables msprof-analyze's
    cluster recipes open for every msprof rank (empty: the job has no collectives)."""
    path = job / ANALYZE_DIR / "communication_analyzer.db"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.close(fs.open_new(tmp, append=False))
    con = sqlite3.connect(tmp)
    try:
        with con:
            con.executescript(ANALYSIS_SCHEMA)
    finally:
        con.close()
    os.replace(tmp, path)
    return path


def export_tool_facing(job: Path) -> list[Path]:
    """Write the tool-facing layout of ``job`` (imports it first if needed); returns the paths."""
    job = Path(job)
    with open_job(job):
        pass  # ensures sqlite/msprof.db is current
    stamp = _stamp()
    db_path = tool_facing_db.write_db(job, stamp)
    out = fs.make_dir(job / OUTPUT_DIR)
    fs.make_dir(job / ANALYZE_DIR)
    analysis = _analysis_db(job)
    _device_info(job)
    figures = overhead.read_job(job)
    _host_overhead(job, figures)
    with JobDB(db_path, job) as db:
        written: list[Path] = []
        for table in _merged_tables(db, stamp):
            written += _rename_slices(write_table(out, table, "csv"), stamp)
        written += _timeline(db, out, stamp)
        executor = next((v for (v,) in db.query("SELECT value FROM META_DATA WHERE name = 'EXECUTOR'")), "CPU")
    written.append(_readme(out, stamp, written, str(executor), figures))
    keep = {p.name for p in written}
    for old in out.iterdir():
        if old.name not in keep and old.is_file() and not old.is_symlink():
            old.unlink(missing_ok=True)
    return [db_path, analysis, *written]
