"""Reading a torch window for the analysis (``framework.load``) the fast way — the native Kineto
scan, the native nesting tree, the kept first-block codings — gives what the pure-Python paths
give (orjson's events through ``Columns.add``, the numpy nesting passes): the same Framework,
column for column, and the same output bytes at every level, with shapes, stacks and memory, on
real windows (nested record_function ranges) and on a hand-built trace of odd nesting (three
threads, equal starts, children outliving parents) in Kineto's own layout."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import openmsprof.torch.profiler as tp
import torch
from openmsprof.export.ascend_pt import framework, nesting
from openmsprof.export.ascend_pt.rank_analyse import export
from openmsprof.sources import kineto_trace
from tests.torch.conftest import Trainer, file_tree, saved_window, window_variant

pytestmark = pytest.mark.skipif(kineto_trace.scan is None or nesting._tree is None,
                                reason="the native scan / nesting tree were not built: only the Python paths run")
OUT = "ASCEND_PROFILER_OUTPUT"
TRACE = Path("FRAMEWORK") / framework.FRAMEWORK_TRACE


def _record(root: Path, memory: bool) -> Path:
    """One real window, unanalysed: shapes, stacks (and memory); nested record_function ranges
    around the step's operators and one around a lone in-place operator."""
    t = Trainer("mlp")
    with tp.profile(schedule=tp.schedule(wait=0, active=2, repeat=1), record_shapes=True, with_stack=True,
                    profile_memory=memory, on_trace_ready=tp.tensorboard_trace_handler(root, analyse_flag=False),
                    experimental_config=tp._ExperimentalConfig(data_simplification=False)) as prof:
        for _ in range(3):
            with torch.profiler.record_function("outer"), torch.profiler.record_function("inner"):
                t.step()
            with torch.profiler.record_function("tail"):
                torch.ones(4, 4).add_(1)
            prof.step()
    return saved_window(root)  # (once the analysis worker's late save of it is answered)


@pytest.fixture(scope="module")
def window(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("load") / "r", memory=False)


@pytest.fixture(scope="module")
def mem_window(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """With profile_memory: its ``[memory]`` events leave those blocks to orjson (the scan does
    not read them); the nesting is still native."""
    return _record(tmp_path_factory.mktemp("load") / "m", memory=True)


def _pure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_trace, "scan", None)
    monkeypatch.setattr(nesting, "_tree", None)
    monkeypatch.setattr(nesting, "_native", None)
    monkeypatch.setattr(nesting, "_kernels", None)


def _variant(src: Path, dst: Path, level: str, stack: bool, memory: bool) -> Path:
    return window_variant(src, dst, level, False, with_stack=stack, profile_memory=memory, record_shapes=True)


def _framework(rd: Path) -> dict[str, Any]:
    """Every attribute of the loaded Framework (and of its columns and kernels), as plain values."""
    info = orjson.loads(next(rd.glob("profiler_info*.json")).read_bytes())
    fw = framework.load(rd, info)
    out: dict[str, Any] = {}
    for owner, prefix in ((fw, ""), (fw.cols, "cols."), (fw.kernels, "kernels.")):
        for k, v in vars(owner).items():
            if k.startswith("_") or k in ("cols", "kernels"):
                continue
            if isinstance(v, np.ndarray):
                out[prefix + k] = (str(v.dtype), v.tolist())
            elif hasattr(v, "items") and hasattr(v, "index"):  # a Vocab
                out[prefix + k] = list(v.items)
            else:
                out[prefix + k] = v
    return out


def _odd_trace(rd: Path) -> None:
    """Replace the window's trace by one of odd nesting in Kineto's layout: equal starts and
    lengths, a child outliving its parent, zero-length ops at a parent's edges, views inside
    views, a step range crossing operators, annotations inside operators, three threads."""
    base = 1_000_000.0
    ops: list[tuple[str, str, float, float, int]] = [  # (cat, name, ts µs, dur µs, tid)
        ("user_annotation", "ProfilerStep#7", 0, 100, 1),
        ("cpu_op", "aten::linear", 1, 50, 1), ("cpu_op", "aten::t", 1, 50, 1),          # equal start and length
        ("cpu_op", "aten::transpose", 2, 3, 1), ("cpu_op", "aten::as_strided", 2.5, 0, 1),
        ("cpu_op", "aten::addmm", 10, 30, 1), ("cpu_op", "aten::empty", 10, 0, 1),
        ("cpu_op", "aten::empty", 40, 0, 1),                                              # at the end: outside
        ("user_annotation", "inner_range", 12, 5, 1),
        ("cpu_op", "aten::relu", 45, 20, 1),                                              # outlives linear
        ("cpu_op", "aten::view", 46, 1, 1), ("cpu_op", "aten::view", 46, 1, 1),
        ("cpu_op", "aten::view", 90, 30, 1),                                              # crosses the step's end
        ("user_annotation", "ProfilerStep#8", 100, 50, 1),
        ("cpu_op", "aten::mm", 100, 10, 2), ("cpu_op", "aten::mm", 100, 10, 2),
        ("cpu_op", "aten::reshape", 105, 1, 2), ("cpu_op", "aten::empty_like", 120, 2, 3),
        ("cpu_op", "c10d::allreduce_", 130, 5, 1), ("cpu_op", "gloo:all_reduce", 131, 3, 1),
    ]
    events: list[dict[str, Any]] = [{"ph": "M", "name": "thread_name", "pid": 7, "tid": 1,
                                     "args": {"name": "thread 1"}}]
    for i, (cat, name, ts, dur, tid) in enumerate(ops):
        args: dict[str, Any] = {"External id": i + 1, "Record function id": 0, "Ev Idx": i}
        if cat == "cpu_op":
            args |= {"Input Dims": [[i % 3 + 1, 4], []], "Input type": ["float", ""], "Sequence number": i}
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": base + ts, "dur": dur,
                       "args": args})
    lines = []
    for e in events:
        body = ",".join(f"\n    {orjson.dumps(k).decode()}: {orjson.dumps(v).decode()}" for k, v in e.items())
        lines.append("  {" + body + "\n  }")
    doc = ('{\n  "schemaVersion": 1,\n  "baseTimeNanoseconds": 1790000000000000000,\n  "traceEvents": [\n'
           + ",\n".join(lines) + '\n  ],\n  "traceName": "x"\n}')
    (rd / TRACE).write_bytes(doc.encode())


@pytest.mark.parametrize("case", ["real", "memory", "odd"])
def test_the_framework_read_natively_is_the_pure_python_one(window: Path, mem_window: Path, tmp_path: Path,
                                                            case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    src = mem_window if case == "memory" else window
    rd = shutil.copytree(src, tmp_path / src.name)
    if case == "odd":
        _odd_trace(rd)
    scanned = [kineto_trace.scan(b) is not None for b in kineto_trace.TraceReader(rd / TRACE).blocks()]
    assert all(scanned) if case != "memory" else not all(scanned)
    fast = _framework(rd)
    again = _framework(rd)  # the kept first-block codings
    _pure(monkeypatch)
    ref = _framework(rd)
    assert fast == ref and again == ref
    assert len(ref["op_leaf"][1]) > 15 and any(ref["op_leaf"][1]) and max(ref["op_depth"][1]) >= 2
    assert ref["steps"]
    if case == "odd":
        assert len(set(ref["cols.op_tid"][1])) == 3
        assert [s[0] for s in ref["steps"]] == [7, 8]
        assert len(ref["cols.op_ts"][1]) == 20 and ref["kernels.comm"][1].count(True) == 1
    else:
        assert ref["stacks"] and (len(ref["cols.mem_ts"][1]) > 0) == (case == "memory")


@pytest.mark.parametrize(("level", "stack", "memory"), [
    ("Level0", False, False), ("Level1", True, True), ("Level2", True, False), ("Level1", False, True)])
def test_the_outputs_of_both_paths_are_the_same_bytes(window: Path, mem_window: Path, tmp_path: Path, level: str,
                                                      stack: bool, memory: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for case in ("real", "odd"):
        src = mem_window if memory and case == "real" else window
        fast = _variant(src, tmp_path / case / "fast" / src.name, level, stack, memory)
        slow = _variant(src, tmp_path / case / "slow" / src.name, level, stack, memory)
        if case == "odd":
            _odd_trace(fast)
            _odd_trace(slow)
        export(fast, parallel=False)
        with monkeypatch.context() as m:
            _pure(m)
            export(slow, parallel=False)
        tree = file_tree(fast / OUT)
        assert "trace_view.json" in tree and "kernel_details.csv" in tree and "operator_details.csv" in tree
        assert tree == file_tree(slow / OUT), case
