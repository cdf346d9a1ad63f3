"""The TensorBoard Ascend plugin (torch-tb-profiler-ascend), the real client, loads our torch runs
through its own loader and every view it offers for Ascend populates: Operator, Kernel, Trace and
Memory (the total curve from the ``PTA+GE`` rows, the per-component curve, Component Peak Memory
from ``npu_module_mem.csv``, the memory events).  The loader runs in a subprocess
(tests/torch/tb_plugin_load.py): it forks its workers and installs absl logging."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.torch.conftest import Trainer, rank_dirs
from tests.torch.ma_jobs import _train  # the msprof-analyze suite's 2-rank gloo run

pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler-ascend not installed (dev extra)")
tp = pytest.importorskip("openmsprof.torch.profiler")
LOADER = Path(__file__).with_name("tb_plugin_load.py")
OUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tb") / "run"
    trainer = Trainer("cnn")
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, export_type=["text"])
    with tp.profile(schedule=tp.schedule(wait=0, warmup=1, active=2, repeat=1), profile_memory=True,
                    record_shapes=True, with_stack=True, on_trace_ready=tp.tensorboard_trace_handler(str(root)),
                    experimental_config=exp) as prof:
        for _ in range(4):
            trainer.step()
            prof.step()
    return root


def _load(run: Path, tmp: Path) -> dict[str, Any]:
    cache = tmp / "cache"
    cache.mkdir()
    res = subprocess.run([sys.executable, str(LOADER), str(run), str(cache)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Failed to parse profile data" not in res.stderr, res.stderr[-2000:]
    assert "Required column is missing" not in res.stderr, res.stderr[-2000:]
    return json.loads(res.stdout)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_every_view_populates(run: Path, tmp_path: Path) -> None:
    doc = _load(run, tmp_path)
    assert set(doc["views"]) == {"Operator", "Kernel", "Trace", "Memory"}
    (w,) = doc["workers"].values()
    assert set(w["views"]) == {"Operator", "Kernel", "Trace", "Memory"}
    (rank,) = rank_dirs(run)
    ops = _rows(rank / OUT / "operator_details.csv")
    kernels = _rows(rank / OUT / "kernel_details.csv")
    # the operator table groups operator_details by name; the kernel table lists kernel_details
    assert w["operators"] == len({r["Name"] for r in ops}) > 0
    assert w["kernels"] == len(kernels) > 0 and w["kernel_pie"] > 0
    assert w["operators_by_shape"] >= w["operators"]
    assert w["trace"].endswith("trace_view.json") and w["tree_threads"] >= 1


def test_memory_view_total_curve_and_component_peak(run: Path, tmp_path: Path) -> None:
    (w,) = _load(run, tmp_path)["workers"].values()
    (rank,) = rank_dirs(run)
    record = _rows(rank / OUT / "memory_record.csv")
    pta = [r for r in record if r["Component"] == "PTA"]
    assert len(pta) > 0
    # the total curve: one point per PTA+GE row (= one per allocator event), allocated and reserved
    assert w["memory_total"] == {"CPU": {"Allocated": len(pta), "Reserved": len(pta)}}
    peak = max(float(r["Total Reserved(MB)"]) for r in pta)
    assert w["memory_total_peaks"]["CPU"] == f"Peak Memory Usage: {peak:.1f}MB"
    assert w["memory_components"] == {"CPU": ["PTA"]}
    # Component Peak Memory: the PTA component's peak reserved memory
    ((name, value),) = w["component_peak"]["CPU"]
    assert name == "PTA" and value == pytest.approx(peak, abs=1e-6)
    assert w["memory_events"] == len(_rows(rank / OUT / "operator_memory.csv")) > 0


def test_two_ranks_fill_the_distributed_view(tmp_path: Path, peaks_cache: Path) -> None:
    (tmp_path / "two").mkdir()
    runs = _train(tmp_path / "two", 2, peaks_cache)
    doc = _load(runs, tmp_path)
    assert set(doc["views"]) == {"Operator", "Kernel", "Trace", "Distributed"}
    assert len(doc["workers"]) == 2
    dist = doc["distributed"]
    # per step: each rank's computation / overlap / communication / other; wait and transfer
    # per rank; and one row per collective kind
    assert dist["overlap"] > 0 and dist["wait"] > 0 and dist["comm_ops"] > 0
    comm = orjson.loads((rank_dirs(runs)[0] / OUT / "communication.json").read_bytes())
    assert comm
