"""msprof_tx's CSV lines rendered by SQLite: the per-row work (the two µs timestamps and the
joining of the string columns, rendered once per id combination into TEMP lookup tables) runs in
SQLite's C instead of a Python loop; same bytes as ``summary_host._tx_lines_py``.

Taken only where that is certain: apsw's connection (its TEMP tables are writable; the sqlite3
connection is ``query_only``), no NULL in a key column (``=`` would not match it), integer times and
no negative start (``us`` writes a sign).  Otherwise :func:`tx_lines` returns None and the caller loops.
"""

from __future__ import annotations

from collections.abc import Iterator

from openmsprof.export.fmt import NA
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.naming import HOST
from openmsprof.export.msprof.tables import csv_fields

__all__ = ["tx_lines"]

_MASK32 = 0xFFFFFFFF
_CHECK = ("SELECT EXISTS (SELECT 1 FROM MSTX_EVENTS WHERE startNs < 0 OR typeof(startNs) != 'integer'"
          " OR typeof(endNs) != 'integer' OR globalTid IS NULL OR category IS NULL OR eventType IS NULL OR message IS NULL OR domainId IS NULL)")
_SETUP = ("DROP TABLE IF EXISTS temp.omsp_tx_head", "DROP TABLE IF EXISTS temp.omsp_tx_tail",
          "CREATE TEMP TABLE omsp_tx_head(g INTEGER, cat INTEGER, kind INTEGER, head TEXT)",
          "CREATE TEMP TABLE omsp_tx_tail(msg INTEGER, dom INTEGER, tail TEXT)",
          "CREATE UNIQUE INDEX temp.omsp_tx_head_k ON omsp_tx_head(g, cat, kind)",
          "CREATE UNIQUE INDEX temp.omsp_tx_tail_k ON omsp_tx_tail(msg, dom)")
# m is the outer loop (CROSS JOIN) and the lookups go through the indexes, whatever the planner
# thinks of the small tables; the ORDER BY is the Python route's
_LINES = ("SELECT h.head || (m.startNs / 1000) || '.' || printf('%03d', m.startNs % 1000) || ','"
          " || (max(m.endNs, m.startNs) / 1000) || '.' || printf('%03d', max(m.endNs, m.startNs) % 1000)"
          " || t.tail FROM MSTX_EVENTS m"
          " CROSS JOIN omsp_tx_head h INDEXED BY omsp_tx_head_k CROSS JOIN omsp_tx_tail t INDEXED BY omsp_tx_tail_k"
          " WHERE h.g = m.globalTid AND h.cat = m.category AND h.kind = m.eventType"
          " AND t.msg = m.message AND t.dom = m.domainId ORDER BY m.startNs, m.endNs DESC")


def tx_lines(db: JobDB) -> Iterator[str] | None:
    """The msprof_tx lines (``\\n``-terminated, in the Python route's order), or None where the
    SQL route is not certain to give its bytes."""
    con = db.scratch()
    if con is None or db.query(_CHECK)[0][0]:
        return None
    kinds = dict(db.query("SELECT id, name FROM ENUM_MSTX_EVENT_TYPE")) if \
        "ENUM_MSTX_EVENT_TYPE" in db.tables else {}
    get = db.strings.get
    # streamed into the TEMP tables (one per distinct message at most: SQLite's pages, not a list)
    heads = ((g, cat, kind, csv_fields([HOST, g >> 32, g & _MASK32, get(cat) or NA,
                                        kinds.get(kind, str(kind)), NA, NA]) + ",")
             for g, cat, kind in db.conn.execute("SELECT DISTINCT globalTid, category, eventType FROM MSTX_EVENTS"))
    tails = ((msg, dom, "," + csv_fields([NA, get(msg) or "", get(dom) or "default", NA, NA]) + "\n")
             for msg, dom in db.conn.execute("SELECT DISTINCT message, domainId FROM MSTX_EVENTS"))
    for stmt in _SETUP:
        con.execute(stmt)
    con.executemany("INSERT INTO omsp_tx_head VALUES (?,?,?,?)", heads)
    con.executemany("INSERT INTO omsp_tx_tail VALUES (?,?,?)", tails)
    return (line for (line,) in con.execute(_LINES))
