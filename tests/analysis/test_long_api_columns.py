"""``rules.long_api`` over int64 columns: the findings of grouping every call as a tuple (the
reference below, the rule as it was), and a peak memory that no longer holds a tuple a call."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from openmsprof.analysis import rules
from openmsprof.export.jobdb import JobDB


def _db(path: Path, calls: list[tuple[Any, ...]]) -> JobDB:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE META_DATA(name TEXT, value TEXT)")
    con.execute("CREATE TABLE CANN_API(startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, "
                "connectionId INTEGER PRIMARY KEY, name INTEGER)")
    con.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(i, f"api{i}") for i in range(1, 9)] + [(9, "")])
    con.executemany("INSERT INTO CANN_API(startNs, endNs, type, globalTid, name) VALUES (?,?,?,0,?)", calls)
    con.commit()
    con.close()
    return JobDB(path)


def _reference(db: JobDB) -> list[tuple[Any, ...]]:
    """The groups as the rule built them before: one tuple a call, grouped by (type, name) in the
    order of first calls; what each finding is made of, per group."""
    rows = db.query("SELECT type, name, connectionId, startNs, MAX(endNs - startNs, 0) FROM CANN_API "
                    "WHERE startNs IS NOT NULL AND endNs IS NOT NULL ORDER BY startNs")
    groups: dict[tuple[Any, Any], list[tuple[int, int, int]]] = {}
    for typ, name, cid, s, d in rows:
        groups.setdefault((typ, name), []).append((cid, s, d))
    return [(db.text(name), calls) for (_t, name), calls in groups.items()]


def _calls(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    out = []
    t = 1_790_000_000_000_000_000
    for i in range(n):
        t += rng.choice((0, 0, 3, 1000))  # ties in start order
        typ = rng.choice((20000, 15000, 5000, None))
        name = rng.choice((1, 2, 3, 4, 5, 9, None))
        dur = rng.choice((10, 20, 30, 40_000_000, 0, -5))  # long calls, zero and negative lengths
        if i % 97 == 0:
            dur = 900_000_000  # a warm-up-like outlier
        out.append((t, t + dur, typ, name))
    out.append((None, 5, 5000, 1))  # no start: left out, as the reference does
    return out


def _groups(db: JobDB) -> list[tuple[Any, ...]]:
    """The groups as the rule now reads them: its int64 rows grouped by ``_api_groups``."""
    rows = rules._api_rows(db)
    out = []
    for sel in rules._api_groups(rows[:, 0], rows[:, 1]):
        out.append((db.text(int(rows[sel[0], 1])),
                    list(zip(rows[sel, 2].tolist(), rows[sel, 3].tolist(), rows[sel, 4].tolist(), strict=True))))
    return out


def test_groups_equal_the_tuple_grouping(tmp_path: Path) -> None:
    """Calls with ties in start order, NULL types and names, an empty name, zero and negative
    lengths, a row without a start: the same groups, in the same order, each call in start order."""
    for seed in range(4):
        db = _db(tmp_path / f"{seed}.db", _calls(random.Random(seed), 3000))
        assert _groups(db) == _reference(db)
        found = rules.long_api(db)
        assert found and all(f.rule == "long_api" for f in found)
        calls = {(c[0], c[1], c[2]) for _n, cs in _reference(db) for c in cs}
        assert all((e.id, e.start_ns, e.dur_ns) in calls for f in found for e in f.events)


def test_groups_keep_start_order_and_first_call_order() -> None:
    typs = np.asarray([5, 7, 5, 7, 5, 9], np.int64)
    names = np.asarray([1, 1, 1, 2, 1, 1], np.int64)
    groups = rules._api_groups(typs, names)
    assert [g.tolist() for g in groups] == [[0, 2, 4], [1], [3], [5]]


_PEAK = """
import sys


def hwm():  # this process's peak RSS in KB (VmHWM: ru_maxrss would start at its parent's RSS)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


from pathlib import Path
from openmsprof.analysis import rules
from openmsprof.export.jobdb import JobDB
db = JobDB(Path(sys.argv[1]))
db.text(1)
before = hwm()
found = rules.long_api(db)
print(len(found), (hwm() - before) // 1024)
"""


def test_peak_memory_of_a_million_calls(tmp_path: Path) -> None:
    """1 M calls of 8 APIs: a tuple a call grew the peak by 289 MB; the int64 columns by 70 MB."""
    base = 1_790_000_000_000_000_000
    _db(tmp_path / "big.db", [(base + 100 * i, base + 100 * i + 50 + (i % 7), 5000, 1 + i % 8)
                              for i in range(1_000_000)]).close()
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_PEAK), str(tmp_path / "big.db")],
                         capture_output=True, text=True, check=True, timeout=300)
    _n, grew_mb = map(int, out.stdout.split())
    assert grew_mb < 120, f"long_api grew the peak RSS by {grew_mb} MB over 1 M calls"
