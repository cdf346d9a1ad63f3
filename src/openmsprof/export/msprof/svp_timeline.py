"""``export timeline --layout svp``: seed 002's two Chrome traces per device and model.

* ``task_time_{device_id}.{model_file_name}.{model_id}.{batch_num}.json``: one ``X`` event per
  task of the model (name = layer name), ``args`` ``Task Type``, ``Stream Id``, ``Task Id``;
* ``acl_{device_id}.{model_file_name}.{model_id}.{batch_num}.json``: one ``X`` event per pyACL
  API call, ``args`` ``Mode`` (the API type), ``Process_Id``, ``Thread_Id``.

``ts``/``dur`` are µs from the job's timeline base (the same base as ``msprof_{dev}.json``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from openmsprof.export.jobdb import JobDB, open_job
from openmsprof.export.msprof import summary_tasks as tasks
from openmsprof.export.msprof.naming import TIMELINE_DIR
from openmsprof.export.msprof.svp_names import SvpModel, svp_models
from openmsprof.export.msprof.timeline import trace_base
from openmsprof.export.outfile import OutFile
from openmsprof.fileio import fs

__all__ = ["acl_events", "export_svp_timeline", "task_events", "write_svp_timeline"]

_MASK32 = 0xFFFFFFFF
_CHUNK = 20_000


def _ts(ns: int, base: int) -> orjson.Fragment:
    d = ns - base
    sign, d = ("-", -d) if d < 0 else ("", d)
    return orjson.Fragment(f"{sign}{d // 1000}.{d % 1000:03d}".encode())


def task_events(db: JobDB, m: SvpModel, base: int) -> Iterator[dict[str, Any]]:
    yield {"name": "process_name", "ph": "M", "pid": m.dev, "tid": 0, "args": {"name": f"Task Scheduler {m.dev}"}}
    sql = (f"SELECT {tasks._c(db, 'name')}, t.taskType, t.streamId, t.taskId, t.startNs, t.endNs"
           f" FROM {tasks._from(db)} WHERE t.deviceId = ? AND t.modelId = ? ORDER BY t.startNs, t.taskId")
    text = db.text
    for name, tt, stream, task_id, s, e in db.conn.execute(sql, (m.dev, m.model_id)):
        yield {"name": text(name), "ph": "X", "pid": m.dev, "tid": stream, "ts": _ts(s, base),
               "dur": _ts(max(e, s), s), "args": {"Task Type": text(tt), "Stream Id": stream, "Task Id": task_id}}


def acl_events(db: JobDB, base: int) -> Iterator[dict[str, Any]]:
    if not db.has("CANN_API"):
        return
    types = dict(db.query("SELECT id, name FROM ENUM_API_TYPE")) if "ENUM_API_TYPE" in db.tables else {}
    pids: set[int] = set()
    for g, typ, name, s, e in db.conn.execute(
            "SELECT globalTid, type, name, startNs, endNs FROM CANN_API ORDER BY startNs"):
        pid, tid = g >> 32, g & _MASK32
        if pid not in pids:
            pids.add(pid)
            yield {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "ACL"}}
        yield {"name": db.text(name), "ph": "X", "pid": pid, "tid": tid, "ts": _ts(s, base),
               "dur": _ts(max(e, s), s), "args": {"Mode": types.get(typ, str(typ)), "Process_Id": pid,
                                                  "Thread_Id": tid}}


def _write(path: Path, events: Iterator[dict[str, Any]]) -> Path | None:
    """A bare JSON array (the chrome://tracing form seed 002 shows); None when only metadata."""
    out = OutFile(path)
    try:
        out.write(b"[")
        n = data = 0
        chunk: list[bytes] = []
        for ev in events:
            chunk.append(orjson.dumps(ev))
            data += ev["ph"] != "M"
            if len(chunk) >= _CHUNK:
                out.write((b"," if n else b"") + b",\n".join(chunk))
                n += len(chunk)
                chunk = []
        if chunk:
            out.write((b"," if n else b"") + b",\n".join(chunk))
        out.write(b"]\n")
        if not data:
            out.abort()
            return None
        return out.commit()
    except BaseException:
        out.abort()
        raise


def write_svp_timeline(db: JobDB, out_dir: Path) -> list[Path]:
    """Write the seed 002 timeline files of an open database into ``out_dir``."""
    fs.make_dir(out_dir)
    base = trace_base(db)
    written: list[Path] = []
    for m in svp_models(db):
        for path in (_write(out_dir / m.task_time(), task_events(db, m, base)),
                     _write(out_dir / m.acl(), acl_events(db, base))):
            if path is not None:
                written.append(path)
    return written


def export_svp_timeline(job: Path) -> list[Path]:
    """Import ``job`` if needed and write its seed 002 timeline files into ``JOB/timeline/``."""
    with open_job(job) as db:
        return write_svp_timeline(db, Path(job) / TIMELINE_DIR)
