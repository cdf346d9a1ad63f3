"""The local rank pool (cluster/rank_pool.py, rank_worker.py): a worker killed in the middle of a
parse is reaped and named by its signal, Ctrl-C ends every worker, a worker's exception reaches
the parent, and no child outlives a run.  Real processes and real signals: the test-only
OPENMSPROF_TEST_WORKER_SIGNAL has a worker signal itself when its parse opens a chosen file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from openmsprof.cluster import run_cluster
from openmsprof.cluster.rank_worker import SIGNAL_ENV
from openmsprof.config.errors import PathError
from tests.cluster.conftest import leftovers
from tests.collector.programs import sigint_as_at_a_terminal


def _children() -> set[int]:
    """This process's child processes (a Dask test's resource tracker may be one before ours)."""
    return {c.pid for c in psutil.Process().children(recursive=True)}


def _status(proc: psutil.Process) -> str:
    try:
        return str(proc.status())
    except psutil.NoSuchProcess:
        return "gone"


def _ranks_in_table(out: Path) -> set[int]:
    rows = (out / "cluster_step_trace_time.csv").read_text().splitlines()[1:]
    return {int(r.split(",")[2]) for r in rows}


def test_a_worker_killed_mid_parse_is_named_by_its_signal(synthetic: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 2's worker gets SIGTERM each time its parse opens communication.json (after the step
    trace was read), although this process handles SIGTERM (the workers do not run its handler):
    three workers die, rank 2 is reported once, the other ranks are analysed and
    no worker process is left (reaped: no zombie either)."""
    monkeypatch.setenv(SIGNAL_ENV, "2:communication.json:SIGTERM")
    before = _children()
    app_handler = signal.signal(signal.SIGTERM, lambda *_: None)  # the application's: not the workers'
    try:
        run = run_cluster(synthetic, ["step_trace", "communication"], tmp_path / "o", workers=2)
    finally:
        signal.signal(signal.SIGTERM, app_handler)
    assert run.problems == ["rank 2: its worker process died 3 times (SIGTERM x3); not analysed"]
    assert [p["rank"] for p in run.partials if p.get("failed")] == [2]
    assert _ranks_in_table(run.output) == {0, 1, 3}
    assert _children() <= before


def test_the_same_ranks_parse_the_same_with_and_without_deaths(synthetic: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranks whose workers did not die give the same files as a run in this process (one worker)."""
    monkeypatch.setenv(SIGNAL_ENV, "1:kernel_details.csv:SIGKILL")
    pooled = run_cluster(synthetic, ["step_trace", "compute_op"], tmp_path / "pool", workers=2)
    monkeypatch.delenv(SIGNAL_ENV)
    alone = run_cluster(synthetic, ["step_trace", "compute_op"], tmp_path / "alone", workers=1)
    assert pooled.problems == ["rank 1: its worker process died 3 times (SIGKILL x3); not analysed"]
    assert not alone.problems
    rows = {r for r in (alone.output / "cluster_step_trace_time.csv").read_text().splitlines()[1:]
            if r.split(",")[2] != "1"}
    assert set((pooled.output / "cluster_step_trace_time.csv").read_text().splitlines()[1:]) == rows
    for p, q in zip(pooled.partials, alone.partials, strict=True):
        if p["rank"] != 1:
            assert (p["counts"], p["problems"]) == (q["counts"], q["problems"])


def test_ctrl_c_ends_every_worker(synthetic: Path, tmp_path: Path) -> None:
    """Both workers stop themselves in the middle of a parse (SIGSTOP) so the command waits; Ctrl-C
    (SIGINT to the command) ends it with status 130 and one line, and no worker is left."""
    out = tmp_path / "o"
    env = {**os.environ, SIGNAL_ENV: "0,1,2,3:communication.json:SIGSTOP"}
    proc = subprocess.Popen([sys.executable, "-m", "openmsprof", "cluster", "-d", str(synthetic), "-o", str(out),
                             "-m", "step_trace", "--workers", "2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_at_a_terminal)
    try:
        me = psutil.Process(proc.pid)
        deadline = time.monotonic() + 240
        stopped: list[psutil.Process] = []
        while len(stopped) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            stopped = [c for c in me.children() if _status(c) == psutil.STATUS_STOPPED]
        assert len(stopped) == 2, (proc.poll(), me.children() if proc.poll() is None else None)
        os.kill(proc.pid, signal.SIGINT)
        _stdout, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["openmsprof: interrupted"]
    assert not leftovers(str(out))


def test_a_worker_exception_reaches_the_parent(synthetic: Path, tmp_path: Path) -> None:
    """A rank's store that is a symbolic link makes its worker's parse raise: the command fails
    with that one error (as ProcessPoolExecutor raised it), and no worker is left."""
    store = tmp_path / "o" / "cluster_analysis_output" / ".openmsprof_store"
    store.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (store / "rank00003").symlink_to(tmp_path / "elsewhere")
    before = _children()
    with pytest.raises(PathError, match=r"rank00003' is a symbolic link; refused"):
        run_cluster(synthetic, ["step_trace"], tmp_path / "o", workers=2)
    assert _children() <= before
    assert not any((tmp_path / "elsewhere").iterdir())


def test_an_oserror_of_a_parse_is_not_taken_for_a_death(synthetic: Path, tmp_path: Path) -> None:
    """A rank whose manifest.json is a directory makes its worker's parse raise IsADirectoryError
    (an OSError, as a broken pipe is): it reaches the parent as itself, not as a dead worker retried."""
    store = tmp_path / "o" / "cluster_analysis_output" / ".openmsprof_store"
    (store / "rank00002" / "manifest.json").mkdir(parents=True)
    before = _children()
    with pytest.raises(IsADirectoryError, match=r"rank00002/manifest.json"):
        run_cluster(synthetic, ["step_trace"], tmp_path / "o", workers=2)
    assert _children() <= before
