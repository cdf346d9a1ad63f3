"""The C writer (``parse/_bulk_insert.c``) used from more than one thread, or re-entered from the
rows' iterator: a second call on a connection while one runs (another thread while SQLite works
without the GIL) raises RuntimeError; nothing is closed or re-prepared under a running insert.
Each scenario runs in its own interpreter, so a regression (a segfault) fails one test by its
signal instead of killing the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openmsprof.parse import db_builder as writer

pytestmark = pytest.mark.skipif(writer._native is None, reason="the C writer is not built here")
_SRC = str(Path(writer.__file__).resolve().parents[2])

_CLOSE_DURING_INSERT = r"""
import json, sqlite3, sys, threading
import numpy as np
from openmsprof.parse import _bulk_insert as bi
path, rows = sys.argv[1], int(sys.argv[2])
conn = bi.Conn(path)
conn.execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
             "CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER, d INTEGER)")
m = np.arange(rows * 4, dtype=np.int64).reshape(rows, 4)
one = "INSERT INTO t VALUES (?,?,?,?)"
many = "INSERT INTO t VALUES " + ",".join(["(?,?,?,?)"] * 16)
out = {}
started = threading.Event()
def insert():
    started.set()
    try:
        out["inserted"] = conn.insert_matrix(one, many, 16, m)
    except Exception as exc:
        out["insert_error"] = type(exc).__name__
t = threading.Thread(target=insert)
t.start()
started.wait()
refused = 0
while t.is_alive():
    try:
        conn.close()
    except RuntimeError as exc:
        refused += 1
        out["message"] = str(exc)
    else:
        if t.is_alive():
            out["closed_while_running"] = True
t.join()
conn.close()
out["refused"] = refused
out["in_file"] = sqlite3.connect(path).execute("SELECT count(*), sum(d) FROM t").fetchone()
print(json.dumps(out))
"""

_TWO_INSERTS = r"""
import json, sys, threading
import numpy as np
from openmsprof.parse import _bulk_insert as bi
conn = bi.Conn(sys.argv[1])
conn.execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; CREATE TABLE t (a INTEGER, b INTEGER)")
m = np.arange(int(sys.argv[2]) * 2, dtype=np.int64).reshape(-1, 2)
results = []
def insert():
    while len(results) < 40:
        try:
            results.append(conn.insert_matrix("INSERT INTO t VALUES (?,?)", "INSERT INTO t VALUES (?,?),(?,?)", 2, m))
        except RuntimeError:
            results.append("refused")
ts = [threading.Thread(target=insert) for _ in range(3)]
for t in ts: t.start()
for t in ts: t.join()
import sqlite3
conn.close()
count = sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM t").fetchone()[0]
print(json.dumps({"ok": sum(r for r in results if r != "refused"),
                  "refused": results.count("refused"), "count": count}))
"""


def _run(code: str, *args: str) -> dict[str, object]:
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": _SRC})
    assert p.returncode == 0, f"exit {p.returncode} (negative: killed by that signal): {p.stderr[-2000:]}"
    out: dict[str, object] = json.loads(p.stdout)
    return out


def test_close_from_another_thread_during_an_insert_is_refused(tmp_path: Path) -> None:
    rows = 400_000
    out = _run(_CLOSE_DURING_INSERT, str(tmp_path / "t.db"), str(rows))
    assert "insert_error" not in out and out["inserted"] == rows
    assert "closed_while_running" not in out
    assert isinstance(out["refused"], int) and out["refused"] >= 1
    assert "in use by another call" in str(out["message"])
    assert out["in_file"] == [rows, sum(4 * i + 3 for i in range(rows))]


def test_concurrent_inserts_from_threads_one_at_a_time(tmp_path: Path) -> None:
    out = _run(_TWO_INSERTS, str(tmp_path / "t.db"), "20001")
    assert isinstance(out["ok"], int) and out["ok"] == out["count"]
    assert out["ok"] % 20001 == 0 and out["ok"] >= 20001


def test_the_rows_iterator_cannot_close_or_reenter_its_connection(tmp_path: Path) -> None:
    conn = writer._native.Conn(str(tmp_path / "t.db"))
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    seen: list[str] = []

    def rows():  # type: ignore[no-untyped-def]
        yield (1, "one")
        for call in (conn.close, lambda: conn.execute("DROP TABLE t"),
                     lambda: conn.insert_rows("INSERT INTO t VALUES (?,?)", [(9, "nine")])):
            try:
                call()
            except RuntimeError as exc:
                seen.append(str(exc))
        yield (2, "two")

    assert conn.insert_rows("INSERT INTO t VALUES (?,?)", rows()) == 2
    assert len(seen) == 3 and all("in use by another call" in s for s in seen)
    conn.execute("CREATE TABLE u (x INTEGER)")  # usable again once the call returned
    conn.close()
    with pytest.raises(ValueError, match="closed"):
        conn.execute("SELECT 1")
    import sqlite3

    assert sqlite3.connect(tmp_path / "t.db").execute("SELECT a, b FROM t ORDER BY a").fetchall() == [
        (1, "one"), (2, "two")]
