"""The ``Python GC`` track of trace_view.json (``gc_detect_threshold``, as torch_npu's GC
detection): the collections longer than the threshold the window recorded
(``FRAMEWORK/gc_events.json``; a PROF_ job's ``host/gc_events.json`` is read by the msprof
timeline's GC pass: [start ns, end ns, generation] in the trace's epoch clock), one
``GC`` complete event each; a file that is unreadable or malformed is one warning, no track."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ProfilingError
from openmsprof.export.ascend_pt.text import ts_text
from openmsprof.fileio.read_guard import read_json

__all__ = ["FILE", "PROCESS", "read", "read_file", "trace_events"]

FILE = "gc_events.json"
PROCESS = "Python GC"
log = logging.getLogger("openmsprof")


def read(rank_dir: Path) -> list[tuple[int, int, int]]:
    """The window's long collections (empty without the file)."""
    return read_file(rank_dir / "FRAMEWORK" / FILE)


def read_file(path: Path) -> list[tuple[int, int, int]]:
    """The long collections of a ``gc_events.json`` (a torch window's or a PROF_ job's
    ``host/`` one); empty without the file."""
    try:
        doc: Any = read_json(path, "GC events") if _present(path) else None
    except ProfilingError as exc:
        log.warning("openmsprof: %s; no GC track", exc)
        return []
    if doc is None:
        return []
    events = doc.get("events") if isinstance(doc, dict) else None
    out = [(e[0], e[1], e[2]) for e in events or [] if isinstance(e, list) and len(e) == 3
           and all(type(v) is int for v in e) and 0 <= e[0] <= e[1]]
    bad = len(events or []) - len(out) if isinstance(events, list) else 1
    if bad:
        log.warning("openmsprof: %s: %d malformed GC event(s) skipped", path, bad)
    return out


def trace_events(events: list[tuple[int, int, int]], pid: int) -> list[bytes]:
    """Metadata of the ``Python GC`` process plus one ``GC`` event per collection."""
    if not events:
        return []
    evs: list[dict[str, Any]] = [
        {"name": "process_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": PROCESS}},
        {"name": "process_labels", "pid": pid, "tid": 0, "ph": "M", "args": {"labels": "CPU"}},
        {"name": "process_sort_index", "pid": pid, "tid": 0, "ph": "M", "args": {"sort_index": 9}}]
    evs += [{"name": "GC", "pid": pid, "tid": 0, "ts": ts_text(t0), "dur": ts_text(t1 - t0), "ph": "X",
             "args": {"generation": gen}} for t0, t1, gen in events]
    return [orjson.dumps(e) for e in evs]


def _present(path: Path) -> bool:
    """Whether anything (a link included) is at ``path``: one syscall."""
    try:
        os.lstat(path)
    except OSError:
        return False
    return True
