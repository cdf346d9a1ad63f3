"""A real job: a multi-threaded program profiled with openmsprof.start/stop, then imported."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import openmsprof
from openmsprof import mstx
from openmsprof.sources import emit
from openmsprof.sources.emit import ApiLevel, StepTag


def _worker(k: int, iters: int) -> None:
    stream = k
    for i in range(iters):
        mstx.range_push(f"worker {k} iter {i}")
        conn = emit.new_connection_id()
        t0 = emit.now_ns()
        ts = t0
        for j, op in enumerate(("Conv", "Relu", "Gemm")):
            time.sleep(0.0002)
            t1 = emit.now_ns()
            emit.record_task(0, stream, f"{op.lower()}_{j}", ts, t1, 1000 * k + 10 * i + j,
                             op_type=op, model_id=1, input_shapes="1,3,8,8",
                             input_dtypes="FLOAT", output_shapes="1,8,8,8",
                             output_dtypes="FLOAT", connection_id=conn)
            ts = t1
        emit.record_api("aclmdlExecute", ApiLevel.ACL, t0, emit.now_ns(), conn)
        mstx.range_pop()
    mstx.mark(f"worker {k} done")


def make_real_job(out: Path, threads: int = 2, iters: int = 5, *, imported: bool = True) -> Path:
    """Profile ``threads`` threads launching tasks through APIs; returns the (imported) job."""
    from openmsprof.parse.importer import import_job

    openmsprof.start(output=out, msproftx=True, runtime_api=True,
                     host_sys_usage=["cpu", "mem"], host_sys_usage_freq=50)
    s0 = emit.now_ns()
    emit.record_step(s0, 0, StepTag.START, model_id=1)
    workers = [threading.Thread(target=_worker, args=(k, iters)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    time.sleep(0.1)  # let the host sampler take a few samples
    emit.record_step(emit.now_ns(), 0, StepTag.END, model_id=1)
    job = Path(openmsprof.stop())
    if imported:
        import_job(job, progress=False)
    return job
