"""The SIGKILL campaign of issue #12, shared by tests/recorder/test_core.py and
benchmarks/bench_markers.py: a child marks flat out on 4 threads, is killed with SIGKILL at a
chosen moment, and the newest marker on disk is compared with the moment of the kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from openmsprof.recorder import rawread
from openmsprof.recorder.records import Kind

__all__ = ["KILL_CHILD", "kill_once"]

#: 4 daemon threads call mstx.mark as fast as they can until the process is killed.
KILL_CHILD = """
import sys, threading, time, openmsprof
from openmsprof import mstx
openmsprof.start(output=sys.argv[1])
go = threading.Barrier(5)
def work():
    mark = mstx.mark
    go.wait()
    while True:
        mark("k")
for _ in range(4):
    threading.Thread(target=work, daemon=True).start()
go.wait()
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def _marks_on_disk(out: Path) -> int:
    jobs = sorted(out.glob("PROF_*"))
    if not jobs:
        return 0
    try:
        recs = rawread.read_all_records(jobs[0] / "host" / "data")
    except (OSError, ValueError):
        return 0
    return int((recs["kind"] == Kind.MARK).sum())


def kill_once(out: Path, backend: str, delay: float, after_first_flush: bool = False) -> float:
    """Start the 4-thread flat-out marker (``OPENMSPROF_RECORDER=backend``) writing under
    ``out``, SIGKILL it ``delay`` s after all four threads run (``after_first_flush``: after the
    first markers reached the disk, which on a machine at load 20 can take over a second); return
    the seconds from the kill back to the newest marker on disk (``inf`` when none reached it)."""
    p = subprocess.Popen([sys.executable, "-c", KILL_CHILD, str(out)], stdout=subprocess.PIPE,
                         text=True, env=dict(os.environ, OPENMSPROF_RECORDER=backend))
    try:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        assert line == "ready", f"child did not start: {line!r}"
        deadline = time.monotonic() + 60
        while after_first_flush and _marks_on_disk(out) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(delay)
        t_kill = time.perf_counter_ns()
        os.kill(p.pid, signal.SIGKILL)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()
    jobs = sorted(out.glob("PROF_*"))
    assert len(jobs) == 1, jobs
    recs = rawread.read_all_records(jobs[0] / "host" / "data")
    marks = recs[recs["kind"] == Kind.MARK]
    return (t_kill - int(marks["t0"].max())) / 1e9 if len(marks) else float("inf")
