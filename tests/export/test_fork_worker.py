"""The exporters' one fork helper and its policy: no fork while another thread runs."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from pathlib import Path

import pytest

from openmsprof.export.ascend_pt import split_read
from openmsprof.export.fork_worker import ForkWorker, fork_allowed

pytestmark = [pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the policy needs two CPUs"),
              pytest.mark.fork_policy]


def _running_thread() -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    return t, stop


def test_child_runs_its_body_and_reports_through_the_pipe() -> None:
    def body(fd: int) -> int:
        os.write(fd, f"child {os.getpid()}".encode())
        return 3

    worker = ForkWorker.start(body)
    assert worker is not None
    data, code = worker.result()
    assert data == f"child {worker.pid}".encode()
    assert code == 3


def test_a_raising_body_exits_nonzero_and_runs_no_parent_code() -> None:
    def body(fd: int) -> int:
        raise RuntimeError("boom")

    worker = ForkWorker.start(body)
    assert worker is not None
    assert worker.result() == (b"", 1)


def test_refused_while_another_thread_runs_and_no_warning_is_silenced() -> None:
    assert fork_allowed()
    t, stop = _running_thread()
    try:
        assert not fork_allowed()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a silenced-then-forked child would raise here
            assert ForkWorker.start(lambda fd: 0) is None
    finally:
        stop.set()
        t.join()
    assert fork_allowed()


def test_kill_reaps_a_stuck_child() -> None:
    worker = ForkWorker.start(lambda fd: time.sleep(60) or 0)
    assert worker is not None
    t0 = time.monotonic()
    worker.kill()
    assert time.monotonic() - t0 < 20
    with pytest.raises(ChildProcessError):
        os.waitpid(worker.pid, os.WNOHANG)  # already reaped


def test_child_dies_with_a_killed_exporter(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: a grandchild started by ForkWorker in a process that is then SIGKILLed
    does not outlive it."""
    pidfile = tmp_path / "grandchild"
    mid = os.fork()
    if mid == 0:  # pragma: no cover - the exporter stand-in
        try:
            w = ForkWorker.start(lambda fd: (pidfile.write_text(str(os.getpid())) and time.sleep(60)) or 0)
            assert w is not None
            time.sleep(60)
        finally:
            os._exit(0)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    grandchild = int(pidfile.read_text())
    os.kill(mid, signal.SIGKILL)
    os.waitpid(mid, 0)
    deadline = time.monotonic() + 30
    while True:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        # a zombie reparented to init counts as gone once reaped; check its state
        try:
            state = Path(f"/proc/{grandchild}/stat").read_text().split()[2]
        except OSError:
            break
        if state == "Z":
            break
        assert time.monotonic() < deadline, "the fork worker outlived its exporter"
        time.sleep(0.05)


def test_split_read_falls_back_to_one_process_while_a_thread_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exporter gets None (and reads serially) instead of forking a threaded process."""
    trace = tmp_path / "t.json"
    events = ",".join(f'{{"ph":"X","cat":"cpu_op","name":"op{i}","pid":1,"tid":1,"ts":{i},"dur":1}}'
                      for i in range(2000))
    trace.write_text('{"traceEvents":[' + events + "]}")
    monkeypatch.setattr(split_read, "MIN_BYTES", 1)
    forks: list[int] = []
    real_fork = os.fork

    def counting_fork() -> int:
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(os, "fork", counting_fork)
    t, stop = _running_thread()
    try:
        assert split_read.read(trace) is None
    finally:
        stop.set()
        t.join()
    assert forks == []
