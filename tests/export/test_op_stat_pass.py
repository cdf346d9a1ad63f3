"""op_statistic gathered in the task pass (export/msprof/op_stat_pass.py): the bytes of the SQL
route on the job db and on the tool-facing db, on jobs with edge cases, and the SQL route taken
where the pass cannot be sure of the order (ties)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof import op_stat_pass
from openmsprof.export.msprof.msprof_analyze_layout import OUTPUT_DIR, export_tool_facing
from openmsprof.export.msprof.summary_export import export_summary
from openmsprof.export.msprof.summary_task_pass import Twins, write_task_tables
from openmsprof.export.msprof.summary_tasks import op_statistic
from openmsprof.export.msprof.tables import write_table
from tests.export.dbfactory import PID, START_NS, Builder, make_job
from tests.export.twins import layout_from_db_and_from_twins


def _edge_job(root: Path, *, tie: bool = False) -> Path:
    """make_job plus: a zero-duration op, one ending before it starts, a task with no
    COMPUTE_TASK_INFO row and a NULL taskType, one with a NULL opType, an unknown executor,
    a device with one op; ``tie``: two groups of one op type with the same total time."""
    job = make_job(root)
    b = Builder.__new__(Builder)
    b.conn = sqlite3.connect(job / "sqlite" / "msprof.db")
    b.ids = dict(b.conn.execute("SELECT value, id FROM STRING_IDS"))
    t = START_NS + 30_000_000
    b.task(t, t, 800, "zero", "Zero")
    b.task(t + 1_000, t + 500, 801, "neg", "Relu")
    b.task(t + 2_000, t + 9_000, 802, "gpu_mm", "MatMul", executor="CUDA 0")
    b.conn.execute("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                   (t + 3_000, t + 4_000, 0, -1, 803, PID, None, -1, 0, 803, -1))
    b.task(t + 5_000, t + 7_000, 804, "no_type", "Anything")
    b.conn.execute("UPDATE COMPUTE_TASK_INFO SET opType = NULL WHERE globalTaskId = 804")
    b.task(t + 6_000, t + 6_300, 805, "only", "Single", dev=2)
    if tie:
        b.task(t + 10_000, t + 11_000, 806, "dup_a", "Dup", executor="CPU")
        b.task(t + 12_000, t + 13_000, 807, "dup_b", "Dup", executor="CUDA 0")
    b.conn.commit()
    b.conn.close()
    return job


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """What the pass's two functions returned (None: the SQL route was taken)."""
    out: dict[str, list[Any]] = {"job_stats": [], "twin_stats": []}
    for name in out:
        real = getattr(op_stat_pass, name)

        def wrapped(*a: Any, real: Any = real, name: str = name) -> Any:
            r = real(*a)
            out[name].append(r)
            return r
        monkeypatch.setattr(op_stat_pass, name, wrapped)
    return out


@pytest.mark.parametrize("tie", [False, True])
def test_job_op_statistic_equals_the_sql_route(tmp_path: Path, tie: bool, seen: dict[str, list[Any]]) -> None:
    job = _edge_job(tmp_path, tie=tie)
    new, old = tmp_path / "new", tmp_path / "old"
    new.mkdir()
    old.mkdir()
    with open_job(job) as db:
        paths = write_task_tables(db, new)["op_statistic"]
        for table in op_statistic(db):
            write_table(old, table)
    assert sorted(p.name for p in paths) == sorted(p.name for p in old.iterdir()) == \
        ["op_statistic_0.csv", "op_statistic_2.csv"]
    for p in old.iterdir():
        assert (new / p.name).read_bytes() == p.read_bytes(), p.name
    text = (old / "op_statistic_0.csv").read_text()
    assert ",Zero,CPU,1,0.000,0.000,0.000,0.000," in text and ",N/A,N/A,1,1.000," in text
    (stats,) = seen["job_stats"]
    assert (stats is None) == tie  # the pass's rows unless two groups tie
    if not tie:
        assert {(s.dev, s.op_type, s.core_type) for s in stats} >= {(0, "MatMul", "CUDA 0"), (2, "Single", "CPU")}


@pytest.mark.parametrize("tie", [False, True])
def test_twin_op_statistic_equals_the_tool_facing_db_route(tmp_path: Path, tie: bool,
                                                           seen: dict[str, list[Any]]) -> None:
    job = _edge_job(tmp_path, tie=tie)
    rendered, written, twins = layout_from_db_and_from_twins(job)
    assert written == rendered
    (stats,) = seen["twin_stats"]
    # the pass's twin unless it cannot be sure (the tie of the job db is one group in the tool db)
    assert ("op_statistic" in twins.written) == (stats is not None) and (tie or stats is not None)
    (name,) = [n for n in rendered if n.startswith("op_statistic_")]
    text = rendered[name].decode()
    assert ",MatMul,AI_CORE," in text or ",MatMul,AI_VECTOR_CORE," in text or ",MatMul,CUDA 0," in text


def test_twin_groups_apart_when_the_db_may_merge_them() -> None:
    """A classified group and an unclassified one with one op type and one Task Type text: the
    db may give them one id or two, so the pass gives up (None)."""
    hk_cls = (1, 0, 10, 20, None, 30, 1)
    hk_raw = (1, 0, 11, 20, None, 31, 0)
    groups = {0: {hk_cls: [1, 5, 5, 5], hk_raw: [2, 8, 3, 5]}}
    texts = {20: "Conv", 30: "CPU", 31: "AI_CORE"}
    text = lambda sid: texts.get(sid, "N/A")  # noqa: E731
    assert op_stat_pass.twin_stats(groups, text, {(20, 10): "AI_CORE"}) is None
    (row_a, row_b) = op_stat_pass.twin_stats(groups, text, {(20, 10): "AI_VECTOR_CORE"}) or []
    assert (row_a.core_type, row_a.calls, row_a.total_ns, row_a.min_ns) == ("AI_CORE", 2, 8, 3)
    assert (row_b.core_type, row_b.total_ns) == ("AI_VECTOR_CORE", 5) and row_a.ratio + row_b.ratio == 100.0


def test_too_many_groups_take_the_sql_route(tmp_path: Path, seen: dict[str, list[Any]],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Past GROUPS_MAX head keys on a device the pass keeps no groups (bounded memory): the
    job's op_statistic comes from SQL, the twin from the tool-facing db; same bytes."""
    from openmsprof.export.msprof import summary_task_pass

    job = _edge_job(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with open_job(job) as db:
        before = [p.read_bytes() for p in write_task_tables(db, tmp_path / "a")["op_statistic"]]
    monkeypatch.setattr(summary_task_pass, "GROUPS_MAX", 3)
    with open_job(job) as db:
        after = [p.read_bytes() for p in write_task_tables(db, tmp_path / "b")["op_statistic"]]
    assert after == before and len(after) == 2
    assert seen["job_stats"][0] is not None and len(seen["job_stats"]) == 1  # not called when over
    out = job / OUTPUT_DIR
    export_tool_facing(job, ("summary",))
    rendered = {p.name: p.read_bytes() for p in out.iterdir()}
    used: list[Twins | None] = []
    export_tool_facing(job, ("summary",),
                       summary=lambda twins, meanwhile: used.append(twins) or export_summary(job, twins=twins))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == rendered
    assert used[0] is not None and "op_statistic" not in used[0].written and seen["twin_stats"] == []
