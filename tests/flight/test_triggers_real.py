"""The flight recorder's triggers in real processes: a planted slow step, a planted hang, SIGUSR2,
an escaping exception; each gives one PROF job that import and analyze read."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson

from tests.flight.conftest import (
    child_env,
    cli,
    flight_doc,
    functions_in_samples,
    info,
    jobs,
    run_code,
)

SLOW = """
    import sys, time
    import openmsprof

    def normal_work():
        time.sleep(0.02)

    def planted_slow_function():
        time.sleep(0.8)

    # factor 8: a loaded machine's scheduling hiccups stay under it; the planted step is ~40x
    with openmsprof.flight_recorder(sys.argv[1], slow_step=8, signal=None) as fr:
        for i in range(30):
            normal_work()
            if i == 12:
                planted_slow_function()
            fr.step()
    print("done", len(fr.dumps))
"""


def test_planted_slow_step_gives_one_job_naming_step_and_function(tmp_path: Path, out: Path) -> None:
    res = run_code(SLOW, tmp_path, str(out))
    assert res.returncode == 0, res.stderr
    assert "done 1" in res.stdout
    (job,) = jobs(out)
    trig = info(job)["flight"]["trigger"]
    assert trig["kind"] == "slow_step" and trig["step"] == 12
    assert trig["duration_ns"] > 8 * trig["median_ns"] and trig["threshold_ns"] == 8 * trig["median_ns"]
    assert "planted_slow_function" in functions_in_samples(job)
    # the samples naming the function lie inside step 12's span
    doc = flight_doc(job)
    step12 = next(s for s in doc["steps"] if s[0] == 12)
    frames = doc["stacks"]["frames"]
    hits = [s[0] for s in doc["stacks"]["samples"] if any(frames[i][1] == "planted_slow_function" for i in s[2])]
    assert hits and all(step12[1] <= t <= step12[2] for t in hits)
    # a normal job: import reads its steps; analyze explains the step
    imp = cli("import", "-dir", str(job))
    assert imp.returncode == 0, imp.stderr
    with sqlite3.connect(job / "sqlite" / "msprof.db") as db:
        (n,) = db.execute("SELECT count(*) FROM STEP_TIME").fetchone()
    assert n == len(doc["steps"]) >= 13
    exp = cli("export", "timeline", "-dir", str(job))
    assert exp.returncode == 0 and list((job / "timeline").glob("*.json")), exp.stderr
    show = cli("show", "-dir", str(job))
    assert show.returncode == 0 and "Steps" in show.stdout, show.stderr
    ana = cli("analyze", "-dir", str(job))
    assert ana.returncode == 0, ana.stderr
    head = next(line for line in ana.stdout.splitlines() if line.startswith("step 12:"))
    assert "in planted_slow_function" in head and "vs median" in head
    as_json = cli("analyze", "-dir", str(job), "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    explained = orjson.loads(as_json.stdout)["flight"]
    assert explained["step"] == 12 and explained["cause"]["function"] == "planted_slow_function"
    assert explained["cause"]["share_slow"] > 0.5 and explained["cause"]["share_median"] == 0


HANG = """
    import sys, time
    import openmsprof

    def sleeping_frame():
        time.sleep(3.0)

    with openmsprof.flight_recorder(sys.argv[1], hang_s=1.0, signal=None) as fr:
        for i in range(8):
            time.sleep(0.02)
            if i == 4:
                sleeping_frame()
            fr.step()
    print("done", len(fr.dumps))
"""


def test_planted_sleep_gives_hang_dump_naming_the_frame_and_keeps_watching(tmp_path: Path, out: Path) -> None:
    res = run_code(HANG, tmp_path, str(out))
    assert res.returncode == 0, res.stderr
    assert "done 1" in res.stdout  # one hang, one dump; the loop went on after it
    (job,) = jobs(out)
    flight = info(job)["flight"]
    assert flight["trigger"]["kind"] == "hang" and flight["trigger"]["step"] == 4
    main = next(t for t in flight["trigger_stacks"] if t["thread"] == "MainThread")
    assert main["frames"][0][1] == "sleeping_frame"
    ana = cli("analyze", "-dir", str(job))
    assert "MainThread waits in sleeping_frame" in ana.stdout, ana.stdout


SIG = """
    import sys, time
    import openmsprof

    def waiting_for_signal():
        time.sleep(0.05)

    with openmsprof.flight_recorder(sys.argv[1]) as fr:
        print("armed", flush=True)
        for i in range(200):
            waiting_for_signal()
            fr.step()
            if fr.dumps:
                break
    print("done", len(fr.dumps), flush=True)
"""


def test_sigusr2_gives_a_dump(tmp_path: Path, out: Path) -> None:
    script = tmp_path / "sig.py"
    import textwrap

    script.write_text(textwrap.dedent(SIG))
    proc = subprocess.Popen([sys.executable, str(script), str(out)], env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "armed"
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGUSR2)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "done 1" in stdout
    (job,) = jobs(out)
    trig = info(job)["flight"]["trigger"]
    assert trig["kind"] == "signal" and trig["detail"] == "SIGUSR2"
    assert "waiting_for_signal" in functions_in_samples(job)


EXC = """
    import sys, time
    import openmsprof

    def failing_step(i):
        if i == 5:
            raise ValueError("planted failure")
        time.sleep(0.01)

    with openmsprof.flight_recorder(sys.argv[1], signal=None) as fr:
        for i in range(10):
            failing_step(i)
            fr.step()
"""


def test_escaping_exception_gives_a_dump_and_still_propagates(tmp_path: Path, out: Path) -> None:
    res = run_code(EXC, tmp_path, str(out))
    assert res.returncode == 1 and "ValueError: planted failure" in res.stderr
    (job,) = jobs(out)
    trig = info(job)["flight"]["trigger"]
    assert trig["kind"] == "exception" and "planted failure" in trig["detail"]


SYNC_CTRL_C = """
    import os, signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (a test runner's worker may ignore SIGINT)
    import openmsprof
    from openmsprof.flight import dump

    write_job = dump.write_job
    def ctrl_c_then_write(*args, **kwargs):  # a real Ctrl-C as the dump starts writing
        os.kill(os.getpid(), signal.SIGINT)
        return write_job(*args, **kwargs)
    dump.write_job = ctrl_c_then_write
    with openmsprof.flight_recorder(sys.argv[1], signal=None) as fr:
        for _ in range(5):
            fr.step()
        try:
            fr.trigger("manual", sync=True)
            print("not interrupted", flush=True)
        except KeyboardInterrupt:
            print("interrupted after the dump", len(fr.dumps), flush=True)
"""


def test_a_ctrl_c_during_a_sync_dump_comes_once_the_job_is_whole(tmp_path: Path, out: Path) -> None:
    res = run_code(SYNC_CTRL_C, tmp_path, str(out))
    assert res.returncode == 0, res.stderr
    assert "interrupted after the dump 1" in res.stdout, res.stdout + res.stderr[-2000:]
    (job,) = jobs(out)
    assert (job / "host" / "end_info").is_file()
    assert info(job)["flight"]["trigger"]["kind"] == "manual"
