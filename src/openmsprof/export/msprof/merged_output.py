"""Merged files of ``mindstudio_profiler_output/``: each summary's rows of every device, the timelines as one array.

``{name}_{ts}.csv`` (sliced above 1,000,000 data rows as ``{name}_slice_{k}_{ts}.csv``) holds the
rows of every device of a Device_id-first summary, rendered from the tool-facing db or, for the
tables of :data:`SAME_IN_BOTH`, the one per-device CSV ``export summary`` has just written;
``msprof_{ts}.json`` joins the devices' Ascend-spelling timelines into one bare JSON array
(docs/formats.md §2).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.naming import SUMMARY_DIR, summary_file
from openmsprof.export.msprof.summary_export import iter_tables
from openmsprof.export.msprof.tables import Table
from openmsprof.export.msprof.timeline import write_timeline
from openmsprof.fileio import fs

__all__ = ["SAME_IN_BOTH", "merged_tables", "merged_timeline", "ready_sources", "rename_slices"]

_SLICE = "_slice_"

#: Summaries that read nothing the tool-facing db changes (the task types): a job's only such
#: per-device CSV, just written by ``export summary``, is the merged file byte for byte.
SAME_IN_BOTH = frozenset({"api_statistic", "msprof_tx", "step_trace", "host_cpu_usage", "host_mem_usage"})


def merged_tables(db: JobDB, stamp: str, names: list[str]) -> list[Table]:
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


def ready_sources(name: str, ready: Iterable[Path], stamp: str) -> list[tuple[Path, str]] | None:
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



def rename_slices(paths: list[Path], stamp: str) -> list[Path]:
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


def merged_timeline(db: JobDB, out: Path, stamp: str) -> list[Path]:
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
