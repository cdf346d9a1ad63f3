"""openmsprof's own frames and threads are removed from a framework trace (export/ascend_pt/footprint)."""

from __future__ import annotations

from typing import Any

from openmsprof.export.ascend_pt.columns import Columns
from openmsprof.export.ascend_pt.footprint import drop_own, is_own_frame


def _py(name: str, tid: int, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def _op(name: str, tid: int, ts: float, dur: float, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def test_own_frames_and_threads_dropped_user_code_kept() -> None:
    events = [
        # main thread: user script, our step() with a torch helper inside, the step annotation
        _py("train.py(10): <module>", 7, 0, 1000),
        _py("site-packages/openmsprof/torch/profiler/profile.py(122): step", 7, 100, 50),
        _py("torch/autograd/profiler.py(700): __enter__", 7, 110, 10),
        _op("ProfilerStep#1", 7, 140, 500, cat="user_annotation"),
        _op("aten::empty", 7, 115, 2),
        _op("aten::mm", 7, 200, 30),
        _py("train.py(20): forward", 7, 190, 60),
        # our writer thread (Python tid 0): threading frames around openmsprof code
        _py("threading.py(1002): _bootstrap", 0, 0, 900),
        _py("threading.py(1045): _bootstrap_inner", 0, 1, 898),
        _py("openmsprof/torch/profiler/_writer.py(27): _run", 0, 3, 890),
        _py("json/encoder.py(200): encode", 0, 10, 5),
        # a user thread: threading frames around user code, kept
        _py("threading.py(1002): _bootstrap", 9, 0, 500),
        _py("loader.py(5): worker", 9, 2, 400),
    ]
    cols = Columns()
    cols.add(events)
    cols.finish(0)
    removed = drop_own(cols)
    names = [cols.py_names.items[c] for c in cols.py_name.tolist()]
    assert not [n for n in names if "openmsprof" in n or "autograd/profiler" in n or "json/encoder" in n]
    assert "train.py(20): forward" in names and "loader.py(5): worker" in names
    assert sorted(set(cols.py_tid.tolist())) == [7, 9]
    ops = [cols.names.items[c] for c in cols.op_name.tolist()]
    assert ops == ["ProfilerStep#1", "aten::mm"]  # the helper's aten::empty went with our frame
    assert removed == 7


def test_own_frame_pattern() -> None:
    assert is_own_frame("openmsprof/torch/profiler/profile.py(122): step")
    assert is_own_frame("/usr/lib/python3/site-packages/openmsprof/sources/markers.py(44): push")
    assert not is_own_frame("myopenmsprof_fork/x.py(1): f") and not is_own_frame("train.py(3): openmsprof")
