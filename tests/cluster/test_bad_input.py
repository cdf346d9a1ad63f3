"""Bad input: torn and missing files (reported per rank, the others analysed), mixed world sizes,
duplicate ranks, an unreachable scheduler, and local worker processes killed mid-run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import psutil
import pytest

from openmsprof.cluster import run_cluster
from openmsprof.cluster.rank_worker import SIGNAL_ENV
from openmsprof.config.errors import ConfigError
from tests.cluster.conftest import copy_tree, leftovers, make_synthetic

OUT = "ASCEND_PROFILER_OUTPUT"


def _rank_dir(root: Path, rank: int) -> Path:
    return next(root.glob(f"*_{1000 + rank}_*"))


def test_torn_and_missing_files_reported_per_rank(synthetic: Path, tmp_path: Path) -> None:
    root = copy_tree(synthetic, tmp_path / "job")
    kd = _rank_dir(root, 1) / OUT / "kernel_details.csv"
    data = kd.read_bytes()
    kd.write_bytes(data[: len(data) // 2 + 7])  # cut in the middle of a row
    comm = _rank_dir(root, 2) / OUT / "communication.json"
    comm.write_bytes(comm.read_bytes()[:1000])
    (_rank_dir(root, 3) / OUT / "step_trace_time.csv").unlink()
    run = run_cluster(root, ["all"], tmp_path / "o", workers=2)
    text = "\n".join(run.problems)
    assert "rank 1: kernel_details.csv torn after" in text
    assert "rank 2: communication json unreadable" in text
    assert "rank 3: step_trace_time.csv unreadable" in text
    assert len(run.problems) == 3
    rows = (run.output / "cluster_step_trace_time.csv").read_text().splitlines()
    assert {r.split(",")[2] for r in rows[1:]} == {"0", "1", "2"}
    comm_doc = orjson.loads((run.output / "cluster_communication.json").read_bytes())
    (group,) = comm_doc
    # rank 2's intact communication_matrix.json still places it in the group; its collectives
    # (the torn communication.json) are missing, the others' are all there
    assert group == "(0, 1, 2, 3)"
    per_rank = [set(ranks) for ops in comm_doc[group].values() for key, ranks in ops.items()
                if not key.startswith("Total")]
    assert per_rank and all(r == {"0", "1", "3"} for r in per_rank)


def test_not_a_rank_dir_and_duplicates(synthetic: Path, tmp_path: Path) -> None:
    root = copy_tree(synthetic, tmp_path / "job")
    old = _rank_dir(root, 0)
    shutil.copytree(old, root / old.name.replace("20261124000000000", "20261123000000000"))
    (root / "stray_1_2_ascend_pt").mkdir()
    run = run_cluster(root, ["step_trace"], tmp_path / "o", workers=1)
    assert any(p.startswith("rank 0: duplicate in") and f"using the newer {old.name}" in p for p in run.problems)
    assert any("stray_1_2_ascend_pt: no profiler_info_{rank}.json" in p for p in run.problems)
    assert [p["rank"] for p in run.partials] == [0, 1, 2, 3]


def test_mixed_world_sizes(synthetic: Path, tmp_path: Path) -> None:
    root = copy_tree(synthetic, tmp_path / "job")
    meta = _rank_dir(root, 3) / "profiler_metadata.json"
    doc = orjson.loads(meta.read_bytes())
    doc["distributed_args"]["world_size"] = 8
    meta.write_bytes(orjson.dumps(doc))
    with pytest.raises(ConfigError, match=r"different world sizes \(rank 0: 4, .* rank 3: 8\)"):
        run_cluster(root, ["all"], tmp_path / "o")


def test_unreachable_scheduler_is_one_line(synthetic: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "openmsprof", "cluster", "-d", str(synthetic), "-o", str(tmp_path),
                          "--scheduler", "tcp://127.0.0.1:9"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("openmsprof: error: Dask scheduler tcp://127.0.0.1:9: unreachable")
    assert time.monotonic() - t0 < 60


class _Killer(threading.Thread):
    """SIGKILL the children of process ``pid`` as soon as they are seen: the first ``times`` (or
    all, for ``times=None``) until stopped, looking every ``every`` seconds."""

    def __init__(self, pid: int, times: int | None, every: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.times, self.every, self.killed, self.stop = pid, times, every, 0, threading.Event()

    def run(self) -> None:
        try:
            parent = psutil.Process(self.pid)
            while not self.stop.is_set() and (self.times is None or self.killed < self.times):
                for child in parent.children(recursive=True):
                    if self.times is not None and self.killed >= self.times:
                        break
                    try:
                        os.kill(child.pid, signal.SIGKILL)
                        self.killed += 1
                    except ProcessLookupError:
                        pass
                time.sleep(self.every)
        except psutil.NoSuchProcess:
            return


@pytest.fixture(scope="module")
def slow_parse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic(tmp_path_factory.mktemp("kill") / "job", ranks=4, events=120_000)


def test_killed_worker_ranks_are_retried(slow_parse: Path, tmp_path: Path) -> None:
    """One worker SIGKILLed: its rank is parsed by a replacement.  The kernels are parsed (120 k a
    rank) so that the workers live long enough for the killer thread to see one at any load."""
    killer = _Killer(os.getpid(), times=1, every=0.005)
    killer.start()
    run = run_cluster(slow_parse, ["step_trace", "compute_op"], tmp_path, workers=2)
    killer.stop.set()
    assert killer.killed == 1
    assert [p["rank"] for p in run.partials] == [0, 1, 2, 3]
    assert not any(p.get("failed") for p in run.partials) and not run.problems


def test_ranks_of_always_dying_workers_are_reported(slow_parse: Path, tmp_path: Path) -> None:
    """A SIGKILL storm on the workers of ``openmsprof cluster``: ranks 1 and 3 kill their worker in
    the middle of every parse (SIGKILL when the parse opens communication.json: the test-only
    OPENMSPROF_TEST_WORKER_SIGNAL), and a thread SIGKILLs every worker of the command as soon as
    it sees one.  The command ends in bounded time with exit status 1; every rank is analysed or
    reported in one line naming the signal; no worker is left."""
    out = tmp_path / "o"
    env = {**os.environ, SIGNAL_ENV: "1,3:communication.json:SIGKILL"}
    proc = subprocess.Popen([sys.executable, "-m", "openmsprof", "cluster", "-d", str(slow_parse), "-o", str(out),
                             "-m", "step_trace", "--workers", "2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    storm = _Killer(proc.pid, times=None, every=0.002)
    storm.start()
    try:
        _stdout, err = proc.communicate(timeout=300)  # a hang fails here (a run takes seconds)
    finally:
        storm.stop.set()
        storm.join()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    lines = err.strip().splitlines()
    assert lines and all(ln.startswith("openmsprof: warning: rank ") for ln in lines), err  # no traceback
    failed = {int(ln.split()[3].rstrip(":")): ln for ln in lines}
    for rank in (1, 3):  # every try died in the middle of the parse, by SIGKILL
        assert failed[rank] == f"openmsprof: warning: rank {rank}: its worker process died 3 times (SIGKILL x3); " \
                               "not analysed", err
    assert all(" died 3 times (SIGKILL x3); not analysed" in ln for ln in failed.values()), err
    table = out / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    parsed = {int(r.split(",")[2]) for r in table.read_text().splitlines()[1:]} if table.exists() else set()
    assert parsed.isdisjoint(failed) and parsed | set(failed) == {0, 1, 2, 3}, (parsed, err)
    assert not leftovers(str(out))


def test_foreign_values_in_communication_json_are_read_as_numbers_or_zero(synthetic: Path, tmp_path: Path) -> None:
    """Times as text ("inf", "2.5"), a list where a dict belongs, a bandwidth that is not a dict:
    the run completes; numeric text is summed as its number, anything else as 0."""
    root = copy_tree(synthetic, tmp_path / "job")
    comm = _rank_dir(root, 2) / OUT / "communication.json"
    doc = orjson.loads(comm.read_bytes())
    step = next(iter(doc))
    kind = next(iter(doc[step]))
    key = next(k for k in doc[step][kind] if not k.startswith("Total"))
    info = doc[step][kind][key]
    info["Communication Time Info"]["Wait Time(ms)"] = "2.5"
    info["Communication Time Info"]["Transit Time(ms)"] = "inf"
    info["Communication Time Info"]["Elapse Time(ms)"] = ["not", "a", "number"]
    info["Communication Bandwidth Info"] = {"HCCS": [1, 2], **{k: v for k, v in
                                            (info.get("Communication Bandwidth Info") or {}).items() if k != "HCCS"}}
    comm.write_bytes(orjson.dumps(doc))
    run = run_cluster(root, ["communication"], tmp_path / "o")
    out = orjson.loads((run.output / "cluster_communication.json").read_bytes())
    group = next(g for g, steps in out.items() if step in steps and key in steps[step])
    mine = out[group][step][key]["2"]["Communication Time Info"]
    assert mine["Wait Time(ms)"] == "2.5" and mine["Transit Time(ms)"] == "inf"  # the rank's own, as it was
    totals = [v for k, v in out[group][step].items() if k.startswith("Total Op Info")]
    assert totals, out[group][step].keys()
    total = totals[0]["2"]["Communication Time Info"]
    assert total["Wait Time(ms)"] >= 2.5 and total["Transit Time(ms)"] is None  # inf: JSON has no inf (null)


def test_a_local_worker_result_fits_one_atomic_pipe_write(synthetic: Path, tmp_path: Path) -> None:
    """A local worker's result goes back in one write of at most PIPE_BUF bytes (a worker killed
    in the middle of a longer write leaves a torn message on which the pool's reader hangs for
    ever): the small tables stay in the store, which the parent reads."""
    import pickle
    import select

    from openmsprof.cluster.discover import discover
    from openmsprof.cluster.rank_worker import parse_for_pool

    ranks = discover(synthetic).ranks
    assert ranks
    for src in ranks:
        partial = parse_for_pool(src, tmp_path / "store", True)
        assert "small" not in partial
        assert len(pickle.dumps(partial)) + 4 <= select.PIPE_BUF, len(pickle.dumps(partial))
    run = run_cluster(synthetic, ["step_trace", "communication"], tmp_path / "o", workers=2)
    assert not run.problems
    rows = (run.output / "cluster_step_trace_time.csv").read_text().splitlines()
    assert len(rows) > 1 and (run.output / "cluster_communication.json").stat().st_size > 2
