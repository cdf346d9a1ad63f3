"""A profiled process killed with SIGKILL: its job imports with a warning and keeps every record
up to at most one second before the kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

from openmsprof.parse.importer import import_job
from tests.margins import SIGKILL_LOSS_S
from tests.parse.conftest import q

CHILD = """
import sys, threading, time
import openmsprof
from openmsprof.sources import markers
s = openmsprof.start(output=sys.argv[1])
print(s.root, flush=True)
def spin(k):
    i = 0
    while True:
        markers.push("tick")
        markers.mark(f"m{k}")
        markers.pop()
        i += 1
        if i % 50 == 0:
            time.sleep(0.001)
for k in range(3):
    threading.Thread(target=spin, args=(k,), daemon=True).start()
markers.push("never closed")
time.sleep(600)
"""


def test_sigkilled_job_imports(out_dir: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(out_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        job = Path(p.stdout.readline().strip())
        time.sleep(1.5)
        kill_mono = time.perf_counter_ns()  # CLOCK_MONOTONIC: the same clock in both processes
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(30)
    assert p.returncode == -signal.SIGKILL
    assert not (job / "host" / "end_info").exists()
    r = import_job(job, progress=False)
    assert any("no end_info" in w for w in r.warnings)
    assert any("unclosed" in w for w in r.warnings)
    info = orjson.loads((job / "host" / "start_info").read_bytes())
    offset = int(info["collectionTimeBegin"]) * 1000 - int(info["clockMonotonicRaw"])
    n, last = q(r.db_path, "SELECT COUNT(*), MAX(startNs) FROM MSTX_EVENTS WHERE eventType=0")[0]
    assert n > 1000
    assert kill_mono - (last - offset) <= SIGKILL_LOSS_S * 1e9  # <= 1 s idle: benchmarks/bench_markers.py
    assert q(r.db_path, "SELECT endTimeNs FROM SESSION_TIME_INFO") == [(None,)]
    # the open range ends at the last record
    s = dict(q(r.db_path, "SELECT value, id FROM STRING_IDS"))
    end = q(r.db_path, "SELECT endNs FROM MSTX_EVENTS WHERE message=?", (s["never closed"],))
    assert end == [(q(r.db_path, "SELECT MAX(endNs) FROM MSTX_EVENTS")[0][0],)]
