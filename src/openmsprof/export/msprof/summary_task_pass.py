"""op_summary, task_time and op_statistic of every device from ONE ordered task query per device, optionally
with their tool-facing twins (``mindstudio_profiler_output/{name}_{ts}.csv``: the same rows with
the task types of ``msprof_{ts}.db``) written in the same pass.

The bytes are those of the separate producers (``summary_tasks._op_summary_lines`` /
``_task_time_lines``) on the job db and on the tool-facing db: string columns are rendered once
per distinct id combination, the µs columns once per row for all four files.  What a twin
changes is the Task Type text of tasks that have a COMPUTE_TASK_INFO row (read from the
tool-facing db itself, :func:`twin_types`) and, in op_summary, the columns that decision 9 writes
``N/A`` for CPU tasks.

The per-row loop runs in C (``_task_lines.c``, built by pip with the system compiler) up to the
rows it leaves to the Python loop here (negative or non-integer times, non-integer task ids, a
wait past 64 bits); without the extension the Python loop renders every row.  Same bytes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from openmsprof.export.fmt import NA, id_or_na, us
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import headers as H
from openmsprof.export.msprof import op_stat_pass
from openmsprof.export.msprof.op_cost_columns import cost_columns
from openmsprof.export.msprof.summary_tasks import (
    _c,
    _from,
    _has_info,
    op_statistic,
    op_statistic_tables,
    task_devices,
)
from openmsprof.export.msprof.tables import LineSlices, Table, csv_fields, write_table

__all__ = ["TABLES", "Twins", "twin_types", "write_task_tables"]

TABLES = ("op_summary", "task_time", "op_statistic")
_native: Any
try:  # the per-row loop in C (built by pip with the system compiler); this module's loop otherwise
    _native = importlib.import_module("openmsprof.export.msprof._task_lines")
except ImportError:  # pragma: no cover - depends on the build
    _native = None
_CHUNK = 10_000
#: op_statistic groups (head keys) gathered per device at most; past it the SQL route is taken
GROUPS_MAX = 262_144


@dataclass
class Twins:
    """Where the twins go and the tool-facing Task Type text per (opType id, name id)."""

    out_dir: Path
    stamp: str
    #: or how to read them from the job db (run by whoever renders first: the forked child)
    types: dict[tuple[Any, Any], str] | Callable[[JobDB], dict[tuple[Any, Any], str]]
    #: filled by ``summary.write_summary``: the twins' paths by table name
    written: dict[str, list[Path]] = field(default_factory=dict)


    def task_types(self, db: JobDB) -> dict[tuple[Any, Any], str]:
        """:attr:`types`, read from the job db ``db`` on first use when given as a function."""
        if callable(self.types):
            self.types = self.types(db)
        return self.types


def twin_types(tool_db: JobDB) -> dict[tuple[Any, Any], str] | None:
    """(opType, name) → the Task Type text the tool-facing db gives its tasks; None when a pair
    has more than one (then the twins are rendered from that db instead)."""
    if "COMPUTE_TASK_INFO" not in tool_db.tables or "TASK" not in tool_db.tables:
        return {}
    get = tool_db.strings.get
    out: dict[tuple[Any, Any], str] = {}
    for op, name, tt in tool_db.query(
            "SELECT DISTINCT c.opType, c.name, t.taskType FROM TASK t"
            " JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"):
        text = get(tt) or NA
        if out.setdefault((op, name), text) != text:
            return None
    return out


def write_task_tables(db: JobDB, out_dir: Path, twins: Twins | None = None) -> dict[str, list[Path]]:
    """Write op_summary_{dev}.csv and task_time_{dev}.csv of every device (and the twins, each
    one file over all devices, slices named as ``write_table`` names them); returns the paths
    by table name (twins under ``tool_facing_{name}``).  op_statistic (and its twin) come from
    the same pass (:mod:`op_stat_pass`); where that cannot be sure of the SQL route's order, the
    job's is queried here and the twin is left out (the caller renders it from its db)."""
    tensor = _has_info(db)
    header = H.OP_SUMMARY + (H.OP_SUMMARY_TENSOR + H.OP_SUMMARY_COST if tensor else [])
    sinks: list[LineSlices] = []
    twin_sinks: list[LineSlices] = []
    paths: dict[str, list[Path]] = {}
    types = twins.task_types(db) if twins is not None else None
    groups: op_stat_pass.Groups = {}
    complete = True
    try:
        if twins is not None:
            twin_sinks = [LineSlices(twins.out_dir, "op_summary", twins.stamp, header),
                          LineSlices(twins.out_dir, "task_time", twins.stamp, H.TASK_TIME)]
        for dev in task_devices(db):
            sinks = [LineSlices(out_dir, "op_summary", dev, header), LineSlices(out_dir, "task_time", dev, H.TASK_TIME)]
            complete &= _device_pass(db, dev, tensor, sinks, twin_sinks, types,
                                     groups.setdefault(dev, {}))
            for name, sink in zip(TABLES, sinks, strict=False):
                paths.setdefault(name, []).extend(sink.finish())
            sinks = []
        for name, sink in zip(TABLES, twin_sinks, strict=False):
            paths[f"tool_facing_{name}"] = sink.finish()
    except BaseException:
        for sink in sinks + twin_sinks:
            sink.abort()
        raise
    stats = op_stat_pass.job_stats(groups, db.text) if complete else None
    tables = op_statistic(db) if stats is None else op_statistic_tables(stats)
    paths["op_statistic"] = [p for t in tables for p in write_table(out_dir, t, "csv")]
    tw = op_stat_pass.twin_stats(groups, db.text, types) if types is not None and complete else None
    if twins is not None and tw:
        rows = [row for t in op_statistic_tables(tw) for row in t.rows]
        paths["tool_facing_op_statistic"] = write_table(
            twins.out_dir, Table("op_statistic", twins.stamp, H.OP_STATISTIC, rows), "csv")
    return paths


def _device_pass(db: JobDB, dev: int, tensor: bool, sinks: list[LineSlices], twin_sinks: list[LineSlices],
                 types: dict[tuple[Any, Any], str] | None, groups: dict[tuple[Any, ...], list[int]]) -> bool:
    """One device's lines; ``groups`` gathers op_statistic's (returns False, ``groups`` emptied,
    when there were more than :data:`GROUPS_MAX`: memory stays bounded, the caller uses SQL)."""
    c = lambda col: _c(db, col)  # noqa: E731
    # row[3:10]: the head key (what the string columns before the times depend on, with "has a
    # COMPUTE_TASK_INFO row"); row[10:21]: the tail key (opType again, the tensor columns, contextId)
    sql = (f"SELECT t.startNs, t.endNs, t.taskId, t.modelId, t.streamId, {c('name')}, {c('opType')},"
           f" {c('opState')}, t.taskType, {c('globalTaskId')} IS NOT NULL, {c('opType')}, {c('blockNum')},"
           f" {c('mixBlockNum')}, {c('hf32Eligible')}, {c('inputShapes')}, {c('inputDataTypes')},"
           f" {c('inputFormats')}, {c('outputShapes')}, {c('outputDataTypes')}, {c('outputFormats')},"
           f" t.contextId FROM {_from(db)} WHERE t.deviceId = ? ORDER BY t.startNs, t.taskId")
    get = db.strings.get
    cost = cost_columns(db) if tensor else None
    twin = types is not None
    # head key → (job pieces, job Task Type is CPU, twin pieces, twin is CPU, twin lines equal)
    heads: dict[tuple[Any, ...], tuple[tuple[str, str, str], bool, tuple[str, str, str], bool, bool]] = {}
    tails: tuple[dict[tuple[Any, ...], str], dict[tuple[Any, ...], str]] = ({}, {})  # by "is CPU"
    dev_head = csv_fields([dev]) + ","

    def pieces(model: Any, stream: Any, name: Any, op_type: Any, state: Any, tt_text: str) -> tuple[str, str, str]:
        return (csv_fields([dev, id_or_na(model)]) + ",",
                "," + csv_fields([stream, get(name) or NA, get(op_type) or NA, get(state) or NA, tt_text]) + ",",
                dev_head + csv_fields([get(name) or NA, tt_text, stream]) + ",")

    def head(key: tuple[Any, ...]) -> tuple[tuple[str, str, str], bool, tuple[str, str, str], bool, bool]:
        if len(heads) > 65536:
            heads.clear()
        model, stream, name, op_type, state, tt, has_info = key
        tt_text = get(tt) or NA
        tw_text = types.get((op_type, name), NA) if twin and has_info else tt_text  # type: ignore[union-attr]
        mine = pieces(model, stream, name, op_type, state, tt_text)
        theirs = mine if tw_text == tt_text else pieces(model, stream, name, op_type, state, tw_text)
        h = heads[key] = (mine, tt_text == "CPU", theirs, tw_text == "CPU", tw_text == tt_text)
        return h

    def tail(cpu: bool, key: tuple[Any, ...]) -> str:
        cache = tails[cpu]
        if len(cache) > 65536:
            cache.clear()
        op_type, block, mix, hf32, ishape, idt, ifmt, oshape, odt, ofmt, ctx_id = key
        # decision 9: no CPU analogue
        t = cache[key] = "," + csv_fields([
            NA if cpu else id_or_na(block), NA if cpu else id_or_na(mix), get(hf32) or NA,
            get(ishape) or NA, get(idt) or NA, get(ifmt) or NA, get(oshape) or NA,
            get(odt) or NA, get(ofmt) or NA, NA if cpu else id_or_na(ctx_id),
            *cost(op_type, ishape, idt, oshape, odt)])  # type: ignore[misc]
        return t

    tails_job = tails[False].get
    tails_cpu = tails[True].get
    heads_get = heads.get
    group_get = groups.get
    complete = True
    ops: list[str] = []
    times: list[str] = []
    twin_ops: list[str] = []
    twin_times: list[str] = []
    prev_end: int | None = None
    cur = iter(db.stream(sql, (dev,)))  # apsw: about three times faster per row than sqlite3
    native = _native.render if _native is not None else None
    ctx = (heads, head, tails[False], tails[True], tail, groups, GROUPS_MAX, tensor, twin)
    blocks: list[list[bytes]] = [[], [], [], []]  # with ``native``: the chunk's lines as UTF-8
    while rows := list(islice(cur, _CHUNK)):
        i = 0
        while i < len(rows):
            if native is not None:  # the same lines up to a row it leaves to the loop below
                i, prev_end, complete, *out = native(rows, i, prev_end, complete, ctx)
                for block, data in zip(blocks, out, strict=True):
                    block.append(data)
                todo, i = rows[i:i + 1], i + 1
            else:
                todo, i = rows, len(rows)
            for row in todo:
                s, e, task_id = row[0], row[1], row[2]
                if e < s:
                    e = s
                d = e - s
                wait = 0 if prev_end is None or s <= prev_end else s - prev_end
                prev_end = e
                if s < 0:
                    st, du, wt, en = us(s), us(d), us(wait), us(e)
                else:
                    st, du, wt, en = (f"{s // 1000}.{s % 1000:03d}", f"{d // 1000}.{d % 1000:03d}",
                                      f"{wait // 1000}.{wait % 1000:03d}", f"{e // 1000}.{e % 1000:03d}")
                tid = "" if task_id is None else task_id
                hk = row[3:10]
                h = heads_get(hk) or head(hk)
                g = group_get(hk)
                if g is None:
                    if complete and len(groups) < GROUPS_MAX:
                        groups[hk] = [1, d, d, d]
                    elif complete:
                        complete = False
                        groups.clear()
                else:
                    g[0] += 1
                    g[1] += d
                    if d < g[2]:
                        g[2] = d
                    if d > g[3]:
                        g[3] = d
                (pre, post, tth), cpu = h[0], h[1]
                nums = f"{st},{du},{wt}"
                if tensor:
                    tk = row[10:21]
                    tl = (tails_cpu(tk) if cpu else tails_job(tk)) or tail(cpu, tk)
                    ops.append(f"{pre}{tid}{post}{nums}{tl}\n")
                else:
                    ops.append(f"{pre}{tid}{post}{nums}\n")
                times.append(f"{tth}{tid},{du},{st},{en}\n")
                if twin:
                    if h[4]:
                        twin_ops.append(ops[-1])
                        twin_times.append(times[-1])
                    else:
                        (pre, post, tth), cpu = h[2], h[3]
                        if tensor:
                            tl = (tails_cpu(tk) if cpu else tails_job(tk)) or tail(cpu, tk)
                            twin_ops.append(f"{pre}{tid}{post}{nums}{tl}\n")
                        else:
                            twin_ops.append(f"{pre}{tid}{post}{nums}\n")
                        twin_times.append(f"{tth}{tid},{du},{st},{en}\n")
            if native is not None and todo:
                for block, lines in zip(blocks, (ops, times, twin_ops, twin_times), strict=True):
                    block.append("".join(lines).encode())
                    lines.clear()
        if native is None:
            _flush(sinks, twin_sinks, ops, times, twin_ops, twin_times)
            ops, times, twin_ops, twin_times = [], [], [], []
        else:
            for sink, block in zip(sinks + twin_sinks, blocks, strict=False):
                sink.add_block(b"".join(block), len(rows))
            for block in blocks:
                block.clear()
    return complete


def _flush(sinks: list[LineSlices], twin_sinks: list[LineSlices], *chunks: list[str]) -> None:
    for sink, lines in zip(sinks + twin_sinks, chunks, strict=False):
        if lines:
            sink.add(lines)
