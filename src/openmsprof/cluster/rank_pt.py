"""Read one torch ``*_ascend_pt`` rank's ASCEND_PROFILER_OUTPUT files into Arrow tables.

Columns are found by their documented names (the torch_npu headers), tolerantly: an absent
optional column becomes empty, a torn file is reported for that rank and the rest still read.
``kernel_details.csv`` is streamed block by block into a Parquet writer, so a rank of millions
of kernels is never held whole in memory.  Every file is opened through
:mod:`openmsprof.fileio.read_guard`: a FIFO, device, socket or symbolic link, or a file past its
size bound, is a :class:`ProfilingError` naming it (the caller reports it for that rank).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from openmsprof.config.errors import ProfilingError
from openmsprof.fileio.read_guard import open_regular, read_json, read_regular

__all__ = ["COMM_MAX_BYTES", "KERNEL_MAX_BYTES", "KERNEL_SCHEMA", "STEP_TRACE_MAX_BYTES", "comm_tables",
           "read_step_trace", "stream_kernels"]

OUT = "ASCEND_PROFILER_OUTPUT"
#: size bounds: step_trace_time.csv (a few rows per step) and communication(_matrix).json are read
#: whole; kernel_details.csv is streamed (bounded memory), its bound only refuses the absurd
STEP_TRACE_MAX_BYTES = 256 << 20
COMM_MAX_BYTES = 1 << 30
KERNEL_MAX_BYTES = 1 << 40
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
    data = read_regular(path, "step_trace_time.csv", STEP_TRACE_MAX_BYTES)
    tab = pacsv.read_csv(pa.BufferReader(data), convert_options=pacsv.ConvertOptions(column_types={"Step": pa.string()},
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


def _comm_doc(path: Path, errors: list[str] | None) -> Any:
    """The JSON of ``path`` (None when absent); a refusal or parse error goes to ``errors`` when
    given (the other file is still read), else it is raised."""
    if not os.path.lexists(path):
        return None
    try:
        return read_json(path, path.name, COMM_MAX_BYTES)
    except ProfilingError as exc:
        if errors is None:
            raise
        errors.append(str(exc))
        return None


def comm_tables(rank: int, comm: Path, matrix: Path, errors: list[str] | None = None) -> dict[str, list[dict]]:
    """communication.json → ``comm`` and ``comm_bw`` rows; communication_matrix.json → ``matrix``
    (an unreadable one is a line in ``errors`` when given, the other one still read)."""
    out: dict[str, list[dict]] = {"comm": [], "comm_bw": [], "matrix": []}
    doc = _comm_doc(comm, errors)
    if doc is not None:
        for step, kinds in (doc.items() if isinstance(doc, dict) else ()):
            for kind, ops in (kinds.items() if isinstance(kinds, dict) else ()):
                if isinstance(ops, dict):
                    rows, bws = _op_rows(rank, step, kind, ops)
                    for row in rows:
                        row["seq"] = len(out["comm"])
                        out["comm"].append(row)
                    out["comm_bw"] += bws
    doc = _comm_doc(matrix, errors)
    if doc is not None:
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
    fd, _size = open_regular(path, "kernel_details.csv", KERNEL_MAX_BYTES)
    with os.fdopen(fd, "rb") as f:  # the file checked is the file read
        head = f.readline(1 << 20)
        header = next(csv.reader([head.decode("utf-8", errors="replace")]), [])
        f.seek(0)
        return _stream(rank, f, header, sink)


def _stream(rank: int, f: io.BufferedReader, header: list[str], sink: Callable[[pa.Table], None]) -> int:
    wanted = [c for c in header if c in KERNEL_COLS]  # only the columns we keep are converted
    reader = pacsv.open_csv(f, read_options=pacsv.ReadOptions(block_size=2 << 20, use_threads=False),
                            convert_options=pacsv.ConvertOptions(
                                column_types={k: pa.string() for k in KERNEL_COLS},
                                include_columns=wanted or None, strings_can_be_null=False))
    rows = 0
    for batch in reader:
        tab = _kernel_batch(rank, batch)
        rows += tab.num_rows
        sink(tab)
    return rows
