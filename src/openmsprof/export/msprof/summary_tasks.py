"""Task-derived summaries: op_summary, task_time, op_statistic (+ S2 form) — docs/formats.md §4.

Statistics are SQL ``GROUP BY`` queries; per-row files stream from one ordered query.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from openmsprof.export.fmt import NA, id_or_na, ratio, us, us_avg
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import headers as H
from openmsprof.export.msprof.op_cost_columns import cost_columns
from openmsprof.export.msprof.tables import Num, Table, csv_fields

_JOIN = "LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"


def task_devices(db: JobDB) -> list[int]:
    if not db.has("TASK"):
        return []
    return [r[0] for r in db.query("SELECT DISTINCT deviceId FROM TASK ORDER BY deviceId")]


def _has_info(db: JobDB) -> bool:
    return db.has("COMPUTE_TASK_INFO")


def _c(db: JobDB, col: str) -> str:
    """``c.col`` when COMPUTE_TASK_INFO exists, else NULL (names fall back to N/A)."""
    return f"c.{col}" if "COMPUTE_TASK_INFO" in db.tables else "NULL"


def _from(db: JobDB) -> str:
    return "TASK t " + (_JOIN if "COMPUTE_TASK_INFO" in db.tables else "")


def op_summary(db: JobDB) -> Iterator[Table]:
    """One op_summary per device; tensor columns when COMPUTE_TASK_INFO has rows."""
    tensor = _has_info(db)
    header = H.OP_SUMMARY + (H.OP_SUMMARY_TENSOR + H.OP_SUMMARY_COST if tensor else [])
    for dev in task_devices(db):
        yield Table("op_summary", dev, header, _op_summary_rows(db, dev, tensor),
                    lambda dev=dev: _op_summary_lines(db, dev, tensor))  # type: ignore[misc]


def _op_summary_rows(db: JobDB, dev: int, tensor: bool) -> Iterator[list[Any]]:
    c = lambda col: _c(db, col)  # noqa: E731
    sql = (f"SELECT t.modelId, t.taskId, t.streamId, {c('name')}, {c('opType')}, {c('opState')},"
           f" t.taskType, t.startNs, t.endNs, {c('blockNum')}, {c('mixBlockNum')},"
           f" {c('hf32Eligible')}, {c('inputShapes')}, {c('inputDataTypes')},"
           f" {c('inputFormats')}, {c('outputShapes')}, {c('outputDataTypes')},"
           f" {c('outputFormats')}, t.contextId FROM {_from(db)} WHERE t.deviceId = ?"
           " ORDER BY t.startNs, t.taskId")
    text = db.text
    cost = cost_columns(db) if tensor else None
    prev_end: int | None = None
    # The string columns of a row depend only on its ids, which repeat (one set per op of a
    # model / graph): resolved once per distinct set.
    named: dict[tuple[Any, ...], tuple[list[Any], list[Any]]] = {}
    for row in db.conn.execute(sql, (dev,)):
        (model, task_id, stream, name, op_type, state, tt, s, e, block, mix, hf32,
         ishape, idt, ifmt, oshape, odt, ofmt, ctx_id) = row
        e = max(e, s)
        wait = 0 if prev_end is None else max(0, s - prev_end)
        prev_end = e  # docs/formats.md §4: start_i - start_{i-1} - dur_{i-1}
        key = (name, op_type, state, tt, block, mix, hf32, ishape, idt, ifmt, oshape, odt,
               ofmt, ctx_id)
        parts = named.get(key)
        if parts is None:
            executor = text(tt)
            tail: list[Any] = []
            if tensor:
                cpu = executor == "CPU"  # decision 9: no CPU analogue
                tail = [NA if cpu else id_or_na(block), NA if cpu else id_or_na(mix), text(hf32),
                        text(ishape), text(idt), text(ifmt), text(oshape), text(odt), text(ofmt),
                        NA if cpu else id_or_na(ctx_id)]
                tail += cost(op_type, ishape, idt, oshape, odt)  # type: ignore[misc]
            parts = named[key] = ([text(name), text(op_type), text(state), executor], tail)
        yield [dev, id_or_na(model), task_id, stream, *parts[0], us(s), Num(us(e - s)),
               Num(us(wait)), *parts[1]]


def _op_summary_sql(db: JobDB) -> str:
    c = lambda col: _c(db, col)  # noqa: E731
    return (f"SELECT t.modelId, t.taskId, t.streamId, {c('name')}, {c('opType')}, {c('opState')},"
            f" t.taskType, t.startNs, t.endNs, {c('blockNum')}, {c('mixBlockNum')},"
            f" {c('hf32Eligible')}, {c('inputShapes')}, {c('inputDataTypes')},"
            f" {c('inputFormats')}, {c('outputShapes')}, {c('outputDataTypes')},"
            f" {c('outputFormats')}, t.contextId FROM {_from(db)} WHERE t.deviceId = ?"
            " ORDER BY t.startNs, t.taskId")


def _op_summary_lines(db: JobDB, dev: int, tensor: bool) -> Iterator[str]:
    """:func:`_op_summary_rows` as CSV lines: the string columns of a row are rendered once per
    distinct id combination (cached), the numbers formatted in one f-string per row."""
    get = db.strings.get
    cost = cost_columns(db) if tensor else None
    heads: dict[tuple[Any, ...], tuple[str, str]] = {}
    tails: dict[tuple[Any, ...], str] = {}
    prev_end: int | None = None
    for row in db.conn.execute(_op_summary_sql(db), (dev,)):
        model, task_id, stream, name, op_type, state, tt, s, e = row[:9]
        e = max(e, s)
        d = e - s
        wait = 0 if prev_end is None else max(0, s - prev_end)
        prev_end = e
        hk = (model, stream, name, op_type, state, tt)
        head = heads.get(hk)
        if head is None:
            if len(heads) > 65536:
                heads.clear()
            head = heads[hk] = (csv_fields([dev, id_or_na(model)]) + ",", "," + csv_fields(
                [stream, get(name) or NA, get(op_type) or NA, get(state) or NA, get(tt) or NA]) + ",")
        pre, post = head
        tid = "" if task_id is None else task_id
        tail = ""
        if tensor:
            tk = (tt, op_type, *row[9:])
            tail = tails.get(tk)  # type: ignore[assignment]
            if tail is None:
                if len(tails) > 65536:
                    tails.clear()
                block, mix, hf32, ishape, idt, ifmt, oshape, odt, ofmt, ctx_id = row[9:]
                cpu = (get(tt) or NA) == "CPU"  # decision 9: no CPU analogue
                tail = tails[tk] = "," + csv_fields([
                    NA if cpu else id_or_na(block), NA if cpu else id_or_na(mix), get(hf32) or NA,
                    get(ishape) or NA, get(idt) or NA, get(ifmt) or NA, get(oshape) or NA,
                    get(odt) or NA, get(ofmt) or NA, NA if cpu else id_or_na(ctx_id),
                    *cost(op_type, ishape, idt, oshape, odt)])  # type: ignore[misc]
        if s < 0:
            yield f"{pre}{tid}{post}{us(s)},{us(d)},{us(wait)}{tail}\n"
        else:
            yield (f"{pre}{tid}{post}{s // 1000}.{s % 1000:03d},"
                   f"{d // 1000}.{d % 1000:03d},{wait // 1000}.{wait % 1000:03d}{tail}\n")


def task_time(db: JobDB) -> Iterator[Table]:
    for dev in task_devices(db):
        yield Table("task_time", dev, H.TASK_TIME, _task_time_rows(db, dev),
                    lambda dev=dev: _task_time_lines(db, dev))  # type: ignore[misc]


def _task_time_lines(db: JobDB, dev: int) -> Iterator[str]:
    """:func:`_task_time_rows` as CSV lines (string columns rendered once per id combination)."""
    sql = (f"SELECT {_c(db, 'name')}, t.taskType, t.streamId, t.taskId, t.startNs, t.endNs"
           f" FROM {_from(db)} WHERE t.deviceId = ? ORDER BY t.startNs, t.taskId")
    get = db.strings.get
    heads: dict[tuple[Any, ...], str] = {}
    for name, tt, stream, task_id, s, e in db.conn.execute(sql, (dev,)):
        e = max(e, s)
        d = e - s
        key = (name, tt, stream)
        head = heads.get(key)
        if head is None:
            if len(heads) > 65536:
                heads.clear()
            head = heads[key] = csv_fields([dev, get(name) or NA, get(tt) or NA, stream]) + ","
        tid = "" if task_id is None else task_id
        if s < 0:
            yield f"{head}{tid},{us(d)},{us(s)},{us(e)}\n"
        else:
            yield (f"{head}{tid},{d // 1000}.{d % 1000:03d},{s // 1000}.{s % 1000:03d},"
                   f"{e // 1000}.{e % 1000:03d}\n")


def _task_time_rows(db: JobDB, dev: int) -> Iterator[list[Any]]:
    sql = (f"SELECT {_c(db, 'name')}, t.taskType, t.streamId, t.taskId, t.startNs, t.endNs"
           f" FROM {_from(db)} WHERE t.deviceId = ? ORDER BY t.startNs, t.taskId")
    get = db.strings.get
    for name, tt, stream, task_id, s, e in db.conn.execute(sql, (dev,)):
        e = max(e, s)
        d = e - s
        if s < 0:
            yield [dev, get(name) or NA, get(tt) or NA, stream, task_id, Num(us(d)), us(s), us(e)]
        else:
            yield [dev, get(name) or NA, get(tt) or NA, stream, task_id, Num(f"{d // 1000}.{d % 1000:03d}"),
                   f"{s // 1000}.{s % 1000:03d}", f"{e // 1000}.{e % 1000:03d}"]


class OpStat(NamedTuple):
    """One op_statistic group (times in ns)."""

    dev: int
    op_type: str
    core_type: str
    calls: int
    total_ns: int
    min_ns: int
    max_ns: int
    ratio: float


def op_statistic_rows(db: JobDB) -> list[OpStat]:
    """GROUP BY device, op type and executor; sorted by device then total time descending."""
    if not db.has("TASK"):
        return []
    sql = (f"SELECT t.deviceId, {_c(db, 'opType')}, t.taskType, COUNT(*),"
           " SUM(MAX(t.endNs - t.startNs, 0)), MIN(MAX(t.endNs - t.startNs, 0)),"
           f" MAX(t.endNs - t.startNs) FROM {_from(db)}"
           f" GROUP BY t.deviceId, {_c(db, 'opType')}, t.taskType")
    rows = db.query(sql)
    totals: dict[int, int] = {}
    for r in rows:
        totals[r[0]] = totals.get(r[0], 0) + r[4]
    out = [OpStat(d, db.text(op), db.text(tt), n, tot, mn, max(mx, 0),
                  100.0 * tot / totals[d] if totals[d] else 0.0)
           for d, op, tt, n, tot, mn, mx in rows]
    out.sort(key=lambda s: (s.dev, -s.total_ns, s.op_type))
    return out


def op_statistic(db: JobDB) -> Iterator[Table]:
    return op_statistic_tables(op_statistic_rows(db))


def op_statistic_tables(stats: list[OpStat]) -> Iterator[Table]:
    """op_statistic_rows' rows as one table per device."""
    for dev in sorted({s.dev for s in stats}):
        rows = [[s.dev, s.op_type, s.core_type, s.calls, Num(us(s.total_ns)), Num(us(s.min_ns)),
                 Num(us_avg(s.total_ns, s.calls)), Num(us(s.max_ns)), Num(f"{s.ratio:.3f}")]
                for s in stats if s.dev == dev]
        yield Table("op_statistic", dev, H.OP_STATISTIC, rows)


def op_statistic_s2(db: JobDB) -> Iterator[Table]:
    """The S2 (SVP) layout: per operator name, ratio of the device's total task time."""
    for dev in task_devices(db):
        sql = (f"SELECT MIN(t.taskId), MIN(t.streamId), {_c(db, 'name')}, t.taskType,"
               " SUM(MAX(t.endNs - t.startNs, 0)), COUNT(*), MAX(t.endNs - t.startNs),"
               f" MIN(MAX(t.endNs - t.startNs, 0)) FROM {_from(db)} WHERE t.deviceId = ?"
               f" GROUP BY {_c(db, 'name')}, t.taskType ORDER BY 5 DESC")
        rows = db.query(sql, (dev,))
        total = sum(r[4] for r in rows)
        yield Table("op_statistic_s2", dev, H.OP_STATISTIC_S2, [
            [tid, sid, db.text(name), db.text(tt), Num(ratio(tot, total)), Num(us(tot)), n,
             Num(us_avg(tot, n)), Num(us(max(mx, 0))), Num(us(mn))]
            for tid, sid, name, tt, tot, n, mx, mn in rows])
