"""The analysing child the analysis worker forks (``_worker_process``): one window at a time.

It runs under SCHED_IDLE where the OS has it and at nice 19 (``_lower_priority``), reads one job
line ``{"dir", "stage"}`` from the worker, analyses the staged copy (holding no claim) or, where
nothing could be staged, the dir in place under its claim, and answers one result line
``{"dir", "stage", "status"}`` (``ok|fail|taken``) until the worker closes its input.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import orjson

from openmsprof.recorder import threads
from openmsprof.torch.profiler import _analysis_claim, analysis

NICE = 19
PRIORITY = f"nice {NICE}"  # what the analysing child set (``_lower_priority``)


def _analyse(path: Path, staged: Path | None, where: str) -> str:
    """Child: analyse the staged copy (None: ``path`` in place, under its claim); the status."""
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        if staged is None:
            with _analysis_claim.claim(path) as mine:
                if mine:
                    read = analysis.analyse_dir_info(path, parallel=True)
                    _analysis_claim.record_overhead(path, time.process_time() - c0, time.perf_counter() - t0, where,
                                                    read)
            return "ok" if mine else "taken"
        if _analysis_claim.done(path):
            return "taken"  # analysed meanwhile by the training process: no work here
        read = analysis.analyse_dir_info(staged, parallel=True, private=True)  # (a large trace forks its second half)
        _analysis_claim.record_overhead(staged, time.process_time() - c0, time.perf_counter() - t0, where, read)
        return "ok"
    except Exception as exc:
        if _analysis_claim.done(path) or not path.is_dir():  # analysed meanwhile, or removed by its owner
            return "taken"
        print(f"openmsprof: analysing {path} failed: {exc}", file=sys.stderr, flush=True)
        return "fail"


def run(jobs_fd: int, res_fd: int, worker: int) -> None:
    """The analysing child: one job line in, one result line out, until the worker closes."""
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    _lower_priority()
    analysis.preload()  # imported once, before the first window
    where = f"background worker process (pid {worker}, {PRIORITY})"
    out = os.fdopen(res_fd, "wb", buffering=0)
    with os.fdopen(jobs_fd, "rb") as jobs:
        for raw in jobs:
            job = orjson.loads(raw)
            staged = job["stage"]
            status = _analyse(Path(job["dir"]), Path(staged) if staged else None, where)
            try:
                out.write(orjson.dumps({"dir": job["dir"], "stage": staged, "status": status}) + b"\n")
            except OSError:
                return  # the worker is gone


def _lower_priority() -> str:
    """SCHED_IDLE where the OS has it, and nice 19 in any case; returns what was set.  At nice 19
    alone, a worker that got a core keeps it for its time slice (~1-3 ms under EEVDF) while a
    training thread that woke up waits; a SCHED_IDLE task is preempted at once by any normal one.
    Threads and children started afterwards inherit both."""
    global PRIORITY
    done = []
    if threads.idle_policy():
        done.append("SCHED_IDLE")
    try:
        os.nice(NICE)
        done.append(f"nice {NICE}")
    except OSError:
        pass
    PRIORITY = ", ".join(done) or "normal priority"
    return PRIORITY
