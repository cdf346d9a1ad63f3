"""Summary CSVs of ASCEND_PROFILER_OUTPUT: kernel_details, operator_details, op_statistic,
api_statistic, step_trace_time (docs/formats.md §4 headers, decisions 1, 4 and 9).

Large tables are streamed in chunks; each row is one ``%`` template over numpy-prepared columns
with texts pre-encoded the way ``csv.writer`` encodes them, so the bytes match ``csv.writer``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from openmsprof.export import classify
from openmsprof.export.ascend_pt import nesting, text
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.export.ascend_pt.overlap import STEP_TRACE_HEADER, Overlap, step_rows
from openmsprof.export.ascend_pt.text import chunks, csv_line, csv_texts, join, us_columns
from openmsprof.export.ascend_pt.trace_view import step_of
from openmsprof.export.msprof.op_cost_columns import COST_COLUMNS, cost_values
from openmsprof.machine import peaks as P

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
_KD_L0 = b"%b{dev},%b,%b,%b,%d.%03d\t,%d.%03d,%d.%03d,N/A,%b,%b,N/A,N/A,N/A,N/A,%b,%b\n"
_KD_FULL = (b"%b{dev},4294967295,%d,%d,%b,%b,%b,%b,%d.%03d\t,%d.%03d,%d.%03d,N/A,N/A,N/A,%b,%b,N/A,N/A,N/A,N/A,N/A,"
            b"%b,%b,%b,%b\n")
#: engine-class time columns (Level1+): the task's whole duration booked to the engine class of
#: ``classify`` — ``aicore_time(us)`` for AI_CORE (matrix) tasks, ``aiv_vec_time(us)`` for
#: AI_VECTOR_CORE tasks, 0 for the other class, N/A for communication / memory copies.  Not a
#: hardware counter (docs/formats.md); msprof-analyze needs them to split Cube/Vector time.
ENGINE_COLS = ["aicore_time(us)", "aiv_vec_time(us)"]
_OPD = b"%b,%b,%b,%d.%03d,%d.%03d,%d.%03d,%d.%03d,0.000,0.000\n"


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    text.write_stream(path, [text.csv_lines([header, *rows])])


def _shape_texts(fw: Framework) -> tuple[list[bytes], list[bytes]]:
    """CSV texts of (input shapes or N/A, input dtypes or N/A) per shape code."""
    items = fw.cols.shapes.items
    return csv_texts([s or NA for s, _t in items]), csv_texts([t or NA for _s, t in items])


def _step_prefix(fw: Framework, ts: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """The ``Step Id,`` cell per timestamp as (codes, texts): ``""`` without steps."""
    if not fw.steps:
        return np.zeros(len(ts), np.int64), [b""]
    # as step_of: the step that starts last at or before ts, if ts is before its end; code 0 (``,``)
    # outside every step, else 1 + the step's index
    starts = np.asarray([s[1] for s in fw.steps], np.int64)
    ends = np.asarray([s[2] for s in fw.steps], np.int64)
    pos = np.searchsorted(starts, ts, side="right") - 1
    inside = (pos >= 0) & (ts < ends[np.maximum(pos, 0)])
    return np.where(inside, pos + 1, 0).astype(np.int64), [b",", *(b"%d," % s[0] for s in fw.steps)]


def kernel_details(path: Path, fw: Framework, device_id: int, full: bool) -> None:
    k = fw.kernels
    end_prev = np.concatenate(([0], (k.ts + k.dur)[:-1]))
    wait = np.maximum(k.ts - end_prev, 0)
    if len(wait):
        wait[0] = 0
    header = (["Step Id"] if fw.steps else []) + (KD_FULL if full else KD_L0) + SHAPE_COLS
    if full:
        header += ["Context ID", *ENGINE_COLS]
    header += [EXECUTOR, *COST_COLUMNS]
    names, cores = csv_texts(k.names), csv_texts(k.cores)
    types = csv_texts([classify.op_type(n) for n in k.names])
    states = csv_texts(fw.op_states()) if full else []
    ex = csv_texts([k.executor])
    shp_t, typ_t = _shape_texts(fw)
    shape = np.where(k.op >= 0, fw.cols.op_shape[np.maximum(k.op, 0)], 0) if len(k) else np.zeros(0, np.int64)

    kd_full, kd_l0 = text.literal(_KD_FULL, dev=device_id), text.literal(_KD_L0, dev=device_id)
    cost = _cost_texts(fw, k.names)

    def rows() -> Iterator[bytes]:
        yield csv_line(header)
        for a, b in chunks(len(k)):
            codes, sh = k.name[a:b], shape[a:b]
            nm, ty_, co = (codes, names), (codes, types), (k.core[a:b], cores)
            sp, ty = (sh, shp_t), (sh, typ_t)
            exs = (np.zeros(b - a, np.int64), ex)
            tq, tr = us_columns(k.ts[a:b])
            dq, dr = us_columns(k.dur[a:b])
            wq, wr = us_columns(wait[a:b])
            pre = _step_prefix(fw, k.ts[a:b])
            cs = _cost_column(cost, codes, sh)
            if full:
                cube, vec = _engine_texts(k.core[a:b], k.dur[a:b])
                yield join(kd_full, [pre, np.arange(a, b, dtype=np.int64), k.stream[a:b], nm, ty_, (codes, states),
                                     co, tq, tr, dq, dr, wq, wr, sp, ty, cube, vec, exs, cs], b"")
            else:
                yield join(kd_l0, [pre, nm, ty_, co, tq, tr, dq, dr, wq, wr, sp, ty, exs, cs], b"")

    text.write_stream(path, rows())


def _cost_column(cost: Callable[[int, int], bytes], name: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """The cost cells of each (kernel name code, shape code) as (codes, texts)."""
    if not len(name):
        return np.zeros(0, np.int64), []
    key = name.astype(np.int64) * (int(shape.max()) + 1) + shape
    _uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), [cost(n, c) for n, c in zip(name[first].tolist(), shape[first].tolist(),
                                                                         strict=True)]


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


_values: list[tuple[object, Callable[..., tuple[float | None, float | None, float | None]], int]] = []
#: the cost model's per-signature cache is kept this many windows (then rebuilt: bounded memory)
_VALUES_WINDOWS = 1000


def _cost_values() -> Callable[..., tuple[float | None, float | None, float | None]]:
    """``cost_values`` of this machine's cached peaks, kept from window to window while the peaks
    stand (its per-signature cache too: the same operators window after window)."""
    doc = P.cached_read_only()
    kept = _values[0] if _values else None
    if kept is None or kept[0] is not doc or kept[2] >= _VALUES_WINDOWS:
        kept = (doc, cost_values(doc), 0)
    _values[:] = [(kept[0], kept[1], kept[2] + 1)]
    return kept[1]


def _cost_texts(fw: Framework, names: list[str]) -> Callable[[int, int], bytes]:
    """(kernel name code, shape code) → the ``FLOPs,Bytes,Memory Bound Ratio`` cells (cost model
    of the kernel's type and input shapes; this machine's cached peaks, else the ratio is N/A)."""
    values = _cost_values()
    items = fw.cols.shapes.items
    cache: dict[tuple[int, int], bytes] = {}

    def cells(name: int, shape: int) -> bytes:
        hit = cache.get((name, shape))
        if hit is None:
            shp, typ = items[shape]
            f, b, r = values(classify.op_type(names[name]), shp, typ, None, None)
            hit = cache[(name, shape)] = (b"N/A,N/A,N/A" if f is None or b is None else
                                          b"%.0f,%.0f,%b" % (f, b, b"N/A" if r is None else b"%.3f" % r))
        return hit

    return cells


def _engine_texts(core: np.ndarray, dur: np.ndarray) -> tuple[list[bytes], list[bytes]]:
    """``aicore_time(us)`` / ``aiv_vec_time(us)`` texts per task (see ``ENGINE_COLS``)."""
    us = [text.ts_text(d).encode() for d in dur.tolist()]
    cube_k, vec_k = int(classify.Kind.CUBE), int(classify.Kind.VECTOR)
    cube = [u if c == cube_k else b"0" if c == vec_k else b"N/A" for c, u in zip(core.tolist(), us, strict=True)]
    vec = [u if c == vec_k else b"0" if c == cube_k else b"N/A" for c, u in zip(core.tolist(), us, strict=True)]
    return cube, vec


def operator_details(path: Path, fw: Framework) -> None:
    """One row per framework operator: host self/total, device (kernel) self/total time.  As in
    torch_npu's OperatorViewParser every operator is a row but the ``ProfilerStep#N`` ranges:
    record_function ranges (user annotations) too, nested like operators (docs/formats.md)."""
    step = np.asarray([n.startswith("ProfilerStep#") for n in fw.names] or [False], bool)[fw.cols.op_name]
    ops = np.flatnonzero(~step)
    if bool((fw.op_annotation & ~step).any()):
        every = np.ones(fw.n_ops, bool)
        parent, depth = nesting.parents(fw.op_ts, fw.op_dur, fw.op_tid, every)
        child, dev_self, dev_total = nesting.op_times(parent, depth, fw.op_dur, every, fw.kernels.op,
                                                      fw.kernels.dur)
    else:  # the steps only: the operators' own tree is the same
        child, dev_self, dev_total = fw.op_times()
    names = csv_texts(fw.names)
    shp_t = csv_texts([s or NA for s, _t in fw.cols.shapes.items])
    stacks = [NA.encode(), *csv_texts(fw.stacks)]  # code -1 → N/A

    def rows() -> Iterator[bytes]:
        yield csv_line(OPERATOR_DETAILS)
        for a, b in chunks(len(ops)):
            i = ops[a:b]
            dur = fw.op_dur[i]
            sq, sr = us_columns(np.maximum(dur - child[i], 0))
            hq, hr = us_columns(dur)
            dq, dr = us_columns(dev_self[i])
            tq, tr = us_columns(dev_total[i])
            yield join(_OPD, [(fw.cols.op_name[i], names), (fw.cols.op_shape[i], shp_t),
                              (fw.op_stack[i].astype(np.int64) + 1, stacks), sq, sr, hq, hr, dq, dr, tq, tr], b"")

    text.write_stream(path, rows())


def op_statistic(path: Path, fw: Framework, device_id: int) -> None:
    """Kernels grouped by (OP Type, core): count, total/min/avg/max, share of all kernel time."""
    k = fw.kernels
    rows: list[list[object]] = []
    if len(k):
        tvocab: dict[str, int] = {}
        tcode = np.asarray([tvocab.setdefault(classify.op_type(n), len(tvocab)) for n in k.names] or [0], np.int64)
        tnames = list(tvocab)
        nk, cores = len(classify.Kind), k.cores
        key = tcode[k.name] * nk + k.core
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        cnt = np.bincount(inv, minlength=len(uniq))
        tot = np.zeros(len(uniq), np.int64)
        np.add.at(tot, inv, k.dur)
        mn = np.full(len(uniq), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(mn, inv, k.dur)
        mx = np.full(len(uniq), np.iinfo(np.int64).min, np.int64)
        np.maximum.at(mx, inv, k.dur)
        total_all = max(int(k.dur.sum()), 1)
        u, tl, cl, mnl, mxl = uniq.tolist(), tot.tolist(), cnt.tolist(), mn.tolist(), mx.tolist()  # Python ints
        for g in np.lexsort((first, -tot)).tolist():
            t, c = tl[g], cl[g]
            rows.append([device_id, tnames[u[g] // nk], cores[u[g] % nk], c,
                         text.ts_text(t), text.ts_text(mnl[g]), text.ts_text(t // c), text.ts_text(mxl[g]),
                         f"{100.0 * t / total_all:.3f}"])
    write_csv(path, OP_STATISTIC, rows)


def api_statistic(path: Path, rows: list[list[object]]) -> None:
    """The dispatch-layer APIs (``cann.statistic_rows``) per Level and name."""
    write_csv(path, API_STATISTIC, rows)


def step_trace_time(path: Path, fw: Framework, ov: Overlap, device_id: int) -> list[list[object]]:
    rows = step_rows(fw, ov, device_id)
    write_csv(path, STEP_TRACE_HEADER, rows)
    return rows
