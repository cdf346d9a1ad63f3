"""Counter, CPU and memory samples are bound many rows per statement (convert._objmat): the
tables hold exactly what one INSERT per sample stores (ints stay ints, floats keep every bit,
NUMERIC affinity applied the same way)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from openmsprof.parse import schema
from openmsprof.parse.convert import DirConverter, JobCounters
from openmsprof.parse.db_builder import ROWS_PER_STATEMENT, DbWriter
from openmsprof.parse.strings import LocalMap, StringIds
from openmsprof.recorder.rawfile import COUNTER_DTYPE, GENERIC_DTYPE
from openmsprof.recorder.records import Series

TABLES = ("OMSP_COUNTER", "CPU_USAGE", "HOST_MEM_USAGE")


def _samples(n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    c = np.zeros(n, dtype=GENERIC_DTYPE).view(COUNTER_DTYPE)
    c["kind"] = 10
    c["ts"] = 1_000_000_000 + np.arange(n, dtype=np.int64) * 997
    series = np.array([Series.SYS_CPU_PERCENT, Series.SYS_MEM_TOTAL_KB, Series.SYS_MEM_USED_KB,
                       Series.PROC_RSS_KB], dtype=np.uint32)
    c["a"] = series[np.arange(n) % len(series)]
    c["b"] = np.arange(n) % 5
    values = rng.random(n) * 10.0 ** rng.integers(-3, 12, n)
    values[::7] = np.round(values[::7])  # integer-valued floats: NUMERIC stores them as integers
    values[::11] = 0.1 + 0.2  # not a short decimal
    c["value"] = values
    return c


def test_bulk_bound_samples_equal_one_insert_per_sample(tmp_path: Path) -> None:
    n = 5 * ROWS_PER_STATEMENT + 13  # full statements and a remainder
    strings = StringIds()
    conv = DirConverter(-1, 4242, 0, strings, LocalMap({}, strings), JobCounters())
    batches = conv.feed(_samples(n).view(GENERIC_DTYPE))
    assert {sql.split(" INTO ", 1)[1].split()[0] for sql, _ in batches} == set(TABLES)
    (tmp_path / "bulk").mkdir()
    w = DbWriter(tmp_path / "bulk")
    w.write(batches)
    bulk = w.commit()
    assert w.rows["OMSP_COUNTER"] == n

    one = sqlite3.connect(tmp_path / "one.db")
    for stmt in schema.create_statements():
        one.execute(stmt)
    c = _samples(n)
    ts, series, sub, value = c["ts"].tolist(), c["a"].tolist(), c["b"].tolist(), c["value"].tolist()
    one.executemany("INSERT INTO OMSP_COUNTER VALUES (?, -1, ?, ?, ?)", zip(ts, series, sub, value, strict=True))
    one.executemany("INSERT INTO CPU_USAGE VALUES (?, ?, ?)",
                    [(t, b - 1, v) for t, a, b, v in zip(ts, series, sub, value, strict=True)
                     if a == Series.SYS_CPU_PERCENT])
    for sql, rows in conv.feed(c.view(GENERIC_DTYPE)):  # memory %: the converter's own arithmetic
        if "HOST_MEM_USAGE" in sql:
            one.executemany(sql, np.asarray(rows).tolist())
    one.commit()
    got = sqlite3.connect(bulk)
    for table in TABLES:
        q = f"SELECT *, {', '.join(f'typeof({c.split()[0]})' for c in schema.TABLES[table].split(','))} FROM {table}"
        mine, theirs = got.execute(q).fetchall(), one.execute(q).fetchall()
        assert mine == theirs and len(mine) > ROWS_PER_STATEMENT, table
    assert {t for (t,) in got.execute("SELECT DISTINCT typeof(value) FROM OMSP_COUNTER")} == {"integer", "real"}
