"""Host-side summaries: api_statistic, acl_statistic (S2), msprof_tx, step_trace,
host_cpu_usage, host_mem_usage — docs/formats.md §4 and decisions 7, 12."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, NamedTuple

from openmsprof.export.fmt import INVALID, NA, id_or_na, ratio, us, us_avg
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import headers as H
from openmsprof.export.msprof import tx_lines_sql
from openmsprof.export.msprof.naming import HOST
from openmsprof.export.msprof.step_points import step_points, training_points
from openmsprof.export.msprof.tables import Num, Table, csv_fields
from openmsprof.parse import api_groups
from openmsprof.recorder.records import API_LEVEL_NAMES, ApiLevel, Series

_MASK32 = 0xFFFFFFFF
_DUR = "MAX(endNs - startNs, 0)"


def level_name(api_type: int) -> str:
    try:
        return API_LEVEL_NAMES[ApiLevel(api_type)]
    except ValueError:
        return "Api"


class ApiStat(NamedTuple):
    """One api_statistic group (times in ns, variance in µs²)."""

    level: str
    name: str
    total_ns: int
    calls: int
    min_ns: int
    max_ns: int
    variance_us2: float


def api_statistic_rows(db: JobDB) -> list[ApiStat]:
    """GROUP BY level and API name, total time descending (population variance in µs²)."""
    if not db.has("CANN_API"):
        return []
    sql = (f"SELECT type, name, SUM({_DUR}), COUNT(*), MIN({_DUR}), MAX({_DUR}),"
           f" TOTAL(({_DUR} / 1000.0) * ({_DUR} / 1000.0)) FROM CANN_API GROUP BY type, name")
    out = []
    for typ, name, tot, n, mn, mx, sq in db.query(sql):
        mean = tot / 1000.0 / n
        out.append(ApiStat(level_name(typ), db.text(name), tot, n, mn, mx,
                           max(0.0, sq / n - mean * mean)))
    out.sort(key=lambda s: (-s.total_ns, s.level, s.name))
    return out


def api_statistic(db: JobDB) -> Iterator[Table]:
    rows = [[HOST, s.level, s.name, Num(us(s.total_ns)), s.calls, Num(us_avg(s.total_ns, s.calls)),
             Num(us(s.min_ns)), Num(us(s.max_ns)), Num(f"{s.variance_us2:.3f}")]
            for s in api_statistic_rows(db)]
    if rows:
        yield Table("api_statistic", HOST, H.API_STATISTIC, rows)


def acl_statistic(db: JobDB) -> Iterator[Table]:
    """S2 layout per process/thread/type/name; written whenever API data exists (decision 7)."""
    if not db.has("CANN_API"):
        return
    types = dict(db.query("SELECT id, name FROM ENUM_API_TYPE")) if "ENUM_API_TYPE" in \
        db.tables else {}
    rows = acl_groups(db)
    total = sum(r[3] for r in rows)
    yield Table("acl_statistic", HOST, H.ACL_STATISTIC, [
        [g >> 32, g & _MASK32, types.get(typ) or level_name(typ), db.text(name),
         Num(ratio(tot, total)), Num(us(tot)), n, Num(us_avg(tot, n)), Num(us(mx)), Num(us(mn))]
        for g, typ, name, tot, n, mx, mn in rows])


def acl_groups(db: JobDB) -> list[tuple[Any, ...]]:
    """(globalTid, type, name, total, count, max, min) per group, total descending: the groups
    the import gathered when it ran in this process (:mod:`openmsprof.parse.api_groups`), else
    SQL's GROUP BY.  SQLite emits its groups in key order and its sorter keeps that order among
    equal totals (``test_acl_groups`` checks it against SQL on ties), hence the stable sort."""
    kept = api_groups.lookup(db.path)
    if kept is None:
        return db.query(f"SELECT globalTid, type, name, SUM({_DUR}), COUNT(*), MAX({_DUR}), MIN({_DUR})"
                        " FROM CANN_API GROUP BY globalTid, type, name ORDER BY 4 DESC")
    rows = [(*key, tot, n, mx, mn) for key, (n, tot, mx, mn) in sorted(kept.items())]
    rows.sort(key=lambda r: -r[3])
    return rows


def msprof_tx(db: JobDB) -> Iterator[Table]:
    """Markers and ranges, host-only rows (no device-side tx on these backends)."""
    if db.has("MSTX_EVENTS"):
        yield Table("msprof_tx", HOST, H.MSPROF_TX, _tx_rows(db), lambda: _tx_lines(db))


def _tx_lines(db: JobDB) -> Iterator[str]:
    """:func:`_tx_rows` as CSV lines (string columns rendered once per id combination), rendered
    by SQLite where it can (:mod:`tx_lines_sql`)."""
    lines = tx_lines_sql.tx_lines(db)
    if lines is not None:
        yield from lines
        return
    yield from _tx_lines_py(db)


def _tx_lines_py(db: JobDB) -> Iterator[str]:
    kinds = dict(db.query("SELECT id, name FROM ENUM_MSTX_EVENT_TYPE")) if \
        "ENUM_MSTX_EVENT_TYPE" in db.tables else {}
    sql = ("SELECT globalTid, category, eventType, startNs, endNs, message, domainId"
           " FROM MSTX_EVENTS ORDER BY startNs, endNs DESC")
    get = db.strings.get
    heads: dict[tuple[Any, ...], str] = {}
    tails: dict[tuple[Any, ...], str] = {}
    for g, cat, kind, s, e, msg, dom in db.stream(sql):
        e = max(e, s)
        hk = (g, cat, kind)
        head = heads.get(hk)
        if head is None:
            if len(heads) > 65536:
                heads.clear()
            head = heads[hk] = csv_fields([HOST, g >> 32, g & _MASK32, get(cat) or NA,
                                           kinds.get(kind, str(kind)), NA, NA]) + ","
        tk = (msg, dom)
        tail = tails.get(tk)
        if tail is None:
            if len(tails) > 65536:
                tails.clear()
            tail = tails[tk] = "," + csv_fields([NA, get(msg) or "", get(dom) or "default", NA, NA]) + "\n"
        if s < 0 or e < 0:
            yield f"{head}{us(s)},{us(e)}{tail}"
        else:
            yield f"{head}{s // 1000}.{s % 1000:03d},{e // 1000}.{e % 1000:03d}{tail}"


def _tx_rows(db: JobDB) -> Iterator[list[Any]]:
    kinds = dict(db.query("SELECT id, name FROM ENUM_MSTX_EVENT_TYPE")) if \
        "ENUM_MSTX_EVENT_TYPE" in db.tables else {}
    sql = ("SELECT globalTid, category, eventType, startNs, endNs, message, domainId"
           " FROM MSTX_EVENTS ORDER BY startNs, endNs DESC")
    get = db.strings.get  # db.text inlined (ids are ints or NULL)
    for g, cat, kind, s, e, msg, dom in db.stream(sql):
        e = max(e, s)
        yield [HOST, g >> 32, g & _MASK32, get(cat) or NA, kinds.get(kind, str(kind)), NA, NA,
               us(s) if s < 0 else f"{s // 1000}.{s % 1000:03d}", us(e) if e < 0 else f"{e // 1000}.{e % 1000:03d}",
               NA, get(msg) or "", get(dom) or "default", NA, NA]


def step_trace(db: JobDB) -> Iterator[Table]:
    """Per device: FP/BP are N/A (no fp/bp points on these backends); Iteration Time =
    End(i) − End(i−1) (first: End − start) for model steps, the step's own duration for
    framework steps (modelId 4294967295, decision 12)."""
    if not db.has("STEP_TIME"):
        return
    for (dev,) in db.query("SELECT DISTINCT deviceId FROM STEP_TIME ORDER BY deviceId"):
        yield Table("step_trace", dev, H.STEP_TRACE, _step_rows(db, dev))


def _step_rows(db: JobDB, dev: int) -> Iterator[list[Any]]:
    sql = ("SELECT id, startNs, endNs, modelId FROM STEP_TIME WHERE deviceId = ?"
           " ORDER BY modelId, startNs, id")
    prev_end: dict[int, int] = {}
    rows = db.query(sql, (dev,))
    points = training_points(db)
    fpbp = step_points(db, [(s, s, max(e, s)) for _i, s, e, m in rows if m in (None, INVALID)],
                       points) if points is not None else {}
    cell: int | str = HOST if dev < 0 else dev  # host steps say "host" like every host file
    for step, s, e, model in rows:
        e = max(e, s)
        if model is None or model == INVALID:
            it = e - s
        else:
            it = e - prev_end.get(model, s)
            prev_end[model] = e
        if s in fpbp:  # training_trace: FP/BP columns, empty where a point was not found
            yield [cell, step, *_fpbp_cells(fpbp[s], s, e, prev_end.get(-1, s)), Num(us(it)),
                   *_fpbp_spans(fpbp[s], s, e, prev_end.get(-1, s)), id_or_na(model)]
            prev_end[-1] = e
            continue
        yield [cell, step, NA, NA, us(e), Num(us(it)), NA, NA, NA, id_or_na(model)]


def _fpbp_cells(p: tuple[int | None, int | None], s: int, e: int, prev: int) -> list[str]:
    """FP Start, BP End, Iteration End ("" for a point not found, seed 003)."""
    fp, bp = p
    return ["" if fp is None else us(fp), "" if bp is None else us(bp), us(e)]


def _fpbp_spans(p: tuple[int | None, int | None], s: int, e: int, prev: int) -> list[Any]:
    """FP to BP Time, Iteration Refresh (BP End → Iteration End), Data Aug Bound (previous
    iteration end, or this one's start, → FP Start)."""
    fp, bp = p
    fp_bp = "" if fp is None or bp is None else Num(us(max(bp - fp, 0)))
    refresh = "" if bp is None else Num(us(max(e - bp, 0)))
    aug = "" if fp is None else Num(us(max(fp - prev, 0)))
    return [fp_bp, refresh, aug]


def _counter_max(db: JobDB, series: Series) -> float | None:
    if "OMSP_COUNTER" not in db.tables:
        return None
    (v,) = db.query("SELECT MAX(value) FROM OMSP_COUNTER WHERE series = ? AND deviceId < 0",
                    (int(series),))[0]
    return None if v is None else float(v)


def host_cpu_usage(db: JobDB) -> Iterator[Table]:
    """Total = CPUs sampled (else info.json cpuNums); Occupied = CPUs' worth of work at the peak
    of whole-machine usage, rounded up; Recommend = Occupied + 1, at most Total (ours)."""
    if not db.has("CPU_USAGE"):
        return
    (n_cpu, peak), = db.query("SELECT COUNT(DISTINCT CASE WHEN cpuId >= 0 THEN cpuId END),"
                              " MAX(CASE WHEN cpuId < 0 THEN usage END) FROM CPU_USAGE")
    total = int(n_cpu) or int(db.info_json().get("cpuNums") or 0)
    if peak is None:
        (peak,), = db.query("SELECT MAX(usage) FROM CPU_USAGE")
    occupied = min(total, math.ceil(float(peak or 0.0) * total / 100.0 - 1e-9)) if total else 0
    yield Table("host_cpu_usage", HOST, H.HOST_CPU_USAGE,
                [[HOST, total, occupied, min(total, occupied + 1)]])


def host_mem_usage(db: JobDB) -> Iterator[Table]:
    """Total from the sampled MemTotal (else info.json memoryTotal); Peak Used from the sampled
    used KB (else peak % × total); Recommend = 1.2 × peak, at most Total (ours)."""
    used = _counter_max(db, Series.SYS_MEM_USED_KB)
    if not db.has("HOST_MEM_USAGE") and used is None:
        return
    total = _counter_max(db, Series.SYS_MEM_TOTAL_KB) or float(
        db.info_json().get("memoryTotal") or 0)
    if used is None:
        (pct,), = db.query("SELECT MAX(usage) FROM HOST_MEM_USAGE")
        used = float(pct or 0.0) * total / 100.0
    peak = round(used)
    yield Table("host_mem_usage", HOST, H.HOST_MEM_USAGE,
                [[HOST, round(total), peak, min(round(total), math.ceil(peak * 1.2))]])


def _process_rows(db: JobDB, series: Series, digits: int) -> list[list[Any]]:
    if "OMSP_COUNTER" not in db.tables:
        return []
    rows = db.query("SELECT subIndex, AVG(value), MAX(value), COUNT(*) FROM OMSP_COUNTER WHERE series = ?"
                    " AND deviceId < 0 AND subIndex > 0 GROUP BY subIndex ORDER BY subIndex", (int(series),))
    return [[HOST, int(pid), Num(f"{avg:.{digits}f}"), Num(f"{peak:.{digits}f}"), int(n)]
            for pid, avg, peak, n in rows]


def host_process_cpu_usage(db: JobDB) -> Iterator[Table]:
    """Per sampled process (the profiled one and its descendants), its CPU in % of one core."""
    rows = _process_rows(db, Series.PROC_CPU_PERCENT, 3)
    if rows:
        yield Table("host_process_cpu_usage", HOST, H.HOST_PROCESS_CPU_USAGE, rows)


def host_process_mem_usage(db: JobDB) -> Iterator[Table]:
    """Per sampled process, its resident memory (RSS) in KB."""
    rows = _process_rows(db, Series.PROC_RSS_KB, 0)
    if rows:
        yield Table("host_process_mem_usage", HOST, H.HOST_PROCESS_MEM_USAGE, rows)
