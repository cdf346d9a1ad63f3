"""Summary CSVs of ASCEND_PROFILER_OUTPUT: kernel_details, operator_details, op_statistic,
api_statistic, step_trace_time (docs/formats.md §4 headers, decisions 1, 4 and 9).

Large tables are streamed in chunks; each row is one ``%`` template over numpy-prepared columns
with texts pre-encoded the way ``csv.writer`` encodes them, so the bytes match ``csv.writer``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from openmsprof.export import classify
from openmsprof.export.ascend_pt import summary_cols, text
from openmsprof.export.ascend_pt.cost_cells import cost_column
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.export.ascend_pt.overlap import STEP_TRACE_HEADER, Overlap, step_rows
from openmsprof.export.ascend_pt.text import chunks, csv_field, csv_texts, join
from openmsprof.export.ascend_pt.trace_view import step_of
from openmsprof.export.msprof.op_cost_columns import COST_COLUMNS

NA = "N/A"
KD_L0 = ["Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)",
         "Block Num"]
KD_FULL = ["Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
           "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Num", "Mix Block Num", "HF32 Eligible"]
SHAPE_COLS = ["Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
              "Output Formats"]
OPERATOR_DETAILS = ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                    "Device Self Duration(us)", "Device Total Duration(us)",
                    "Device Self Duration With AICore(us)", "Device Total Duration With AICore(us)"]
OP_STATISTIC = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                "Max Time(us)", "Ratio(%)"]
API_STATISTIC = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)",
                 "Variance"]
#: the real hardware beside the Ascend engine class (``classify``; docs/formats.md)
EXECUTOR = "Executor"
#: ``%t``: µs text of a ns column (``text.join``); ``{ex}``: the executor's CSV text
_KD_L0 = b"%b{dev},%b,%b,%b,%t\t,%t,%t,N/A,%b,%b,N/A,N/A,N/A,N/A,{ex},%b\n"
_KD_FULL = (b"%b{dev},4294967295,%d,%d,%b,%b,%b,%b,%t\t,%t,%t,N/A,N/A,N/A,%b,%b,N/A,N/A,N/A,N/A,N/A,"
            b"%b,%b,{ex},%b\n")
#: engine-class time columns (Level1+): the task's whole duration booked to the engine class of
#: ``classify`` — ``aicore_time(us)`` for AI_CORE (matrix) tasks, ``aiv_vec_time(us)`` for
#: AI_VECTOR_CORE tasks, 0 for the other class, N/A for communication / memory copies.  Not a
#: hardware counter (docs/formats.md); msprof-analyze needs them to split Cube/Vector time.
ENGINE_COLS = ["aicore_time(us)", "aiv_vec_time(us)"]
_OPD = b"%b,%b,%b,%t,%t,%t,%t,0.000,0.000\n"


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    text.write_stream(path, [text.csv_lines([header, *rows])])


#: the largest vocabulary whose texts are kept between windows (bounded memory)
_VOCAB_KEPT_MAX = 1 << 16
#: _shape_texts' answers by shape vocabulary: the same shapes window after window
_shapes_kept: dict[tuple[tuple[str, str], ...], tuple[list[bytes], list[bytes]]] = {}
_SHAPES_KEPT = 8


def _shape_texts(fw: Framework) -> tuple[list[bytes], list[bytes]]:
    """CSV texts of (input shapes or N/A, input dtypes or N/A) per shape code (kept lists: read only)."""
    key = tuple(fw.cols.shapes.items)
    hit = _shapes_kept.get(key)
    if hit is None:
        hit = (csv_texts([s or NA for s, _t in key]), csv_texts([t or NA for _s, t in key]))
        if len(key) <= _VOCAB_KEPT_MAX:
            if len(_shapes_kept) >= _SHAPES_KEPT:
                _shapes_kept.clear()
            _shapes_kept[key] = hit
    return hit


_KD_HEADERS: dict[tuple[bool, bool], tuple[str, ...]] = {}


def _kd_header(steps: bool, full: bool) -> bytes:
    key = (steps, full)
    if key not in _KD_HEADERS:
        header = (["Step Id"] if steps else []) + (KD_FULL if full else KD_L0) + SHAPE_COLS
        if full:
            header += ["Context ID", *ENGINE_COLS]
        _KD_HEADERS[key] = (*header, EXECUTOR, *COST_COLUMNS)
    return text.header_line(_KD_HEADERS[key])


@lru_cache(maxsize=64)
def _kd_template(full: bool, device_id: int, executor: str) -> bytes:
    """The row template of one device and executor (the same on every row: baked in, a % escaped)."""
    ex = csv_texts([executor])[0].replace(b"%", b"%%")
    return text.literal(_KD_FULL if full else _KD_L0, dev=device_id).replace(b"{ex}", ex)


def kernel_details(path: Path, fw: Framework, device_id: int, full: bool) -> None:
    k = fw.kernels
    n = len(k)
    ts, dur = k.ts, k.dur
    wait, shape, step = summary_cols.kernel_codes(ts, dur, k.op, fw.cols.op_shape, fw.steps)
    facts = _name_facts(k.names)
    names, types, cores = facts.texts, facts.types, csv_texts(k.cores)
    shp_t, typ_t = _shape_texts(fw)
    template = _kd_template(full, device_id, k.executor)
    pre = (step, [b",", *(b"%d," % s[0] for s in fw.steps)] if fw.steps else [b""])
    cost = cost_column(fw, k.names, k.name, shape)
    if full:
        states = csv_texts(fw.op_states())
        cube, vec = _engine_texts(k.core, dur)
        cols: list[text.Column] = [pre, np.arange(n, dtype=np.int64), k.stream, (k.name, names), (k.name, types),
                                   (k.name, states), (k.core, cores), ts, dur, wait, (shape, shp_t),
                                   (shape, typ_t), cube, vec, cost]
    else:
        cols = [pre, (k.name, names), (k.name, types), (k.core, cores), ts, dur, wait, (shape, shp_t),
                (shape, typ_t), cost]

    def rows() -> Iterator[bytes]:
        yield _kd_header(bool(fw.steps), full)
        if n <= text.CHUNK:
            yield join(template, cols, b"")
            return
        for a, b in chunks(n):
            yield join(template, [_rows_of(c, a, b) for c in cols], b"")

    text.write_stream(path, rows())


def _rows_of(col: text.Column, a: int, b: int) -> text.Column:
    """Rows a..b of a :func:`text.join` column."""
    if isinstance(col, tuple):
        return col[0][a:b], col[1]
    return col[a:b]


@dataclass(frozen=True)
class _NameFacts:
    """What the views take from a names vocabulary, per name code."""

    texts: list[bytes]      # the name's CSV text
    types: list[bytes]      # the CSV text of its ``classify.op_type``
    type_code: np.ndarray   # its op type's code (read-only)
    type_texts: list[bytes]  # the CSV text per op type code
    row: np.ndarray         # whether an operator of that name is an operator_details row: all but
                            # the ``ProfilerStep#N`` ranges (read-only)


#: the facts of each name (its CSV text, op type, the type's CSV text, whether a row), kept from
#: window to window per name, not per vocabulary: every window has new ``ProfilerStep#N`` names
_name_kept: dict[str, tuple[bytes, str, bytes, bool]] = {}


def _name_fact(n: str) -> tuple[bytes, str, bytes, bool]:
    t = classify.op_type(n)
    f = (csv_field(n).encode(), t, csv_field(t).encode(), not n.startswith("ProfilerStep#"))
    if len(_name_kept) >= _VOCAB_KEPT_MAX:
        _name_kept.clear()
    _name_kept[n] = f
    return f


#: the last answer and the list it was for (kernel_details, operator_details and op_statistic ask
#: about the same vocabulary list of a window in turn); held, so the list's identity is not reused
_last_facts: list[tuple[list[str], int, _NameFacts]] = []


def _name_facts(names: list[str]) -> _NameFacts:
    if _last_facts and _last_facts[0][0] is names and _last_facts[0][1] == len(names):
        return _last_facts[0][2]
    facts = _facts_of(names)
    _last_facts[:] = [(names, len(names), facts)]
    return facts


def _facts_of(names: list[str]) -> _NameFacts:
    get = _name_kept.get
    facts = [get(n) or _name_fact(n) for n in names]
    tvocab: dict[str, int] = {}
    type_texts: list[bytes] = []
    codes = []
    for _text, t, t_text, _row in facts:
        c = tvocab.get(t)
        if c is None:
            c = tvocab[t] = len(type_texts)
            type_texts.append(t_text)
        codes.append(c)
    code, row = np.asarray(codes or [0], np.int64), np.asarray([f[3] for f in facts] or [True], bool)
    code.flags.writeable = row.flags.writeable = False  # (kept: ``_last_facts``)
    return _NameFacts([f[0] for f in facts], [f[2] for f in facts], code, type_texts, row)


def kernel_columns(fw: Framework, device_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                            list[tuple[np.ndarray, list[str]] | None]]:
    """What :func:`kernel_details` writes, as columns for the rank dir's kernel database
    (``kernel_job.write_kernel_db``): start, end (ns), device, step (-1: none) and the texts
    (codes, vocabulary) in its order — Name, Type, Executor, Accelerator Core, Input Formats,
    Input Data Types, Input Shapes, then the Output columns (N/A here, as in the CSV)."""
    k = fw.kernels
    n = len(k)
    shape = np.where(k.op >= 0, fw.cols.op_shape[np.maximum(k.op, 0)], 0) if n else np.zeros(0, np.int64)
    step = step_of(fw, k.ts).astype(np.int64) if fw.steps and n else np.full(n, -1, np.int64)
    items = fw.cols.shapes.items
    return (k.ts.astype(np.int64), (k.ts + k.dur).astype(np.int64), np.full(n, device_id, np.int64), step,
            [(k.name, list(k.names)), (k.name, [classify.op_type(x) for x in k.names]),
             (np.zeros(n, np.int64), [k.executor]), (k.core.astype(np.int64), k.cores), None,
             (shape, [t or NA for _s, t in items]), (shape, [s or NA for s, _t in items]), None, None, None])


def _engine_texts(core: np.ndarray, dur: np.ndarray) -> tuple[list[bytes], list[bytes]]:
    """``aicore_time(us)`` / ``aiv_vec_time(us)`` texts per task (see ``ENGINE_COLS``)."""
    us = text.fill(b"%t", [dur])
    cube_k, vec_k = int(classify.Kind.CUBE), int(classify.Kind.VECTOR)
    kinds = core.tolist()
    cube = [u if c == cube_k else b"0" if c == vec_k else b"N/A" for c, u in zip(kinds, us, strict=True)]
    vec = [u if c == vec_k else b"0" if c == cube_k else b"N/A" for c, u in zip(kinds, us, strict=True)]
    return cube, vec


_OPD_HEADER = tuple(OPERATOR_DETAILS)


def operator_details(path: Path, fw: Framework) -> None:
    """One row per framework operator: host self/total, device (kernel) self/total time.  As in
    torch_npu's OperatorViewParser every operator is a row but the ``ProfilerStep#N`` ranges:
    record_function ranges (user annotations) too, nested like operators (docs/formats.md)."""
    facts = _name_facts(fw.names)
    row = facts.row[fw.cols.op_name]
    ops = np.flatnonzero(row)
    if bool((fw.op_annotation & row).any()):
        child, dev_self, dev_total = summary_cols.op_tree_times(fw.op_ts, fw.op_dur, fw.op_tid, fw.kernels.op,
                                                                fw.kernels.dur)
    else:  # the steps only: the operators' own tree is the same
        child, dev_self, dev_total = fw.op_times()
    names = facts.texts
    shp_t = _shape_texts(fw)[0]
    stacks = [NA.encode(), *csv_texts(fw.stacks)]  # code -1 → N/A
    dur = fw.op_dur[ops]
    cols: list[text.Column] = [(fw.cols.op_name[ops], names), (fw.cols.op_shape[ops], shp_t),
                               (fw.op_stack[ops] + 1, stacks), np.maximum(dur - child[ops], 0), dur,
                               dev_self[ops], dev_total[ops]]

    def rows() -> Iterator[bytes]:
        yield text.header_line(_OPD_HEADER)
        if len(ops) <= text.CHUNK:
            yield join(_OPD, cols, b"")
            return
        for a, b in chunks(len(ops)):
            yield join(_OPD, [_rows_of(c, a, b) for c in cols], b"")

    text.write_stream(path, rows())


_OPS_HEADER = tuple(OP_STATISTIC)
_OPS = b"{dev},%b,%b,%d,%t,%t,%t,%t,%b\n"


@lru_cache(maxsize=64)
def _ops_template(device_id: int) -> bytes:
    return text.literal(_OPS, dev=device_id)


def op_statistic(path: Path, fw: Framework, device_id: int) -> None:
    """Kernels grouped by (OP Type, core): count, total/min/avg/max, share of all kernel time."""
    k = fw.kernels
    head = text.header_line(_OPS_HEADER)
    if not len(k):
        text.write_stream(path, [head])
        return
    facts = _name_facts(k.names)
    nk = len(classify.Kind)
    g = summary_cols.group_stats(facts.type_code[k.name] * nk + k.core, k.dur, len(facts.type_texts) * nk)
    key, cnt, tot = g[:, 0], g[:, 1], g[:, 2]
    total_all = max(int(k.dur.sum()), 1)
    ratio = [b"%.3f" % (100.0 * t / total_all) for t in tot.tolist()]
    body = join(_ops_template(device_id), [(key // nk, facts.type_texts), (key % nk, csv_texts(k.cores)),
                                                    cnt, tot, g[:, 3], tot // cnt, g[:, 4], ratio], b"")
    text.write_stream(path, [head, body])


def api_statistic(path: Path, rows: list[list[object]]) -> None:
    """The dispatch-layer APIs (``cann.statistic_rows``) per Level and name."""
    write_csv(path, API_STATISTIC, rows)


_STT_HEADER = tuple(STEP_TRACE_HEADER)


def step_trace_time(path: Path, fw: Framework, ov: Overlap, device_id: int) -> list[list[object]]:
    rows = step_rows(fw, ov, device_id)
    text.write_stream(path, [text.header_line(_STT_HEADER), text.csv_lines(rows)])
    return rows
