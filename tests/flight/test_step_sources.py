"""Steps from ``torch_npu.profiler``'s ``step()`` and from mstx ranges named by ``step_range``; no
code change through ``collect --flight-recorder``; ``then_capture`` records the next steps in full."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openmsprof.analysis.flight_explain import db_ranges
from tests.flight.conftest import (
    child_env,
    cli,
    functions_in_samples,
    info,
    jobs,
    run_code,
)

TORCH_STEPS = """
    import sys, time
    import torch
    import openmsprof
    import openmsprof.torch as torch_npu

    def slow_data():
        time.sleep(0.7)

    with openmsprof.flight_recorder(sys.argv[1], slow_step=8, signal=None) as fr:
        with torch_npu.profiler.profile(schedule=torch_npu.profiler.schedule(wait=100, warmup=0, active=1),
                                        on_trace_ready=None) as prof:
            for i in range(20):
                x = torch.ones(64, 64) @ torch.ones(64, 64)
                time.sleep(0.01)
                if i == 11:
                    slow_data()
                prof.step()
    print("steps", fr.step_index)
"""


def test_torch_npu_profiler_step_drives_the_steps(tmp_path: Path, out: Path) -> None:
    pytest.importorskip("torch")
    res = run_code(TORCH_STEPS, tmp_path, str(out))
    assert res.returncode == 0, res.stderr
    assert "steps 20" in res.stdout
    (job,) = jobs(out)
    assert info(job)["flight"]["trigger"]["step"] == 11
    assert "slow_data" in functions_in_samples(job)


RANGES = """
    import sys, time
    from openmsprof import mstx
    import openmsprof

    def slow_phase():
        time.sleep(0.7)

    with openmsprof.flight_recorder(sys.argv[1], slow_step=8, signal=None, step_range="train_step") as fr:
        for i in range(20):
            if sys.argv[2] == "push":
                mstx.range_push("train_step")
                with mstx.mstx_range("inner"):
                    time.sleep(0.01)
                if i == 12:
                    slow_phase()
                mstx.range_pop()
            else:
                rid = mstx.range_start("train_step")
                time.sleep(0.01)
                if i == 12:
                    slow_phase()
                mstx.range_end(rid)
            time.sleep(0.005)
    print("steps", fr.step_index)
"""


@pytest.mark.parametrize("how", ["push", "start"])
def test_mstx_step_range_drives_the_steps(tmp_path: Path, out: Path, how: str) -> None:
    res = run_code(RANGES, tmp_path, str(out), how)
    assert res.returncode == 0, res.stderr
    assert "steps 20" in res.stdout
    (job,) = jobs(out)
    assert info(job)["flight"]["trigger"]["step"] == 12
    assert cli("import", "-dir", str(job)).returncode == 0
    names = {r[0] for r in db_ranges(job)}
    assert "train_step" in names and (how != "push" or "inner" in names)
    with sqlite3.connect(job / "sqlite" / "msprof.db") as db:
        (n,) = db.execute("SELECT count(*) FROM MSTX_EVENTS e JOIN STRING_IDS s ON s.id = e.message "
                          "WHERE s.value = 'train_step'").fetchone()
    assert n >= 10


NO_CHANGE = """
    import time
    import openmsprof.torch as torch_npu
    from openmsprof import mstx

    def loader_stall():
        time.sleep(0.7)

    for i in range(20):
        mstx.range_push("step")
        time.sleep(0.01)
        if i == 13:
            loader_stall()
        mstx.range_pop()
"""


def test_collect_flight_recorder_needs_no_code_change(tmp_path: Path, out: Path) -> None:
    prog = tmp_path / "train.py"
    prog.write_text(textwrap.dedent(NO_CHANGE))
    res = subprocess.run([sys.executable, "-m", "openmsprof", "collect", "--flight-recorder",
                          "slow_step=8,step_range=step,signal=off", "--output", str(out), "-m", str(prog)],
                         env=child_env(), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    (job,) = jobs(out)
    assert info(job)["flight"]["trigger"]["step"] == 13
    assert "loader_stall" in functions_in_samples(job)
    # no continuous session ran: the only job is the dump
    assert not (job / "host" / "data" / "MstxPy.records.host.slice_0").exists()


def test_environment_variable_arms_under_the_bootstrap(tmp_path: Path, out: Path) -> None:
    from openmsprof.collector.collect_switches import bootstrap_dir

    prog = tmp_path / "train.py"
    prog.write_text(textwrap.dedent(NO_CHANGE))
    env = child_env(OPENMSPROF_FLIGHT_RECORDER=f"slow_step=8,step_range=step,output={out}")
    env["PYTHONPATH"] = f"{bootstrap_dir()}:{env['PYTHONPATH']}"
    res = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    (job,) = jobs(out)
    assert info(job)["flight"]["trigger"]["step"] == 13


CAPTURE = """
    import sys, time
    import openmsprof
    from openmsprof import mstx

    with openmsprof.flight_recorder(sys.argv[1], slow_step=8, signal=None, then_capture=3) as fr:
        for i in range(30):
            mstx.mark(f"iter {i}")
            time.sleep(0.6 if i == 10 else 0.01)
            fr.step()
            fr.wait_idle(10)
    print("dumps", len(fr.dumps))
"""


def test_then_capture_records_the_next_steps_into_the_same_job(tmp_path: Path, out: Path) -> None:
    res = run_code(CAPTURE, tmp_path, str(out))
    assert res.returncode == 0, res.stderr
    (job,) = jobs(out)
    flight = info(job)["flight"]
    assert flight["trigger"]["step"] == 10 and flight["then_capture"]["steps"] == 3
    assert cli("import", "-dir", str(job)).returncode == 0
    with sqlite3.connect(job / "sqlite" / "msprof.db") as db:
        msgs = [r[0] for r in db.execute("SELECT s.value FROM MSTX_EVENTS e JOIN STRING_IDS s ON s.id = e.message "
                                         "ORDER BY e.startNs")]
    # the history (before the trigger) and the captured steps after it, in one job
    assert "iter 0" in msgs and "iter 10" in msgs and "iter 12" in msgs
    assert "iter 25" not in msgs  # the capture ended after 3 steps
