"""A sync ``profile.stop()`` never waits on a starved or stopped analysis worker: the waiting thread
analyses the windows itself (``_worker_takeover.take_over``), so stop() costs the analysis CPU it
waits for plus ``STALL_S`` of waiting, not the worker's time to get a core (issues 23 and 26)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import psutil
import pytest

from openmsprof.torch.profiler import _analysis_claim, _worker_cpu, _worker_takeover
from tests.torch.conftest import rank_dirs

REPO = Path(__file__).resolve().parents[2]

_TRAIN = textwrap.dedent("""
    import os, sys, signal, time
    import torch
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _analysis_claim, _analysis_worker

    root, mode = sys.argv[1], sys.argv[2]
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    handler = tp.tensorboard_trace_handler(root)
    pid = _analysis_worker.start()
    time.sleep(0.5)  # (it imports meanwhile)
    if mode == "stopped":
        os.kill(pid, signal.SIGSTOP)  # wedged for good: never continued
    prof = tp.profile(activities=[tp.ProfilerActivity.CPU], on_trace_ready=handler,
                      schedule=tp.schedule(wait=2, warmup=1, active=3, repeat=3))
    prof.start()
    for _ in range(20):
        model(torch.randn(16, 32)).sum().backward()
        prof.step()
    print("before stop: analysis imported", "openmsprof.export.ascend_pt.rank_analyse" in sys.modules, flush=True)
    t0, c0 = time.monotonic(), time.process_time()
    prof.stop()
    print(f"stop wall {time.monotonic() - t0:.3f} cpu {time.process_time() - c0:.3f}", flush=True)
    try:
        os.kill(pid, 0)
        print("worker alive", flush=True)
    except ProcessLookupError:
        print("worker gone", flush=True)
""")


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """One busy process per core at normal priority (the benchmarks' co-runner)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _run(tmp_path: Path, mode: str) -> tuple[str, list[Path], float, float]:
    root = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", _TRAIN, str(root), mode], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "before stop: analysis imported False" in proc.stdout  # no window analysed in training
    wall, cpu = (float(x) for x in proc.stdout.split("stop wall ")[1].split()[0:3:2])
    dirs = rank_dirs(root)
    assert len(dirs) == 3
    said = (proc.stdout + proc.stderr)[-3000:]
    for d in dirs:  # a sync handler: every window analysed when stop() returned
        assert (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file(), (d.name, sorted(
            p.name for p in (d / "ASCEND_PROFILER_OUTPUT").glob("*")), said)
        with _analysis_claim.claim(d, wait_s=60) as mine:  # its holder released the claim
            assert mine is False, said
    return proc.stdout + proc.stderr, dirs, wall, cpu


def _where(d: Path) -> str:
    return str(orjson.loads((d / "profiler_info_0.json").read_bytes())["openmsprof_overhead"]["analysis_where"])


def test_a_stopped_worker_costs_stop_a_bounded_wait(tmp_path: Path) -> None:
    """SIGSTOPped for good: stop() ends it after ``STALL_S`` and analyses the windows itself
    (before: it waited up to 1,800 s)."""
    out, dirs, wall, _cpu = _run(tmp_path, "stopped")
    assert f"got under 25% of a core for {_worker_takeover.STALL_S} s" in out
    assert "worker gone" in out  # ended, not left stopped with the windows
    assert {_where(d).split(" (")[0] for d in dirs} == {"training process, on the thread that waited"}
    assert wall < 60  # STALL_S plus three small analyses and the exporter's import, on a loaded machine


def test_sync_stop_with_busy_cores_costs_the_analysis_not_the_wait(tmp_path: Path, busy_cores: None) -> None:
    """Every core busy: the SCHED_IDLE worker gets no CPU; stop() returns within its bound, having
    spent about the analysis CPU of the windows it waited for."""
    out, dirs, wall, cpu = _run(tmp_path, "busy")
    info = [orjson.loads((d / "profiler_info_0.json").read_bytes())["openmsprof_overhead"] for d in dirs]
    here = [o for o in info if o["analysis_where"].startswith("training process")]
    assert wall < 60, out  # before: tens of seconds waiting for a worker that never ran
    assert "worker alive" in out  # its windows taken over, not ended (it holds a claim only to save, publish)
    # stop()'s CPU: the analyses done here (the first one includes the exporter's import), no more
    assert cpu <= 2 * sum(o["analysis_cpu_s"] for o in here) + 0.5, out


_REPEAT = textwrap.dedent("""
    import os, sys
    import orjson, torch
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import _analysis_worker

    root = sys.argv[1]
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    pids = []
    for _ in range(3):  # three profiles in one run, each with a sync handler and its stop()
        prof = tp.profile(activities=[tp.ProfilerActivity.CPU], on_trace_ready=tp.tensorboard_trace_handler(root),
                          schedule=tp.schedule(wait=2, warmup=1, active=3, repeat=2))
        prof.start()
        for _ in range(14):
            model(torch.randn(16, 32)).sum().backward()
            prof.step()
        prof.stop()
        pids.append(_analysis_worker._client.proc.pid)
    state = {}
    for d in sorted(os.listdir(root)):
        if d.endswith("_ascend_pt"):
            over = orjson.loads(open(os.path.join(root, d, "profiler_info_0.json"), "rb").read())["openmsprof_overhead"]
            tv = os.path.join(root, d, "ASCEND_PROFILER_OUTPUT", "trace_view.json")
            state[d] = [os.lstat(tv).st_ino, over["analysis_where"]]
    print("RESULT", orjson.dumps({"pids": pids, "state": state}).decode(), flush=True)
""")


def _state(root: Path) -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for d in rank_dirs(root):
        over = orjson.loads((d / "profiler_info_0.json").read_bytes())["openmsprof_overhead"]
        out[d.name] = [os.lstat(d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").st_ino, over["analysis_where"]]
    return out


def test_repeated_profiles_with_busy_cores_keep_one_worker_and_analyse_each_window_once(tmp_path: Path) -> None:
    """stop() takes the windows of the starved worker over without ending it (the worker holds a
    window's claim only to save and publish it): three profiles, one worker; the worker's late
    copies of the windows done by stop() are discarded, never published over them."""
    import psutil

    root = tmp_path / "out"
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    try:  # (files, not pipes: the worker, which inherits stderr, may outlive the run)
        with open(out, "wb") as o, open(err, "wb") as e:
            code = subprocess.run([sys.executable, "-c", _REPEAT, str(root)], stdout=o, stderr=e,
                                  env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=400).returncode
    finally:
        for p in busy:
            p.kill()
            p.wait()
    stderr = err.read_text()[-3000:]
    assert code == 0, stderr
    res = orjson.loads(out.read_text().split("RESULT ", 1)[1])
    assert len(set(res["pids"])) == 1, stderr  # never ended, never restarted
    assert len(res["state"]) == 6
    worker = res["pids"][0]
    try:  # the worker leaves once its queue is through (the windows done by stop() are discarded)
        psutil.Process(worker).wait(timeout=180)
    except psutil.NoSuchProcess:
        pass
    assert _state(root) == res["state"]  # no window published again after stop() returned
    for d in rank_dirs(root):
        assert (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file()
    assert sorted(p.name for p in root.iterdir()) == sorted(res["state"])  # no stage dir, no claim left
    assert "Traceback" not in stderr and "failed" not in stderr, stderr


def test_the_workers_progress_is_read_in_nanoseconds_not_clock_ticks() -> None:
    """``stop()``'s 50 ms stall window reads the analysis's CPU from the threads' schedstat:
    the same time as the kernel's clock-tick count, to within a tick or two, but not rounded to
    10 ms ticks."""
    spin = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 0.4: pass\n"
                             "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        p, deadline = psutil.Process(spin.pid), time.monotonic() + 120
        while sum(p.cpu_times()[:2]) < 0.3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        ticks = sum(p.cpu_times()[:2])
        run = _worker_cpu.run_s(spin.pid)
        assert run is not None and abs(run - ticks) < 0.1, (run, ticks)
        assert round(run * 1e9) % 10_000_000 != 0  # (1 chance in 10 million of a whole tick)
    finally:
        spin.kill()
        spin.wait()
