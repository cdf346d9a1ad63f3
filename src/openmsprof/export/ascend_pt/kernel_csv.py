"""kernel_details.csv → TASK / COMPUTE_TASK_INFO / STEP_TIME rows, column-wise (pyarrow's CSV
reader and numpy), for the kernel database of :mod:`openmsprof.export.ascend_pt.kernel_job`.

The same rows as the line-by-line reader there, without a Python object per field: a 1 M-kernel
file is parsed in well under a second and its rows go to SQLite in one ``executemany`` per
table.  Anything this reader does not accept as-is (a field that is not a plain number, a
short row, text that is not UTF-8, pyarrow missing) makes :func:`load` return False, and the
line-by-line reader then builds the database or names the bad line in one message.
"""

from __future__ import annotations

import csv
import io
import itertools
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["load", "store"]

_INT = r"^[+-]?[0-9]+$"
#: kernel rows turned into Python values at a time
_CHUNK = 1 << 16
#: kernel rows bound per INSERT statement (one statement run per 64 kernels)
_ROWS_PER_INSERT = 64
_DECIMAL = r"^(?P<w>[+-]?[0-9]+)(?:\.(?P<f>[0-9]*))?$"


def _np(arr: Any) -> np.ndarray[Any, Any]:
    """An Arrow integer array without nulls as numpy, from its data buffer (``to_numpy``
    imports pandas: half a second a run)."""
    if hasattr(arr, "combine_chunks"):
        arr = arr.combine_chunks()
    dtype = np.dtype(f"int{arr.type.bit_width}")
    data = np.frombuffer(arr.buffers()[1], dtype=dtype)
    return data[arr.offset:arr.offset + len(arr)].astype(np.int64)


def _ints(pc: Any, pa: Any, col: Any, empty: int | None = None) -> np.ndarray[Any, Any] | None:
    """Integers of a string column (trimmed); ``empty`` for blank fields; None if any is not
    a plain integer.  (No Python value is turned into an Arrow scalar: that imports pandas.)"""
    text = pc.utf8_trim_whitespace(col)
    if empty is not None:
        text = pc.replace_substring_regex(text, pattern="^$", replacement=str(empty))
    if not pc.all(pc.match_substring_regex(text, _INT)).as_py():
        return None
    return _np(text.cast(pa.int64()))


def _ns(pc: Any, pa: Any, col: Any) -> np.ndarray[Any, Any] | None:
    """``"1795503649863373.676\t"`` (µs) → exact ns, as the line reader's ``_ns``."""
    text = pc.utf8_trim_whitespace(col)
    if not pc.all(pc.match_substring_regex(text, _DECIMAL)).as_py():
        return None
    parts = pc.extract_regex(text.combine_chunks(), _DECIMAL)  # a StructArray
    whole = _np(parts.field("w").cast(pa.int64()))
    frac = pc.utf8_slice_codeunits(pc.utf8_rpad(parts.field("f"), width=3, padding="0"), 0, 3)
    return whole * 1000 + _np(frac.cast(pa.int64()))


def _header(path_fd: io.BufferedReader) -> list[str]:
    line = path_fd.readline().decode("utf-8", errors="replace")
    path_fd.seek(0)
    return next(csv.reader([line]), [])


def load(fd: int, src: Path, con: sqlite3.Connection, needed: tuple[str, ...],
         texts: tuple[str, ...], strings: dict[str, int], meta: Callable[[int, int], None],
         invalid: int) -> bool:
    """Fill ``con``'s tables from the open kernel_details ``fd`` (closed here); False (nothing
    written) when the line reader must do it.  ``texts``: the string columns in the order
    the line reader takes them (Name, Type, Executor, then COMPUTE_TASK_INFO's)."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv
    except ImportError:
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as f:
        header = _header(f)  # type: ignore[arg-type]
        if any(c not in header for c in needed) or len(set(header)) != len(header):
            return False
        try:
            table = pacsv.read_csv(f, read_options=pacsv.ReadOptions(block_size=1 << 24),
                                   convert_options=pacsv.ConvertOptions(
                                       column_types={c: pa.string() for c in header},
                                       strings_can_be_null=False,
                                       quoted_strings_can_be_null=False))
        except (pa.ArrowInvalid, UnicodeDecodeError, ValueError):
            return False
    n = table.num_rows
    start = _ns(pc, pa, table["Start Time(us)"])
    dur = _ns(pc, pa, table["Duration(us)"])
    dev = _ints(pc, pa, table["Device_id"])
    step = _ints(pc, pa, table["Step Id"], empty=-1) if "Step Id" in header else np.full(n, -1)
    if start is None or dur is None or dev is None or step is None:
        return False
    if n and (dev.min() < -1 or dev.max() >= 1 << 22 or step.min() < -1 or step.max() >= 1 << 40):
        return False  # beyond the ranges store takes (device < 2**22, step < 2**40): the line reader
    cols: list[tuple[np.ndarray[Any, Any], list[str]] | None] = []
    for name in texts:
        if name not in header:
            cols.append(None)
            continue
        enc = pc.dictionary_encode(table[name].combine_chunks())
        cols.append((_np(enc.indices) if n else np.zeros(0, np.int64), enc.dictionary.to_pylist()))
    del table
    store(con, start, start + dur, dev, step, cols, strings, meta, invalid)
    return True


def _insert(con: sqlite3.Connection, table: str, row: str, columns: list[np.ndarray[Any, Any]]) -> None:
    """The rows of ``columns`` into ``table`` (``row``: one row's VALUES tuple, ``?`` per column)."""
    n = len(columns[0])
    many = f"INSERT INTO {table} VALUES {', '.join([row] * _ROWS_PER_INSERT)}"
    width = len(columns)
    for a in range(0, n, _CHUNK):  # Python ints for one chunk at a time: a bounded peak
        b = min(a + _CHUNK, n)
        rows = np.stack([c[a:b] for c in columns], axis=1).astype(np.int64)
        full = (b - a) // _ROWS_PER_INSERT * _ROWS_PER_INSERT
        con.executemany(many, rows[:full].reshape(-1, width * _ROWS_PER_INSERT).tolist())
        con.executemany(f"INSERT INTO {table} VALUES {row}", rows[full:].tolist())


def store(con: sqlite3.Connection, start: np.ndarray[Any, Any], end: np.ndarray[Any, Any],
          dev: np.ndarray[Any, Any], step: np.ndarray[Any, Any],
          cols: list[tuple[np.ndarray[Any, Any], list[str]] | None], strings: dict[str, int],
          meta: Callable[[int, int], None], invalid: int) -> None:
    """Write one TASK + COMPUTE_TASK_INFO row per kernel and STEP_TIME from columns (ns, device,
    step or -1) and the text columns as (codes, vocabulary) in the line reader's order (Name,
    Type, Executor, then COMPUTE_TASK_INFO's); None: the column is absent (N/A, Executor CPU).
    Shared by the CSV reader and the torch analysis, which writes the cache from memory."""
    n = len(start)
    if n and (dev.min() < -1 or dev.max() >= 1 << 22 or step.min() < -1 or step.max() >= 1 << 40):
        raise ValueError("device or step beyond the kernel rows' range (device < 2**22, step < 2**40)")
    na = strings.setdefault("N/A", len(strings))
    ids: list[np.ndarray[Any, Any]] = []
    for j, col in enumerate(cols):
        if col is None:
            fill = strings.setdefault("CPU", len(strings)) if j == 2 else na
            ids.append(np.full(n, fill, dtype=np.int64))
            continue
        codes, vocab = col
        lut = np.array([strings.setdefault(v or "N/A", len(strings)) for v in vocab] or [na],
                       dtype=np.int64)
        ids.append(lut[codes] if n else np.zeros(0, np.int64))
    core = ids[2]
    con.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", ((i, v) for v, i in strings.items()))
    meta(int(start.min()) if n else 0, int(end.max()) if n else 0)
    # straight into TASK, then COMPUTE_TASK_INFO (rowids in kernel order), _ROWS_PER_INSERT rows a
    # statement; the constant columns are SQL literals
    idx = np.arange(n, dtype=np.int64)
    task = f"(?, ?, ?, ?, ?, 0, ?, 0, 0, ?, {int(invalid)})"
    info = f"(?, ?, NULL, NULL, ?, ?, ?, ?, ?, ?, ?, ?, {na}, {na}, {na})"
    _insert(con, "TASK", task, [start, end, dev, step, idx, core, idx])
    _insert(con, "COMPUTE_TASK_INFO", info, [ids[0], idx, ids[3], ids[1], *ids[4:10]])
    on = step >= 0
    if on.any():
        pairs = np.stack([step[on], dev[on]], axis=1)
        # one integer per (step, device), in (step, device) order
        d0, span = int(dev[on].min()), int(dev[on].max() - dev[on].min()) + 1
        keys, inv_k = np.unique((step[on] * span) + (dev[on] - d0), return_inverse=True)
        inv_k = inv_k.ravel()
        first_row = np.zeros(len(keys), dtype=np.int64)
        first_row[inv_k[::-1]] = np.arange(len(inv_k))[::-1]
        uniq = pairs[first_row]
        first = np.full(len(uniq), np.iinfo(np.int64).max)
        last = np.full(len(uniq), np.iinfo(np.int64).min)
        np.minimum.at(first, inv_k, start[on])
        np.maximum.at(last, inv_k, end[on])
        con.executemany("INSERT INTO STEP_TIME VALUES (?, ?, ?, ?, ?)", zip(
            uniq[:, 0].tolist(), first.tolist(), last.tolist(), itertools.repeat(invalid),
            uniq[:, 1].tolist(), strict=False))
