"""Window lines that reach the worker in quick succession are written together: dense windows wake
the worker (and its analysing child) once per run of windows, not once each.  A held line is
written ``COALESCE_S`` after it was held even when nobody waits, at ``COALESCE_MAX`` lines, and at
once when anyone waits for the worker; sparse windows are written as they end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

import openmsprof.torch.profiler as tp
from tests.torch.conftest import rank_dirs

REPO = Path(__file__).resolve().parents[2]

_TRAIN = textwrap.dedent("""
    import os, sys, time
    import torch
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _analysis_worker, _worker_input

    root, coalesce_s, windows, gap_s = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    _worker_input.COALESCE_S = coalesce_s
    model = torch.nn.Linear(16, 16)
    _analysis_worker.start()
    prof = tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1),
                      on_trace_ready=tp.tensorboard_trace_handler(root, async_mode=True))
    prof.start()
    for i in range(windows):
        model(torch.randn(4, 16)).sum().backward()
        if gap_s > 0:
            time.sleep(gap_s)
        prof.step()
    c = _analysis_worker._client
    print("after the loop", c.input.writes, flush=True)
    if gap_s == 0 and coalesce_s < 10:  # nobody waits: the watcher writes the held lines in time
        end = time.monotonic() + 120
        while sum(os.path.isfile(os.path.join(root, d, "profiler_info_0.json")) for d in os.listdir(root)) < windows:
            assert time.monotonic() < end, os.listdir(root)
            time.sleep(0.02)
        print("saved without a wait", c.input.writes, flush=True)
    if gap_s < 0:  # killed with windows held: they stay as temp traces for offline analyse
        print("killing", c.input.writes, len(c.input.held), c.proc.pid, flush=True)
        os.kill(os.getpid(), 9)
    prof.stop()  # (its last window is a line of its own, sent by stop()'s wait)
    print("after stop", c.input.writes, len(prof.saved), flush=True)
""")


def _run(tmp_path: Path, coalesce_s: float, windows: int, gap_s: float) -> tuple[list[str], Path]:
    root = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", _TRAIN, str(root), str(coalesce_s), str(windows), str(gap_s)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                          timeout=300)
    assert proc.returncode == (-signal.SIGKILL if gap_s < 0 else 0), proc.stderr[-3000:]
    return [ln for ln in proc.stdout.splitlines() if ln[:1].isalpha()], root


def _analysed(root: Path) -> int:
    return sum((d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").is_file() for d in rank_dirs(root))


def test_dense_windows_go_in_runs_of_coalesce_max(tmp_path: Path) -> None:
    """10 windows within the coalescing time (here long: a loaded machine is never too slow): the
    first is written at once, the next 8 in one write, the 10th waits for stop()."""
    out, root = _run(tmp_path, 60.0, 10, 0.0)
    assert out == ["after the loop 2", "after stop 3 11"], out  # (11: the last step() opened one more)
    assert _analysed(root) == 11


def test_held_lines_are_written_in_time_without_a_wait(tmp_path: Path) -> None:
    out, root = _run(tmp_path, 1.0, 3, 0.0)
    assert out[0] == "after the loop 1", out
    assert out[1] == "saved without a wait 2", out  # the 2nd and 3rd in one write, by the watcher
    assert _analysed(root) == 4


def test_sparse_windows_are_written_as_they_end(tmp_path: Path) -> None:
    out, root = _run(tmp_path, 0.05, 3, 0.3)
    assert out[0] == "after the loop 3", out
    assert _analysed(root) == 4


def test_windows_held_at_a_kill_stay_as_temp_traces_that_offline_analyse_adopts(tmp_path: Path) -> None:
    out, root = _run(tmp_path, 60.0, 3, -1.0)
    writes, held, worker = (int(x) for x in out[-1].split()[1:])
    assert (writes, held) == (1, 2), out  # the first window written, the next two held
    end = time.monotonic() + 120
    while psutil.pid_exists(worker) and psutil.Process(worker).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < end, "the worker outlived its run"  # (it leaves at the end of its input)
        time.sleep(0.05)
    done = tp.analyse(root)  # (the two held windows: adopted from their temp traces)
    assert len(done) == 3 and _analysed(root) == 3, (done, list(root.iterdir()))


_DATALOADER = textwrap.dedent("""
    import os, sys
    import torch
    from torch.utils.data import DataLoader, Dataset
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _analysis_worker

    class Items(Dataset):
        def __len__(self):
            return 64
        def __getitem__(self, i):
            return torch.full((16,), float(i))

    model = torch.nn.Linear(16, 16)
    with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1),
                    on_trace_ready=tp.tensorboard_trace_handler(sys.argv[1])) as prof:
        for epoch in range(3):  # the loader forks its workers anew each epoch, with window lines held
            for batch in DataLoader(Items(), batch_size=8, num_workers=2,
                                    multiprocessing_context="fork"):
                model(batch).sum().backward()
                prof.step()
            print("epoch", epoch, "held", len(_analysis_worker._client.input.held), flush=True)
    print("worker", _analysis_worker._client.proc.pid, "saved", len(prof.saved), flush=True)
""")


def test_dataloader_workers_forked_with_lines_held_leave_the_run_whole(tmp_path: Path) -> None:
    """DataLoader workers forked while window lines are held: each child drops its copies of the
    worker's pipes and the wake pipe (and writes nothing), exits normally; the run's windows are all
    analysed and the worker leaves once the run does (no child keeps its input open)."""
    root = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", _DATALOADER, str(root)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln[:1].isalpha()]
    assert any(int(ln.split()[-1]) > 0 for ln in lines if ln.startswith("epoch")), lines  # (forked while held)
    worker, saved = int(lines[-1].split()[1]), int(lines[-1].split()[3])
    assert saved == 25 and _analysed(root) == 25, (lines, _analysed(root))  # 24 steps: 24 windows + the last
    end = time.monotonic() + 60
    while psutil.pid_exists(worker) and psutil.Process(worker).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < end, "the analysis worker outlived its run"
        time.sleep(0.05)
