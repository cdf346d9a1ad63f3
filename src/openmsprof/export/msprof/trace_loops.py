"""The hot loops of the timeline export: pre-formatted event strings per row.

Perfetto-safe loops use f-strings, a 000–999 pad table for the µs fractions, cached event heads
(the text up to ``"ts":`` per name and thread), values carried over from the previous row (rows
mostly repeat thread, stream and model) and an inline fast path for the common "next span starts
after the previous one ended" lane case.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from openmsprof.export.fmt import INVALID
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.trace_layout import Lanes, templates
from openmsprof.recorder.records import API_LEVEL_NAMES, ApiLevel

if TYPE_CHECKING:
    from openmsprof.export.msprof.trace_context import PassContext
    from openmsprof.export.msprof.trace_writer import TraceWriter

_MASK32 = 0xFFFFFFFF
#: (globalTid, start, end) of an API drawn on an overflow lane → that lane's tid.  Two APIs with
#: the same key are drawn on the same lane (equal spans nest), so the key is enough.
Overflow = dict[tuple[int, int, int], int]
_PAD = [f"{i:03d}" for i in range(1000)]
#: Stands for a thread with no lane yet (never takes the inline fast path: its length is 0).
_NO_LANE: list[int] = []


def api_label(db: JobDB, typ: int, nm: int | None) -> str:
    """``"{Level}@{api}"`` as a JSON literal."""
    try:
        level = API_LEVEL_NAMES[ApiLevel(typ)]
    except ValueError:
        level = "Api"
    return orjson.dumps(f"{level}@{db.text(nm, 'unknown')}").decode()


def apis_safe(ctx: PassContext, chunks: Any, pid: int, lanes: Lanes, overflow: Overflow) -> None:
    """The Perfetto-safe API loop.  Rows: (start − base, duration ≥ 0, type << 32 | name id,
    globalTid)."""
    db, pad, w = ctx.db, _PAD, ctx.w
    lane0, place = lanes.lane0, lanes.place
    tids = ctx.api_tids
    heads: dict[int, dict[int, str]] = {}  # drawn tid → key → the event text up to "ts":
    # the previous row's thread and drawn tid (rows mostly repeat them)
    last_g, tid, st, h_lt, hd = None, 0, _NO_LANE, -1, {}
    for rows in chunks:
        out: list[str] = []
        ap = out.append
        for rel, d, key, g in rows:
            if g != last_g:
                last_g, tid = g, tids[g]
                st = lane0.get(tid, _NO_LANE)
            e = rel + d
            if len(st) == 1 and st[0] <= rel:
                st[0] = e
                lt = tid
            else:
                lt = place(tid, rel, e)
                st = lane0[tid]
                if lt != tid:
                    overflow[(g, rel, e)] = lt
            if lt != h_lt:
                h_lt, hd = lt, heads.setdefault(lt, {})
            h = hd.get(key)
            if h is None:
                label = api_label(db, key >> 32, key & _MASK32)
                h = hd[key] = f'{{"name":{label},"pid":{pid},"tid":{lt},"ts":'
            ap(f'{h}{rel // 1000}.{pad[rel % 1000]},"dur":{d // 1000}.{pad[d % 1000]},"ph":"X"}}')
        w.write_events(out)


def tasks_safe(ctx: PassContext, chunks: Any, pid: int, lanes: Lanes, mixed: bool,
               starts: TraceWriter | None) -> None:
    """The Perfetto-safe task loop (the hot path of the export: f-strings, inline lanes) with the
    ``f`` end of each task's flow, and its ``s`` end into ``starts`` when given (fused pass).

    ``Task Type`` goes into args only when the device mixes executors (else the process name
    says it); ``Model Id`` only when set."""
    names, pad, w = ctx.names, _PAD, ctx.w
    lane0, place = lanes.lane0, lanes.place
    stids, api_pid, atids = ctx.stream_tids, ctx.api_pid, ctx.api_tids
    heads: dict[int, dict[int, str]] = {}  # drawn tid → name id → the event text up to "ts":
    # values of the previous row, which the next one mostly repeats: stream (→ tid, lane-0
    # stack), drawn tid (→ heads), model (→ args text), flow end tid and API thread (→ flow
    # texts up to "id":)
    last_stream, tid, st, h_lt, hd, last_model, m = None, 0, _NO_LANE, -1, {}, None, ""
    f_lt, fh, s_g, sh = -1, "", -1, ""
    fid = fid0 = 0
    for rows in chunks:
        out: list[str] = []
        sout: list[str] = []
        ap, sp = out.append, sout.append
        for rel, d, stream, nm, task_id, model, tt, a_rel, a_g in rows:
            if stream != last_stream:
                last_stream, tid = stream, stids[stream]
                st = lane0.get(tid, _NO_LANE)
            e = rel + d
            if len(st) == 1 and st[0] <= rel:
                st[0] = e
                lt = tid
            else:
                lt = place(tid, rel, e)
                st = lane0[tid]
            ts = f"{rel // 1000}.{pad[rel % 1000]}"
            if model != last_model:
                last_model, m = model, "" if model is None else f',"Model Id":{model}'
            if lt != h_lt:
                h_lt, hd = lt, heads.setdefault(lt, {})
            h = hd.get(nm)
            if h is None:
                h = hd[nm] = f'{{"name":{names[nm]},"pid":{pid},"tid":{lt},"ts":'
            t = f'"Task Type":{names[tt]},' if mixed else ""
            if a_rel is None:
                ap(f'{h}{ts},"dur":{d // 1000}.{pad[d % 1000]},"ph":"X","args":{{{t}"Task Id":'
                   f'{task_id}{m}}}}}')
                continue
            fid += 1
            if lt != f_lt:
                f_lt, fh = lt, (f'{{"name":"HostToDevice","pid":{pid},"tid":{lt},"ph":"f",'
                                '"cat":"HostToDevice","id":')
            i = f"{fid}"
            # the task and its flow end as one text (two events)
            ap(f'{h}{ts},"dur":{d // 1000}.{pad[d % 1000]},"ph":"X","args":{{{t}"Task Id":'
               f'{task_id}{m}}}}},{fh}{i},"ts":{ts},"bp":"e"}}')
            if a_g is not None:
                if a_g != s_g:
                    s_g, sh = a_g, _s_head(api_pid, a_g, atids)
                sp(f'{sh}{i},"ts":{a_rel // 1000}.{pad[a_rel % 1000]}}}')
        w.write_events(out, len(out) + fid - fid0)
        fid0 = fid
        if sout and starts is not None:
            starts.write_events(sout)


def flow_starts(ctx: PassContext, chunks: Any, overflow: Overflow) -> None:
    """The ``s`` end of each flow, at its API's start on the API's drawn thread.  Rows, in the
    task order of the task pass: (API start − base, API globalTid), plus the API's end − base
    when some APIs are on overflow lanes, plus the connectionId in Ascend mode."""
    pad, w, api_pid, atids = _PAD, ctx.w, ctx.api_pid, ctx.api_tids
    fid = 0
    if not ctx.style.safe:
        s_fmt = ('{"name":"HostToDevice%d","pid":%d,"tid":%d,"ph":"s","cat":"HostToDevice",'
                 '"id":"%d","ts":' + ctx.style.ts_fmt + "}")
        flow_id = FlowIds()
        for rows in chunks:
            out = []
            for rel, a_g, a_e, conn in rows:
                big = conn << 32
                aq, ar = divmod(rel, 1000)
                tid = overflow.get((a_g, rel, a_e), a_g & _MASK32)
                out.append(s_fmt % (big, api_pid, tid, flow_id(conn), aq, ar))
            w.write_events(out)
        return
    heads: dict[int, str] = {}  # API globalTid (or overflow tid) → the text up to "id":
    s_g, h = -1, ""  # the previous row's API thread and its text (rows mostly repeat it)
    for rows in chunks:
        out = []
        ap = out.append
        if overflow:
            for rel, a_g, a_e in rows:
                fid += 1
                key = -overflow.get((a_g, rel, a_e), -a_g)  # overflow lanes as negative keys
                h = heads.get(key) or heads.setdefault(key, _s_head(api_pid, key, atids))
                ap(f'{h}{fid},"ts":{rel // 1000}.{pad[rel % 1000]}}}')
        else:
            for rel, a_g in rows:
                fid += 1
                if a_g != s_g:
                    s_g, h = a_g, _s_head(api_pid, a_g, atids)
                ap(f'{h}{fid},"ts":{rel // 1000}.{pad[rel % 1000]}}}')
        w.write_events(out)


class FlowIds:
    """Ascend-mode flow ids: MP's ``connectionId << 32`` plus the task's ordinal among the tasks of
    the same connection (one API launching many tasks), so every id in a file is unique.  The
    ``s`` and ``f`` loops walk the tasks in the same order, so both ends get the same id.

    The ordinals are kept in one byte per connection id (ids are dense from 1: about 1 MB per
    million tasks, where a dict of every connection cost ~80 B each and grew the timeline's peak
    RSS with the job, issue 26); an ordinal that reaches 255, and an id outside ``[0, LIMIT)``,
    is counted in a dict."""

    LIMIT = 1 << 26  # the byte table's largest size (64 MB); ids beyond go to the dict

    __slots__ = ("_counts", "_more")

    def __init__(self) -> None:
        self._counts = bytearray()
        self._more: dict[int, int] = {}

    def __call__(self, conn: int) -> int:
        counts = self._counts
        if 0 <= conn < self.LIMIT:
            if conn >= len(counts):
                counts.extend(bytes(min(max(conn + 1, 2 * len(counts)), self.LIMIT) - len(counts)))
            n = counts[conn]
            if n < 255:
                counts[conn] = n + 1
                return (conn << 32) | n
        n = self._more.get(conn, 255 if 0 <= conn < self.LIMIT else 0)
        self._more[conn] = n + 1
        return (conn << 32) | n


def _s_head(api_pid: int, key: int, atids: dict[int, int]) -> str:
    """Text of a flow start up to ``"id":``; ``key`` is a globalTid, or −(overflow lane tid)."""
    tid = -key if key < 0 else atids[key]
    return f'{{"name":"HostToDevice","pid":{api_pid},"tid":{tid},"ph":"s","cat":"HostToDevice","id":'


def tasks_ascend(ctx: PassContext, chunks: Any, pid: int, lanes: Lanes) -> None:
    """The Ascend-compatible task loop: absolute string ts, MP flow ids (connectionId << 32)."""
    names = ctx.names
    x_fmt, _ = templates(ctx.style)
    ts = ctx.style.ts_fmt
    task_fmt = x_fmt + ',"args":{"Model Id":%d,"Task Type":%s,"Physic Stream Id":%d,"Task Id":%d}}'
    f_fmt = ('{"name":"HostToDevice%d","pid":%d,"tid":%d,"ph":"f","cat":"HostToDevice",'
             '"id":"%d","ts":' + ts + ',"bp":"e"}')
    flow_id = FlowIds()
    for rows in chunks:
        out = []
        for rel, d, stream, nm, task_id, model, tt, conn in rows:
            lt, fd = lanes.draw(stream, rel, rel + d)  # Ascend mode: tid = stream id
            q, r = divmod(rel, 1000)
            dq, dr = divmod(fd, 1000)
            out.append(task_fmt % (names[nm], pid, lt, q, r, dq, dr,
                                   INVALID if model is None else model, names[tt], stream,
                                   task_id))
            if conn is not None:
                big = conn << 32
                out.append(f_fmt % (big, pid, lt, flow_id(conn), q, r))
        ctx.w.write_events(out)
