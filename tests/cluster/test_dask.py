"""Dask distributed: a LocalCluster of two worker processes, and a scheduler plus two workers
started as separate processes on loopback; ranks run on the workers, results equal the local
run, and a worker killed mid-run loses nothing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import psutil
import pytest

from openmsprof.cluster import rank_deadline, run_cluster
from openmsprof.config.errors import ConfigError
from tests.cluster.agree import json_diffs
from tests.cluster.conftest import make_synthetic

distributed = pytest.importorskip("distributed")

COMPARED = ("cluster_step_trace_time.csv", "cluster_communication.json", "cluster_communication_matrix.json",
            "compute_op_sum/rank_stats_by_optype.csv", "slow_rank/wait_transfer.csv", "slow_rank/slow_rank.json")


@pytest.fixture(scope="module", autouse=True)
def _no_thread_left() -> Iterator[None]:
    """distributed's offload thread outlives its clients; a thread left in the test process makes
    every later fork-based export refuse to fork (export/fork_worker.py): end it here (the tests
    that need a fork run first anyway: tests/conftest.py, ``fork_policy``)."""
    yield
    from concurrent.futures import ThreadPoolExecutor

    import distributed.utils as du

    old, du._offload_executor = du._offload_executor, ThreadPoolExecutor(1, thread_name_prefix="Dask-Offload")
    old.shutdown(wait=True)
    left = [t.name for t in threading.enumerate() if "dask" in t.name.lower()]
    assert not left, f"threads left by the dask tests: {left}"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic(tmp_path_factory.mktemp("dask") / "job", ranks=6, events=60_000)


@pytest.fixture(scope="module")
def local(job: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_cluster(job, ["all"], tmp_path_factory.mktemp("local"), workers=1).output


def _same(a: Path, b: Path, compared: tuple[str, ...] = COMPARED) -> None:
    """Same files; numbers equal up to float summation order (DuckDB aggregates in parallel)."""
    for name in compared:
        if name.endswith(".csv"):
            x, y = pd.read_csv(a / name), pd.read_csv(b / name)
            sort = [c for c in x.columns if x[c].dtype == object or c in ("Rank", "rank", "Count")]
            pd.testing.assert_frame_equal(x.sort_values(sort).reset_index(drop=True),
                                          y.sort_values(sort).reset_index(drop=True), rtol=1e-9, obj=name)
        else:
            n, diffs = json_diffs(a / name, b / name)
            assert n and not diffs, (name, diffs[:3])


def test_local_cluster_two_worker_processes(job: Path, local: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranks parse on the cluster's worker processes (pinned to the hosts that hold them, or
    not); the environment's local rank deadline does not apply there and is reported, not obeyed."""
    monkeypatch.setenv(rank_deadline.ENV, "600")
    here = tmp_path / "here"
    for d in job.iterdir():  # the same ranks, named after this host, for pinning
        (here / d.name.replace("node0_", f"{socket.gethostname()}_")).parent.mkdir(exist_ok=True)
        shutil.copytree(d, here / d.name.replace("node0_", f"{socket.gethostname()}_"))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as lc, distributed.Client(lc) as client:
        worker_pids = set(client.run(os.getpid).values())
        run = run_cluster(job, ["all"], tmp_path / "a", scheduler=lc.scheduler_address)
        pinned = run_cluster(here, ["all"], tmp_path / "b", scheduler=lc.scheduler_address, shared=False)
        with pytest.raises(ConfigError, match=r"no Dask worker runs on host\(s\) node0 that hold rank files"):
            run_cluster(job, ["all"], tmp_path / "c", scheduler=lc.scheduler_address, shared=False)
    pids = {p["pid"] for p in run.partials}
    assert pids <= worker_pids and os.getpid() not in pids
    said = f"{rank_deadline.ENV}: not supported here with a Dask scheduler (the local workers' deadline); ignored"
    assert run.problems.count(said) == 1 and pinned.problems.count(said) == 1, run.problems
    _same(run.output, local)
    _same(pinned.output, local, COMPARED[:-1])  # slow_rank.json names the host


def _start(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


@pytest.fixture
def loopback_cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    sched_file = tmp_path / "scheduler.json"
    procs = [_start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--dashboard-address", ":0", "--scheduler-file", str(sched_file)])]
    deadline = time.monotonic() + 60
    while not sched_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = [_start(["distributed.cli.dask_worker", "--scheduler-file", str(sched_file), "--nthreads", "1",
                       "--nworkers", "1", "--host", "127.0.0.1", "--no-dashboard", "--name", f"w{i}"])
               for i in range(2)]
    procs += workers
    with distributed.Client(scheduler_file=str(sched_file), timeout="30s") as client:
        client.wait_for_workers(2, timeout=60)
    try:
        yield sched_file, workers
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def test_scheduler_and_workers_as_processes(job: Path, local: Path, tmp_path: Path, loopback_cluster) -> None:  # type: ignore[no-untyped-def]
    sched_file, _workers = loopback_cluster
    res = subprocess.run([sys.executable, "-m", "openmsprof", "cluster", "-d", str(job), "-o", str(tmp_path),
                          "--scheduler-file", str(sched_file)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "cluster_analysis_output"
    _same(out, local)
    manifests = [(p / "manifest.json").read_bytes() for p in sorted((out / ".openmsprof_store").glob("rank*"))]
    assert len(manifests) == 6 and all(f'"pid":{os.getpid()}'.encode() not in m for m in manifests)


def _semaphores(pgid: int) -> set[str]:
    """The POSIX semaphores (multiprocessing's ``/dev/shm/sem.mp-*``) mapped by process group ``pgid``."""
    found: set[str] = set()
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                found.update(m.path for m in proc.memory_maps() if m.path.startswith("/dev/shm/sem.mp-"))
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return found


def test_worker_killed_mid_run(job: Path, local: Path, tmp_path: Path, loopback_cluster) -> None:  # type: ignore[no-untyped-def]
    sched_file, workers = loopback_cluster
    victim = workers[0]
    killed = threading.Event()

    def kill_when_busy() -> None:
        with distributed.Client(scheduler_file=str(sched_file), timeout="30s") as c:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                busy = [addr for addr, keys in c.processing().items() if keys]
                info = c.scheduler_info()["workers"]
                if any(info[a].get("name") == "w0" for a in busy):
                    sems = _semaphores(victim.pid)
                    os.killpg(victim.pid, signal.SIGKILL)
                    killed.set()
                    victim.wait(timeout=30)
                    for sem in sems:  # (their resource tracker died in the group: nothing else unlinks them)
                        Path(sem).unlink(missing_ok=True)
                    return
                time.sleep(0.01)

    t = threading.Thread(target=kill_when_busy)
    t.start()
    run = run_cluster(job, ["all"], tmp_path, scheduler_file=str(sched_file))
    t.join()
    assert killed.is_set()
    assert not any(p.get("failed") for p in run.partials) and len(run.partials) == 6
    _same(run.output, local)
