"""The timeline passes: markers, CANN APIs, device tasks with flows, steps, host counters.

Each pass streams one ordered query in chunks of ``CHUNK`` rows and formats events with printf
templates; string ids resolve through pre-escaped JSON literals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openmsprof.export import trace_loops as loops
from openmsprof.export.db import JobDB
from openmsprof.export.fmt import INVALID
from openmsprof.export.trace_layout import (
    SORT_APP,
    SORT_CANN,
    SORT_CPU,
    SORT_DEVICE,
    SORT_MEM,
    STEP_TID,
    TID_SPAN,
    Lanes,
    Style,
    process_meta,
    templates,
    thread_meta,
)
from openmsprof.export.trace_loops import api_label
from openmsprof.export.trace_writer import TraceWriter

CHUNK = 20_000
_MASK32 = 0xFFFFFFFF
_NUMERIC = "typeof({0}) IN ('integer','real') AND {0} BETWEEN -1e300 AND 1e300"


class _Names(dict):  # type: ignore[type-arg]
    """String id → JSON literal; unknown ids read ``"N/A"``."""

    def __missing__(self, key: object) -> str:
        return '"N/A"'


@dataclass
class PassContext:
    """Everything a pass needs: the database, the writer, id/time spelling and the window."""

    db: JobDB
    w: TraceWriter
    style: Style
    lo: int
    hi: int
    names: dict[Any, str] = field(default_factory=dict)
    threads: dict[int, str] = field(default_factory=dict)
    api_pid: int = 0
    api_tids: dict[int, int] = field(default_factory=dict)
    stream_tids: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.names = _Names(self.db.json_strings)
        if "THREAD_INFO" in self.db.tables:
            self.threads = {g: self.db.text(n, "") for g, n in
                            self.db.conn.execute("SELECT globalTid, name FROM THREAD_INFO")}

    def chunks(self, sql: str, params: tuple[Any, ...]) -> Any:
        cur = self.db.conn.execute(sql, params)
        while rows := cur.fetchmany(CHUNK):
            yield rows

    def thread_tracks(self, pid: int, sort_index: int, table: str,
                      ) -> tuple[dict[int, str], dict[int, int]]:
        """Thread metadata for every globalTid of ``table``.  Returns (drawn tid → label,
        globalTid → drawn tid)."""
        labels: dict[int, str] = {}
        tids: dict[int, int] = {}
        rows = self.db.conn.execute(f"SELECT DISTINCT globalTid FROM {table} ORDER BY 1")
        for k, (g,) in enumerate(rows, 1):
            real = g & _MASK32
            tid = tids[g] = self.style.tid(sort_index, k, real)
            name = self.threads.get(g, "")
            label = f"Thread {real} ({name})" if name else f"Thread {real}"
            labels[tid] = label
            thread_meta(self.w, pid, tid, label, real)
        return labels, tids


def write_markers_and_apis(ctx: PassContext) -> dict[int, int]:
    """Markers (instants and ranges) and CANN APIs.  Returns connectionId → overflow tid for
    APIs drawn on an overflow lane (flows must start there)."""
    db, w, style = ctx.db, ctx.w, ctx.style
    tb = style.ts_base
    x_fmt, i_fmt = templates(style)
    names = ctx.names
    window = (ctx.lo, ctx.hi)
    if db.has("MSTX_EVENTS"):
        app = str(db.info_json().get("pid_name") or f"Process {db.pid}")
        pid = process_meta(w, style, SORT_APP, app, "CPU")
        names_by_tid, tids = ctx.thread_tracks(pid, SORT_APP, "MSTX_EVENTS")
        lanes = Lanes(w, pid, names_by_tid, style)
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
                    e = max(e, s)
                    lt = lanes.place(tid, s, e)
                    dq, dr = divmod(e - s, 1000)
                    out.append(x_fmt % (names.get(msg, '"N/A"'), pid, lt, q, r, dq, dr) + tail)
            w.write_events(out)
    overflow: dict[int, int] = {}
    if db.has("CANN_API"):
        pid = ctx.api_pid = process_meta(w, style, SORT_CANN, "CANN", "CPU")
        names_by_tid, ctx.api_tids = ctx.thread_tracks(pid, SORT_CANN, "CANN_API")
        lanes = Lanes(w, pid, names_by_tid, style)
        tids = ctx.api_tids
        sql = ("SELECT startNs, endNs, type, name, globalTid, connectionId FROM CANN_API"
               " WHERE endNs >= ? AND startNs < ? ORDER BY startNs, endNs DESC")
        if style.safe:
            loops.apis_safe(ctx, ctx.chunks(sql, window), pid, lanes, overflow)
        else:
            api_fmt = x_fmt + "}"
            labels: dict[tuple[int, int | None], str] = {}
            for rows in ctx.chunks(sql, window):
                out = []
                for s, e, typ, nm, g, conn in rows:
                    tid = tids[g]
                    e = max(e, s)
                    lt = lanes.place(tid, s, e)
                    if lt != tid:
                        overflow[conn] = lt
                    q, r = divmod(s - tb, 1000)
                    dq, dr = divmod(e - s, 1000)
                    label = labels.get((typ, nm))
                    if label is None:
                        label = labels[(typ, nm)] = api_label(db, typ, nm)
                    out.append(api_fmt % (label, pid, lt, q, r, dq, dr))
                w.write_events(out)
    return overflow


def write_device(ctx: PassContext, dev: int, overflow: dict[int, int]) -> None:
    """Device tasks by stream (process named after the executor), API→task flows, steps."""
    db, w, style = ctx.db, ctx.w, ctx.style
    pairs = db.query("SELECT DISTINCT taskType, streamId FROM TASK WHERE deviceId = ?",
                     (dev,)) if db.has("TASK") else []
    executors = sorted({db.text(t, "") for t, _ in pairs})
    executor = executors[0] if len(executors) == 1 and executors[0] else "Device"
    pname = "CPU Execution" if executor == "CPU" else f"{executor} {dev}"
    labels = f"{executor} {dev}" if style.safe else f"NPU {dev}"
    pid = process_meta(w, style, SORT_DEVICE, pname, labels, dev)
    streams: dict[int, str] = {}
    for k, sid in enumerate(sorted({sid for _, sid in pairs}), 1):
        tid = ctx.stream_tids[sid] = style.tid(SORT_DEVICE, k, sid)
        streams[tid] = f"Stream {sid}"
        thread_meta(w, pid, tid, f"Stream {sid}", sid)
    lanes = Lanes(w, pid, streams, style)
    info = "COMPUTE_TASK_INFO" in db.tables
    api = "CANN_API" in db.tables
    # Rows come in TaskIndex order; equal starts on one stream are rare and at worst land on an
    # overflow lane.
    name_col = "c.name" if info else "t.taskType"
    api_cols = "a.startNs, a.globalTid" if api else "NULL, NULL"
    info_join = "LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId" if info else ""
    api_join = ("LEFT JOIN CANN_API a ON a.connectionId = t.connectionId AND t.connectionId >= 0"
                " AND a.endNs >= ? AND a.startNs < ?") if api else ""
    sql = (f"SELECT t.startNs, t.endNs, t.streamId, {name_col}, t.taskId, t.modelId, t.taskType,"
           f" {api_cols}, t.connectionId FROM TASK t {info_join} {api_join}"
           " WHERE t.deviceId = ? AND t.endNs >= ? AND t.startNs < ? ORDER BY t.startNs")
    params = ((ctx.lo, ctx.hi) if api else ()) + (dev, ctx.lo, ctx.hi)
    if executors:
        if style.safe:
            loops.tasks_safe(ctx, ctx.chunks(sql, params), pid, lanes, overflow, len(executors) > 1)
        else:
            loops.tasks_ascend(ctx, ctx.chunks(sql, params), pid, lanes, overflow)
    _write_steps(ctx, dev, pid, lanes)


def _write_steps(ctx: PassContext, dev: int, pid: int, lanes: Lanes) -> None:
    db = ctx.db
    if not db.has("STEP_TIME"):
        return
    tb = ctx.style.ts_base
    x_fmt, _ = templates(ctx.style)
    fmt = x_fmt + ',"args":{"Iteration Id":%d,"Model Id":%s}}'
    tid = ctx.style.tid(SORT_DEVICE, TID_SPAN - 1, STEP_TID)
    lanes.names[tid] = "Step Trace"
    thread_meta(ctx.w, pid, tid, "Step Trace", STEP_TID)
    sql = ("SELECT startNs, endNs, id, modelId FROM STEP_TIME WHERE deviceId = ? AND endNs >= ?"
           " AND startNs < ? ORDER BY startNs, endNs DESC")
    for rows in ctx.chunks(sql, (dev, ctx.lo, ctx.hi)):
        out = []
        for s, e, step, model in rows:
            e = max(e, s)
            lt = lanes.place(tid, s, e)
            q, r = divmod(s - tb, 1000)
            dq, dr = divmod(e - s, 1000)
            m = '"N/A"' if model is None or model == INVALID else str(int(model))
            out.append(fmt % (f'"Step {step}"', pid, lt, q, r, dq, dr, step, m))
        ctx.w.write_events(out)


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
