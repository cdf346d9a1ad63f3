"""Training interrupted by signals, in real processes: Ctrl-C (a real SIGINT from outside) in the
middle of a ``with profile(...)`` loop, and a timer whose handler raises while ``stop()`` waits
for the analyses.  The user's exception reaches the user's code, the process leaves (no hang on
the worker), and every window that ended before the interruption is on disk and analysed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from tests.torch.conftest import analysed_dirs, rank_dirs

REPO = Path(__file__).resolve().parents[2]

_CTRL_C = textwrap.dedent("""
    import signal, sys, torch
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (a test runner's worker may ignore SIGINT)
    import openmsprof.torch.profiler as tp
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    root = sys.argv[1]
    try:
        with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1),
                        on_trace_ready=tp.tensorboard_trace_handler(root)) as prof:
            for i in range(10**9):
                model(torch.randn(16, 32)).sum().backward()
                opt.step()
                opt.zero_grad()
                prof.step()
                if i == 3:
                    print("steps", flush=True)  # the parent sends SIGINT now
    except KeyboardInterrupt:
        print("interrupted at step", prof.step_num, flush=True)
        raise
""")

_ALARM = textwrap.dedent("""
    import signal, sys, torch
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _analysis_worker
    class Tick(Exception):
        pass
    armed = [True]
    def on_alarm(signum, frame):
        if armed[0]:  # (once, and not after stop() returned: only stop() is under test)
            armed[0] = False
            raise Tick()
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 10)
    root = sys.argv[1]
    prof = tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1),
                      on_trace_ready=tp.tensorboard_trace_handler(root))
    prof.start()
    for _ in range(6):
        model(torch.randn(16, 32)).sum().backward()
        prof.step()
    signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.001)  # fires inside stop(), while it waits for the worker
        prof.stop()
        armed[0] = False
        print("stop returned", flush=True)
    except Tick:
        print("tick reached the caller", flush=True)
    signal.setitimer(signal.ITIMER_REAL, 0)
    assert _analysis_worker.wait(120), "the windows were never analysed"
    print("all analysed", flush=True)
""")


_SLOW_HANDLER = textwrap.dedent("""
    import signal, sys, time, torch
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (a test runner's worker may ignore SIGINT)
    import openmsprof.torch.profiler as tp
    calls = []
    def handler(prof):  # a user's on_trace_ready that takes long on its second window
        calls.append(str(prof.prof_path))
        if len(calls) == 2:
            print("in handler", flush=True)  # the parent sends SIGINT now
            end = time.monotonic() + 60
            while time.monotonic() < end:
                time.sleep(0.01)
            print("handler finished", flush=True)
    model = torch.nn.Linear(8, 8)
    try:
        with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1),
                        on_trace_ready=handler) as prof:  # (its windows go to the working dir)
            for _ in range(10):
                model(torch.randn(2, 8)).sum().backward()
                prof.step()
    except KeyboardInterrupt:
        print("interrupted", len(calls), len(set(calls)), flush=True)
""")


_CAUGHT_IN_HANDLER = textwrap.dedent("""
    import os, signal, sys, torch
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (a test runner's worker may ignore SIGINT)
    import openmsprof.torch.profiler as tp
    calls = []
    def handler(prof):
        calls.append(str(prof.prof_path))
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the user's handler runs (unheld)
            for _ in range(10**6):
                pass
    model = torch.nn.Linear(8, 8)
    warmup, active = (int(x) for x in sys.argv[2:4])
    prof = tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=warmup, active=active),
                      on_trace_ready=handler)
    prof.start()
    caught = 0
    for _ in range(int(sys.argv[1])):  # a loop that takes the Ctrl-C and goes on (its own handler, say)
        model(torch.randn(2, 8)).sum().backward()
        try:
            prof.step()
        except KeyboardInterrupt:
            caught += 1
    prof.stop()
    print("caught", caught, "calls", len(calls), len(set(calls)), flush=True)
    print("first window kept", os.path.isdir(calls[0]), flush=True)
""")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO / "src")}


def test_ctrl_c_mid_training_leaves_every_ended_windowanalysed_dirs(tmp_path: Path) -> None:
    root = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", _CTRL_C, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(), start_new_session=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "steps"
        time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C goes to the training process (the worker ignores it)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGINT, err  # Python's own exit on an uncaught KeyboardInterrupt
    assert "KeyboardInterrupt" in err and "interrupted at step" in out
    stepped = int(out.split("interrupted at step")[1].split()[0])
    done = analysed_dirs(root)
    assert len(done) >= stepped >= 4  # every ended window (and the one open at the interrupt, when it recorded)
    assert len(done) == len(rank_dirs(root))  # none left half-done
    assert [p for p in root.iterdir() if p.name.startswith(".")] in ([], [root / ".openmsprof.claims"])


def test_ctrl_c_in_a_users_long_trace_handler_comes_at_once_and_the_window_is_not_handed_on_twice(
        tmp_path: Path) -> None:
    """The window changes hold a Ctrl-C until they are whole; the user's own ``on_trace_ready``
    between them does not: its KeyboardInterrupt comes while it runs, and ``stop()`` (the ``with``
    block's exit) neither calls it again for that window nor leaves a window unsaved."""
    (tmp_path / "out").mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_HANDLER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(), start_new_session=True, cwd=tmp_path / "out")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "in handler"
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=240)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert "handler finished" not in out and took < 40, (out, took)  # held, it would come after 60 s
    assert out.strip().splitlines()[-1] == "interrupted 2 2", out  # not called again by stop()
    saved = [d for d in rank_dirs(tmp_path / "out") if (d / "FRAMEWORK").is_dir()]
    assert len(saved) == 2, rank_dirs(tmp_path / "out")


@pytest.mark.parametrize("steps,warmup,active,windows,resumes", [(7, 1, 1, 4, 0), (2, 1, 1, 1, 0), (8, 0, 2, 5, 3),
                                                                  (9, 0, 3, 4, 4)])
def test_a_loop_that_takes_a_ctrl_c_from_the_trace_handler_goes_on_whole(tmp_path: Path, steps: int, warmup: int,
                                                                         active: int, windows: int,
                                                                         resumes: int) -> None:
    """After a Ctrl-C in the user's handler the next window was not prepared: the next step that
    records prepares it, with one warning (not start the ended window's Kineto again: SIGSEGV; nor
    lose the window silently when the schedule goes on recording), and ``stop()`` right after
    must not take the window handed to the handler for a warmup window to drop (it deleted it)."""
    r = subprocess.run([sys.executable, "-c", _CAUGHT_IN_HANDLER, str(steps), str(warmup), str(active)],
                       capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=240)
    assert r.stderr.count("recording resumes at step") == (1 if resumes else 0), r.stderr[-3000:]
    assert not resumes or f"recording resumes at step {resumes} " in r.stderr  # (the first step it can)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"caught 1 calls {windows} {windows}" in r.stdout, r.stdout + r.stderr[-2000:]  # (each window once)
    assert "first window kept True" in r.stdout, r.stdout + r.stderr[-2000:]
    assert len(rank_dirs(tmp_path)) == windows, rank_dirs(tmp_path)
    partial = [str(orjson.loads(p.read_bytes()).get("openmsprof_partial"))
               for d in rank_dirs(tmp_path) for p in d.glob("profiler_info*.json")]
    said = [p for p in partial if p != "None"]  # (the resumed window says what it lacks; no other does)
    assert len(partial) == windows and said == ([f"recording resumed at step {resumes}: an interrupt in "
                                                 "on_trace_ready kept the window from being prepared, so it lacks "
                                                 "its steps before that one"] if resumes else []), partial


def test_a_signal_handler_raising_inside_stop_reaches_the_caller_and_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", _ALARM, str(root)], capture_output=True, text=True, env=_env(),
                          timeout=240, start_new_session=True)
    assert proc.returncode == 0, proc.stderr
    assert ("tick reached the caller" in proc.stdout) or ("stop returned" in proc.stdout)
    assert "all analysed" in proc.stdout
    assert len(analysed_dirs(root)) == len(rank_dirs(root)) == 7  # six windows and the one open at stop()
    assert "Traceback" not in proc.stderr


_STATES = textwrap.dedent("""
    import sys, torch
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _writer
    model = torch.nn.Linear(32, 10)
    case, root = sys.argv[1], sys.argv[2]
    prof = tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1),
                      on_trace_ready=tp.tensorboard_trace_handler(root))
    prof.start()
    model(torch.randn(16, 32)).sum().backward()
    kineto = prof._kineto
    if case == "stopped_by_torch":  # the exception came after torch stopped the session (results kept)
        kineto.stop_trace()
    elif case == "exported":  # ... and after the window's trace was exported (torch refuses a second export)
        prof._stop()
        _writer.flush()  # (as _finalize exports only once the root is made: the writer thread makes it)
        tmp = prof._tmp = prof.prof_path.parent / "early.kineto.tmp"
        kineto.export_chrome_trace(str(tmp))
    elif case == "results_lost":  # ... between torch's stop and its storing the results
        kineto.stop_trace()
        kineto.profiler.kineto_results = None
    elif case == "never_started":  # ... before the next window's start_trace (a fresh window, no session)
        prof._stop(); prof._finalize()
        prof._init(); prof._tracing = True
    prof.stop()
    print("stopped", flush=True)
""")


@pytest.mark.parametrize(("case", "saved"), [("stopped_by_torch", 1), ("exported", 1), ("results_lost", 0),
                                             ("never_started", 1)])
def test_stop_after_an_exception_mid_transition_never_stops_no_session(case: str, saved: int, tmp_path: Path) -> None:
    """Each state an exception inside a transition can leave: ``stop()`` saves the window whose
    results torch kept (once), drops the one it lost with a warning, and never calls stop_trace
    with no session running (whose export crashed the process with SIGSEGV)."""
    root = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", _STATES, case, str(root)], capture_output=True, text=True,
                          env=_env(), timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "stopped" in proc.stdout
    assert "disableProfiler called but no active profiling session" not in proc.stderr
    assert len(analysed_dirs(root)) == saved
    assert len(rank_dirs(root)) == saved  # (a dropped window leaves no empty dir)
    if case == "results_lost":
        assert "has no trace (never started, or ended by an exception or another profiler before its stop); dropped" in proc.stderr


def test_a_profile_inside_a_profile_leaves_the_outer_ones_session_alone(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Kineto has one session per process.  The inner profile's stop ended the outer's session
    (bare torch.profiler: the outer silently empty, "disableProfiler called but no active
    profiling session"); now the inner records nothing, says so, and the outer keeps its window."""
    import logging

    import openmsprof.torch.profiler as tp
    import torch

    model = torch.nn.Linear(32, 10)
    with caplog.at_level(logging.WARNING, logger="openmsprof"), \
            tp.profile(activities=[tp.ProfilerActivity.CPU],
                       on_trace_ready=tp.tensorboard_trace_handler(str(tmp_path / "outer"))):
        model(torch.randn(16, 32)).sum().backward()
        with tp.profile(activities=[tp.ProfilerActivity.CPU],
                        on_trace_ready=tp.tensorboard_trace_handler(str(tmp_path / "inner"))):
            model(torch.randn(16, 32)).sum().backward()
        model(torch.randn(16, 32)).sum().backward()
    assert caplog.text.count("another profiler is recording in this process; this window records nothing") == 1
    (outer,) = analysed_dirs(tmp_path / "outer")
    events = orjson.loads((outer / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_bytes())
    assert [e.get("name") for e in events if e.get("ph") == "X"].count("aten::linear") == 3  # all three steps
    assert not (tmp_path / "inner").exists() or rank_dirs(tmp_path / "inner") == []
