"""The cost model's columns on the torch outputs: ``FLOPs, Bytes, Memory Bound Ratio`` after the
existing kernel_details columns, and the same figures in the db's own OMSP_OP_COST table (the
tables msprof-analyze reads keep their columns; tests/torch/test_msprof_analyze.py runs it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

import openmsprof.torch.profiler as tp
from openmsprof.export.ascend_pt import torch_db
from openmsprof.export.ascend_pt.rank_analyse import export
from openmsprof.export.msprof.op_cost_columns import COST_COLUMNS
from openmsprof.machine import peaks as P
from openmsprof.parse.costmodel import op_cost, roofline
from tests.torch.conftest import rank_dirs, read_csv

torch = pytest.importorskip("torch")
F = torch.nn.functional
OUT = "ASCEND_PROFILER_OUTPUT"
PEAKS = {"stream": {"copy": {"best": 20.0}}, "gemm": {"numpy float32": {"best": 100.0}},
         "special": {"tanh": {"best": 2.0}}}


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real window of a hand-written Mish on shapes (text + db, not yet analysed)."""
    root = tmp_path_factory.mktemp("cost")
    exp = tp._ExperimentalConfig(data_simplification=False,
                                 export_type=[tp.ExportType.Text, tp.ExportType.Db])
    conv = torch.nn.Conv2d(3, 16, 3, padding=1)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad(), tp.profile(
            schedule=tp.schedule(wait=0, active=2, repeat=1), record_shapes=True,
            on_trace_ready=tp.tensorboard_trace_handler(root / "r", analyse_flag=False),
            experimental_config=exp) as prof:
        for _ in range(3):
            y = conv(x)
            y * torch.tanh(F.softplus(y))
            prof.step()
    (rd,) = rank_dirs(root / "r")
    return rd


def _export_with_peaks(rd: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
                       doc: dict[str, object] | None) -> None:
    monkeypatch.setenv("OPENMSPROF_CACHE", str(cache))
    cache.mkdir(exist_ok=True)
    if doc is not None:
        P.cache_path().write_bytes(orjson.dumps(doc))
    export(rd, parallel=False)


def test_kernel_details_and_db_carry_the_cost_model(rank_dir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _export_with_peaks(rank_dir, tmp_path / "cache", monkeypatch, PEAKS)
    header, rows = read_csv(rank_dir / OUT / "kernel_details.csv")
    assert header[-4:] == ["Executor", *COST_COLUMNS]
    sp = [r for r in rows if r["Type"] == "aten::softplus"]
    assert len(sp) == 2 and sp[0]["Input Shapes"] == "1,16,32,32;;"
    cost = op_cost("aten::softplus", "1,16,32,32;;", sp[0]["Input Data Types"])
    ratio = roofline(cost, 20e9, 100e9, 2e9).memory_bound_ratio
    assert cost.flops == 16384 and cost.bytes == 2 * 65536 + 8  # in, out, two scalars
    assert (sp[0]["FLOPs"], sp[0]["Bytes"], sp[0]["Memory Bound Ratio"]) == (
        "16384", str(int(cost.bytes)), f"{ratio:.3f}")
    assert all(r["FLOPs"] == "N/A" for r in rows if r["Type"] == "aten::empty")  # unmodelled
    con = sqlite3.connect(rank_dir / OUT / "ascend_pytorch_profiler_0.db")
    try:
        got = con.execute(
            "SELECT o.flops, o.bytes, o.memoryBoundRatio FROM OMSP_OP_COST o JOIN COMPUTE_TASK_INFO c"
            " USING (globalTaskId) JOIN STRING_IDS s ON s.id = c.opType WHERE s.value = 'aten::softplus'"
        ).fetchall()
        assert got == [(16384, cost.bytes, pytest.approx(ratio))] * 2
        assert con.execute("SELECT COUNT(*) FROM OMSP_OP_COST").fetchone()[0] == len(rows)
        # the tables msprof-analyze reads keep exactly their columns
        for table in ("TASK", "COMPUTE_TASK_INFO"):
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            want = torch_db.SCHEMA.split(f"CREATE TABLE {table}(")[1].split(");")[0]
            assert cols == [c.split()[0] for c in want.replace("\n", " ").split(",")]
    finally:
        con.close()


def test_ratio_is_na_without_peaks(rank_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _export_with_peaks(rank_dir, tmp_path / "empty", monkeypatch, None)  # export never measures
    _h, rows = read_csv(rank_dir / OUT / "kernel_details.csv")
    sp = [r for r in rows if r["Type"] == "aten::softplus"]
    assert sp and all(r["FLOPs"] == "16384" and r["Memory Bound Ratio"] == "N/A" for r in sp)
    assert not P.cache_path().exists()
