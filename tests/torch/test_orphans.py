"""Windows a killed run left only as temp traces: offline ``analyse`` adopts them when their writer
is gone (real processes, real SIGSTOP/SIGKILL), leaves a live writer's and a corrupt one alone."""

from __future__ import annotations

import csv
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

import openmsprof.torch.profiler as tp
from openmsprof.torch.profiler import _orphans, analysis
from tests.torch.conftest import rank_dirs

REPO = Path(__file__).resolve().parents[2]

_TRAIN = textwrap.dedent("""
    import os, signal, sys
    import torch
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _analysis_worker

    root = sys.argv[1]
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    handler = tp.tensorboard_trace_handler(root)
    os.kill(_analysis_worker.start(), signal.SIGSTOP)  # the worker never gets to save a window
    prof = tp.profile(activities=[tp.ProfilerActivity.CPU], on_trace_ready=handler, record_shapes=True,
                      schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=2))
    prof.start()
    for _ in range(3):
        model(torch.randn(8, 16)).softmax(1).sum().backward()
        prof.step()  # the window ends here: its trace is exported, handed off, not saved
    print("windows ended", os.getpid(), flush=True)
    os.killpg(0, signal.SIGKILL)  # the training process and its (stopped) worker
""")


def test_killed_with_its_stopped_worker_offline_analyse_completes_the_windows(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", _TRAIN, str(root)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=300, start_new_session=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pid = int(proc.stdout.split("windows ended ")[1].split()[0])
    temps = [o.tmp for o in _orphans.find(root)]
    assert len(temps) == 2, sorted(p.name for p in root.rglob("*"))  # one in the root, one in the first dir
    assert {p.parent.name for p in temps} == {"out", "FRAMEWORK"}
    assert not list(root.rglob("profiler_info*.json"))  # nothing saved
    with caplog.at_level(logging.WARNING, logger="openmsprof"):
        done = tp.analyse(root)
    adopted = [r.getMessage() for r in caplog.records if "adopted the unsaved window" in r.getMessage()]
    assert len(adopted) == 2 and all(f"pid {pid} gone" in m for m in adopted)
    dirs = rank_dirs(root)
    assert len(dirs) == 2 and sorted(done) == sorted(d / "ASCEND_PROFILER_OUTPUT" for d in dirs)
    assert not _orphans.find(root)
    steps = []
    for d in dirs:
        info = orjson.loads((d / "profiler_info_0.json").read_bytes())
        rec = info["openmsprof_recovered"]
        assert rec["writer_pid"] == pid and "config.experimental_config" in rec["missing"]
        assert info["config"]["common_config"]["record_shapes"] is True  # from the trace
        assert "window_files_offline_analyse_cpu_s" in info["openmsprof_overhead"]
        steps += rec["derived"]["steps"]
        with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as f:
            kernels = {r["Name"] for r in csv.DictReader(f)}
        assert {"aten::_softmax", "aten::clamp_min"} <= kernels, kernels  # the leaf ops of the step (relu)
        with open(d / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv", newline="") as f:
            stats = {r["OP Type"]: int(r["Count"]) for r in csv.DictReader(f)}
        assert stats["aten::_softmax"] == 1 and stats["MatMul"] >= 2, stats  # one step per window
        with open(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
            assert [r["Step"] for r in csv.DictReader(f)] == [str(s) for s in rec["derived"]["steps"]]
    assert sorted(steps) == [0, 1]


def _trace(path: Path) -> None:
    import torch

    model = torch.nn.Linear(8, 8)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        model(torch.randn(2, 8)).sum().backward()
    p.export_chrome_trace(os.fspath(path))


def _orphan(root: Path, pid: int, src: Path) -> Path:
    root.mkdir(exist_ok=True)
    tmp = root / f".host_{pid}-abc123_{'2' * 17}_ascend_pt.{pid}.kineto.tmp"
    tmp.write_bytes(src.read_bytes())
    return tmp


def test_a_live_writers_temp_is_left_alone_until_it_is_gone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = tmp_path / "good.json"
    _trace(good)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        time.sleep(0.05)
        tmp = _orphan(tmp_path / "out", live.pid, good)
        with caplog.at_level(logging.WARNING, logger="openmsprof"):
            assert _orphans.adopt(tmp_path / "out") == []
        assert tmp.read_bytes() == good.read_bytes() and not rank_dirs(tmp_path / "out")
        assert any(f"pid {live.pid}) is still running" in r.getMessage() for r in caplog.records)
    finally:
        live.kill()
        live.wait()
    assert analysis.main([os.fspath(tmp_path / "out")]) == 0  # the writer is gone now
    assert not tmp.exists() and len(rank_dirs(tmp_path / "out")) == 1


def test_a_reused_pid_does_not_keep_an_orphan(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    _trace(good)
    tmp = _orphan(tmp_path / "out", os.getpid(), good)  # this process is alive, but younger than the file
    os.utime(tmp, (time.time() - 86400 * 400, time.time() - 86400 * 400))
    assert _orphans.adopt(tmp_path / "out") == [tmp_path / "out" / tmp.name[1:].split(".")[0]]


def test_a_truncated_temp_is_reported_in_one_line_and_left_as_is(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    _trace(good)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    tmp = _orphan(tmp_path / "out", int(dead.stdout), good)
    data = good.read_bytes()[: good.stat().st_size // 2]
    tmp.write_bytes(data)
    proc = subprocess.run([sys.executable, "-m", "openmsprof.torch.profiler.analysis", str(tmp_path / "out")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                          timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if tmp.name in ln]
    assert len(lines) == 1 and "not adopted, left as it is" in lines[0], proc.stderr
    assert tmp.read_bytes() == data and not rank_dirs(tmp_path / "out")
