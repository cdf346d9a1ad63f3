"""What profiling itself cost in a run, shown next to the data (no peer tool does this).

Two sources, both optional and read tolerantly (a missing or malformed file is no error):
* ``PROF_*/host/openmsprof_overhead.json``, written by the recorder at session stop:
  ``{"records_written", "bytes_written", "records_dropped", "flusher_cpu_ns", ...}``;
* on the torch path, ``profiler_info*.json``'s ``openmsprof_overhead`` object (the facade's own
  cost, e.g. the analysis worker's CPU time).
Numbers of the same key are added; non-numeric values are dropped.

The figures go into the tool-facing outputs: a ``Profiling Overhead`` process in trace_view.json /
msprof_{ts}.json (one counter event per figure at the first timestamp; the process has no X events
so no analysis tool counts it as work), and ``openmsprof_overhead`` in info.json-style documents.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ProfilingError
from openmsprof.fileio.read_guard import read_json

__all__ = ["FILE", "KEY", "PROCESS", "merge", "read", "read_job", "trace_events"]

FILE = "openmsprof_overhead.json"
KEY = "openmsprof_overhead"
PROCESS = "Profiling Overhead"
MAX_BYTES = 1 << 20


def _numbers(obj: Any) -> dict[str, float | int]:
    if not isinstance(obj, dict):
        return {}
    return {str(k): v for k, v in obj.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v}


def _load(path: Path) -> Any:
    try:
        return read_json(path, "overhead figures", MAX_BYTES) if path.exists() else None
    except ProfilingError:
        return None


def merge(*parts: dict[str, float | int]) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0) + v
    return out


def read_job(job_dir: Path) -> dict[str, float | int]:
    """The recorder's figures of one PROF_ job (``host/openmsprof_overhead.json``)."""
    return _numbers(_load(job_dir / "host" / FILE))


def read(rank_dir: Path, info: dict[str, Any] | None = None,
         jobs: list[Path] | None = None) -> dict[str, float | int]:
    """All figures of a torch rank dir: profiler_info's key plus every PROF_ job's file
    (``info``, ``jobs``: its profiler_info and sorted PROF_ dirs when the caller read them)."""
    parts = [_numbers((info or {}).get(KEY))]
    if info is None:
        for p in sorted(rank_dir.glob("profiler_info*.json")):
            doc = _load(p)
            parts.append(_numbers(doc.get(KEY) if isinstance(doc, dict) else None))
            break
    if jobs is None:
        jobs = [j for j in sorted(rank_dir.glob("PROF_*")) if j.is_dir()]
    parts += [read_job(j) for j in jobs]
    return merge(*parts)


def trace_events(figures: dict[str, float | int], pid: int, ts_ns: int | None) -> list[bytes]:
    """The ``Profiling Overhead`` process: metadata plus one counter event per figure."""
    if not figures or ts_ns is None:
        return []
    ts = f"{ts_ns // 1000}.{ts_ns % 1000:03d}"
    evs = [{"name": k, "pid": pid, "tid": 0, "ts": ts, "ph": "C", "args": {k: v}} for k, v in sorted(figures.items())]
    return [*_metadata(pid), *map(orjson.dumps, evs)]


@lru_cache(maxsize=16)  # the same pid window after window (the torch analysis worker)
def _metadata(pid: int) -> tuple[bytes, ...]:
    """The process' metadata events."""
    evs: list[dict[str, Any]] = [
        {"name": "process_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": PROCESS}},
        {"name": "process_labels", "pid": pid, "tid": 0, "ph": "M", "args": {"labels": "CPU"}},
        {"name": "process_sort_index", "pid": pid, "tid": 0, "ph": "M", "args": {"sort_index": 8}}]
    return tuple(orjson.dumps(e) for e in evs)
