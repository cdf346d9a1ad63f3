"""The CUDA paths, on a machine with a GPU (skipped elsewhere, with the reason in the summary):
Kineto's CUDA activity through ``torch_npu.profiler``'s NPU activity, and ONNX Runtime's CUDA
execution provider through the pyACL facade."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.torch.conftest import rank_dirs

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")

import openmsprof.torch.profiler as tp  # noqa: E402

OUT = "ASCEND_PROFILER_OUTPUT"


def _train_on_gpu(steps: int, prof: object | None = None) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        x = torch.randn(64, 256, device="cuda")
        y = torch.randint(0, 10, (64,), device="cuda")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch.cuda.synchronize()
        if prof is not None:
            prof.step()  # type: ignore[attr-defined]


def test_npu_activity_records_cuda_kernels_from_kineto(tmp_path: Path) -> None:
    assert tp.ProfilerActivity.NPU in tp.supported_activities()
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1,
                                 export_type=[tp.ExportType.Text, tp.ExportType.Db])
    with tp.profile(activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.NPU],
                    schedule=tp.schedule(wait=1, warmup=1, active=3, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler(str(tmp_path / "gpu")),
                    record_shapes=True, experimental_config=exp) as prof:
        _train_on_gpu(6, prof)
    (rd,) = rank_dirs(tmp_path / "gpu")
    info = orjson.loads(next(rd.glob("profiler_info*.json")).read_bytes())
    assert "CUDA" in str(info.get("backend", "")), info.get("backend")
    with open(rd / OUT / "kernel_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    cores = {r["Accelerator Core"] for r in rows}
    assert "CUDA" in cores, cores  # decision 1: the real executor
    gpu = [r for r in rows if r["Accelerator Core"] == "CUDA"]
    assert len(gpu) >= 3 * 4, len(gpu)  # forward and backward GEMMs of 3 active steps at least
    assert all(float(r["Duration(us)"]) > 0 for r in gpu)
    trace = orjson.loads((rd / OUT / "trace_view.json").read_bytes())
    events = trace if isinstance(trace, list) else trace["traceEvents"]
    names = {e.get("name") for e in events if e.get("ph") == "X"}
    assert {r["Name"] for r in gpu} <= names
    db = next((rd / OUT).glob("ascend_pytorch_profiler*.db"))
    with sqlite3.connect(db) as con:
        (n,) = con.execute("SELECT COUNT(*) FROM TASK").fetchone()
    assert n >= len(gpu)


def test_onnxruntime_cuda_provider_through_the_acl_facade(tmp_path: Path) -> None:
    """``openmsprof demo`` (the pyACL facade over ONNX Runtime) picks the CUDA provider when
    this onnxruntime has it, and op_summary names CUDA as the executor (decision 1)."""
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(f"this onnxruntime has no CUDA provider: {ort.get_available_providers()}")
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "openmsprof", "demo", "--output", str(tmp_path / "d"),
                    "--executes", "5"], check=True, timeout=600, capture_output=True)
    (job,) = (tmp_path / "d").glob("PROF_*")
    (csv_path,) = job.glob("summary/op_summary_*.csv")
    with open(csv_path, newline="") as f:
        kinds = {r["Task Type"] for r in csv.DictReader(f)}
    assert any(k.startswith("CUDA") for k in kinds), kinds
