"""DuckDB over the rank stores: one view or table per table, across all ranks (views
``read_parquet`` the kernel tables; the small tables are read once into tables with their fixed
schemas: :mod:`.rank_small`).

Views: ``kernels`` (rank, step, name, op_type, task_type, start_us, dur_us, input_shapes),
``step_trace`` (rank, step, then the step_trace_time.csv columns), ``comm`` (rank, step, type,
op_key, op_name, group_name, start_us, elapse_ms, transit_ms, wait_ms, sync_ms, idle_ms, info),
``comm_bw`` (rank, step, type, op_key, transport, size_mb, time_ms, bandwidth), ``matrix``
(rank, step, type, op_key, link, info), ``op_by_type``/``op_by_name`` (per-rank operator statistics,
:mod:`.opstats`) and, once computed, ``waits`` (see :mod:`.waits`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import orjson

from openmsprof.cluster import memcap
from openmsprof.cluster.rank_small import SCHEMAS, STEP_COLUMNS_KEY, read_small, scan_sql
from openmsprof.fileio import fs

__all__ = ["TABLES", "connect", "has", "memo"]

#: what is known of the latest connection used (one at a time: no growth in a long-lived process)
_LATEST: list[tuple[duckdb.DuckDBPyConnection, dict[str, Any]]] = []

TABLES = ("kernels", "step_trace", "comm", "comm_bw", "matrix", "op_by_type", "op_by_name", "gaps")


def connect(store_root: Path, ranks: list[int] | None = None, threads: int | None = None,
            memory_bytes: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with a view (or table) per table over the given ranks' stores, under
    ``memory_bytes`` (default ``memcap.cap_bytes()``), spilling to ``memcap.SPILL_DIR`` beside the store."""
    con = duckdb.connect(":memory:")
    cap = memory_bytes if memory_bytes is not None else memcap.cap_bytes()
    con.execute(f"SET memory_limit='{int(cap)}B'")
    spill = memcap.spill_dir(store_root.parent)
    con.execute("SET temp_directory=" + "'" + str(spill).replace("'", "''") + "'")
    con.execute("SET preserve_insertion_order=false")
    if threads:
        con.execute(f"SET threads={int(threads)}")
    made: set[str] = set()
    stores = sorted(p for p in store_root.glob("rank*") if ranks is None or int(p.name[4:]) in ranks)
    small = [read_small(s) for s in stores]
    for table in TABLES:
        if table in SCHEMAS:
            if _load_small(con, table, small, spill):
                made.add(table)
            continue
        files = [str(s / f"{table}.parquet") for s in stores if (s / f"{table}.parquet").exists()]
        if files:
            listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet([{listing}], union_by_name=true)")
            made.add(table)
    memo(con)["views"] = made
    return con


def _load_small(con: duckdb.DuckDBPyConnection, table: str, docs: list[dict[str, Any]], tmp: Path) -> bool:
    """Load one small table of every rank (``docs``: each rank's small.json) into a table of
    ``con`` (False when no rank has it).  The ranks' rows are joined into one JSON file read
    once: DuckDB spends ~0.5 ms on each file it opens, more than a query over 64 ranks' rows.
    The step trace's columns are every rank's, in the order the ranks first give them."""
    key = STEP_COLUMNS_KEY if table == "step_trace" else table
    have = [d for d in docs if isinstance(d.get(key), list)]
    if not have:
        return False
    steps: dict[str, None] = {}
    if table == "step_trace":
        for d in have:
            steps.update(dict.fromkeys(str(c) for c in d[key]))
    parts = [orjson.dumps(d[table])[1:-1] for d in have if d.get(table)]
    path = tmp / f"{table}.json"
    try:
        fs.write_stream_atomic(path, [b"[", b",".join(parts), b"]"])
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM {scan_sql(table, str(path), list(steps))}")
    finally:
        path.unlink(missing_ok=True)
    return True


def memo(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Facts derived once from ``con``'s views, which never change (``views``: those ``connect``
    made; others by their users); another connection's are forgotten when one is asked for."""
    if not _LATEST or _LATEST[0][0] is not con:
        _LATEST[:] = [(con, {})]
    return _LATEST[0][1]


def has(con: duckdb.DuckDBPyConnection, view: str) -> bool:
    """Whether a view or table of that name exists."""
    if view in memo(con).get("views", ()):  # views are never dropped
        return True
    row = con.execute("SELECT (SELECT count(*) FROM duckdb_views() WHERE view_name = $n) + "
                      "(SELECT count(*) FROM duckdb_tables() WHERE table_name = $n)", {"n": view}).fetchone()
    return bool(row and row[0])
