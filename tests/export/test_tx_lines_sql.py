"""msprof_tx lines rendered by SQLite (export/msprof/tx_lines_sql.py): the Python loop's bytes
and order (ties included), and the loop taken where SQL could differ (NULL ids, a negative start)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof.summary_host import _tx_lines, _tx_lines_py
from openmsprof.export.msprof.tx_lines_sql import tx_lines
from tests.export.dbfactory import PID, START_NS, Builder, make_job

pytest.importorskip("apsw", reason="the SQL route reads through apsw (a dependency)")


def _job(root: Path, extra: str = "") -> Path:
    """make_job plus markers that tie on start and end on several threads, a range starting with
    a marker, messages that need CSV quoting, an unknown event type; ``extra``: SQL run last."""
    job = make_job(root)
    b = Builder.__new__(Builder)
    b.conn = sqlite3.connect(job / "sqlite" / "msprof.db")
    b.ids = dict(b.conn.execute("SELECT value, id FROM STRING_IDS"))
    t = START_NS + 40_000_000
    for tid in (PID, PID + 8, PID + 9, PID):
        b.mstx(t, t, 0, f"tie {tid % 3}", tid)
    b.mstx(t, t + 7_001, 2, 'say "hi", then\nleave', PID + 9, range_id=7)
    b.mstx(t + 1, t + 1, 0, "ünïcode, marker", PID, domain="my domain")
    b.mstx(t + 2, t + 1, 9, "ends before it starts", PID)
    if extra:
        b.conn.execute(extra)
    b.conn.commit()
    b.conn.close()
    return job


def test_sql_lines_are_the_loops_bytes(tmp_path: Path) -> None:
    with open_job(_job(tmp_path)) as db:
        sql = tx_lines(db)
        assert sql is not None
        lines = list(sql)
        assert lines == list(_tx_lines_py(db)) and len(lines) > 10
        assert list(_tx_lines(db)) == lines  # the producer's route; twice on one connection
    text = "".join(lines)
    assert '"say ""hi"", then\nleave"' in text and ',9,N/A,N/A,' in text


@pytest.mark.parametrize("extra", [
    "UPDATE MSTX_EVENTS SET message = NULL WHERE rowid = 2",
    "UPDATE MSTX_EVENTS SET startNs = -5, endNs = 10 WHERE rowid = 3",
    "UPDATE MSTX_EVENTS SET domainId = NULL, category = NULL WHERE rowid = 4",
])
def test_the_loop_where_sql_could_differ(tmp_path: Path, extra: str) -> None:
    with open_job(_job(tmp_path, extra)) as db:
        assert tx_lines(db) is None
        lines = list(_tx_lines(db))
        assert lines == list(_tx_lines_py(db)) and len(lines) > 10
