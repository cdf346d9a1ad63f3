"""Jobs every msprof-analyze test reads, made once per session (issue 25's matrix): a one-rank
and a two-rank torch run (gloo, loopback; rank ``SLOW_RANK`` planted slow: it sleeps before every
step's collectives), each exported as text and as db into separate trees (msprof-analyze takes
a tree with any db as db-only) beside the combined ``runs/`` tree; a pyACL and a TensorFlow
``PROF_`` job exported with both verbs (the tool-facing layout).  mstx is on: the runs carry
user markers (``train_step`` ranges, ``step N`` marks).  The torch runs see a peaks cache the
session measured first (``openmsprof peaks``, ``OPENMSPROF_CACHE``): their db export writes the
device-info JSON with the measured peak that msprof-analyze ``operator_mfu`` needs, whatever the
machine's own cache holds (a fresh machine has none), and no rank spawns its own measurement.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.collector.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
OPENMSPROF = str(Path(sys.executable).with_name("openmsprof"))
MSPROF_ANALYZE = shutil.which("msprof-analyze") or str(Path(sys.executable).with_name("msprof-analyze"))
#: [ERROR] lines msprof-analyze prints for any job without collectives (not about our data): its
#: communication recipes find no group to map (an inference or single-process job has none)
NO_COMM = ("Create CommunicationGroupMap table failed", "There is no CommunicationGroupMapping data",
           "'DataFrame' object has no attribute 'str'")
#: msprof-analyze's own SQL (GROUP_CONCAT ... ORDER BY) needs SQLite >= 3.44 for the DB stack lookup
OLD_SQLITE = ("Error loading API stack data",) if sqlite3.sqlite_version_info < (3, 44) else ()
OUT = "ASCEND_PROFILER_OUTPUT"
SLOW_RANK = 1
PLANTED_S = 0.4  # well above a loaded machine's step-time noise (~0.1 s at load 20)

TRAIN = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {repo!r})
    import torch
    from tests.torch.conftest import Trainer
    import openmsprof.torch.profiler as tp
    from openmsprof.torch import npu
    dist = None
    if {world} > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo")
    t = Trainer("cnn")
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, export_type=["text", "db"], mstx=True)
    with tp.profile(schedule=tp.schedule(wait=1, warmup=1, active=2, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler("runs"), record_shapes=True, with_stack=True,
                    experimental_config=exp) as prof:
        for i in range(5):
            npu.mstx.mark(f"step {{i}}")
            rid = npu.mstx.range_start("train_step")
            t.step()
            npu.mstx.range_end(rid)
            if dist is not None:
                if dist.get_rank() == {slow}:
                    time.sleep({planted})  # the planted slow rank: the others wait for it
                for p in t.model.parameters():
                    dist.all_reduce(p.data)
            prof.step()
    if dist is not None:
        dist.barrier()
        dist.destroy_process_group()
    sys.stdout.flush(); sys.stderr.flush()
    import os; os._exit(0)
""")


def analyze(args: list[str], cwd: Path, tolerated: tuple[str, ...] = ()) -> str:
    """Run msprof-analyze; fail on any [ERROR] line not in ``tolerated``; return its log (progress
    bars' carriage returns read as line ends, so an [ERROR] after one is a line of its own)."""
    res = subprocess.run([MSPROF_ANALYZE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    log = (res.stdout + res.stderr).replace("\r", "\n")
    errors = [ln for ln in log.splitlines() if "[ERROR]" in ln and not any(t in ln for t in tolerated)]
    assert not errors, errors
    assert res.returncode == 0, log[-2000:]
    return log


def cluster_db(out: Path) -> sqlite3.Connection:
    """msprof-analyze's cluster_analysis.db under the output ``out``."""
    return sqlite3.connect(out / "cluster_analysis_output" / "cluster_analysis.db")


def compare_distribution(log: str) -> list[dict[str, str]]:
    """The rows of compare's 'Model Profiling Time Distribution' table (base first)."""
    lines = [ln for ln in log.splitlines() if ln.startswith("|")]
    head = next(ln for ln in lines if "Computing Time" in ln)
    cols = [c.strip() for c in head.strip("|").split("|")]
    return [dict(zip(cols, (c.strip() for c in ln.strip("|").split("|")), strict=True))
            for ln in lines if ln.startswith("| NPU")]


def measured_peaks(root: Path) -> Path:
    """A peaks cache folder holding this machine's peaks, measured now by ``openmsprof peaks``."""
    cache = root / "peaks_cache"
    res = subprocess.run([OPENMSPROF, "peaks", "--cached", "--format", "json"], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "OPENMSPROF_CACHE": str(cache)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(list(cache.glob("peaks-*.json"))) == 1
    return cache


@pytest.fixture(scope="session")
def peaks_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return measured_peaks(tmp_path_factory.mktemp("peaks"))


def _train(root: Path, world: int, cache: Path, template: str = TRAIN, planted: float = PLANTED_S) -> Path:
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
        env["OPENMSPROF_CACHE"] = str(cache)
        if world > 1:
            env.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        code = template.format(repo=str(REPO), world=world, slow=SLOW_RANK, planted=planted)
        procs.append(subprocess.Popen([sys.executable, "-c", code], cwd=root, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    return root / "runs"


#: the 4-rank run for msprof-analyze ``slow_rank``: its Dixon test (n ≤ 7) flags the shortest of
#: one collective's per-rank durations when (2nd shortest − shortest) ÷ (longest − shortest) >
#: 0.920, and needs 4 distinct durations.  Each recorded step ends in ONE all_reduce (a flat
#: tensor); right before it the ranks meet at a store barrier (not a collective: nothing
#: recorded), then rank ``SLOW_RANK`` sleeps ``FOUR_PLANTED_S``: the other three wait that long ±
#: their wake-up skew (≪ 8 % of it even at load 20), the slow rank not at all.  Without the
#: barrier the three waits differ by their step times, seconds apart at load 20 (measured:
#: 1.66 / 2.63 / 2.70 s for a 1.5 s plant), and Dixon names nobody.
FOUR_PLANTED_S = 3.0
TRAIN_FOUR = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {repo!r})
    import torch
    import torch.distributed as dist
    from tests.torch.conftest import Trainer
    import openmsprof.torch.profiler as tp
    dist.init_process_group("gloo")
    store, world = dist.distributed_c10d._get_default_store(), dist.get_world_size()
    t = Trainer("mlp")
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, export_type=["text", "db"])
    with tp.profile(schedule=tp.schedule(wait=0, warmup=1, active=2, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler("runs"), experimental_config=exp) as prof:
        for i in range(3):
            t.step()
            flat = torch.cat([p.data.reshape(-1) for p in t.model.parameters()])
            if i:  # the recorded steps
                if store.add(f"arrived{{i}}", 1) == world:
                    store.set(f"go{{i}}", "1")
                store.wait([f"go{{i}}"])
                if dist.get_rank() == {slow}:
                    time.sleep({planted})  # the planted slow rank: the others wait for it
            dist.all_reduce(flat)
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush(); sys.stderr.flush()
    import os; os._exit(0)
""")


def split(runs: Path, dest: Path) -> dict[str, Path]:
    """``text/`` and ``db/`` trees of the same rank dirs, each holding one export type; ``runs``
    is the combined tree (what ``openmsprof cluster`` reads)."""
    trees = {"runs": runs}
    for mode in ("text", "db"):
        tree = dest / mode
        for d in sorted(p for p in runs.iterdir() if p.name.endswith("_ascend_pt")):
            shutil.copytree(d, tree / d.name)
            for f in (tree / d.name / OUT).iterdir():
                if f.is_file() and (f.suffix == ".db") != (mode == "db") and f.name != "analyse.done":
                    f.unlink()
        trees[mode] = tree
    return trees


@pytest.fixture(scope="session")
def ma_two(tmp_path_factory: pytest.TempPathFactory, peaks_cache: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ma_two")
    return {**split(_train(root, 2, peaks_cache), root), "peaks": peaks_cache}


@pytest.fixture(scope="session")
def ma_four(tmp_path_factory: pytest.TempPathFactory, peaks_cache: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ma_four")
    return split(_train(root, 4, peaks_cache, TRAIN_FOUR, FOUR_PLANTED_S), root)


@pytest.fixture(scope="session")
def ma_one(tmp_path_factory: pytest.TempPathFactory, peaks_cache: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ma_one")
    return {**split(_train(root, 1, peaks_cache), root), "peaks": peaks_cache}


def _export(job: Path) -> Path:
    for verb in ("summary", "timeline"):
        res = subprocess.run([OPENMSPROF, "export", verb, "-dir", str(job)], capture_output=True, text=True,
                             timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
    return job


@pytest.fixture(scope="session")
def ma_pyacl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ma_acl")
    res = subprocess.run([OPENMSPROF, "demo", "--output", str(root / "jobs"), "--executes", "8"], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    (job,) = (root / "jobs").glob("PROF_*")
    return _export(job)


@pytest.fixture(scope="session")
def ma_tf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tensorflow")
    root = tmp_path_factory.mktemp("ma_tf")
    (root / "jobs").mkdir()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.pathsep.join(
        [str(REPO), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, str(REPO / "examples" / "tf_sess_run.py"), str(root / "jobs"), "5",
                          "dense/MatMul"], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    (job,) = (root / "jobs").glob("PROF_*")
    return _export(job)
