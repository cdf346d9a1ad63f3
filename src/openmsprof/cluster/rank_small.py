"""One torch rank's small tables (step trace, communication, links) as rows of plain dicts, and
their store file ``small.json`` ({table: [row, ...]}, plus the step trace's column order), which
DuckDB reads with a fixed schema (:func:`scan_sql`).  One file a rank, written by orjson: creating
a file, or formatting floats in Python, costs more than parsing a rank's tables.  A float that
JSON cannot hold (inf, nan) is kept as its text, which DuckDB reads back as that DOUBLE.

No pyarrow or pandas here: ``step_trace``/``communication`` runs parse every rank in the parent
and their whole cost was those imports (issue 26).  ``read_step_trace`` keeps the conversion of
the pyarrow CSV reader it replaces (msprof-analyze reads every column as float): a column of
integers becomes floats with 0.0 for an empty cell, a column of floats keeps empty cells empty,
and any other column is converted cell by cell (unparsable text is 0.0).  Every file is opened
through :mod:`openmsprof.fileio.read_guard`.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ProfilingError
from openmsprof.fileio.read_guard import read_json, read_regular

__all__ = ["COMM_MAX_BYTES", "OUT", "SCHEMAS", "SMALL_FILE", "STEP_COLUMNS_KEY", "STEP_TRACE_MAX_BYTES",
           "comm_tables", "num", "read_small", "read_step_trace", "scan_sql"]

OUT = "ASCEND_PROFILER_OUTPUT"
#: size bounds: step_trace_time.csv (a few rows per step) and communication(_matrix).json are read whole
STEP_TRACE_MAX_BYTES = 256 << 20
COMM_MAX_BYTES = 1 << 30
#: the store's small.json: a rank's step trace and communication tables (as rows, with their infos)
SMALL_MAX_BYTES = 8 << 30
TIME_KEYS = {"Start Timestamp(us)": "start_us", "Elapse Time(ms)": "elapse_ms", "Transit Time(ms)": "transit_ms",
             "Wait Time(ms)": "wait_ms", "Synchronization Time(ms)": "sync_ms", "Idle Time(ms)": "idle_ms"}
#: the store's column names and DuckDB types (step_trace: rank, step, then every column of the source as DOUBLE)
SCHEMAS: dict[str, tuple[tuple[str, str], ...]] = {
    "step_trace": (("rank", "INTEGER"), ("step", "VARCHAR")),
    "comm": (("rank", "BIGINT"), ("seq", "BIGINT"), ("step", "VARCHAR"), ("type", "VARCHAR"), ("op_key", "VARCHAR"),
             ("op_name", "VARCHAR"), ("group_name", "VARCHAR"), ("info", "VARCHAR"),
             *((c, "DOUBLE") for c in TIME_KEYS.values())),
    "comm_bw": (("rank", "BIGINT"), ("step", "VARCHAR"), ("type", "VARCHAR"), ("op_key", "VARCHAR"),
                ("transport", "VARCHAR"), ("size_mb", "DOUBLE"), ("time_ms", "DOUBLE"), ("bandwidth", "DOUBLE")),
    "matrix": (("rank", "BIGINT"), ("seq", "BIGINT"), ("step", "VARCHAR"), ("type", "VARCHAR"), ("op_key", "VARCHAR"),
               ("link", "VARCHAR"), ("info", "VARCHAR")),
}
SMALL_FILE = "small.json"
STEP_COLUMNS_KEY = "step_trace_columns"
# the CSV reader this replaces (pyarrow's defaults): cells read as null, and the typed cells
_NULLS = frozenset(("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                    "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null"))
_INT = re.compile(r"\s*(?:-?[0-9]+|0[xX][0-9a-fA-F]+)\s*\Z")  # (hexadecimal unsigned only, as pyarrow)
_FLOAT = re.compile(r"\s*[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))\s*\Z")
_INT64 = range(-(1 << 63), 1 << 63)
_BOOL = {"1": 1.0, "True": 1.0, "TRUE": 1.0, "true": 1.0, "0": 0.0, "False": 0.0, "FALSE": 0.0, "false": 0.0}


def num(v: Any) -> float | str:
    """``v`` as a float for the store (0.0 when it is none; inf and nan as their text)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0.0
    return f if f - f == 0 else repr(f)


def _int(cell: str) -> int:
    text = cell.strip()
    return int(text, 16) if text[1:2] in ("x", "X") else int(text)


def _column(cells: list[str]) -> list[float | str | None]:
    """One step_trace column as floats, converted as the pyarrow-typed column was (see the module doc)."""
    seen = [c for c in cells if c not in _NULLS]
    if not seen:
        return [0.0] * len(cells)
    ints = [_int(c) for c in seen] if all(_INT.match(c) for c in seen) else []
    if ints and all(v in _INT64 for v in ints):
        return [0.0 if c in _NULLS else float(_int(c)) for c in cells]
    if all(c in _BOOL for c in seen):
        return [_BOOL.get(c, 0.0) for c in cells]
    if all(_FLOAT.match(c) for c in seen):
        return [None if c in _NULLS else num(c) for c in cells]
    return [num(c) for c in cells]


def read_step_trace(rank: int, path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """step_trace_time.csv as msprof-analyze reads it: (columns, rows) of ``rank``, ``step`` and
    every column but Step/Device_id as float, in order.  ValueError for a torn or headless file."""
    data = read_regular(path, "step_trace_time.csv", STEP_TRACE_MAX_BYTES)
    text = data.decode("utf-8-sig")
    table = [r for r in csv.reader(io.StringIO(text, newline="")) if r]
    if not table:
        raise ValueError("Empty CSV file")
    head, body = table[0], table[1:]
    for i, row in enumerate(body):
        if len(row) != len(head):
            raise ValueError(f"CSV parse error: Expected {len(head)} columns, got {len(row)} (row {i + 2})")
    if "Step" not in head:
        raise ValueError(f"{path}: no 'Step' column")
    names = ["rank", "step"]
    cols: list[list[Any]] = [[rank] * len(body), [r[head.index("Step")] for r in body]]
    for i, name in enumerate(head):
        if name not in ("Step", "Device_id"):
            names.append(name)
            cols.append(_column([r[i] for r in body]))
    return names, [dict(zip(names, r, strict=True)) for r in zip(*cols, strict=True)] if body else []


def _op_rows(rank: int, step: str, kind: str, ops: dict) -> tuple[list[dict], list[dict]]:
    rows, bws = [], []
    for key, info in ops.items():
        if key.startswith("Total") or not isinstance(info, dict):
            continue
        t = info.get("Communication Time Info") or {}
        name, _, group = key.rpartition("@") if "@" in key else (key, "", "")
        row = {"rank": rank, "seq": 0, "step": step, "type": kind, "op_key": key, "op_name": name, "group_name": group,
               "info": orjson.dumps(info).decode()}
        row.update({col: num(t.get(k)) for k, col in TIME_KEYS.items()})
        rows.append(row)
        for transport, b in (info.get("Communication Bandwidth Info") or {}).items():
            if isinstance(b, dict):
                bws.append({"rank": rank, "step": step, "type": kind, "op_key": key, "transport": transport,
                            "size_mb": num(b.get("Transit Size(MB)")), "time_ms": num(b.get("Transit Time(ms)")),
                            "bandwidth": num(b.get("Bandwidth(GB/s)"))})
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
    (an unreadable file is a line in ``errors`` when given, the other one still read)."""
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
                                "rank": rank, "seq": len(out["matrix"]), "step": step, "type": kind, "op_key": key,
                                "link": link, "info": orjson.dumps(v).decode()})
    return out


def read_small(out: Path) -> dict[str, Any]:
    """The small tables of the rank store ``out`` ({} when it has none; an unreadable file is a
    :class:`ProfilingError` naming it)."""
    path = out / SMALL_FILE
    if not os.path.lexists(path):
        return {}
    doc = read_json(path, "the store's small.json", SMALL_MAX_BYTES)
    return doc if isinstance(doc, dict) else {}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def scan_sql(table: str, path: str, step_columns: Sequence[str] = ()) -> str:
    """DuckDB's ``read_json`` of a JSON array of ``table`` rows (``step_columns``: the step trace
    columns after rank and step, all DOUBLE); a key a row lacks is NULL."""
    cols = [*SCHEMAS[table], *((n, "DOUBLE") for n in step_columns)] if table == "step_trace" else SCHEMAS[table]
    spec = ", ".join(f"{_quote(n)}: {_quote(t)}" for n, t in cols)
    return f"read_json({_quote(path)}, format='array', columns={{{spec}}})"
