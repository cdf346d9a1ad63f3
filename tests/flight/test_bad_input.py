"""Bad flight recorder input: one line each at start, the program runs on unprofiled."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.flight.conftest import jobs, run_code

PROG = """
    import sys, time
    import openmsprof

    fr = openmsprof.flight_recorder(sys.argv[1], slow_step=float(sys.argv[2]), signal=sys.argv[3],
                                    **({sys.argv[4]: 1} if len(sys.argv) > 4 else {}))
    with fr:
        for i in range(20):
            time.sleep(0.3 if i == 10 else 0.01)
            fr.step()
    print("ran", fr.armed, len(fr.dumps))
"""


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def test_each_bad_value_is_one_line_and_the_program_runs(tmp_path: Path, out: Path) -> None:
    res = run_code(PROG, tmp_path, str(out), "-2", "SIGKILL", "slow_stepp")
    assert res.returncode == 0 and "ran False 0" in res.stdout
    lines = _lines(res.stderr)
    assert len(lines) == 3, lines
    assert any("unknown option 'slow_stepp'" in x for x in lines)
    assert any("slow_step=-2.0 must be a positive number" in x for x in lines)
    assert any("signal 'SIGKILL' cannot be caught" in x for x in lines)
    assert "Traceback" not in res.stderr and jobs(out) == []


def test_unknown_signal_name(tmp_path: Path, out: Path) -> None:
    res = run_code(PROG, tmp_path, str(out), "3", "SIGNOPE")
    assert res.returncode == 0 and "ran False 0" in res.stdout
    assert _lines(res.stderr) == ["openmsprof: flight recorder: signal 'SIGNOPE' is not a signal of this system"]


def test_unwritable_output(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    res = run_code(PROG, tmp_path, str(blocker / "out"), "3", "SIGUSR2")
    assert res.returncode == 0 and "ran False 0" in res.stdout
    assert _lines(res.stderr) == [f"openmsprof: flight recorder: output {str(blocker / 'out')!r} is not writable "
                                  f"({str(blocker)!r} is not a directory)"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through mode bits")
def test_read_only_output(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        res = run_code(PROG, tmp_path, str(ro / "out"), "3", "SIGUSR2")
    finally:
        ro.chmod(0o750)
    assert res.returncode == 0 and "ran False 0" in res.stdout
    assert _lines(res.stderr) == [f"openmsprof: flight recorder: output {str(ro / 'out')!r} is not writable"]


USER_EXC = """
    import sys
    import openmsprof

    class Tick(Exception):
        pass

    fr = openmsprof.flight_recorder(sys.argv[1])
    with fr:
        def snapshot_fails():
            raise ValueError("history unreadable")
        fr.history.snapshot = snapshot_fails  # the dump's own failure: one line, the program goes on
        print("own", fr.trigger("manual", sync=True), flush=True)
        def snapshot_interrupted():
            raise Tick()  # as a user's signal handler raises, mid-dump, in a sync trigger
        fr.history.snapshot = snapshot_interrupted
        try:
            fr.trigger("other", sync=True)
        except Tick:
            print("tick reached the caller", flush=True)
"""


def test_a_sync_dumps_own_failure_is_one_line_and_a_users_exception_passes(tmp_path: Path, out: Path) -> None:
    res = run_code(USER_EXC, tmp_path, str(out))
    assert res.returncode == 0, res.stderr
    assert "own True" in res.stdout and "tick reached the caller" in res.stdout
    assert "manual dump not written: ValueError: history unreadable" in res.stderr
    assert "other dump not written" not in res.stderr
