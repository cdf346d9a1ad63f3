"""The history stays inside keep_s and memory_mb; evictions are counted; the rate limit holds."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from openmsprof.flight.history import MARK_BYTES, History
from openmsprof.flight.triggers import RateLimit, SlowStep
from tests.flight.conftest import info, jobs, run_code


def test_marks_bounded_by_memory_and_evictions_counted() -> None:
    h = History(keep_s=30, memory_mb=1)
    cap = h.marks.maxlen
    assert cap is not None and cap * MARK_BYTES <= 1024 * 1024
    t = time.perf_counter_ns()
    for i in range(3 * cap):
        h.add_mark((t + i, 1, 1, "m", None, 0))
    assert len(h.marks) == cap
    assert h.evicted["marks"] == 2 * cap
    assert h.estimate_bytes() <= 1024 * 1024


def test_trim_keeps_only_keep_s() -> None:
    h = History(keep_s=1, memory_mb=8)
    now = time.perf_counter_ns()
    for k in range(10):  # one a second over the last 10 s
        ts = now - (9 - k) * 1_000_000_000
        h.add_mark((ts, 1, 1, "m", None, 0))
        h.add_step(k, ts - 10, ts)
    h.add_stacks(now - 5_000_000_000, sys._current_frames(), {}, set())
    h.add_stacks(now, sys._current_frames(), {}, set())
    h.trim(now)
    assert [m[0] for m in h.marks] == [now - 1_000_000_000, now]
    assert [s[0] for s in h.steps] == [8, 9]
    assert {s[0] for s in h.stacks} == {now}


def test_stack_store_bounded_by_its_share() -> None:
    h = History(keep_s=3600, memory_mb=1)
    frames = sys._current_frames()
    t = time.perf_counter_ns()
    for i in range(20_000):
        h.add_stacks(t + i, frames, {}, set())
    assert h.stack_bytes <= h.stack_cap
    assert h.evicted["stacks"] > 0
    assert h.estimate_bytes() <= 1024 * 1024


def test_slow_step_waits_for_warmup_and_uses_the_median() -> None:
    s = SlowStep(3.0, warmup=2)
    assert s.check(1000) is None and s.check(1000) is None  # warm-up: never a trigger
    for _ in range(5):
        assert s.check(10) is None
    assert s.check(29) is None
    assert s.check(31) == (10, 30)


def test_rate_limit_one_per_kind_per_period() -> None:
    r = RateLimit(100)
    assert r.allow("hang", 0) and not r.allow("hang", 50) and r.allow("slow_step", 50)
    assert r.allow("hang", 150)
    assert r.suppressed == {"hang": 1}


TWO_SLOW = """
    import sys, time
    import openmsprof

    with openmsprof.flight_recorder(sys.argv[1], slow_step=8, keep_s=float(sys.argv[2]), signal=None) as fr:
        for i in range(40):
            time.sleep(0.6 if i in (10, 14) else 0.01)
            fr.step()
    print("dumps", len(fr.dumps))
"""


def test_second_slow_step_within_keep_s_is_held_back(tmp_path: Path) -> None:
    out = tmp_path / "a"
    res = run_code(TWO_SLOW, tmp_path, str(out), "30")
    assert "dumps 1" in res.stdout, res.stderr
    (job,) = jobs(out)
    assert info(job)["flight"]["trigger"]["step"] == 10
    out2 = tmp_path / "b"
    res = run_code(TWO_SLOW, tmp_path, str(out2), "0.2")
    assert "dumps 2" in res.stdout, res.stderr
    assert sorted(info(j)["flight"]["trigger"]["step"] for j in jobs(out2)) == [10, 14]


def test_threads_born_mid_session_are_sampled() -> None:
    h = History(keep_s=30, memory_mb=8)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="late-born")
    t.start()
    try:
        h.add_stacks(time.perf_counter_ns(), sys._current_frames(), {t.ident or 0: 4242}, set())
    finally:
        stop.set()
        t.join()
    assert 4242 in {s[1] for s in h.stacks}


FORK = """
    import os, sys, time
    import openmsprof

    with openmsprof.flight_recorder(sys.argv[1], slow_step=3, signal="SIGUSR2") as fr:
        for i in range(3):
            time.sleep(0.01)
            fr.step()
        pid = os.fork()
        if pid == 0:  # a forked worker: disarmed, its exit writes nothing and waits for nothing
            os._exit(0 if not fr.armed else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), "parent armed", fr.armed)
"""


def test_forked_child_runs_disarmed(tmp_path: Path) -> None:
    res = run_code(FORK, tmp_path, str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    assert "child 0 parent armed True" in res.stdout
