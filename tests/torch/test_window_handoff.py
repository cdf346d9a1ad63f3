"""A tensorboard_trace_handler's window files are saved by the analysis worker process from one pipe
write: also with ``analyse_flag=False``, never blocking the training thread on a stalled worker
(the pipe full), saved by the training process itself when the worker does not confirm them or
dies (at once, without another window end or ``stop()``), and left on disk by the worker alone when
the training run is SIGKILLed.  Saving is idempotent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

import openmsprof.torch.profiler as tp
import torch
from openmsprof.config.errors import PathError
from openmsprof.torch.profiler import _window_files
from tests.torch.conftest import modes_ok, rank_dirs

REPO = Path(__file__).resolve().parents[2]

_TRAIN = textwrap.dedent("""
    import os, sys, signal, time
    import torch
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _analysis_worker

    root, mode = sys.argv[1], sys.argv[2]
    model = torch.nn.Linear(16, 16)
    handler = tp.tensorboard_trace_handler(root, analyse_flag=(mode in ("pipe_full", "worker_killed")),
                                           async_mode=True)
    pid = _analysis_worker.start()
    if mode in ("pipe_full", "worker_killed"):
        os.kill(pid, signal.SIGSTOP)
    prof = tp.profile(activities=[tp.ProfilerActivity.CPU], on_trace_ready=handler,
                      schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=4))
    if mode == "pipe_full":  # 4 windows of 200 kB lines: more than the pipe takes from a stopped worker
        prof.add_metadata("blob", "x" * 200_000)
    prof.start()
    for i in range(4):
        model(torch.randn(4, 16)).sum().backward()
        prof.step()
        if mode == "worker_replaced" and i == 1:  # a new worker takes the next windows
            _analysis_worker.wait_saved(120)
            os.kill(pid, signal.SIGKILL)
            end = time.monotonic() + 60
            while _analysis_worker._client.alive():
                assert time.monotonic() < end
                time.sleep(0.02)
            assert _analysis_worker.start() not in (None, pid)
    print("steps done", flush=True)  # a blocking pipe write would never get here
    if mode == "killed_live":  # no stop(), no flush: the worker alone puts the raw windows on disk
        end = time.monotonic() + 120
        while sum(os.path.isfile(os.path.join(root, d, "profiler_info_0.json")) for d in os.listdir(root)) < 4:
            assert time.monotonic() < end
            time.sleep(0.02)
        os.killpg(0, signal.SIGKILL)
    if mode == "pipe_full":
        os.kill(pid, signal.SIGCONT)
    if mode == "worker_killed":  # no window end, no stop(): the worker's end alone hands its windows back
        os.kill(pid, signal.SIGKILL)
        end = time.monotonic() + 200
        def done(d):
            return all(os.path.exists(os.path.join(root, d, f)) for f in (
                "profiler_info_0.json", "ASCEND_PROFILER_OUTPUT/analyse.done"))
        while sum(done(d) for d in os.listdir(root) if d.endswith("ascend_pt")) < 4:
            assert time.monotonic() < end, os.listdir(root)
            time.sleep(0.05)
        print("handed back", flush=True)
    if mode in ("no_analysis", "worker_replaced"):  # however loaded the machine, the worker (SCHED_IDLE) gets to save them
        _analysis_worker.wait_saved(120)
    prof.stop()
    print("saved", len(prof.saved), len(set(prof.saved)), flush=True)
""")


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    root = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", _TRAIN, str(root), mode], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=300, start_new_session=True)
    return proc, root


def _over(d: Path) -> dict:
    return orjson.loads((d / "profiler_info_0.json").read_bytes())["openmsprof_overhead"]


def test_without_analysis_the_worker_saves_the_windows(tmp_path: Path) -> None:
    proc, root = _run(tmp_path, "no_analysis")
    assert proc.returncode == 0, proc.stderr
    assert "saved 4 4" in proc.stdout  # stop() waited for the saves; each dir listed once
    dirs = rank_dirs(root)
    assert len(dirs) == 4
    for d in dirs:
        assert (d / "FRAMEWORK" / "torch.kineto_trace.json").stat().st_size > 0
        assert (d / "profiler_metadata.json").is_file()
        assert "window_files_worker_cpu_s" in _over(d)  # not the training process's writer thread
        assert not (d / "ASCEND_PROFILER_OUTPUT").exists()  # analyse_flag=False
        # the worker makes the dirs under its own umask, without a chmod each: the modes stay exact
        assert os.stat(d).st_mode & 0o777 == 0o750 and modes_ok(d)
        assert sorted(p.name for p in d.iterdir()) == ["FRAMEWORK", "logs", "profiler_info_0.json",
                                                       "profiler_metadata.json"]
        assert not list(d.parent.glob(".*.kineto.tmp")) and not list((d / "FRAMEWORK").glob(".*.tmp"))


def test_a_replacement_worker_is_sent_the_profilers_static_files_again(tmp_path: Path) -> None:
    """The job line names the profiler's static part (config, backend, notes, torch version) sent
    once per worker: a worker started after the first one died saves the next windows itself."""
    proc, root = _run(tmp_path, "worker_replaced")
    assert proc.returncode == 0, proc.stderr
    assert "saved 4 4" in proc.stdout and "failed" not in proc.stderr, proc.stdout + proc.stderr[-2000:]
    dirs = rank_dirs(root)
    assert len(dirs) == 4
    infos = [orjson.loads((d / "profiler_info_0.json").read_bytes()) for d in dirs]
    for info in infos:  # both workers saved theirs, not the training process
        assert "window_files_worker_cpu_s" in info["openmsprof_overhead"], info["openmsprof_overhead"]
        assert {k: info[k] for k in ("config", "backend", "torch_version")} == \
            {k: infos[0][k] for k in ("config", "backend", "torch_version")}
    assert infos[0]["config"]["common_config"]["activities"] == ["ProfilerActivity.CPU"]
    assert infos[0]["torch_version"].startswith(torch.__version__.split("+")[0]), infos[0]["torch_version"]


def test_a_stopped_worker_with_a_full_pipe_never_blocks_the_training_thread(tmp_path: Path) -> None:
    proc, root = _run(tmp_path, "pipe_full")
    assert proc.returncode == 0, proc.stderr
    assert "steps done" in proc.stdout and "saved 4 4" in proc.stdout
    dirs = rank_dirs(root)
    assert len(dirs) == 4
    for d in dirs:  # the backlog reached the worker once it ran again
        meta = orjson.loads((d / "profiler_metadata.json").read_bytes())
        assert meta["blob"] == "x" * 200_000


def test_killed_run_the_live_worker_saves_and_offline_analyse_completes(tmp_path: Path) -> None:
    proc, root = _run(tmp_path, "killed_live")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    dirs = rank_dirs(root)
    assert len(dirs) == 4
    for d in dirs:
        assert "window_files_worker_cpu_s" in _over(d)
    done = tp.analyse(root)
    assert sorted(done) == sorted(d / "ASCEND_PROFILER_OUTPUT" for d in dirs)
    assert all((d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").stat().st_size > 0 for d in dirs)


def test_a_dead_workers_windows_are_saved_and_analysed_without_waiting_for_stop(tmp_path: Path) -> None:
    proc, root = _run(tmp_path, "worker_killed")
    assert proc.returncode == 0, proc.stderr
    assert "handed back" in proc.stdout and "saved 4 4" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    dirs = rank_dirs(root)
    assert len(dirs) == 4
    for d in dirs:  # the stopped worker saved none: the training process's writer thread did
        assert "window_files_writer_thread_cpu_s" in _over(d)
        assert (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").stat().st_size > 0


def _files() -> dict:
    return {"config": {"common_config": {}}, "start": {"start_monotonic": 1}, "end": {"MonotonicTimeEnd": 2},
            "rank": 0, "backend": "CPU", "notes": ["x"], "meta": {"k": "v"}, "torch_version": "t",
            "window_end_s": 0.001}


def test_save_is_idempotent_and_refuses_a_link(tmp_path: Path) -> None:
    path = tmp_path / "h_1-abc_1_ascend_pt"
    tmp = tmp_path / ".trace.tmp"
    tmp.write_bytes(b"{}")
    assert _window_files.save(path, tmp, _files(), "worker") is True
    info = orjson.loads((path / "profiler_info_0.json").read_bytes())
    assert info["torch_version"] == "t" and info["openmsprof_overhead"]["window_end_training_thread_s"] == 0.001
    assert (path / "logs" / "collection.log").read_text() == "not supported here: x\n"
    assert _window_files.save(path, tmp, _files(), "writer_thread") is False  # the other party finds it saved
    assert "window_files_writer_thread_cpu_s" not in orjson.loads((path / "profiler_info_0.json").read_bytes())[
        "openmsprof_overhead"]
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "l_1-abc_1_ascend_pt"
    link.symlink_to(tmp_path / "elsewhere")
    tmp.write_bytes(b"{}")
    with pytest.raises(PathError):
        _window_files.save(link, tmp, _files(), "worker")
    assert not list((tmp_path / "elsewhere").iterdir())
