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


def _memory_percent(ts: list[int], series: list[int], value: list[float]) -> list[tuple[int, float]]:
    """HOST_MEM_USAGE as FORMATS defines it, sample by sample: used * 100 / the latest total
    before it (0 while no total is known)."""
    rows, total = [], 0.0
    for t, a, v in zip(ts, series, value, strict=True):
        if a == Series.SYS_MEM_TOTAL_KB:
            total = v
        elif a == Series.SYS_MEM_USED_KB:
            rows.append((t, v * 100.0 / total if total > 0 else 0.0))
    return rows


def _feed_memory(conv: DirConverter, samples: list[tuple[int, float]]) -> list[float]:
    """Feed (series, kB) samples one second apart; the HOST_MEM_USAGE values the converter binds."""
    c = np.zeros(len(samples), dtype=GENERIC_DTYPE).view(COUNTER_DTYPE)
    c["kind"] = 10
    c["ts"] = 10**9 * np.arange(1, len(samples) + 1)
    c["a"] = [s for s, _ in samples]
    c["value"] = [v for _, v in samples]
    out = []
    for sql, rows in conv.feed(c.view(GENERIC_DTYPE)):
        if "HOST_MEM_USAGE" in sql:
            out += [float(r[1]) for r in np.asarray(rows).tolist()]
    return out


def test_memory_percent_is_used_over_total_across_chunks() -> None:
    """8 GiB total, 2 GiB used → 25 %, not the 75 % free; a chunk without a total uses the last."""
    strings = StringIds()
    conv = DirConverter(-1, 4242, 0, strings, LocalMap({}, strings), JobCounters())
    T, U = Series.SYS_MEM_TOTAL_KB, Series.SYS_MEM_USED_KB
    assert _feed_memory(conv, [(U, 1024.0)]) == [0.0]  # no total known yet
    assert _feed_memory(conv, [(T, 8_388_608.0), (U, 2_097_152.0), (U, 6_291_456.0)]) == [25.0, 75.0]
    assert _feed_memory(conv, [(U, 4_194_304.0)]) == [50.0]  # the total of the previous chunk
    assert _feed_memory(conv, [(T, 4_194_304.0), (U, 1_048_576.0)]) == [25.0]


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
    one.executemany("INSERT INTO HOST_MEM_USAGE VALUES (?, ?)", _memory_percent(ts, series, value))
    one.commit()
    got = sqlite3.connect(bulk)
    for table in TABLES:
        q = f"SELECT *, {', '.join(f'typeof({c.split()[0]})' for c in schema.TABLES[table].split(','))} FROM {table}"
        mine, theirs = got.execute(q).fetchall(), one.execute(q).fetchall()
        assert mine == theirs and len(mine) > ROWS_PER_STATEMENT, table
    assert {t for (t,) in got.execute("SELECT DISTINCT typeof(value) FROM OMSP_COUNTER")} == {"integer", "real"}
