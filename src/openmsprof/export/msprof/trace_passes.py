"""The host passes of a timeline file — markers, CANN APIs, host counters — and the context
every pass shares (the device passes are in :mod:`trace_device`).

Each pass streams one ordered query in chunks of ``CHUNK`` rows and formats events with
f-strings or printf templates; string ids resolve through pre-escaped JSON literals.
"""

from __future__ import annotations

import orjson

from openmsprof.export import overhead
from openmsprof.export.ascend_pt import gc_track
from openmsprof.export.msprof import trace_loops as loops
from openmsprof.export.msprof.trace_context import PassContext, ThreadTids
from openmsprof.export.msprof.trace_layout import (
    SORT_APP,
    SORT_CANN,
    SORT_CPU,
    SORT_MEM,
    Lanes,
    process_meta,
    templates,
)
from openmsprof.export.msprof.trace_loops import api_label
from openmsprof.recorder.records import Series

_NUMERIC = "typeof({0}) IN ('integer','real') AND {0} BETWEEN -1e300 AND 1e300"


def prepare_apis(ctx: PassContext, *, all_threads: bool = False) -> ThreadTids:
    """The CANN track's process metadata and thread map (once per file).  ``all_threads``: give
    every API thread its tid now, in globalTid order, so that a forked device pass knows them."""
    tids = ctx.api_tids
    if not isinstance(tids, ThreadTids):
        ctx.api_pid = process_meta(ctx.w, ctx.style, SORT_CANN, "CANN", "CPU")
        tids = ctx.api_tids = ctx.thread_tracks(ctx.api_pid, SORT_CANN)
    if all_threads:
        for (g,) in ctx.db.stream("SELECT DISTINCT globalTid FROM CANN_API ORDER BY 1"):
            tids[g]  # allocates the tid and writes the thread's metadata
    return tids


def write_markers_and_apis(ctx: PassContext) -> loops.Overflow:
    """Markers (instants and ranges) and CANN APIs.  Returns (globalTid, start, end) → overflow
    tid for APIs drawn on an overflow lane (flows must start there)."""
    db, w, style = ctx.db, ctx.w, ctx.style
    tb = style.ts_base
    x_fmt, i_fmt = templates(style)
    names = ctx.names
    window = (ctx.lo, ctx.hi)
    if db.has("MSTX_EVENTS"):
        app = str(db.info_json().get("pid_name") or f"Process {db.pid}")
        pid = process_meta(w, style, SORT_APP, app, "CPU")
        tids = ctx.thread_tracks(pid, SORT_APP)
        lanes = Lanes(w, pid, tids.labels, style, tids.ks)
        domains = {k: ("" if v == '"default"' else f',"args":{{"domain":{v}}}')
                   for k, v in names.items()}
        sql = ("SELECT startNs, endNs, eventType, message, globalTid, domainId FROM MSTX_EVENTS"
               " WHERE endNs >= ? AND startNs < ? ORDER BY startNs, endNs DESC")
        for rows in ctx.chunks(sql, window):
            out = []
            for s, e, kind, msg, g, dom in rows:
                tid = tids[g]
                q, r = divmod(s - tb, 1000)
                tail = domains.get(dom, "") + "}"
                if kind == 0 or kind == 3:
                    out.append(i_fmt % (names.get(msg, '"N/A"'), pid, tid, q, r) + tail)
                else:
                    lt, d = lanes.draw(tid, s, max(e, s))
                    dq, dr = divmod(d, 1000)
                    out.append(x_fmt % (names.get(msg, '"N/A"'), pid, lt, q, r, dq, dr) + tail)
            w.write_events(out)
    overflow: loops.Overflow = {}
    if db.has("CANN_API"):
        tids = prepare_apis(ctx)
        pid = ctx.api_pid
        lanes = Lanes(w, pid, tids.labels, style, tids.ks)
        sql = ("SELECT startNs, endNs, type, name, globalTid FROM CANN_API"
               " WHERE endNs >= ? AND startNs < ? ORDER BY startNs, endNs DESC")
        if style.safe:
            sql = ("SELECT startNs - ?, max(endNs - startNs, 0), (ifnull(type, 0) << 32) |"
                   " ifnull(name, 0), globalTid FROM CANN_API WHERE endNs >= ? AND"
                   " startNs < ? ORDER BY startNs, endNs DESC")
            loops.apis_safe(ctx, ctx.chunks(sql, (tb, *window)), pid, lanes, overflow)
        else:
            api_fmt = x_fmt + "}"
            labels: dict[tuple[int, int | None], str] = {}
            for rows in ctx.chunks(sql, window):
                out = []
                for s, e, typ, nm, g in rows:
                    tid = tids[g]
                    e = max(e, s)
                    lt, d = lanes.draw(tid, s, e)
                    if lt != tid:
                        overflow[(g, s, e)] = lt
                    q, r = divmod(s - tb, 1000)
                    dq, dr = divmod(d, 1000)
                    label = labels.get((typ, nm))
                    if label is None:
                        label = labels[(typ, nm)] = api_label(db, typ, nm)
                    out.append(api_fmt % (label, pid, lt, q, r, dq, dr))
                w.write_events(out)
    return overflow


def write_counters(ctx: PassContext) -> None:
    """Host CPU and memory usage as counter (``ph:"C"``) tracks."""
    db, w, style = ctx.db, ctx.w, ctx.style
    tb = style.ts_base
    c_fmt = '{"name":%s,"pid":%d,"tid":%d,"ts":' + style.ts_fmt + ',"ph":"C","args":{"Usage(%%)":%s}}'
    window = (ctx.lo, ctx.hi)
    if db.has("CPU_USAGE"):
        pid = process_meta(w, style, SORT_CPU, "CPU Usage", "CPU")
        tid = style.tid(SORT_CPU, 0, 0)
        series: dict[int, str] = {}
        sql = ("SELECT timestampNs, cpuId, usage FROM CPU_USAGE WHERE timestampNs >= ? AND "
               "timestampNs < ? AND " + _NUMERIC.format("usage") + " ORDER BY timestampNs")
        for rows in ctx.chunks(sql, window):
            out = []
            for t, cpu, v in rows:
                name = series.get(cpu)
                if name is None:
                    name = series[cpu] = '"CPU Avg"' if cpu < 0 else f'"CPU {cpu}"'
                q, r = divmod(t - tb, 1000)
                out.append(c_fmt % (name, pid, tid, q, r, v))
            w.write_events(out)
    if db.has("HOST_MEM_USAGE"):
        pid = process_meta(w, style, SORT_MEM, "Memory Usage", "CPU")
        tid = style.tid(SORT_MEM, 0, 0)
        sql = ("SELECT timestampNs, usage FROM HOST_MEM_USAGE WHERE timestampNs >= ? AND "
               "timestampNs < ? AND " + _NUMERIC.format("usage") + " ORDER BY timestampNs")
        for rows in ctx.chunks(sql, window):
            out = [c_fmt % ('"Memory Usage"', pid, tid, *divmod(t - tb, 1000), v) for t, v in rows]
            w.write_events(out)
    _process_counters(ctx, c_fmt)


def _process_counters(ctx: PassContext, c_fmt: str) -> None:
    """Seed 003 host_sys_usage, "CPU usage of processes" and "Memory usage of processes": one
    ``PID {pid}`` counter per sampled process on the CPU Usage level (% of one core) and on the
    Memory Usage level (RSS in % of the host's memory, the level's unit)."""
    db, w, style = ctx.db, ctx.w, ctx.style
    if not db.has("OMSP_COUNTER"):
        return
    tb = style.ts_base
    total = db.query("SELECT MAX(value) FROM OMSP_COUNTER WHERE series = ? AND deviceId < 0",
                     (int(Series.SYS_MEM_TOTAL_KB),))[0][0]
    for series, sort, level, table in ((Series.PROC_CPU_PERCENT, SORT_CPU, "CPU Usage", "CPU_USAGE"),
                                       (Series.PROC_RSS_KB, SORT_MEM, "Memory Usage", "HOST_MEM_USAGE")):
        scale = 1.0 if series == Series.PROC_CPU_PERCENT else (100.0 / float(total) if total else 0.0)
        if not scale:
            continue
        sql = ("SELECT timestampNs, subIndex, value FROM OMSP_COUNTER WHERE series = ? AND deviceId < 0"
               " AND subIndex > 0 AND timestampNs >= ? AND timestampNs < ? AND " + _NUMERIC.format("value")
               + " ORDER BY timestampNs")
        tid = style.tid(sort, 0, 0)
        pid = style.pid(sort) if db.has(table) else None
        for rows in ctx.chunks(sql, (int(series), ctx.lo, ctx.hi)):
            if pid is None:  # the level's process, when the system-wide counters did not draw it
                pid = process_meta(w, style, sort, level, "CPU")
            w.write_events([c_fmt % (f'"PID {p}"', pid, tid, *divmod(t - tb, 1000), round(v * scale, 3))
                            for t, p, v in rows])


SORT_OVERHEAD = 8


def write_overhead(ctx: PassContext) -> int:
    """The ``Profiling Overhead`` track: one counter event per figure of the recorder's
    ``host/openmsprof_overhead.json`` (``export.overhead``) at the session start.  Returns the
    number of events written (a file with only these has no data: ``timeline`` writes none)."""
    db, w, style = ctx.db, ctx.w, ctx.style
    figures = overhead.read_job(db.job)
    rows = db.query("SELECT min(startTimeNs) FROM SESSION_TIME_INFO") if db.has("SESSION_TIME_INFO") else []
    start = rows[0][0] if rows and rows[0][0] is not None else None
    if not figures or start is None or not ctx.lo <= start < ctx.hi:
        return 0
    pid = process_meta(w, style, SORT_OVERHEAD, overhead.PROCESS, "CPU")
    tid = style.tid(SORT_OVERHEAD, 0, 0)
    q, r = divmod(start - style.ts_base, 1000)
    c_fmt = '{"name":%s,"pid":%d,"tid":%d,"ts":' + style.ts_fmt + ',"ph":"C","args":{%s:%s}}'
    w.write_events([c_fmt % (orjson.dumps(k).decode(), pid, tid, q, r, orjson.dumps(k).decode(),
                             orjson.dumps(v).decode()) for k, v in sorted(figures.items())])
    return len(figures)


SORT_GC = 11


def write_gc(ctx: PassContext) -> None:
    """The ``Python GC`` process: one ``GC`` complete event per long collection of the job's
    ``host/gc_events.json`` (``gc_detect_threshold``) inside the window."""
    db, w, style = ctx.db, ctx.w, ctx.style
    events = [e for e in gc_track.read_file(db.job / "host" / gc_track.FILE) if ctx.lo <= e[0] < ctx.hi]
    if not events:
        return
    pid = process_meta(w, style, SORT_GC, gc_track.PROCESS, "CPU")
    tid = style.tid(SORT_GC, 0, 0)
    x_fmt = ('{"name":"GC","pid":%d,"tid":%d,"ts":' + style.ts_fmt + ',"dur":%d.%03d,"ph":"X",'
             '"args":{"generation":%d}}')
    w.write_events([x_fmt % (pid, tid, *divmod(t0 - style.ts_base, 1000), *divmod(t1 - t0, 1000), gen)
                    for t0, t1, gen in events])
