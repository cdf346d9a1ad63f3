"""torch_npu 2.14's own offline analysis (the reference parser, its pure-Python ``analysis`` from
the wheel with the stand-in of tests/torch/npu_analysis.py) reads our raw ``FRAMEWORK/`` records
(``torch.op_range``, ``torch.python_tracer_*``: export/ascend_pt/npu_records.py) and rebuilds
operator_details.csv and trace_view.json with our operators and Python functions: the same rows,
names, start times and host times."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.refclients import TORCH_NPU
from tests.torch.conftest import Trainer, rank_dirs

tp = pytest.importorskip("openmsprof.torch.profiler")
REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("npu_analysis.py")
OUT = "ASCEND_PROFILER_OUTPUT"
#: what torch_npu prints whatever our data: the run asked for NPU activity, and a CPU machine has
#: no CANN data (PROF_ dir) for it, so the analysis drops that activity and says so.
BY_DESIGN = ("ProfilerActivity.NPU is set in activities, but CANN Profiling data does not exist.",)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not (TORCH_NPU / "torch_npu" / "profiler" / "analysis").is_dir():
        pytest.skip("reference clients not fetched: run `make .venv/refclients/.installed`")
    root = tmp_path_factory.mktemp("npu")
    trainer = Trainer("cnn")
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, export_type=["text"],
                                 data_simplification=False)  # torch_npu's re-analysis needs FRAMEWORK/
    with tp.profile(schedule=tp.schedule(wait=1, warmup=1, active=2, repeat=1), record_shapes=True,
                    with_stack=True, on_trace_ready=tp.tensorboard_trace_handler(str(root / "ours")),
                    experimental_config=exp) as prof:
        for _ in range(5):
            trainer.step()
            prof.step()
    (ours,) = rank_dirs(root / "ours")
    theirs = root / "theirs" / ours.name
    shutil.copytree(ours, theirs)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    res = subprocess.run([sys.executable, str(RUNNER), str(TORCH_NPU), str(theirs)], capture_output=True,
                         text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    errors = [ln for ln in (res.stdout + res.stderr).splitlines() if "[ERROR]" in ln]
    assert [e for e in errors if not any(b in e for b in BY_DESIGN)] == []
    logs = "".join(p.read_text() for p in (theirs / "logs").glob("profiler_*.log"))
    assert "[ERROR]" not in logs and "torch op data is empty" not in logs, logs[-2000:]
    return ours, theirs


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_framework_records_are_written_and_kept(dirs: tuple[Path, Path]) -> None:
    ours, theirs = dirs
    assert (ours / "FRAMEWORK" / "torch.op_range").stat().st_size > 1000
    assert (theirs / "FRAMEWORK" / "torch.op_range").read_bytes() == \
        (ours / "FRAMEWORK" / "torch.op_range").read_bytes()
    assert {"operator_details.csv", "trace_view.json", "analyse.done"} <= {p.name for p in (theirs / OUT).iterdir()}


def test_operator_details_rebuilt_with_our_rows(dirs: tuple[Path, Path]) -> None:
    ours, theirs = dirs
    a, b = _rows(ours / OUT / "operator_details.csv"), _rows(theirs / OUT / "operator_details.csv")
    assert len(a) == len(b) > 100

    def key(r: dict[str, str]) -> tuple[str, float, float]:
        return r["Name"], float(r["Host Total Duration(us)"]), float(r["Host Self Duration(us)"])

    assert Counter(map(key, a)) == Counter(map(key, b))
    assert any("#" in r["Name"] for r in b)  # record_function ranges are rows in both
    assert not any(r["Name"].startswith("ProfilerStep#") for r in a + b)
    stacks = Counter(r["Call Stack"] for r in a if r["Call Stack"] != "N/A")
    assert stacks and stacks == Counter(r["Call Stack"] for r in b if r["Call Stack"])


def test_trace_view_rebuilt_with_our_operators(dirs: tuple[Path, Path]) -> None:
    ours, theirs = dirs

    def ops(d: Path) -> list[dict]:
        return [e for e in orjson.loads((d / OUT / "trace_view.json").read_bytes())
                if e.get("ph") == "X" and e.get("cat") == "cpu_op"]

    a, b = ops(ours), ops(theirs)
    assert len(a) == len(b) > 100
    assert Counter((e["name"], e["ts"], e["tid"]) for e in a) == Counter((e["name"], e["ts"], e["tid"]) for e in b)
    # durations: ours are Perfetto-fitted (perfetto_fit: < 0.5 µs shorter where rounding bites)
    da = sorted((e["name"], e["ts"], float(e["dur"])) for e in a)
    db = sorted((e["name"], e["ts"], float(e["dur"])) for e in b)
    assert all(0 <= y[2] - x[2] < 0.5 for x, y in zip(da, db, strict=True))


def test_python_functions_rebuilt_from_the_tracer_records(dirs: tuple[Path, Path]) -> None:
    ours, theirs = dirs
    assert (theirs / "FRAMEWORK" / "torch.python_tracer_func").stat().st_size % 33 == 0

    def py(d: Path) -> list[dict]:
        return [e for e in orjson.loads((d / OUT / "trace_view.json").read_bytes())
                if e.get("ph") == "X" and e.get("cat") == "python_function"]

    a, b = py(ours), py(theirs)
    assert len(a) == len(b) > 100
    assert Counter((e["name"], e["ts"]) for e in a) == Counter((e["name"], e["ts"]) for e in b)
    dur = {(e["name"], e["ts"]): float(e["dur"]) for e in a}
    assert all(abs(float(e["dur"]) - dur[(e["name"], e["ts"])]) < 0.5 for e in b)
