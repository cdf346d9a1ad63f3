"""The device passes of a timeline file: tasks by stream with their API→task flows, and steps.

Flow ids number the flows in task order (start, then globalTaskId).  The task pass writes each
flow's ``f`` end and — when no API lies on an overflow lane, the common case — its ``s`` end
too, at the API's start on the API's thread ("fused", one query).  Otherwise the ``s`` ends come
from :func:`write_flow_starts`, which walks the same join in the same order and knows each
API's drawn lane.
"""

from __future__ import annotations

from openmsprof.export.fmt import INVALID
from openmsprof.export.msprof import trace_loops as loops
from openmsprof.export.msprof.trace_context import PassContext
from openmsprof.export.msprof.trace_layout import (
    DEVICE_FIRST_LANE_TID,
    SORT_DEVICE,
    STEP_TID,
    Lanes,
    process_meta,
    templates,
    thread_meta,
)
from openmsprof.export.msprof.trace_writer import TraceWriter


def flow_join(ctx: PassContext, kind: str) -> tuple[str, tuple[int, ...]]:
    """The TASK→CANN_API join of flows (``kind`` "JOIN" or "LEFT JOIN") and its parameters."""
    return (f"{kind} CANN_API a ON a.connectionId = t.connectionId AND t.connectionId >= 0"
            " AND a.endNs >= ? AND a.startNs < ?", (ctx.lo, ctx.hi))


def _task_where(ctx: PassContext, dev: int) -> tuple[str, tuple[int, ...]]:
    return (" WHERE t.deviceId = ? AND t.endNs >= ? AND t.startNs < ?"
            " ORDER BY t.startNs, t.globalTaskId", (dev, ctx.lo, ctx.hi))


def write_flow_starts(ctx: PassContext, dev: int, overflow: loops.Overflow) -> None:
    """The ``s`` end of every API→task flow of device ``dev`` (on the API's drawn lane)."""
    db = ctx.db
    if not (db.has("TASK") and db.has("CANN_API")):
        return
    join, jp = flow_join(ctx, "JOIN")
    where, wp = _task_where(ctx, dev)
    tb = ctx.style.ts_base
    # the API's end only to find those on overflow lanes, its connection only for Ascend ids
    cols = "" if ctx.style.safe and not overflow else ", max(a.endNs, a.startNs) - ?"
    cols += "" if ctx.style.safe else ", a.connectionId"
    params = (tb,) + ((tb,) if "?" in cols else ())
    sql = f"SELECT a.startNs - ?, a.globalTid{cols} FROM TASK t {join}{where}"
    loops.flow_starts(ctx, ctx.chunks(sql, (*params, *jp, *wp)), overflow)


def write_device(ctx: PassContext, dev: int, starts: TraceWriter | None = None) -> None:
    """Device tasks by stream (process named after the executor), flow ends, steps.

    ``starts``: where the fused pass writes the flows' ``s`` ends (Perfetto-safe mode only; the
    API threads must already have their tids, no API may lie on an overflow lane).  None: the
    caller writes them with :func:`write_flow_starts`."""
    db, w, style = ctx.db, ctx.w, ctx.style
    pairs = db.task_streams.get(dev, [])
    executors = sorted({db.text(t, "") for t, _ in pairs})
    executor = executors[0] if len(executors) == 1 and executors[0] else "Device"
    pname = "CPU Execution" if executor == "CPU" else f"{executor} {dev}"
    labels = f"{executor} {dev}" if style.safe else f"NPU {dev}"
    pid = process_meta(w, style, SORT_DEVICE, pname, labels, dev)
    streams: dict[int, str] = {}
    sids = sorted({sid for _, sid in pairs})
    for k, sid in enumerate(sids, 1):
        tid = ctx.stream_tids[sid] = style.tid(SORT_DEVICE, k, sid)
        streams[tid] = f"Stream {sid}"
        thread_meta(w, pid, tid, f"Stream {sid}", sid)
    step_tid = style.tid(SORT_DEVICE, len(sids) + 1, STEP_TID)
    lanes = Lanes(w, pid, streams, style, [len(sids) + 1], first_raw=DEVICE_FIRST_LANE_TID)
    if executors:
        sql, params = _task_query(ctx, dev, len(executors) > 1, starts is not None)
        chunks = ctx.chunks(sql, params)
        if style.safe:
            loops.tasks_safe(ctx, chunks, pid, lanes, len(executors) > 1, starts)
        else:
            loops.tasks_ascend(ctx, chunks, pid, lanes)
    _write_steps(ctx, dev, pid, lanes, step_tid)


def _task_query(ctx: PassContext, dev: int, mixed: bool,
                fused: bool) -> tuple[str, tuple[int, ...]]:
    """Rows in TaskIndex order (equal starts on one stream are rare and at worst land on an
    overflow lane).  Perfetto-safe columns: (start − base, duration ≥ 0, stream, name id, task
    id, model id or None, task type or 0, API start − base or None, API globalTid or None);
    Ascend: absolute start, the raw model id and type, and the connectionId (or None) last."""
    db, safe, tb = ctx.db, ctx.style.safe, ctx.style.ts_base
    info = "COMPUTE_TASK_INFO" in db.tables
    name_col = "ifnull(c.name, -1)" if info else "ifnull(t.taskType, -1)"
    info_join = "LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId" if info else ""
    params: tuple[int, ...] = (tb,)
    if "CANN_API" not in db.tables:
        api_join, api_cols = "", "NULL, NULL" if safe else "NULL"
    else:
        api_join, jp = flow_join(ctx, "LEFT JOIN")
        if safe:
            api_cols = "a.startNs - ?, " + ("a.globalTid" if fused else "NULL")
            params += (tb,)
        else:
            api_cols = "a.connectionId"
        params += jp
    # Perfetto-safe: cheap Python values where the loop needs no more (None, 0)
    model_col = f"nullif(t.modelId, {INVALID})" if safe else "t.modelId"
    type_col = "0" if safe and not mixed else "t.taskType"
    where, wp = _task_where(ctx, dev)
    sql = (f"SELECT t.startNs - ?, max(t.endNs - t.startNs, 0), t.streamId, {name_col}, t.taskId,"
           f" {model_col}, {type_col}, {api_cols} FROM TASK t {info_join} {api_join}{where}")
    return sql, params + wp


def _write_steps(ctx: PassContext, dev: int, pid: int, lanes: Lanes, tid: int) -> None:
    db = ctx.db
    if not db.has("STEP_TIME"):
        return
    tb = ctx.style.ts_base
    x_fmt, _ = templates(ctx.style)
    fmt = x_fmt + ',"args":{"Iteration Id":%d,"Model Id":%s}}'
    lanes.names[tid] = "Step Trace"
    thread_meta(ctx.w, pid, tid, "Step Trace", STEP_TID)
    sql = ("SELECT startNs, endNs, id, modelId FROM STEP_TIME WHERE deviceId = ? AND endNs >= ?"
           " AND startNs < ? ORDER BY startNs, endNs DESC")
    for rows in ctx.chunks(sql, (dev, ctx.lo, ctx.hi)):
        out = []
        for s, e, step, model in rows:
            lt, d = lanes.draw(tid, s, max(e, s))
            q, r = divmod(s - tb, 1000)
            dq, dr = divmod(d, 1000)
            m = '"N/A"' if model is None or model == INVALID else str(int(model))
            out.append(fmt % (f'"Step {step}"', pid, lt, q, r, dq, dr, step, m))
        ctx.w.write_events(out)
