"""``timeline/step_trace_{dev}.json``: the iteration timeline of seed 003 Table 1 ("step_trace
(iteration trace data) → step_trace_*.json").

Per device (``host`` for framework steps), Chrome trace events on one ``Step Trace`` process:
``Iteration {id}`` spans (args: Iteration ID, Model ID, Iteration End and Iteration Time as in
``step_trace_{dev}.csv``) and, with ``training_trace`` points found, ``FP_BP Time {id}``,
``Iteration Refresh {id}`` and ``Data_aug Bound {id}`` spans on their own threads.  Times are
µs from the msprof timeline's base (``otherData.openmsprof_base_ns``), as in ``msprof_{dev}.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import RawDataError
from openmsprof.export.jobdb import DB_ERRORS, JobDB, open_job
from openmsprof.export.msprof.naming import TIMELINE_DIR, dev_text, remove_stale
from openmsprof.export.msprof.summary_host import step_trace
from openmsprof.export.msprof.timeline import trace_base
from openmsprof.fileio import fs

__all__ = ["export_step_timeline", "step_timeline_file", "write_step_timeline"]

_PID = 1
#: thread id and name of each span kind (the iteration first)
_THREADS = {"Iteration": 1, "FP_BP Time": 2, "Iteration Refresh": 3, "Data_aug Bound": 4}
_ALL = (-(1 << 63), (1 << 63) - 1)


def step_timeline_file(dev: int | str) -> str:
    return f"step_trace_{dev_text(dev)}.json"


def _ns(cell: Any) -> int | None:
    """A µs cell of step_trace (``"12.345"``; empty or N/A → None) in ns."""
    text = str(cell)
    try:
        return round(float(text) * 1000) if text and text != "N/A" else None
    except ValueError:
        return None


def _span(name: str, step: int, t0: int, t1: int, base: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": f"{name} {step}", "ph": "X", "pid": _PID, "tid": _THREADS[name],
            "ts": (t0 - base) / 1000, "dur": max(t1 - t0, 0) / 1000, "args": args}


def _events(db: JobDB, dev: int, rows: list[list[Any]], base: int, lo: int, hi: int) -> list[dict[str, Any]]:
    bounds = {i: (s, max(e, s)) for i, s, e in db.query(
        "SELECT id, startNs, endNs FROM STEP_TIME WHERE deviceId = ?", (dev,))}
    out: list[dict[str, Any]] = []
    prev_end: int | None = None
    for row in rows:
        step = int(row[1])
        s, e = bounds.get(step, (None, None))
        if s is None or e is None:
            continue
        fp, bp = _ns(row[2]), _ns(row[3])
        if e >= lo and s < hi:
            out.append(_span("Iteration", step, s, e, base, {
                "Iteration ID": step, "Model ID": str(row[9]), "Iteration End(us)": str(row[4]),
                "Iteration Time(us)": str(row[5])}))
            if fp is not None and bp is not None:
                out.append(_span("FP_BP Time", step, fp, bp, base, {"FP Start(us)": str(row[2]),
                                                                    "BP End(us)": str(row[3])}))
            if bp is not None:
                out.append(_span("Iteration Refresh", step, bp, e, base, {}))
            if fp is not None:
                out.append(_span("Data_aug Bound", step, s if prev_end is None else prev_end, fp, base, {}))
        prev_end = e
    return out


def _meta() -> list[dict[str, Any]]:
    meta: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": _PID, "tid": 0,
                                   "args": {"name": "Step Trace"}}]
    for name, tid in _THREADS.items():
        meta.append({"name": "thread_name", "ph": "M", "pid": _PID, "tid": tid, "args": {"name": name}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": _PID, "tid": tid,
                     "args": {"sort_index": tid}})
    return meta


def write_step_timeline(db: JobDB, out_dir: Path, base_ns: int, lo: int = _ALL[0],
                        hi: int = _ALL[1]) -> list[Path]:
    """Write ``step_trace_{dev}.json`` per device with steps in ``[lo, hi)``; a device without
    steps writes none (and, for a whole-job export, removes an older one)."""
    written: list[Path] = []
    for table in step_trace(db):
        dev = int(table.dev) if not isinstance(table.dev, str) else -1
        path = out_dir / step_timeline_file(table.dev)
        events = _events(db, dev, [list(r) for r in table.rows], base_ns, lo, hi)
        if not events:
            if (lo, hi) == _ALL:
                remove_stale([], path)
            continue
        doc = {"traceEvents": _meta() + events, "otherData": {"openmsprof_base_ns": base_ns}}
        fs.make_dir(out_dir)
        fs.write_file_atomic(path, orjson.dumps(doc))
        written.append(path)
    return written


def export_step_timeline(job: Path, start_us: float | None = None, end_us: float | None = None) -> list[Path]:
    """Import ``job`` if needed and write ``JOB/timeline/step_trace_{dev}.json`` (times and the
    ``start_us``/``end_us`` window as ``export timeline``'s, from the same base)."""
    with open_job(job) as db:
        try:
            base = trace_base(db)
            lo = _ALL[0] if start_us is None else base + round(start_us * 1000)
            hi = _ALL[1] if end_us is None else base + round(end_us * 1000)
            return write_step_timeline(db, Path(job) / TIMELINE_DIR, base, lo, hi)
        except DB_ERRORS as exc:  # a database damaged under us: one line, no traceback
            raise RawDataError(f"database {str(db.path)!r} is unreadable: {exc}") from None
