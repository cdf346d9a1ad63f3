"""op_summary and task_time from one task pass (export/msprof/summary_task_pass.py): the bytes of
the separate producers, and tool-facing twins equal to the files rendered from msprof_{ts}.db."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof.msprof_analyze_layout import OUTPUT_DIR, export_tool_facing
from openmsprof.export.msprof.summary_export import PRODUCERS, export_summary
from openmsprof.export.msprof.summary_task_pass import Twins, write_task_tables
from openmsprof.export.msprof.tables import write_table
from tests.export.dbfactory import START_NS, Builder, make_job
from tests.export.realjob import make_real_job
from tests.export.twins import layout_from_db_and_from_twins


def _two_device_job(root: Path) -> Path:
    """make_job plus device 1 tasks (one launched on a real accelerator, one without a
    COMPUTE_TASK_INFO row, one ending before it starts)."""
    job = make_job(root)
    b = Builder.__new__(Builder)
    b.conn = sqlite3.connect(job / "sqlite" / "msprof.db")
    b.ids = dict(b.conn.execute("SELECT value, id FROM STRING_IDS"))
    t = START_NS + 20_000_000
    b.task(t, t + 5_000, 900, "mm_gpu", "MatMul", dev=1, executor="CUDA 0")
    b.task(t + 10_000, t + 9_000, 901, "neg", "Relu", dev=1)
    b.conn.execute("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                   (t + 20_000, t + 30_000, 1, -1, 999, 4242, b.s("CPU"), -1, 3, 999, -1))
    b.conn.commit()
    b.conn.close()
    return job


@pytest.fixture(params=["db", "real"])
def job(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return _two_device_job(tmp_path) if request.param == "db" else make_real_job(tmp_path / "out")


def test_one_pass_writes_the_producers_bytes(job: Path, tmp_path: Path) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    new.mkdir()
    old.mkdir()
    with open_job(job) as db:
        paths = write_task_tables(db, new)
        for name in ("op_summary", "task_time", "op_statistic"):
            for t in PRODUCERS[name](db):
                write_table(old, t)
    assert sorted(p.name for ps in paths.values() for p in ps) == sorted(p.name for p in old.iterdir())
    for p in old.iterdir():
        assert (new / p.name).read_bytes() == p.read_bytes(), p.name


def test_twins_equal_the_layout_rendered_from_its_db(job: Path) -> None:
    rendered, written, twins = layout_from_db_and_from_twins(job)
    assert written == rendered
    assert set(twins.written) == {"op_summary", "task_time", "op_statistic"}  # by the pass
    ops = (job / "summary" / "op_summary_0.csv").read_text()
    twin = rendered[twins.written["op_summary"][0].name].decode()
    assert ",AI_" not in ops and ",AI_" not in twin and ",CPU," in twin  # the real executor (decision 1)
    assert any(n.startswith("op_summary_") for n in rendered) and any(n.startswith("task_time_") for n in rendered)


def test_twins_written_by_the_forked_child(job: Path, tmp_path: Path) -> None:
    from openmsprof.export.msprof.summary_export import write_summary

    out: dict[bool, dict[str, bytes]] = {}
    for parallel in (False, True):
        twin_dir = tmp_path / f"twins{parallel}"
        twin_dir.mkdir()
        twins = Twins(twin_dir, "20260101000000", {})
        with open_job(job) as db:
            paths = write_summary(db, tmp_path / f"summary{parallel}", parallel=parallel, twins=twins)
        assert set(twins.written) == {"op_summary", "task_time"}
        out[parallel] = {p.name: p.read_bytes() for p in [*paths, *twin_dir.iterdir()]}
    assert out[True] == out[False] and "op_summary_20260101000000.csv" in out[True]


def test_fresh_db_copied_while_the_child_renders(job: Path) -> None:
    """No current msprof_{ts}.db: the twins' types come from the job db (engine_types) and the
    copy runs as the summary's ``meanwhile``; files and db are those of the plain route."""
    from openmsprof.export.jobdb import JobDB
    from openmsprof.export.msprof.summary_task_pass import twin_types
    from openmsprof.export.msprof.task_classes import engine_types

    out = job / OUTPUT_DIR
    export_tool_facing(job, ("summary",))
    rendered = {p.name[:-len("_20260101000000.csv")]: p.read_bytes() for p in out.iterdir() if p.suffix == ".csv"}
    (db_path,) = job.glob("msprof_*.db")
    with JobDB(db_path, job) as tool_db, open_job(job) as jdb:
        assert engine_types(jdb.conn) == twin_types(tool_db) != {}
    dump = "\n".join(sqlite3.connect(db_path).iterdump())
    db_path.unlink()
    calls: list[bool] = []

    def summary(twins: Twins | None, meanwhile: object) -> list[Path]:
        assert callable(meanwhile) and not list(job.glob("msprof_*.db"))  # not copied yet

        def copy() -> None:
            calls.append(True)
            meanwhile()
        return export_summary(job, twins=twins, meanwhile=copy)

    export_tool_facing(job, ("summary",), summary=summary)
    assert calls == [True]
    (fresh,) = job.glob("msprof_*.db")
    assert "\n".join(sqlite3.connect(fresh).iterdump()) == dump
    assert {p.name[:-len("_20260101000000.csv")]: p.read_bytes() for p in out.iterdir() if p.suffix == ".csv"} == rendered


@pytest.mark.parametrize("fresh", [True, False])
def test_merged_tables_from_the_db_are_made_in_the_meanwhile_step(job: Path, fresh: bool) -> None:
    """fusion_op of the layout reads the tool-facing db's task types: it is rendered in the step
    run while the summary's child renders (fresh db or kept one); op_statistic is gathered by the
    task pass instead (not by that step); same bytes as a layout whose summary never runs it."""
    out = job / OUTPUT_DIR
    export_tool_facing(job, ("summary",), summary=lambda twins, meanwhile: export_summary(job, twins=twins))
    late = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".csv"}
    assert any(n.startswith("op_statistic_") for n in late)
    if fresh:
        for db in job.glob("msprof_*.db"):
            db.unlink()
    seen: list[set[str]] = []

    def summary(twins: Twins | None, meanwhile: Callable[[], None] | None) -> list[Path]:
        def step() -> None:
            assert meanwhile is not None
            for p in out.glob("op_statistic_*.csv"):
                p.unlink()
            meanwhile()
            seen.append({p.name for p in out.iterdir()})
        return export_summary(job, twins=twins, meanwhile=step)

    export_tool_facing(job, ("summary",), summary=summary)
    assert len(seen) == 1 and not any(n.startswith("op_statistic_") for n in seen[0])
    now = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".csv"}
    if fresh:  # a new stamp: compare without it
        strip = lambda d: {k[:-len("_20260101000000.csv")]: v for k, v in d.items()}  # noqa: E731
        assert sorted(strip(now)) == sorted(strip(late))
        assert strip(now)["op_statistic"] == strip(late)["op_statistic"]
    else:
        assert now == late
