"""The torch analysis writes the same bytes with the C row formatter (export/ascend_pt/_row_text.c)
and with its Python fallback: real torch windows (with and without stacks, record_function
ranges, backward) analysed at Level0/1/2 with data_simplification on and off, small formatting
groups (chunk remainders), kernels with and without a source operator, the kernel database
written; every file of the rank dir (mode and bytes) equal, and the C path taken."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openmsprof.export.ascend_pt import framework, kernel_job, rank_analyse, text
from tests.torch.conftest import Trainer, saved_window

tp = pytest.importorskip("openmsprof.torch.profiler")
torch = pytest.importorskip("torch")
rt = pytest.importorskip("openmsprof.export.ascend_pt._row_text")


class _Counting:
    """The C module, counting its calls."""

    def __init__(self) -> None:
        self.calls = {"join": 0, "rows": 0, "records": 0}

    def __getattr__(self, name: str) -> Any:
        fn = getattr(rt, name)

        def call(*args: Any) -> Any:
            self.calls[name] += 1
            return fn(*args)

        return call


def _raw_window(root: Path, with_stack: bool) -> Path:
    """One saved, unanalysed window (the worker saves it in the background, under its claim:
    stop() does not wait for that, so the claim is waited for)."""
    trainer = Trainer("mlp")
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, export_type=["text"],
                                 data_simplification=False)
    with tp.profile(schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1), record_shapes=True,
                    with_stack=with_stack,
                    on_trace_ready=tp.tensorboard_trace_handler(str(root), analyse_flag=False),
                    experimental_config=exp) as prof:
        for i in range(6):
            with torch.profiler.record_function(f"range %d {i}" if i % 2 else "plain, comma {} [1]"):
                trainer.step()
        prof.step()
    return saved_window(root)


def _files(rank: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(rank)): (p.stat().st_mode & 0o777, p.read_bytes())
            for p in sorted(rank.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def _configure(rank: Path, level: str, simplify: bool) -> None:
    for info in rank.glob("profiler_info*.json"):
        doc = json.loads(info.read_text())
        exp = doc["config"]["experimental_config"]
        exp["_profiler_level"], exp["_data_simplification"] = level, simplify
        info.write_text(json.dumps(doc))


@pytest.mark.parametrize("with_stack", [False, True])
def test_every_output_file_is_the_same_with_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          with_stack: bool) -> None:
    raw = _raw_window(tmp_path / "raw", with_stack)
    monkeypatch.setattr(text, "CHUNK", 7)  # groups of 7 rows: every view ends on a remainder
    monkeypatch.setattr(kernel_job, "EAGER_MIN_KERNELS", 1)  # .openmsprof/kernels.db written
    load = framework.load

    def some_kernels_without_op(*args: Any, **kwargs: Any) -> Any:
        fw = load(*args, **kwargs)
        fw.kernels.op[::5] = -1  # as a device kernel no operator launched
        return fw

    monkeypatch.setattr(rank_analyse.framework, "load", some_kernels_without_op)
    seen = 0
    for level in ("Level0", "Level1", "Level2"):
        for simplify in (False, True):
            out: dict[str, dict[str, tuple[int, bytes]]] = {}
            for side in ("c", "python"):
                rank = tmp_path / f"{level}_{simplify}_{side}" / raw.name
                shutil.copytree(raw, rank)
                _configure(rank, level, simplify)
                native = _Counting() if side == "c" else None
                monkeypatch.setattr(text, "NATIVE", native)
                rank_analyse.export(rank, parallel=False)
                out[side] = _files(rank)
                if native is not None:
                    assert native.calls["join"] > 20, native.calls  # the views went through C
                    assert native.calls["rows"] > 0, native.calls  # the kernels without an op
                    assert native.calls["records"] == (0 if simplify and not with_stack else 1), native.calls
            c, py = out["c"], out["python"]
            assert sorted(c) == sorted(py)
            different = [name for name in c if c[name] != py[name]]
            assert not different, (level, simplify, different)
            names = set(c)
            assert {"ASCEND_PROFILER_OUTPUT/trace_view.json", "ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                    "ASCEND_PROFILER_OUTPUT/operator_details.csv", ".openmsprof/kernels.db"} <= names
            assert ("FRAMEWORK/torch.op_range" in names) == (not simplify or with_stack)
            tv = c["ASCEND_PROFILER_OUTPUT/trace_view.json"][1]
            assert (b'"cat":"python_function"' in tv) == with_stack
            assert (b'"name":"Node@' in tv) == (level != "Level0")
            assert b'"name":"torch_to_npu"' in tv
            seen += 1
    assert seen == 6


def test_op_range_records_in_c_equal_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.op_range from the numpy records and C (``npu_records._op_range_native``) equals the
    struct loop, stacks and ranges included; a negative thread id goes to the loop (struct's error)."""
    from openmsprof.export.ascend_pt import npu_records

    rank = _raw_window(tmp_path, with_stack=True)
    info, _rank = rank_analyse.read_info(rank)
    fw = framework.load(rank, info, parallel=False)
    assert fw.stacks and bool(fw.cols.op_annot.any())
    off = npu_records.local_offset_ns(info)
    native = npu_records._op_range_native(fw, off)
    monkeypatch.setattr(text, "NATIVE", None)
    assert npu_records._op_range_native(fw, off) is None
    loop = npu_records.op_range_bytes(fw, off)
    assert native == loop
    assert len(loop) > 58 * fw.n_ops
    monkeypatch.setattr(text, "NATIVE", rt)
    fw.cols.op_tid = np.where(np.arange(fw.n_ops) == 3, -1, fw.cols.op_tid)
    assert npu_records._op_range_native(fw, off) is None
