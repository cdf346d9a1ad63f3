"""acl_statistic's groups gathered by the import (parse/api_groups.py): the SQL route's rows, in
its order on tied totals, handed out only for the file they were gathered for, and not kept where
SQL could compute differently or memory would grow."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof.summary_host import acl_groups, acl_statistic
from openmsprof.parse import api_groups
from openmsprof.parse.api_groups import ApiGroups
from tests.export.dbfactory import make_job
from tests.export.realjob import make_real_job


def _random_api(db_path: Path, seed: int) -> dict[str, np.ndarray]:
    """CANN_API replaced by rows whose totals tie often (few durations, few counts)."""
    rng = np.random.default_rng(seed)
    n = 5_000
    cols = {"gtid": rng.choice([7 << 32 | 1, 7 << 32 | 2, 8 << 32 | 1], n),
            "typ": rng.choice([20000, 5000, 15000], n), "name": rng.integers(1, 40, n)}
    start = rng.integers(0, 1 << 40, n)
    cols["start"], cols["end"] = start, start + rng.choice([-5, 0, 1000, 2000], n)
    con = sqlite3.connect(db_path)
    con.execute("DELETE FROM CANN_API")
    con.executemany("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)", zip(
        cols["start"].tolist(), cols["end"].tolist(), cols["typ"].tolist(), cols["gtid"].tolist(),
        range(1, n + 1), cols["name"].tolist(), strict=True))
    con.commit()
    con.close()
    return cols


@pytest.mark.parametrize("seed", range(4))
def test_groups_are_sqls_rows_in_sqls_order(tmp_path: Path, seed: int) -> None:
    job = make_job(tmp_path)
    db_path = job / "sqlite" / "msprof.db"
    cols = _random_api(db_path, seed)
    groups = ApiGroups()
    for part in np.array_split(np.arange(len(cols["start"])), 7):  # chunks as the import feeds them
        groups.add(*(cols[k][part] for k in ("gtid", "typ", "name", "start", "end")))
    try:
        with open_job(job) as db:
            api_groups.forget(db.path)
            sql = acl_groups(db)
            sql_file = next(iter(acl_statistic(db))).rows
            api_groups.remember(db.path, groups)
            assert api_groups.lookup(db.path) is groups.groups
            assert acl_groups(db) == sql
            assert next(iter(acl_statistic(db))).rows == sql_file
        totals = [r[3] for r in sql]
        assert len(set(totals)) < len(totals)  # ties were there to be ordered
    finally:
        api_groups.forget(db_path)


def test_groups_only_for_the_file_they_were_gathered_for(tmp_path: Path) -> None:
    job = make_job(tmp_path)
    db_path = job / "sqlite" / "msprof.db"
    groups = ApiGroups()
    groups.add(*(np.array([v]) for v in (1, 20000, 3, 10, 20)))
    api_groups.remember(db_path, groups)
    assert api_groups.lookup(db_path) == {(1, 20000, 3): [1, 10, 10, 10]}
    st = db_path.stat()
    os.utime(db_path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert api_groups.lookup(db_path) is None
    api_groups.forget(db_path)


def test_only_the_latest_imports_groups_are_kept(tmp_path: Path) -> None:
    """A process importing many jobs keeps one set of groups (memory stays bounded)."""
    first, second = (make_job(tmp_path / n) / "sqlite" / "msprof.db" for n in ("a", "b"))
    for db_path, value in ((first, 10), (second, 11)):
        groups = ApiGroups()
        groups.add(*(np.array([v]) for v in (1, 20000, 3, value, 20)))
        api_groups.remember(db_path, groups)
    assert api_groups.lookup(first) is None
    assert api_groups.lookup(second) == {(1, 20000, 3): [1, 9, 9, 9]}
    api_groups.forget(second)


def test_groups_give_up_where_sql_could_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    huge = ApiGroups()
    huge.add(*(np.array([v]) for v in (1, 2, 3, 1 << 62, (1 << 62) + 5)))
    assert not huge.ok and huge.groups == {}
    big_sum = ApiGroups()
    big_sum.add(np.ones(4, dtype=np.int64), np.ones(4, dtype=np.int64), np.ones(4, dtype=np.int64),
                np.zeros(4, dtype=np.int64), np.full(4, 1 << 61, dtype=np.int64))
    assert not big_sum.ok
    monkeypatch.setattr(api_groups, "MAX_GROUPS", 2)
    many = ApiGroups()
    many.add(np.arange(3), np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64),
             np.zeros(3, dtype=np.int64), np.ones(3, dtype=np.int64))
    assert not many.ok and many.groups == {}
    api_groups.remember(Path("/nonexistent/msprof.db"), many)
    assert api_groups.lookup(Path("/nonexistent/msprof.db")) is None


def test_the_import_keeps_them_and_the_export_writes_the_same_file(tmp_path: Path) -> None:
    job = make_real_job(tmp_path / "out", imported=False)
    from openmsprof.parse.importer import import_job

    db_path = import_job(job).db_path
    kept = api_groups.lookup(db_path)
    assert kept
    with open_job(job) as db:
        fast = next(iter(acl_statistic(db))).rows
        api_groups.forget(db_path)
        assert next(iter(acl_statistic(db))).rows == fast
