"""The task pass's per-row loop in C (export/msprof/_task_lines.c): the bytes of the Python loop
(summary_task_pass._device_pass without it) on the rows it must leave to Python (negative,
float or huge times, text or NULL task ids) and on non-ASCII names, with twins and the
op_statistic groups (bounded or not)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof import summary_task_pass as tp
from openmsprof.export.msprof.task_classes import engine_types
from tests.export.dbfactory import START_NS, Builder, make_job

native = pytest.importorskip("openmsprof.export.msprof._task_lines",
                             reason="the C extension was not built (no compiler): the Python loop runs")


def _odd_job(root: Path) -> Path:
    job = make_job(root)
    b = Builder.__new__(Builder)
    b.conn = sqlite3.connect(job / "sqlite" / "msprof.db")
    b.ids = dict(b.conn.execute("SELECT value, id FROM STRING_IDS"))
    t = START_NS + 50_000_000
    b.task(t, t + 5_000, 900, "卷积_conv", "Conv2D", executor="CUDA 0")  # non-ASCII (2-byte kind)
    b.task(t + 1_000, t + 9_999, 901, "op_😀", "Relu")  # 4-byte kind
    b.task(t + 2_000, t + 1_000, 902, "ends_early", "Relu", dev=1)
    b.task(-5_000, -9_000, 903, "negative", "Relu", dev=1)
    b.task(-(1 << 62), -(1 << 62), 904, "very_negative", "Relu", dev=2)
    b.task((1 << 62) + 7, (1 << 62) + 1_234_567, 905, "wait_overflows", "Relu", dev=2)
    b.task(t + 3_000, t + 3_500, 906, "float_start", "Relu", dev=1)
    b.conn.execute("UPDATE TASK SET startNs = ? WHERE globalTaskId = 906", (float(t + 3_000) + 0.5,))
    b.task(t + 4_000, t + 4_500, 907, "text_task_id", "Relu")
    b.conn.execute("UPDATE TASK SET taskId = '12a' WHERE globalTaskId = 907")
    b.task(t + 5_000, t + 5_500, 908, "null_task_id", "Relu")
    b.conn.execute("UPDATE TASK SET taskId = NULL WHERE globalTaskId = 908")
    b.conn.execute("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",  # no COMPUTE_TASK_INFO row
                   (t + 6_000, t + 7_000, 0, -1, 999, 4242, b.s("CPU"), -1, 3, 999, -1))
    b.conn.commit()
    b.conn.close()
    return job


def _render(job: Path, out: Path, use_native: bool, monkeypatch: pytest.MonkeyPatch,
            groups_max: int) -> dict[str, bytes]:
    out.mkdir()
    with monkeypatch.context() as m:
        m.setattr(tp, "_native", native if use_native else None)
        m.setattr(tp, "GROUPS_MAX", groups_max)
        with open_job(job) as db:
            twins = tp.Twins(out, "20260101000000", lambda jdb: engine_types(jdb.conn))
            paths = tp.write_task_tables(db, out, twins)
    assert paths["op_summary"] and paths["tool_facing_op_summary"]
    return {p.name: p.read_bytes() for p in out.iterdir()}


@pytest.mark.parametrize("groups_max", [tp.GROUPS_MAX, 3])
def test_native_loop_writes_the_python_loops_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   groups_max: int) -> None:
    job = _odd_job(tmp_path / "job")
    fast = _render(job, tmp_path / "c", True, monkeypatch, groups_max)
    slow = _render(job, tmp_path / "py", False, monkeypatch, groups_max)
    assert fast == slow
    text = fast["op_summary_0.csv"].decode()
    assert "卷积_conv" in text and "op_😀" in text and ",12a," in text
    assert "-5.000" in fast["op_summary_1.csv"].decode()
    assert str(((1 << 62) + (1 << 62) + 7) // 1000) in fast["op_summary_2.csv"].decode()  # the big wait


def test_render_stops_at_the_rows_it_leaves_to_python() -> None:
    heads: dict[object, object] = {}
    pieces = ("0,N/A,", ",1,Conv,Conv,N/A,CPU,", "0,Conv,CPU,1,")

    def head(key: object) -> object:
        h = heads[key] = (pieces, True, pieces, True, True)
        return h

    groups: dict[object, list[int]] = {}
    ctx = (heads, head, {}, {}, None, groups, 10, False, True)
    key = (None, 1, 2, 3, None, 4, 1)
    rows = [(2_000, 3_500, 7, *key, *[None] * 11), (5_000, 4_000, None, *key, *[None] * 11),
            (-1, 5, 8, *key, *[None] * 11), (6_000, 6_001, 9, *key, *[None] * 11)]
    i, prev_end, complete, ops, times, twin_ops, twin_times = native.render(rows, 0, None, True, ctx)
    assert (i, prev_end, complete) == (2, 5_000, True)
    assert ops == (b"0,N/A,7,1,Conv,Conv,N/A,CPU,2.000,1.500,0.000\n"
                   b"0,N/A,,1,Conv,Conv,N/A,CPU,5.000,0.000,1.500\n")
    assert times == b"0,Conv,CPU,1,7,1.500,2.000,3.500\n0,Conv,CPU,1,,0.000,5.000,5.000\n"
    assert (twin_ops, twin_times) == (ops, times)
    assert groups == {key: [2, 1_500, 0, 1_500]}
    assert native.render(rows, 2, prev_end, True, ctx) == (2, 5_000, True, b"", b"", b"", b"")  # negative start
    assert native.render(rows, 3, -1, True, ctx)[:2] == (4, 6_001)
    with pytest.raises(TypeError):
        native.render(rows, 0, None, True, ctx[:5])


@pytest.mark.parametrize("max_rows", [1, 2, 3, 7, 100])
def test_blocks_slice_as_lines_do(tmp_path: Path, max_rows: int) -> None:
    """LineSlices.add_block (the native route's encoded chunks) cuts slices where add does,
    a newline inside a quoted field included."""
    from openmsprof.export.msprof.tables import LineSlices

    lines = ['0,"a\nb",1\n', "0,b,2\n", '0,"x""\n""y",3\n', "0,é,4\n", "0,c,5\n"]
    out = {}
    for route in ("lines", "block"):
        d = tmp_path / route
        d.mkdir()
        sink = LineSlices(d, "op_summary", 0, ["A", "B", "C"], max_rows)
        for chunk in (lines[:2], lines[2:]):
            if route == "lines":
                sink.add(list(chunk))
            else:
                sink.add_block("".join(chunk).encode(), len(chunk))
        out[route] = {p.name: p.read_bytes() for p in sink.finish()}
    assert out["block"] == out["lines"] and len(out["lines"]) == -(-5 // max_rows)
