"""Real programs fork: children forked during a session record into the same job as their own
processes (own pid, own raw stream), the parent's job ends only when the parent stops, nothing
is lost, duplicated or hung; on both backends (issue 23)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from openmsprof.parse.importer import import_job
from openmsprof.recorder import core, rawread

BACKENDS = [pytest.param("native", marks=pytest.mark.skipif(core.ring is None, reason="native core not built")),
            "python"]
TIMEOUT = 240

# A producer thread marks flat out while the main thread forks 20 children; each child marks 500
# times (and a push/pop), then leaves by os._exit, sys.exit or exec, in turn.  The parent marks
# 1000 "after" once every child has gone: those must all be in the job, once.
FORK_UNDER_LOAD = r"""
import os, sys, threading
import openmsprof
from openmsprof import mstx
from openmsprof.recorder import core
openmsprof.start(output=sys.argv[1])
stop = threading.Event()
def producer():
    while not stop.is_set():
        mstx.mark("bg")
t = threading.Thread(target=producer)
t.start()
for i in range(100):
    mstx.mark("before")
kids = []
for k in range(20):
    pid = os.fork()
    if pid == 0:
        if core.ring is not None:
            core.ring.stats()  # a child must never wait on a lock some parent thread held
        for i in range(500):
            mstx.mark("child")
        mstx.push("child range")
        mstx.pop()
        if k % 3 == 0:
            os._exit(0)
        elif k % 3 == 1:
            sys.exit(0)
        os.execv("/bin/true", ["/bin/true"])
    kids.append(pid)
for p in kids:
    _, status = os.waitpid(p, 0)
    assert status == 0, status
for i in range(1000):
    mstx.mark("after")
stop.set()
t.join()
openmsprof.stop()
print(" ".join(map(str, kids)))
"""


def _run(code: str, out: Path, backend: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-c", code, str(out), *args], capture_output=True, text=True,
                       timeout=TIMEOUT, env=dict(os.environ, OPENMSPROF_RECORDER=backend, **env))
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _job(out: Path) -> Path:
    jobs = sorted(out.glob("PROF_*"))
    assert len(jobs) == 1, jobs
    return jobs[0]


def _counts(job: Path) -> dict[tuple[int, str], int]:
    """(pid, message) -> marker rows in the imported job."""
    res = import_job(job, progress=False)
    con = sqlite3.connect(res.db_path)
    try:
        rows = con.execute("SELECT m.globalTid >> 32, s.value, COUNT(*) FROM MSTX_EVENTS m "
                           "JOIN STRING_IDS s ON s.id = m.message GROUP BY 1, 2").fetchall()
    finally:
        con.close()
    return {(int(p), str(msg)): int(n) for p, msg, n in rows}


@pytest.mark.parametrize("backend", BACKENDS)
def test_twenty_forks_under_producer_load_follow_each_child(tmp_path: Path, backend: str) -> None:
    r = _run(FORK_UNDER_LOAD, tmp_path, backend)
    kids = [int(x) for x in r.stdout.split()]
    job = _job(tmp_path)
    parent = int((job / "host" / "info.json").read_text().split('"pid"')[1].split('"')[1])
    counts = _counts(job)
    # the parent's job was not ended by any child: its marks after the children are all there, once
    assert counts[(parent, "after")] == 1000
    assert counts[(parent, "before")] == 100
    for kid in kids:
        # each child is its own process in the job, with its own records, and only those
        assert counts[(kid, "child")] == 500, kid
        assert counts[(kid, "child range")] == 1, kid
        assert (kid, "after") not in counts and (kid, "before") not in counts and (kid, "bg") not in counts
    assert {p for p, _m in counts} == {parent, *kids}
    data = job / "host" / "data"
    assert rawread.child_pids(data) == sorted(kids)
    # the children's counts sit beside the parent's; the job's end is the parent's alone
    for kid in kids:
        assert (job / "host" / f"openmsprof_overhead.pid{kid}.json").is_file()
    assert (job / "host" / "end_info").is_file()
    # the timeline draws each child's threads as its own process's
    r = subprocess.run([sys.executable, "-m", "openmsprof", "export", "timeline", "-dir", str(job)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr[-2000:]
    text = (job / "timeline" / "msprof_host.json").read_text()
    for kid in kids:
        assert f'"Process {kid} Thread {kid} (MainThread)"' in text, kid
    assert f'"Process {parent} ' not in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_follow_fork_off_records_nothing_in_children(tmp_path: Path, backend: str) -> None:
    r = _run(FORK_UNDER_LOAD, tmp_path, backend, OPENMSPROF_FOLLOW_FORK="0")
    kids = [int(x) for x in r.stdout.split()]
    job = _job(tmp_path)
    counts = _counts(job)
    assert rawread.child_pids(job / "host" / "data") == []
    assert not any(p in kids for p, _m in counts)
    assert sum(n for (_p, m), n in counts.items() if m == "after") == 1000
    assert not list((job / "host").glob("openmsprof_overhead.pid*"))


MP_POOL = r"""
import multiprocessing as mp, os, sys
import openmsprof
from openmsprof import mstx

def work(i):
    mstx.mark("task")
    return os.getpid()

if __name__ == "__main__":
    openmsprof.start(output=sys.argv[1])
    mstx.mark("parent before")
    ctx = mp.get_context(sys.argv[2])
    pool = ctx.Pool(2)
    pids = sorted(set(pool.map(work, range(40), chunksize=5)))
    pool.close()  # the workers leave normally (terminate() sends SIGTERM: a worker killed by a signal loses its last flush interval)
    pool.join()
    mstx.mark("parent after")
    openmsprof.stop()
    print(" ".join(map(str, pids)))
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_start_methods(tmp_path: Path, backend: str, method: str) -> None:
    script = tmp_path / "pool.py"  # spawn and forkserver import the main module by path
    script.write_text(MP_POOL)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(script), str(out), method], capture_output=True, text=True,
                       timeout=TIMEOUT, env=dict(os.environ, OPENMSPROF_RECORDER=backend))
    assert r.returncode == 0, r.stderr[-3000:]
    workers = [int(x) for x in r.stdout.split()]
    counts = _counts(_job(out))
    parent_marks = {m: n for (_p, m), n in counts.items() if m.startswith("parent")}
    assert parent_marks == {"parent before": 1, "parent after": 1}
    tasks = {p: n for (p, m), n in counts.items() if m == "task"}
    if method == "fork":
        # pool workers are forked children: each is its own process with its own tasks, and
        # every task is there once (the pool ends its workers with os._exit)
        assert set(tasks) <= set(workers) and sum(tasks.values()) == 40
    else:
        # spawn and forkserver start fresh interpreters that are not forks of the session:
        # they are not recorded, and the parent's job is whole
        assert tasks == {}


DATALOADER = r"""
import os, sys
import torch
from torch.utils.data import DataLoader, Dataset
import openmsprof
from openmsprof import mstx

class Items(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        with mstx.mstx_range("load"):
            return torch.full((4,), float(i))

if __name__ == "__main__":
    openmsprof.start(output=sys.argv[1])
    total = 0.0
    for batch in DataLoader(Items(), batch_size=8, num_workers=2):
        mstx.mark("step")
        total += float(batch.sum())
    openmsprof.stop()
    print(total)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_dataloader_workers_are_their_own_processes(tmp_path: Path, backend: str) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "loader.py"
    script.write_text(DATALOADER)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True,
                       timeout=TIMEOUT, env=dict(os.environ, OPENMSPROF_RECORDER=backend))
    assert r.returncode == 0, r.stderr[-3000:]
    assert float(r.stdout.split()[-1]) == sum(range(64)) * 4
    job = _job(out)
    counts = _counts(job)
    parent = {p for (p, m) in counts if m == "step"}
    assert len(parent) == 1 and counts[(parent.pop(), "step")] == 8
    loads = {p: n for (p, m), n in counts.items() if m == "load"}
    assert len(loads) == 2 and sum(loads.values()) == 64, loads  # two workers, every item once
    assert set(loads) == set(rawread.child_pids(job / "host" / "data"))


# A pre-fork server: the parent listens, forks 3 workers that accept and mark each request; the
# parent sends 30 requests, then SIGTERM ends the workers (their handler exits normally).
PREFORK = r"""
import os, signal, socket, sys, time
import openmsprof
from openmsprof import mstx
openmsprof.start(output=sys.argv[1])
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(64)
port = srv.getsockname()[1]
workers = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
        while True:
            conn, _a = srv.accept()
            with mstx.mstx_range("request"):
                data = conn.recv(64)
                conn.sendall(data.upper())
            conn.close()
    workers.append(pid)
srv.close()
for i in range(30):
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"ping")
    assert c.recv(64) == b"PING"
    c.close()
    mstx.mark("sent")
time.sleep(0.3)
for pid in workers:
    os.kill(pid, signal.SIGTERM)
for pid in workers:
    os.waitpid(pid, 0)
openmsprof.stop()
print(" ".join(map(str, workers)))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_prefork_server_workers(tmp_path: Path, backend: str) -> None:
    r = _run(PREFORK, tmp_path, backend)
    workers = {int(x) for x in r.stdout.split()}
    counts = _counts(_job(tmp_path))
    requests = {p: n for (p, m), n in counts.items() if m == "request"}
    assert set(requests) <= workers and sum(requests.values()) == 30
    assert sum(n for (_p, m), n in counts.items() if m == "sent") == 30


# A child that never exits (until killed after the parent stopped): the parent's stop does not
# wait for it, and the parent's job is whole.
NEVER_EXITS = r"""
import os, sys, time
import openmsprof
from openmsprof import mstx
openmsprof.start(output=sys.argv[1])
pid = os.fork()
if pid == 0:
    mstx.mark("child")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # let the test's pipe close when the parent exits
    os.dup2(null, 2)
    while True:
        time.sleep(1)
for i in range(200):
    mstx.mark("parent")
t0 = time.monotonic()
openmsprof.stop()
print(pid, time.monotonic() - t0)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_child_that_never_exits(tmp_path: Path, backend: str) -> None:
    r = _run(NEVER_EXITS, tmp_path, backend)
    pid_text, took = r.stdout.split()
    try:
        assert float(took) < 30
        job = _job(tmp_path)
        assert (job / "host" / "end_info").is_file()
        counts = _counts(job)
        assert sum(n for (_p, m), n in counts.items() if m == "parent") == 200
    finally:
        os.kill(int(pid_text), 9)  # reparented to init, which reaps it
