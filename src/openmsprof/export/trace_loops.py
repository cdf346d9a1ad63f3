"""The hot loops of the timeline export: one pre-formatted event string per row.

Perfetto-safe loops use f-strings, a 000–999 pad table for the µs fractions and an inline fast
path for the common "next span starts after the previous one ended" lane case.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from openmsprof.collect.records import API_LEVEL_NAMES, ApiLevel
from openmsprof.export.db import JobDB
from openmsprof.export.fmt import INVALID
from openmsprof.export.trace_layout import Lanes, templates

if TYPE_CHECKING:
    from openmsprof.export.trace_passes import PassContext

_MASK32 = 0xFFFFFFFF
_PAD = [f"{i:03d}" for i in range(1000)]


def api_label(db: JobDB, typ: int, nm: int | None) -> str:
    """``"{Level}@{api}"`` as a JSON literal."""
    try:
        level = API_LEVEL_NAMES[ApiLevel(typ)]
    except ValueError:
        level = "Api"
    return orjson.dumps(f"{level}@{db.text(nm, 'unknown')}").decode()


def apis_safe(ctx: PassContext, chunks: Any, pid: int, lanes: Lanes,
               overflow: dict[int, int]) -> None:
    """The Perfetto-safe API loop (f-strings, inline lane fast path)."""
    db, pad, tb, w = ctx.db, _PAD, ctx.style.ts_base, ctx.w
    tracks, place = lanes.tracks, lanes.place
    tids = ctx.api_tids
    labels: dict[int, str] = {}
    for rows in chunks:
        out: list[str] = []
        ap = out.append
        for s, e, typ, nm, g, conn in rows:
            tid = tids[g]
            if e < s:
                e = s
            st = tracks.get(tid)
            if st is not None and len(st) == 1 and len(st[0]) == 1 and st[0][0] <= s:
                st[0][0] = e
                lt = tid
            else:
                lt = place(tid, s, e)
                if lt != tid:
                    overflow[conn] = lt
            key = (typ << 32) | (nm or 0)
            label = labels.get(key)
            if label is None:
                label = labels[key] = api_label(db, typ, nm)
            rel = s - tb
            d = e - s
            ap(f'{{"name":{label},"pid":{pid},"tid":{lt},"ts":{rel // 1000}.{pad[rel % 1000]},'
               f'"dur":{d // 1000}.{pad[d % 1000]},"ph":"X"}}')
        w.write_events(out)


def tasks_safe(ctx: PassContext, chunks: Any, pid: int, lanes: Lanes,
                overflow: dict[int, int], mixed: bool) -> None:
    """The Perfetto-safe task loop (the hot path of the export: f-strings, inline lanes).

    ``Task Type`` goes into args only when the device mixes executors (else the process name
    says it); ``Model Id`` only when set."""
    names, pad, tb, w = ctx.names, _PAD, ctx.style.ts_base, ctx.w
    tracks, place = lanes.tracks, lanes.place
    stids, atids = ctx.stream_tids, ctx.api_tids
    s_head = f'{{"name":"HostToDevice","pid":{ctx.api_pid},"tid":'
    f_head = f'{{"name":"HostToDevice","pid":{pid},"tid":'
    fid = 0
    for rows in chunks:
        out: list[str] = []
        ap = out.append
        for s, e, stream, nm, task_id, model, tt, a_s, a_g, conn in rows:
            if e < s:
                e = s
            tid = stids[stream]
            st = tracks.get(tid)
            if st is not None and len(st) == 1 and len(st[0]) == 1 and st[0][0] <= s:
                st[0][0] = e
                lt = tid
            else:
                lt = place(tid, s, e)
            rel = s - tb
            d = e - s
            ts = f"{rel // 1000}.{pad[rel % 1000]}"
            args = f'"Task Id":{task_id}'
            if model != INVALID and model is not None:
                args = f'{args},"Model Id":{model}'
            if mixed:
                args = f'"Task Type":{names[tt]},{args}'
            ap(f'{{"name":{names[nm]},"pid":{pid},"tid":{lt},"ts":{ts},"dur":{d // 1000}.'
               f'{pad[d % 1000]},"ph":"X","args":{{{args}}}}}')
            if a_s is not None:
                fid += 1
                arel = a_s - tb
                atid = overflow[conn] if overflow and conn in overflow else atids[a_g]
                ap(f'{s_head}{atid},"ph":"s","cat":"HostToDevice","id":{fid},"ts":'
                   f'{arel // 1000}.{pad[arel % 1000]}}}')
                ap(f'{f_head}{lt},"ph":"f","cat":"HostToDevice","id":{fid},"ts":{ts},"bp":"e"}}')
        w.write_events(out)


def tasks_ascend(ctx: PassContext, chunks: Any, pid: int, lanes: Lanes,
                  overflow: dict[int, int]) -> None:
    """The Ascend-compatible task loop: absolute string ts, MP flow ids (connectionId << 32)."""
    names, tb, api_pid = ctx.names, ctx.style.ts_base, ctx.api_pid
    x_fmt, _ = templates(ctx.style)
    ts = ctx.style.ts_fmt
    task_fmt = x_fmt + ',"args":{"Model Id":%d,"Task Type":%s,"Physic Stream Id":%d,"Task Id":%d}}'
    s_fmt = ('{"name":"HostToDevice%d","pid":%d,"tid":%d,"ph":"s","cat":"HostToDevice",'
             '"id":"%d","ts":' + ts + "}")
    f_fmt = ('{"name":"HostToDevice%d","pid":%d,"tid":%d,"ph":"f","cat":"HostToDevice",'
             '"id":"%d","ts":' + ts + ',"bp":"e"}')
    for rows in chunks:
        out = []
        for s, e, stream, nm, task_id, model, tt, a_s, a_g, conn in rows:
            e = max(e, s)
            lt = lanes.place(stream, s, e)  # Ascend mode: tid = stream id
            q, r = divmod(s - tb, 1000)
            dq, dr = divmod(e - s, 1000)
            out.append(task_fmt % (names[nm], pid, lt, q, r, dq, dr,
                                   INVALID if model is None else model, names[tt], stream,
                                   task_id))
            if a_s is not None:
                aq, ar = divmod(a_s - tb, 1000)
                atid = overflow.get(conn, a_g & _MASK32)
                big = conn << 32
                out.append(s_fmt % (big, api_pid, atid, big, aq, ar))
                out.append(f_fmt % (big, pid, lt, big, q, r))
        ctx.w.write_events(out)
