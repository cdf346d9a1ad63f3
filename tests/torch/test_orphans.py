"""Windows a killed run left only as temp traces: offline ``analyse`` adopts them when their writer
is gone (real processes, real SIGSTOP/SIGKILL), leaves a live writer's and a corrupt one alone."""

from __future__ import annotations

import contextlib
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
import psutil
import pytest

import openmsprof.torch.profiler as tp
from openmsprof.torch.profiler import _orphans, analysis
from tests.torch.conftest import rank_dirs

REPO = Path(__file__).resolve().parents[2]
MSPROF_ANALYZE = Path(sys.executable).with_name("msprof-analyze")
ADVISOR = ("Can not convert / to float",)  # its own sort of "/" cells (tests/torch/test_msprof_analyze.py)

_TRAIN = textwrap.dedent("""
    import os, signal, sys
    import torch
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _analysis_worker

    root, mode = sys.argv[1], sys.argv[2]
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    handler = tp.tensorboard_trace_handler(root)
    worker = _analysis_worker.start()
    os.kill(worker, signal.SIGSTOP)  # the worker never gets to save a window
    prof = tp.profile(activities=[tp.ProfilerActivity.CPU], on_trace_ready=handler, record_shapes=True,
                      schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=2))
    prof.start()
    for _ in range(3):
        model(torch.randn(8, 16)).softmax(1).sum().backward()
        prof.step()  # the window ends here: its trace is exported, handed off, not saved
    print("windows ended", os.getpid(), worker, flush=True)
    if mode == "both":
        os.killpg(0, signal.SIGKILL)  # the training process and its (stopped) worker
    os.kill(os.getpid(), signal.SIGKILL)  # the training process alone
""")


def _train(root: Path, mode: str) -> tuple[int, int]:
    """Run the script; (training pid, worker pid).  Its output goes to files: a worker that outlives
    it would hold a pipe open."""
    out, err = root.parent / f"{mode}.out", root.parent / f"{mode}.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.run([sys.executable, "-c", _TRAIN, str(root), mode], stdout=o, stderr=e,
                              env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=300,
                              start_new_session=True)
    if proc.returncode != -signal.SIGKILL or "windows ended" not in out.read_text():
        with contextlib.suppress(ProcessLookupError):  # no stopped worker is left behind
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL, err.read_text()
    pid, worker = out.read_text().split("windows ended ")[1].split()[:2]
    return int(pid), int(worker)


def test_killed_with_its_stopped_worker_offline_analyse_completes_the_windows(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "out"
    pid, _worker = _train(root, "both")
    temps = [o.tmp for o in _orphans.find(root)]
    assert len(temps) == 2, sorted(p.name for p in root.rglob("*"))
    # each in its rank dir's FRAMEWORK/ when the writer thread had made the dir by the window end,
    # else beside it in the root (which one is timing: under load the dir comes later)
    for o in _orphans.find(root):
        assert o.tmp.parent in (root, o.rank_dir / "FRAMEWORK"), o
        assert o.tmp.name.startswith(f".{o.rank_dir.name}."), o
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
    if MSPROF_ANALYZE.exists():  # the real client reads an adopted dir
        res = subprocess.run([str(MSPROF_ANALYZE), "advisor", "all", "-d", str(dirs[0]), "-o", str(tmp_path / "adv")],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
        errors = [ln for ln in (res.stdout + res.stderr).splitlines() if "[ERROR]" in ln and ADVISOR[0] not in ln]
        assert not errors and list((tmp_path / "adv").glob("mstt_advisor_*.html")), res.stdout + res.stderr


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_stopped_worker_that_outlives_its_run_keeps_its_windows_until_it_is_killed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "out"
    _pid, worker = _train(root, "training_only")
    try:
        assert not _gone(worker)  # stopped, alive: it may still save the windows
        with caplog.at_level(logging.WARNING, logger="openmsprof"):
            assert _orphans.adopt(root) == []
        left = [r.getMessage() for r in caplog.records if "left alone" in r.getMessage()]
        assert len(left) == 2 and all(f"analysis worker (pid {worker})" in m for m in left), left
        assert len(_orphans.find(root)) == 2
    finally:
        os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not _gone(worker):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert len(_orphans.adopt(root)) == 2 and not _orphans.find(root)


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


def test_the_module_run_as_a_command_prints_its_own_lines_only(tmp_path: Path) -> None:
    """``python -m openmsprof.torch.profiler.analysis PATH`` (docs/torch.md): no runpy warning
    about the package having imported the module first; a bad path is one line."""
    proc = subprocess.run([sys.executable, "-m", "openmsprof.torch.profiler.analysis", str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == f"openmsprof: error: profiler_path {str(tmp_path / 'nothing')!r} is not a directory\n"
