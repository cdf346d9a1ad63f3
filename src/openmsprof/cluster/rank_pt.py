"""Read one torch ``*_ascend_pt`` rank's kernel_details.csv into Arrow tables (its small files:
:mod:`.rank_small`).

Columns are found by their documented names (the torch_npu headers), tolerantly: an absent
optional column becomes empty, a torn file is reported for that rank and the rest still read.
``kernel_details.csv`` is streamed block by block into a Parquet writer, so a rank of millions
of kernels is never held whole in memory.  The file is opened through
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

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from openmsprof.fileio.read_guard import open_regular

__all__ = ["KERNEL_MAX_BYTES", "KERNEL_SCHEMA", "stream_kernels"]

#: kernel_details.csv is streamed (bounded memory): its size bound only refuses the absurd
KERNEL_MAX_BYTES = 1 << 40
KERNEL_COLS = {"Step Id": "step", "Step ID": "step", "Name": "name", "Type": "op_type",
               "Accelerator Core": "task_type", "Start Time(us)": "start_us", "Duration(us)": "dur_us",
               "Input Shapes": "input_shapes"}
KERNEL_SCHEMA = pa.schema([("rank", pa.int32()), ("step", pa.int64()), ("name", pa.string()),
                           ("op_type", pa.string()), ("task_type", pa.string()), ("start_us", pa.float64()),
                           ("dur_us", pa.float64()), ("input_shapes", pa.string())])


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
