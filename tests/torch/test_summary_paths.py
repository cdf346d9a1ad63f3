"""The summary CSVs (and every other output) of real torch windows are the same bytes with the C
row formatter and summary columns (``_row_text``, ``_summary_cols``) as with their Python
fallbacks (and the chunks of a large table), at every level, with shapes, stacks and memory, with
and without data_simplification, window after window (the vocabularies' texts and cost cells kept between windows); and the
``OPENMSPROF_*_PYTHON`` switches turn the C off."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from openmsprof.export.ascend_pt import cost_cells, summary_cols, text
from openmsprof.machine import peaks
from openmsprof.torch.profiler import analysis
from tests.torch.conftest import Trainer, file_tree, raw_window, read_csv, window_variant

OUT = "ASCEND_PROFILER_OUTPUT"


def _variant(src: Path, dst: Path, level: str, simplify: bool, stack: bool, memory: bool) -> Path:
    return window_variant(src, dst, level, simplify, with_stack=stack, profile_memory=memory)


def test_native_and_python_paths_write_the_same_bytes(trainer: Trainer, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if text.NATIVE is None or summary_cols.NATIVE is None:
        pytest.skip("the C row formatter or summary columns are not built")
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "cache"))  # private peaks: the ratios are written
    (tmp_path / "cache").mkdir()
    peaks.cache_path().write_bytes(orjson.dumps({"stream": {"copy": 9.5}, "gemm": {"numpy float32": 40.0}}))
    monkeypatch.setattr(peaks, "_kept", None)
    monkeypatch.setattr(cost_cells, "_values", [])
    raw = raw_window(trainer, tmp_path / "raw")
    variants = [("Level0", True, False, False), ("Level0", False, True, True), ("Level1", True, True, False),
                ("Level1", False, False, True), ("Level2", False, True, True)]
    for i, (level, simplify, stack, memory) in enumerate(variants):
        for rep in range(2):  # the second window meets the kept vocabularies and cost cells
            fast = _variant(raw, tmp_path / f"c{i}{rep}" / raw.name, level, simplify, stack, memory)
            slow = _variant(raw, tmp_path / f"p{i}{rep}" / raw.name, level, simplify, stack, memory)
            analysis.analyse_dir(fast, parallel=False)
            with monkeypatch.context() as m:
                m.setattr(text, "NATIVE", None)
                m.setattr(summary_cols, "NATIVE", None)
                m.setattr(text, "CHUNK", 37)  # the large tables' chunked path too
                analysis.analyse_dir(slow, parallel=False)
            got = file_tree(fast)
            assert got == file_tree(slow), (level, simplify, stack, memory)
            names = {Path(k).name for k in got}
            assert {"kernel_details.csv", "operator_details.csv", "op_statistic.csv",
                    "step_trace_time.csv"} <= names
            header, rows = read_csv(fast / OUT / "kernel_details.csv")
            assert len(rows) > 10 and ("Model ID" in header) == (level != "Level0")
            assert any(r["Memory Bound Ratio"] != "N/A" for r in rows)
        shutil.rmtree(tmp_path / f"c{i}0")
        shutil.rmtree(tmp_path / f"p{i}0")


def test_the_switches_turn_the_c_off() -> None:
    code = ("from openmsprof.export.ascend_pt import summary_cols, text;"
            "print(summary_cols.NATIVE is None, text.NATIVE is None)")
    env = {**os.environ, "OPENMSPROF_SUMMARY_COLS_PYTHON": "1", "OPENMSPROF_ROW_TEXT_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]
    env.pop("OPENMSPROF_SUMMARY_COLS_PYTHON")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(summary_cols.NATIVE is None), "True"]
