"""The large summaries (op_summary, task_time, msprof_tx) are written from ready CSV lines; the bytes
must be those the csv module writes from the rows (quoting of commas, quotes, newlines, braces,
empty strings), also across slices."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof import summary_host, summary_tasks
from openmsprof.export.msprof.tables import Table, csv_fields, write_csv
from tests.export.dbfactory import START_NS, Builder, write_info

AWKWARD = ["plain", "a,b", 'say "hi"', "two\nlines", "{brace}", "", " lead space", "1,3;2,4"]


def _job(tmp_path: Path) -> Path:
    job = tmp_path / "PROF_000001_20240101000000000_00004242ABCDEFGH"
    write_info(job)  # before the database: a newer host/ would make open_job import again
    b = Builder(job / "sqlite" / "msprof.db")
    b.meta(START_NS, START_NS + 10**9)
    t = START_NS
    for i in range(40):
        text = AWKWARD[i % len(AWKWARD)]
        b.task(t, t + 1_234 * (i % 5), i, text or "x", AWKWARD[(i + 1) % len(AWKWARD)] or "y", stream=i % 3,
               shapes=AWKWARD[(i + 2) % len(AWKWARD)] or "1", executor="CPU" if i % 2 else "AI_CORE")
        b.mstx(t, t + 500 * (i % 3), 1 + i % 2, text, tid=7 + i % 2, domain=AWKWARD[(i + 3) % len(AWKWARD)] or "d")
        t += 2_000 - 700 * (i % 4 == 0)  # some tasks overlap their predecessor
    b.close()
    return job


def _csv_of(rows: list[list[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def test_lines_equal_the_csv_module_rows(tmp_path: Path) -> None:
    with open_job(_job(tmp_path)) as db:
        tables = [*summary_tasks.op_summary(db), *summary_tasks.task_time(db), *summary_host.msprof_tx(db)]
        assert [t.name for t in tables] == ["op_summary", "task_time", "msprof_tx"]
        for t in tables:
            assert t.lines is not None
            lines = "".join(t.lines())
            assert lines == _csv_of([list(r) for r in t.rows]), t.name
            assert lines.count('"') > 0  # the awkward strings were quoted


def test_line_slices_match_row_slices(tmp_path: Path) -> None:
    rows = [[i, AWKWARD[i % len(AWKWARD)], f"{i}.000"] for i in range(7)]
    lines = [_csv_of([r]) for r in rows]
    (tmp_path / "r").mkdir()
    (tmp_path / "l").mkdir()
    by_rows = write_csv(tmp_path / "r", Table("task_time", 0, ["a", "b,c", "d"], rows), max_rows=3)
    by_lines = write_csv(tmp_path / "l", Table("task_time", 0, ["a", "b,c", "d"], [], lambda: iter(lines)),
                         max_rows=3)
    assert [p.name for p in by_rows] == [p.name for p in by_lines] == [f"task_time_0_slice_{k}.csv" for k in range(3)]
    for a, b in zip(by_rows, by_lines, strict=True):
        assert a.read_bytes() == b.read_bytes()
    assert csv_fields([""]) == "" and csv_fields(["a,b", None]) == '"a,b",'
