"""``export timeline``: the job database → Chrome trace JSON (docs/formats.md §5, decisions 2 and 3).

One file per device, ``timeline/msprof_{dev}.json`` (``msprof_host.json`` when the job has no
device data), each holding the host layers too so API→task flows stay in one file (the iteration
timeline ``timeline/step_trace_{dev}.json`` is :mod:`step_timeline`'s).  Events are
formatted from cursor rows in chunks — never a list of the whole job; on a multi-core machine
the device pass of a big job runs in a forked child (:mod:`trace_fork`).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from pathlib import Path

from openmsprof.config.errors import ConfigError, RawDataError
from openmsprof.export.fork_worker import fork_allowed
from openmsprof.export.jobdb import DB_ERRORS, JobDB, open_job
from openmsprof.export.msprof import trace_device as device
from openmsprof.export.msprof import trace_passes as passes
from openmsprof.export.msprof.naming import TIMELINE_DIR, remove_stale, timeline_file
from openmsprof.export.msprof.trace_fork import DeviceChild
from openmsprof.export.msprof.trace_layout import Style
from openmsprof.export.msprof.trace_writer import TraceWriter
from openmsprof.fileio import fs

_TIME_TABLES = (("TASK", "startNs"), ("CANN_API", "startNs"), ("MSTX_EVENTS", "startNs"),
                ("STEP_TIME", "startNs"), ("CPU_USAGE", "timestampNs"),
                ("HOST_MEM_USAGE", "timestampNs"))
#: Tasks (by TASK's largest rowid) from which the device pass runs in a forked child.
FORK_MIN_TASKS = 100_000


def trace_base(db: JobDB) -> int:
    """BASE_NS, lowered to a whole second if any event precedes it (ts stay ≥ 0)."""
    base = db.base_ns
    for table, col in _TIME_TABLES:
        if table in db.tables:
            (low,) = db.conn.execute(f"SELECT MIN({col}) FROM {table}").fetchone()
            if low is not None and low < base:
                base = int(low) // 1_000_000_000 * 1_000_000_000
    return base


def timeline_devices(db: JobDB) -> list[int]:
    """Device ids with tasks or steps; empty means a host-only timeline."""
    devs = {d for d in db.task_streams if d is not None and d >= 0}
    if "STEP_TIME" in db.tables:
        devs.update(r[0] for r in db.conn.execute(
            "SELECT DISTINCT deviceId FROM STEP_TIME WHERE deviceId >= 0"))
    return sorted(devs)


def write_timeline(db: JobDB, out_dir: Path, *, ascend_compat: bool = False,
                   start_us: float | None = None, end_us: float | None = None,
                   max_size_mb: float | None = None, parallel: bool | None = None,
                   meanwhile: Callable[[], object] | None = None) -> list[Path]:
    """Write the timeline files of an open database into ``out_dir``; returns their paths.
    ``meanwhile``: run once in this process while a device child renders (else at the end).

    ``parallel``: run each device pass in a forked child — True: always (but never with size
    splitting), False: never, None: when it pays (two or more CPUs, a single-threaded caller,
    at least ``FORK_MIN_TASKS`` tasks).  The events written are the same either way.
    A device with no events writes no file; a whole-job export then removes an older one, a
    ``start_us``/``end_us`` window with no events leaves it (the caller says so)."""
    if max_size_mb is not None and max_size_mb <= 0:
        raise ConfigError(f"--max-size-mb must be > 0, got {max_size_mb}")
    if start_us is not None and end_us is not None and end_us <= start_us:
        raise ConfigError(f"--end-us ({end_us}) must be greater than --start-us ({start_us})")
    max_bytes = None if max_size_mb is None else max(1, int(max_size_mb * 1024 * 1024))
    fs.make_dir(out_dir)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived row tuples: collections only cost time here
    try:
        base = trace_base(db)
        style = Style(safe=not ascend_compat, base_ns=base, real_pid=db.pid)
        lo = -(1 << 63) if start_us is None else base + round(start_us * 1000)
        hi = (1 << 63) - 1 if end_us is None else base + round(end_us * 1000)
        devices: list[int | str] = list(timeline_devices(db)) or ["host"]
        fork = _want_fork(db, parallel, max_bytes)
        written: list[Path] = []
        pending = [meanwhile] if meanwhile is not None else []
        for dev in devices:
            written.extend(_write_device_file(db, out_dir, dev, style, lo, hi, max_bytes, fork, pending))
        if pending:
            pending.pop()()
        return written
    except DB_ERRORS as exc:  # a database damaged under us: one line, no traceback
        raise RawDataError(f"database {str(db.path)!r} is unreadable: {exc}") from None
    finally:
        if gc_was_enabled:
            gc.enable()


def _want_fork(db: JobDB, parallel: bool | None, max_bytes: int | None) -> bool:
    if not hasattr(os, "fork") or max_bytes is not None or parallel is False:
        return False
    if parallel:
        return True
    if not fork_allowed() or "TASK" not in db.tables:
        return False
    (rows,) = db.conn.execute("SELECT MAX(rowid) FROM TASK").fetchone()
    return (rows or 0) >= FORK_MIN_TASKS


def _write_device_file(db: JobDB, out_dir: Path, dev: int | str, style: Style, lo: int, hi: int,
                       max_bytes: int | None, fork: bool, pending: list[Callable[[], object]]) -> list[Path]:
    """One device's file(s): host layers, then the device's tasks and steps, then counters
    (``pending``'s step is taken and run while the device child renders)."""
    w = TraceWriter(out_dir, dev, safe=style.safe, base_ns=style.base_ns, max_bytes=max_bytes)
    child: DeviceChild | None = None
    try:
        ctx = passes.PassContext(db, w, style, lo, hi)
        if isinstance(dev, int) and fork:
            fused = style.safe and db.has("CANN_API")
            if fused:
                passes.prepare_apis(ctx, all_threads=True)
            child = DeviceChild.start(ctx, dev, out_dir, fused)
        overflow = passes.write_markers_and_apis(ctx)
        if isinstance(dev, int):
            if child is not None and pending:
                pending.pop()()
            running, child = child, None
            if running is not None and running.finish(w, take_starts=not overflow):
                if not (running.fused and not overflow):
                    device.write_flow_starts(ctx, dev, overflow)
            else:  # in this process; fused unless an API lies on an overflow lane
                fused = style.safe and not overflow
                if not fused:
                    device.write_flow_starts(ctx, dev, overflow)
                device.write_device(ctx, dev, w if fused else None)
        passes.write_counters(ctx)
        own = passes.write_overhead(ctx)
        passes.write_gc(ctx)
        if w.events == own:  # no data, no file (the seed's rule; profiling's own figures are not data)
            w.abort()
            if lo == -(1 << 63) and hi == (1 << 63) - 1:  # an empty window keeps earlier files
                remove_stale([], out_dir / timeline_file(dev))
            return []
        return w.finish()
    except BaseException:
        if child is not None:
            child.cancel()
        w.abort()
        raise


def export_timeline(job: Path, *, ascend_compat: bool = False, start_us: float | None = None,
                    end_us: float | None = None, max_size_mb: float | None = None,
                    meanwhile: Callable[[], object] | None = None) -> list[Path]:
    """Import ``job`` if needed and write ``JOB/timeline/msprof_{dev}.json`` (``meanwhile``: see
    :func:`write_timeline`); ``export timeline`` adds :func:`step_timeline.export_step_timeline`."""
    with open_job(job) as db:
        return write_timeline(db, Path(job) / TIMELINE_DIR, ascend_compat=ascend_compat,
                              start_us=start_us, end_us=end_us, max_size_mb=max_size_mb,
                              meanwhile=meanwhile)
