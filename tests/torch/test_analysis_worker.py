"""The window end hands analysis to one background worker process: the training process never runs
the analysis (nor imports it), async_mode starts no process per window, the worker's CPU time is in
profiler_info, and a run killed with its worker leaves raw traces that offline ``analyse`` completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson

import openmsprof.torch.profiler as tp
from openmsprof.torch.profiler import _analysis_claim
from tests.torch.conftest import modes_ok, rank_dirs

REPO = Path(__file__).resolve().parents[2]

_TRAIN = textwrap.dedent("""
    import os, sys, signal, time
    import psutil, torch
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _analysis_worker, _worker_takeover

    root, mode = sys.argv[1], sys.argv[2]
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    handler = tp.tensorboard_trace_handler(root, async_mode=(mode not in ("sync", "stalled")))
    pid = _analysis_worker.start()
    if mode == "sync":  # this run follows the worker: stop() never takes its windows over (test_stop_bound)
        _worker_takeover.MIN_SHARE = 0.0
    if mode in ("killed", "stalled"):
        os.kill(pid, signal.SIGSTOP)  # the worker cannot analyse anything meanwhile
    children = set()
    with tp.profile(activities=[tp.ProfilerActivity.CPU], on_trace_ready=handler,
                    schedule=tp.schedule(wait=1, warmup=1, active=2, repeat=4)) as prof:
        for _ in range(18):
            model(torch.randn(16, 32)).sum().backward()
            prof.step()
            children |= {c.pid for c in psutil.Process().children(recursive=True)}
        if mode == "stalled":  # every window ended in step() with no analysis done: none waited
            _analysis_worker.wait_saved(0.5)  # the stopped worker saved none: saved here
            print("windows ended", len(prof.saved), "analysed", sum(
                os.path.exists(os.path.join(d, "ASCEND_PROFILER_OUTPUT", "analyse.done")) for d in prof.saved),
                flush=True)
            os.kill(pid, signal.SIGCONT)
    if mode == "sync":  # stop() returned: a sync handler's windows are analysed by now
        print("analysed at stop", sum(os.path.exists(os.path.join(d, "ASCEND_PROFILER_OUTPUT", "analyse.done"))
                                      for d in prof.saved), "of", len(prof.saved), flush=True)
    print("children", len(children), "worker", pid, flush=True)
    print("analysis imported here", "openmsprof.export.ascend_pt.rank_analyse" in sys.modules, flush=True)
    if mode == "killed":  # the stopped worker saved none: what stop() and exit do saves them here
        _analysis_worker.wait_saved(0.5)
        os.killpg(0, signal.SIGKILL)  # the run and its worker die together
""")


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    root = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-c", _TRAIN, str(root), mode], capture_output=True, text=True,
                          env=env, timeout=300, start_new_session=True)
    return proc, root


def _info(d: Path) -> dict:
    return orjson.loads((d / "profiler_info_0.json").read_bytes())


def test_sync_handler_analyses_off_the_training_process(tmp_path: Path) -> None:
    proc, root = _run(tmp_path, "sync")
    assert proc.returncode == 0, proc.stderr
    assert "analysis imported here False" in proc.stdout  # the training process never loaded it
    assert "analysed at stop 4 of 4" in proc.stdout, proc.stdout
    worker = int(proc.stdout.split("worker ")[1].split()[0])
    dirs = rank_dirs(root)
    assert len(dirs) == 4
    for d in dirs:  # stop() waited: every window analysed, by the one worker
        assert (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file()
        over = _info(d)["openmsprof_overhead"]
        assert over["analysis_cpu_s"] > 0
        # the training thread's share, and the window's file work, done by the worker too
        assert 0 < over["window_end_training_thread_s"] < 5
        assert 0 < over["window_files_worker_cpu_s"] < 5
        assert "window_files_writer_thread_cpu_s" not in over
        track = orjson.loads((d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_bytes())
        shown = {e["name"] for e in (track if isinstance(track, list) else track["traceEvents"])
                 if e.get("ph") == "C"}
        assert "window_end_training_thread_s" in shown  # the window's own trace_view carries it
        assert f"pid {worker}," in over["analysis_where"]
        assert modes_ok(d)  # (the worker's umask is not its analysing child's: modes stay exact)


def test_window_end_steps_do_not_wait_for_the_analysis(tmp_path: Path) -> None:
    """A sync handler with its worker stopped: the four window-end ``step()`` calls return (the
    training process saves the windows the worker does not confirm, none analysed); ``stop()``
    then waits for the analyses, as documented."""
    proc, root = _run(tmp_path, "stalled")
    assert proc.returncode == 0, proc.stderr
    assert "windows ended 4 analysed 0" in proc.stdout
    assert "has not saved 4 window(s)" in proc.stderr  # the stopped worker's saves, done here instead
    dirs = rank_dirs(root)
    assert len(dirs) == 4 and all((d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file() for d in dirs)
    for d in dirs:  # saved once, by the training process; the worker found them saved and analysed them
        over = _info(d)["openmsprof_overhead"]
        assert "window_files_writer_thread_cpu_s" in over and "window_files_worker_cpu_s" not in over
        assert over["analysis_cpu_s"] > 0


def test_async_mode_uses_one_worker_not_a_process_per_window(tmp_path: Path) -> None:
    proc, root = _run(tmp_path, "async")
    assert proc.returncode == 0, proc.stderr
    assert "children 2 " in proc.stdout  # four windows, two processes in all: the worker and its analysing child
    worker = int(proc.stdout.split("worker ")[1].split()[0])
    dirs = rank_dirs(root)
    assert len(dirs) == 4
    end = time.monotonic() + 120
    while not all((d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file() for d in dirs):
        assert time.monotonic() < end, "the worker did not finish its queue after the run exited"
        time.sleep(0.05)
    idle = "SCHED_IDLE, " if hasattr(os, "SCHED_IDLE") else ""
    assert {_info(d)["openmsprof_overhead"]["analysis_where"] for d in dirs} == {
        f"background worker process (pid {worker}, {idle}nice 19)"}


def test_killed_run_leaves_raw_traces_that_offline_analyse_completes(tmp_path: Path) -> None:
    proc, root = _run(tmp_path, "killed")
    assert proc.returncode == -signal.SIGKILL
    dirs = rank_dirs(root)
    assert len(dirs) == 4
    for d in dirs:
        assert (d / "FRAMEWORK" / "torch.kineto_trace.json").is_file()
        assert not (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; from openmsprof."
                               "torch.profiler import _analysis_claim as c\nwith c.claim(Path(sys.argv[1])) as mine: "
                               "print('held', mine, flush=True); time.sleep(600)", str(dirs[0])],
                              stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert holder.stdout is not None and holder.stdout.readline() == b"held True\n"
    holder.kill()  # a worker killed while it held a window's claim: the lock goes, the claims file stays
    holder.wait()
    assert (root / _analysis_claim.CLAIMS_FILE).exists()
    done = tp.analyse(root)
    assert sorted(done) == sorted(d / "ASCEND_PROFILER_OUTPUT" for d in dirs)
    for d in dirs:
        assert (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").stat().st_size > 0
    assert sorted(p.name for p in root.iterdir()) == [d.name for d in dirs]  # its claims file removed too


_NO_WORKER = textwrap.dedent("""
    import sys
    import torch
    import openmsprof.torch.profiler as tp

    sys.executable = "/bin/false"  # a host where the worker process cannot run (it exits at once)
    model = torch.nn.Linear(8, 8)
    with tp.profile(activities=[tp.ProfilerActivity.CPU], on_trace_ready=tp.tensorboard_trace_handler(sys.argv[1]),
                    schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=3)) as prof:
        for _ in range(3):
            model(torch.randn(2, 8)).sum().backward()
            prof.step()
    print("analysed in process", "openmsprof.export.ascend_pt.rank_analyse" in sys.modules)
""")


def test_windows_are_analysed_when_no_worker_can_run(tmp_path: Path) -> None:
    root = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", _NO_WORKER, str(root)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "analysed in process True" in proc.stdout  # the fallback: the writer thread analysed
    assert "no analysis worker process" in proc.stderr
    dirs = rank_dirs(root)
    assert len(dirs) == 3
    assert all((d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file() for d in dirs)


_FAIL_FIRST_SAVE = textwrap.dedent("""
    import sys
    if "openmsprof.torch.profiler._worker_process" in " ".join(sys.orig_argv):  # the worker only
        from openmsprof.torch.profiler import _window_files
        real, calls = _window_files.save, []
        def save(*a, **k):
            calls.append(1)
            if len(calls) == 1:
                raise OSError("injected: the worker cannot save this window")
            return real(*a, **k)
        _window_files.save = save
""")

_THREE_WINDOWS = textwrap.dedent("""
    import sys, torch
    import openmsprof.torch.profiler as tp
    model = torch.nn.Linear(16, 16)
    prof = tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1),
                      on_trace_ready=tp.tensorboard_trace_handler(sys.argv[1]))
    with prof:
        for _ in range(3):
            model(torch.randn(4, 16)).sum().backward()
            prof.step()
    print("saved", len(prof.saved), flush=True)
""")


def test_a_window_the_worker_cannot_save_is_saved_and_analysed_here(tmp_path: Path) -> None:
    """A worker that answers ``unsaved`` (here a save made to fail once inside the real worker
    process) says why on stderr, and the training process saves that window itself and queues its
    analysis again: ``stop()`` returns with every window saved and analysed, none left as a temp
    trace for offline ``analyse``."""
    (tmp_path / "inject").mkdir()
    (tmp_path / "inject" / "sitecustomize.py").write_text(_FAIL_FIRST_SAVE)
    root = tmp_path / "out"
    r = subprocess.run([sys.executable, "-c", _THREE_WINDOWS, str(root)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(tmp_path / "inject")])},
                       timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "injected: the worker cannot save this window" in r.stderr, r.stderr[-3000:]  # (the worker said it)
    assert "saved 4" in r.stdout, r.stdout + r.stderr[-3000:]  # (three steps, and the window open at stop)
    dirs = rank_dirs(root)
    assert len(dirs) == 4 and all((d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file() for d in dirs), [
        sorted(p.name for p in d.rglob("*")) for d in dirs]
    assert all((d / "profiler_info_0.json").is_file() for d in dirs)
    assert not [p for p in root.iterdir() if p.name.endswith(".kineto.tmp")], list(root.iterdir())
