"""Summary CSVs of ASCEND_PROFILER_OUTPUT: kernel_details, operator_details, op_statistic,
api_statistic, step_trace_time (FORMATS.md §4 headers, decisions 1, 4 and 9)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from openmsprof.collect import fs
from openmsprof.export.ascend_pt.framework import Framework, call_stacks, op_times, shapes_text
from openmsprof.export.ascend_pt.overlap import STEP_TRACE_HEADER, Overlap, step_rows
from openmsprof.export.ascend_pt.trace_view import step_of, ts_text

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


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    fs.write_file_atomic(path, buf.getvalue().encode())


def _us(ns: int) -> str:
    return ts_text(ns)


def kernel_details(path: Path, fw: Framework, device_id: int, full: bool) -> None:
    k = fw.kernels
    end_prev = np.concatenate(([0], (k.ts + k.dur)[:-1]))
    wait = np.maximum(k.ts - end_prev, 0)
    if len(wait):
        wait[0] = 0
    steps = step_of(fw, k.ts)
    header = (["Step Id"] if fw.steps else []) + (KD_FULL if full else KD_L0) + SHAPE_COLS
    if full:
        header.append("Context ID")
    rows: list[list[object]] = []
    kts, kdur, kst, kop = k.ts.tolist(), k.dur.tolist(), k.stream.tolist(), k.op.tolist()
    wl = wait.tolist()
    for j in range(len(k)):
        o = kop[j]
        shp, typ = shapes_text(fw.ops[o].get("args") or {}) if o >= 0 else ("", "")
        start = ts_text(kts[j]) + "\t"
        if full:
            row: list[object] = [device_id, 4294967295, j, kst[j], k.name[j], k.name[j], NA, k.core[j], start,
                                 _us(kdur[j]), _us(wl[j]), NA, NA, NA]
        else:
            row = [device_id, k.name[j], k.name[j], k.core[j], start, _us(kdur[j]), _us(wl[j]), NA]
        row += [shp or NA, typ or NA, NA, NA, NA, NA]
        if full:
            row.append(NA)
        rows.append(([steps[j]] if fw.steps else []) + row)
    write_csv(path, header, rows)


def operator_details(path: Path, fw: Framework) -> None:
    """One row per framework operator: host self/total, device (kernel) self/total time."""
    ops = np.flatnonzero(~fw.op_annotation)
    child, dev_self, dev_total = op_times(fw)
    durl = fw.op_dur.tolist()
    stacks = call_stacks(fw)
    rows: list[list[object]] = []
    for i in ops.tolist():
        shp, _t = shapes_text(fw.ops[i].get("args") or {})
        rows.append([fw.ops[i].get("name", ""), shp or NA, stacks.get(i, NA), _us(max(durl[i] - int(child[i]), 0)),
                     _us(durl[i]), _us(int(dev_self[i])), _us(int(dev_total[i])), _us(0), _us(0)])
    write_csv(path, OPERATOR_DETAILS, rows)


def op_statistic(path: Path, fw: Framework, device_id: int) -> None:
    k = fw.kernels
    groups: dict[tuple[str, str], list[int]] = {}
    for j, d in enumerate(k.dur.tolist()):
        groups.setdefault((k.name[j], k.core[j]), []).append(d)
    total_all = max(int(k.dur.sum()), 1)
    rows: list[list[object]] = []
    for (name, core), ds in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
        tot = sum(ds)
        rows.append([device_id, name, core, len(ds), _us(tot), _us(min(ds)), _us(tot // len(ds)), _us(max(ds)),
                     f"{100.0 * tot / total_all:.3f}"])
    write_csv(path, OP_STATISTIC, rows)


def api_statistic(path: Path) -> None:
    """No CANN/driver APIs exist on the CPU backend: header only (FORMATS.md 'no source ⇒ no rows')."""
    write_csv(path, API_STATISTIC, [])


def step_trace_time(path: Path, fw: Framework, ov: Overlap, device_id: int) -> list[list[object]]:
    rows = step_rows(fw, ov, device_id)
    write_csv(path, STEP_TRACE_HEADER, rows)
    return rows
