"""A rank's deadline in the local pool (cluster/rank_deadline.py, rank_pool.py): a worker that hangs
alive or stopped is killed at its rank's deadline, the rank retried and then reported in one line
while the other ranks complete; a slow rank within its deadline is not killed; the setting's bad
values are one line; the parent's wait wakes only on events.  Real processes: the test-only
OPENMSPROF_TEST_WORKER_SIGNAL has a worker hang (sleep for ever), stop itself (SIGSTOP) or sleep
when its parse opens a chosen file.  Deadlines of seconds, set by the environment; the tests
assert outcomes (which ranks, which causes), not durations."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from openmsprof.cluster import rank_deadline, rank_pool
from openmsprof.cluster.discover import discover
from openmsprof.cluster.rank_deadline import RankDeadline
from openmsprof.cluster.rank_pool import RankPool
from openmsprof.cluster.rank_worker import SIGNAL_ENV
from openmsprof.config.errors import ConfigError
from tests.cluster.conftest import copy_tree, leftovers

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "openmsprof", "cluster", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src"), **env})


def _finish(proc: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    try:
        _out, err = proc.communicate(timeout=timeout)  # a pool that waits for ever fails here
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def _children() -> set[int]:
    return {c.pid for c in psutil.Process().children(recursive=True)}


def test_a_hung_rank_is_killed_retried_and_reported_while_the_others_complete(synthetic: Path,
                                                                              tmp_path: Path) -> None:
    """Rank 1's worker sleeps for ever (alive) when its parse opens communication.json; with a
    5 s deadline (the environment) each of its three workers is killed, and the command ends with
    exit status 1, one line naming rank 1, that it timed out and after how long, and the other
    ranks' rows; no worker is left."""
    out = tmp_path / "o"
    proc = _cli("-d", str(synthetic), "-o", str(out), "-m", "step_trace", "communication", "--workers", "2",
                env={SIGNAL_ENV: "1:communication.json:hang", rank_deadline.ENV: "5"})
    code, err = _finish(proc, 280)
    assert code == 1, err
    assert err.strip().splitlines() == [
        "openmsprof: warning: rank 1: timed out after 5 s, 3 times (its worker process killed each time); "
        "not analysed"], err
    rows = (out / "cluster_analysis_output" / "cluster_step_trace_time.csv").read_text().splitlines()[1:]
    assert {int(r.split(",")[2]) for r in rows} == {0, 2, 3}
    assert not leftovers(str(out))


def test_a_stopped_worker_is_killed_at_the_deadline_and_its_rank_retried(synthetic: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 2's worker stops itself (SIGSTOP) in the middle of its parse: at the 4 s deadline each
    of its three workers is SIGKILLed (a stopped process dies of it) and charged to rank 2, which
    is then reported; ranks 0, 1 and 3 are parsed; no child is left."""
    monkeypatch.setenv(SIGNAL_ENV, "2:communication.json:SIGSTOP")
    ranks = discover(synthetic).ranks
    before = _children()
    pool = RankPool(2, tmp_path / "store", False, deadline=RankDeadline(fixed=4.0, by_size=False))
    done = pool.run(ranks)
    assert pool.deaths[2] == ["timed out after 4 s"] * 3
    assert done[2]["failed"] and done[2]["problems"] == [
        "rank 2: timed out after 4 s, 3 times (its worker process killed each time); not analysed"]
    assert sorted(done) == [0, 1, 2, 3]
    assert not any(done[r].get("failed") for r in (0, 1, 3)) and all(done[r]["counts"] for r in (0, 1, 3))
    assert _children() <= before


def test_slow_ranks_within_their_deadline_are_not_killed(synthetic: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """One worker parses the four ranks in turn; ranks 0, 1 and 3 sleep 5 s in the middle of their
    parse, 15 s in all, past the 12 s deadline of each rank: no worker is killed, since each rank's
    deadline counts from when that rank was handed over (7 s of margin a rank)."""
    monkeypatch.setenv(SIGNAL_ENV, "0,1,3:communication.json:sleep5")
    pool = RankPool(1, tmp_path / "store", False, deadline=RankDeadline(fixed=12.0, by_size=False))
    done = pool.run(discover(synthetic).ranks)
    assert pool.deaths == {}
    assert sorted(done) == [0, 1, 2, 3] and not any(p.get("failed") for p in done.values())


def test_the_default_deadline_grows_with_the_rank_size(synthetic: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a setting: at least the 300 s floor, and 1 s more per MB of the rank's files (a
    rank's kernel_details.csv 5 MB longer gets 5 s more); a setting is the same for every rank."""
    root = copy_tree(synthetic, tmp_path / "job")
    monkeypatch.delenv(rank_deadline.ENV, raising=False)
    (src,) = [s for s in discover(root).ranks if s.rank == 3]
    small = rank_deadline.setting().seconds(src)
    assert small is not None and 300 <= small < 400
    kd = src.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with kd.open("ab") as f:
        f.write(b"\n" * 5_000_000)
    bigger = rank_deadline.setting().seconds(src)
    assert bigger is not None and bigger - small == pytest.approx(5.0)
    monkeypatch.setenv(rank_deadline.ENV, "42")
    assert rank_deadline.setting().seconds(src) == 42.0 and rank_deadline.setting("7.5").seconds(src) == 7.5
    assert rank_deadline.setting("off").seconds(src) is None
    monkeypatch.setenv(rank_deadline.ENV, "OFF")
    assert rank_deadline.setting().seconds(src) is None and rank_deadline.setting("9").seconds(src) == 9.0


def test_bad_rank_timeouts_are_one_line(synthetic: Path, tmp_path: Path) -> None:
    """Every bad value of --rank-timeout and of the environment variable is refused before any
    rank is parsed, in one line naming where it came from; so is the switch with Dask."""
    for bad, why in (("soon", "not a number of seconds"), ("", "not a number of seconds"),
                     ("0", "must be more than 0"), ("-3", "must be more than 0"), ("nan", "must be more than 0"),
                     ("inf", "must be more than 0"), ("5s", "not a number of seconds")):
        with pytest.raises(ConfigError, match=f"^--rank-timeout '{bad}': {why}"):
            rank_deadline.setting(bad)
    cases = [(["--rank-timeout", "soon"], {}, "--rank-timeout 'soon': not a number of seconds (say 600, 90.5 or off)"),
             ([], {rank_deadline.ENV: "-1"}, f"{rank_deadline.ENV} '-1': must be more than 0 seconds"),
             (["--rank-timeout", "5", "--scheduler", "tcp://127.0.0.1:9"], {},
              "--rank-timeout: not supported with a Dask scheduler")]
    for args, env, line in cases:
        out = tmp_path / f"o{len(args)}{len(env)}"
        code, err = _finish(_cli("-d", str(synthetic), "-o", str(out), *args, env=env), 120)
        assert code == 1 and err.count("\n") == 1 and err.startswith(f"openmsprof: error: {line}"), err
        assert not (out / "cluster_analysis_output" / ".openmsprof_store").exists()  # refused before parsing


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "sentinel"])
def test_the_pool_wakes_only_on_events(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       pidfd: bool) -> None:
    """Four workers parse four ranks (kernels included), three times: the parent's wait returns at
    most once per answer and twice per worker (its pipe's end of file, its end), never spinning
    while a worker that left is still ending (the loop woke up to ~500 times a run when it waited on
    that worker's sentinel and pipe).  Also where Linux has no pidfd (the sentinel, then a join)."""
    if not pidfd:
        monkeypatch.setattr(rank_pool, "_exit_fd", lambda pid: None)
    ranks = discover(synthetic).ranks
    for i in range(3):
        store = tmp_path / f"store{i}"
        pool = RankPool(4, store, True)
        done = pool.run(ranks)
        assert sorted(done) == [0, 1, 2, 3] and not pool.deaths
        assert pool.wakeups <= len(ranks) + 2 * 4, pool.wakeups
        shutil.rmtree(store)
