"""``held_signals``: a raising signal handler (Ctrl-C, a user's timer) waits until profiling's state
is whole.  Before, a timer's exception inside ``openmsprof.stop()`` left the session half-stopped:
17 721 of 200 000 markers were lost and the job had no end_info."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsprof.recorder import held_signals

REPO = Path(__file__).resolve().parents[2]

_STOP = textwrap.dedent("""
    import signal, sys
    import openmsprof
    from openmsprof import mstx
    from openmsprof.recorder import session
    class Tick(Exception):
        pass
    armed = [False]
    def on_alarm(signum, frame):
        if armed[0]:  # (only inside the loop's try, once an arming: never in the except, nor after the loop)
            armed[0] = False
            raise Tick()
    openmsprof.start(output=sys.argv[1])
    for i in range(200_000):
        mstx.mark("m")
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)  # a tick every 0.2 ms while stop() drains
    ticks = 0
    while True:
        try:  # (a tick raised on any line here is caught: the loop's test is inside)
            armed[0], calling = True, False
            if session.current() is None:
                armed[0] = False
                break
            calling = True
            openmsprof.stop()
            calling = False
        except Tick:
            ticks += calling  # (the ticks stop() held and raised as it returned)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    print("ticks", ticks, flush=True)
""")


def test_stop_under_a_raising_timer_writes_every_record(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-c", _STOP, str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split("ticks")[1]) >= 1  # the tick reached the caller, once stop() was through
    (job,) = [p for p in tmp_path.iterdir() if p.name.startswith("PROF_")]
    r = subprocess.run([sys.executable, "-m", "openmsprof", "import", "-dir", str(job)], capture_output=True,
                       text=True, env=env, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "no end_info" not in r.stdout + r.stderr
    with sqlite3.connect(job / "sqlite" / "msprof.db") as db:
        (n,), = db.execute("SELECT COUNT(*) FROM MSTX_EVENTS").fetchall()
    assert n == 200_000


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Python's own SIGINT handler (a test runner's worker may ignore SIGINT), restored after."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.mark.usefixtures("ctrl_c")
def test_held_signals_raise_once_the_block_is_through() -> None:
    order = []
    with pytest.raises(KeyboardInterrupt), held_signals.held():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # (the handler would run here: it is held)
        order.append("block through")
    assert order == ["block through"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("ctrl_c")
def test_a_noted_signal_keeps_nothing_of_the_frame_it_came_in() -> None:
    """The frame a held signal arrived in is not kept: its locals (a view of a buffer the block
    resizes later, as the raw writer's close does) are freed when it returns."""
    buf = bytearray(64)

    def inner() -> None:
        view = memoryview(buf)  # noqa: F841  (alive while the signal arrives)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)

    with pytest.raises(KeyboardInterrupt), held_signals.held():
        inner()
        buf.extend(b"x")  # BufferError while the noted frame (and its view) were kept
    assert len(buf) == 65
