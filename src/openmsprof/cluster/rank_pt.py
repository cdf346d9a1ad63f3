"""Read one torch ``*_ascend_pt`` rank's ASCEND_PROFILER_OUTPUT files into Arrow tables.

Columns are found by their documented names (the torch_npu headers), tolerantly: an absent
optional column becomes empty, a torn file is reported for that rank and the rest still read.
``kernel_details.csv`` is streamed block by block into a Parquet writer, so a rank of millions
of kernels is never held whole in memory.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

__all__ = ["KERNEL_SCHEMA", "comm_tables", "read_step_trace", "stream_kernels"]

OUT = "ASCEND_PROFILER_OUTPUT"
KERNEL_COLS = {"Step Id": "step", "Step ID": "step", "Name": "name", "Type": "op_type",
               "Accelerator Core": "task_type", "Start Time(us)": "start_us", "Duration(us)": "dur_us",
               "Input Shapes": "input_shapes"}
KERNEL_SCHEMA = pa.schema([("rank", pa.int32()), ("step", pa.int64()), ("name", pa.string()),
                           ("op_type", pa.string()), ("task_type", pa.string()), ("start_us", pa.float64()),
                           ("dur_us", pa.float64()), ("input_shapes", pa.string())])
TIME_KEYS = {"Start Timestamp(us)": "start_us", "Elapse Time(ms)": "elapse_ms", "Transit Time(ms)": "transit_ms",
             "Wait Time(ms)": "wait_ms", "Synchronization Time(ms)": "sync_ms", "Idle Time(ms)": "idle_ms"}


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def read_step_trace(rank: int, path: Path) -> pa.Table:
    """step_trace_time.csv as read by msprof-analyze: every column but Step/Device_id as float."""
    tab = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types={"Step": pa.string()},
                                                                     strings_can_be_null=False))
    if "Step" not in tab.column_names:
        raise ValueError(f"{path}: no 'Step' column")
    cols: dict[str, Any] = {"rank": pa.array([rank] * tab.num_rows, pa.int32()),
                            "step": pc.fill_null(tab["Step"], "")}
    for name in tab.column_names:
        if name in ("Step", "Device_id"):
            continue
        col = tab[name]
        if not pa.types.is_floating(col.type):
            col = pa.array([_num(v) for v in col.to_pylist()], pa.float64())
        cols[name] = col
    return pa.table(cols)


def _op_rows(rank: int, step: str, kind: str, ops: dict) -> tuple[list[dict], list[dict]]:
    rows, bws = [], []
    for key, info in ops.items():
        if key.startswith("Total") or not isinstance(info, dict):
            continue
        t = info.get("Communication Time Info") or {}
        name, _, group = key.rpartition("@") if "@" in key else (key, "", "")
        row = {"rank": rank, "seq": 0, "step": step, "type": kind, "op_key": key, "op_name": name, "group_name": group,
               "info": orjson.dumps(info).decode()}
        row.update({col: _num(t.get(k)) for k, col in TIME_KEYS.items()})
        rows.append(row)
        for transport, b in (info.get("Communication Bandwidth Info") or {}).items():
            if isinstance(b, dict):
                bws.append({"rank": rank, "step": step, "type": kind, "op_key": key, "transport": transport,
                            "size_mb": _num(b.get("Transit Size(MB)")), "time_ms": _num(b.get("Transit Time(ms)")),
                            "bandwidth": _num(b.get("Bandwidth(GB/s)"))})
    return rows, bws


def comm_tables(rank: int, comm: Path, matrix: Path) -> dict[str, list[dict]]:
    """communication.json → ``comm`` and ``comm_bw`` rows; communication_matrix.json → ``matrix``."""
    out: dict[str, list[dict]] = {"comm": [], "comm_bw": [], "matrix": []}
    if comm.exists():
        doc = orjson.loads(comm.read_bytes())
        for step, kinds in (doc.items() if isinstance(doc, dict) else ()):
            for kind, ops in (kinds.items() if isinstance(kinds, dict) else ()):
                if isinstance(ops, dict):
                    rows, bws = _op_rows(rank, step, kind, ops)
                    for row in rows:
                        row["seq"] = len(out["comm"])
                        out["comm"].append(row)
                    out["comm_bw"] += bws
    if matrix.exists():
        doc = orjson.loads(matrix.read_bytes())
        for step, kinds in (doc.items() if isinstance(doc, dict) else ()):
            for kind, ops in (kinds.items() if isinstance(kinds, dict) else ()):
                for key, links in (ops.items() if isinstance(ops, dict) else ()):
                    for link, v in (links.items() if isinstance(links, dict) else ()):
                        if isinstance(v, dict):
                            out["matrix"].append({
                                "rank": rank, "seq": len(out["matrix"]), "step": step, "type": kind, "op_key": key, "link": link,
                                "info": orjson.dumps(v).decode()})
    return out


def _kernel_batch(rank: int, batch: pa.RecordBatch) -> pa.Table:
    names = batch.schema.names
    n = batch.num_rows
    cols: dict[str, Any] = {"rank": pa.array([rank] * n, pa.int32())}
    for src, dst in KERNEL_COLS.items():
        if src in names and dst not in cols:
            cols[dst] = batch.column(names.index(src))
    for field in KERNEL_SCHEMA:
        col = cols.get(field.name)
        if col is None:
            cols[field.name] = pa.nulls(n, field.type)
        elif field.type != pa.string():
            text = pc.utf8_trim_whitespace(col.cast(pa.string()))
            text = pc.if_else(pc.match_substring_regex(text, r"^-?[0-9.eE+]+$"), text, None)
            cols[field.name] = text.cast(field.type)
        else:
            cols[field.name] = col.cast(pa.string())
    return pa.table({f.name: cols[f.name] for f in KERNEL_SCHEMA}, schema=KERNEL_SCHEMA)


def stream_kernels(rank: int, path: Path, sink: Callable[[pa.Table], None]) -> int:
    """Feed kernel_details.csv to ``sink`` in blocks of the kernel schema; returns the row count."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        header = next(csv.reader([f.readline()]), [])
    wanted = [c for c in header if c in KERNEL_COLS]  # only the columns we keep are converted
    reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=2 << 20, use_threads=False),
                            convert_options=pacsv.ConvertOptions(
                                column_types={k: pa.string() for k in KERNEL_COLS},
                                include_columns=wanted or None, strings_can_be_null=False))
    rows = 0
    for batch in reader:
        tab = _kernel_batch(rank, batch)
        rows += tab.num_rows
        sink(tab)
    return rows
