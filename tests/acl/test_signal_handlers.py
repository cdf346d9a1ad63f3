"""A user's signal handler that raises (a serving loop's alarm timeout) while pyACL executes: the
exception reaches the user's code, as it does after a C pyACL call returns, and the model is not
run again.  Before, ``acl.mdl.execute`` caught it and answered ACL_ERROR_INVALID_PARAM ("model 1:
Tick"), and the fast path ran the model a second time.  ONNX Runtime's own errors still come back
as codes."""

from __future__ import annotations

import signal
import time

import numpy as np
import pytest

from openmsprof import acl


class Tick(Exception):
    pass


_armed = [False]
_raises: list[type[Exception]] = [Tick]


def _on_alarm(signum, frame):
    if _armed[0]:  # (only inside the loop's try: never while the test handles the last one)
        _armed[0] = False
        raise _raises[0]("tick")


@pytest.mark.parametrize("profiled,raises", [(False, Tick), (True, Tick), (True, ValueError)],
                         ids=["plain", "profiled", "profiled-ValueError"])
def test_a_raising_signal_handler_reaches_the_caller_of_execute(models, loaded, out_dir, profiled: bool,
                                                                raises: type[Exception]) -> None:
    """(A ValueError too, the class of the call's own bad-input failures: raised in an installed
    signal handler, it is the user's.)"""
    _raises[0] = raises
    assert acl.init() == 0
    m = loaded(models["resnet_mish"])
    m.feed(np.random.default_rng(0).random(m.in_shape, dtype=np.float32))
    if profiled:
        assert acl.prof.init(str(out_dir)) == 0
        cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
        assert acl.prof.start(cfg) == 0
    ok = ticks = bad = 0
    old = signal.signal(signal.SIGALRM, _on_alarm)
    end, started = time.monotonic() + 1.0, False
    while True:
        try:  # (a tick may land on any line of the loop)
            _armed[0] = True
            if not started:
                started = True
                signal.setitimer(signal.ITIMER_REAL, 0.001, 0.0013)  # every ~1 ms: most executes take longer
            if time.monotonic() >= end:
                _armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
                break
            ret = m.execute()
            _armed[0] = False  # (a tick after this, on the loop's own lines, does not raise)
            if ret == 0:
                ok += 1
            else:
                bad += 1
        except raises:
            ticks += 1
    assert bad == 0, acl.get_recent_err_msg()
    assert ticks >= 5 and ok + ticks >= 20  # (under load most executes outlast a tick: ok may be few)
    if profiled:
        assert acl.prof.stop(cfg) == 0
        assert acl.prof.finalize() == 0
    assert acl.mdl.execute(m.model_id, 777, m.output) == acl.ACL_ERROR_INVALID_PARAM  # its own failures: codes


def test_prof_stop_under_a_raising_timer_keeps_every_execute(models, loaded, out_dir) -> None:
    """``acl.prof.stop`` / ``finalize`` harvest ONNX Runtime's profile and stop the session with
    a raising handler held: the job ends whole (end_info, every execute's task records)."""
    _raises[0] = Tick
    import sqlite3
    import subprocess
    import sys

    assert acl.init() == 0
    m = loaded(models["tiny_mlp"])
    assert acl.prof.init(str(out_dir)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
    assert acl.prof.start(cfg) == 0
    for _ in range(200):
        assert m.execute() == 0
    old = signal.signal(signal.SIGALRM, _on_alarm)
    ticks, stopped, finalized = 0, False, False
    while True:
        try:
            _armed[0] = True
            signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
            if not stopped:  # (a tick held through the call is raised as it returns: done, then)
                assert acl.prof.stop(cfg) in (0, acl.ACL_ERROR_PROF_NOT_RUN)
                stopped = True
            if not finalized:
                assert acl.prof.finalize() in (0, acl.ACL_ERROR_UNINITIALIZE)
                finalized = True
            _armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            break
        except Tick:
            ticks += 1
    (job,) = [p for p in out_dir.iterdir() if p.name.startswith("PROF_")]
    # (held_signals keeping the noted frames pinned a buffer's view: "closing raw files failed")
    assert "failed" not in (job / "host" / "collection.log").read_text()
    r = subprocess.run([sys.executable, "-m", "openmsprof", "import", "-dir", str(job)], capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "no end_info" not in r.stdout + r.stderr
    with sqlite3.connect(job / "sqlite" / "msprof.db") as db:
        (execs,), = db.execute("SELECT COUNT(*) FROM CANN_API a JOIN STRING_IDS s ON s.id = a.name "
                               "WHERE s.value = 'aclmdlExecute'").fetchall()
    assert execs == 200
