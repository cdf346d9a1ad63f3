"""Fixtures for the import tests: real jobs made by the real session."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import openmsprof
from openmsprof.recorder.records import ApiLevel, Executor, StepTag
from openmsprof.sources import emit, markers

THREADS = 4
LOOPS = 50
TASKS = 40


def make_job(out: Path, *, sampler: bool = True) -> tuple[Path, dict[str, Any]]:
    """A job from a multi-threaded program; returns (job dir, what was issued)."""
    switches: dict[str, Any] = {"runtime_api": True}
    if sampler:
        switches["host_sys_usage"] = ["cpu", "mem"]
    openmsprof.start(output=out, **switches)
    issued: dict[str, Any] = {"threads": {}}

    def work(k: int) -> None:
        issued["threads"][k] = threading.get_native_id()
        for _ in range(LOOPS):
            markers.push(f"outer{k}")
            markers.mark(f"mark{k}", "dom")
            markers.push("inner")
            markers.pop()
            markers.pop()
        rid = markers.range_start(f"range{k}")
        markers.range_end(rid)

    ts = [threading.Thread(target=work, args=(k,), name=f"worker{k}") for k in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    # a cross-thread range: started here, ended on another thread
    rid = markers.range_start("cross")
    t = threading.Thread(target=markers.range_end, args=(rid,))
    t.start()
    t.join()
    api_spans = []
    for i in range(TASKS):
        c = emit.new_connection_id()
        t0 = emit.now_ns()
        emit.record_api("aclmdlExecute", ApiLevel.ACL, t0, t0 + 5000, c)
        emit.record_task(0, 3, f"Conv_{i % 4}", t0 + 1000, t0 + 4000, i, op_type="Conv2D",
                         input_shapes="1,3,224,224", input_dtypes="FLOAT", output_shapes="1,64",
                         output_dtypes="FLOAT16", connection_id=c, executor=Executor.CPU)
        api_spans.append((t0, c))
    emit.record_api("rtKernelLaunch", ApiLevel.RUNTIME, 10, 20)  # no connection id
    s0 = emit.now_ns()
    emit.record_step(s0, 7, StepTag.START, 2)
    emit.record_step(s0 + 1000, 7, StepTag.END, 2)
    emit.record_step_range(s0, s0 + 2000, 3)
    markers.push("left open")
    session = openmsprof.recorder.session.current()
    assert session is not None
    if sampler:  # wait until the sidecar has written a few samples (it starts a new Python)
        deadline = time.monotonic() + 20
        files = session.job.host_data.glob
        while time.monotonic() < deadline and sum(
                p.stat().st_size for p in files("HostSampler.records.*")) < 16 + 32 * 5 * 4:
            time.sleep(0.05)
    issued["offset"] = session.start_pair.offset_ns
    issued["api"] = api_spans
    job = openmsprof.stop()
    return job, issued


@pytest.fixture
def real_job(out_dir: Path) -> tuple[Path, dict[str, Any]]:
    return make_job(out_dir)


def q(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def dump_db(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    con = sqlite3.connect(db)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {n: con.execute(f"SELECT * FROM {n}").fetchall() for n in names}
    finally:
        con.close()
