"""Issue 25's matrix: msprof-analyze (the real tool) × output kind — torch text and db (1 and 2
ranks), a pyACL and a TensorFlow ``PROF_`` job.  Every cell runs the tool and fails on any
``[ERROR]`` line not listed in ``BY_DESIGN`` (each entry names the tool's reason; the same table
is in docs/formats.md "msprof-analyze, mode by mode").  The jobs are the session's
(tests/torch/ma_jobs.py), shared with tests/torch/test_msprof_analyze.py.

Beyond "no unlisted error", cells whose numbers matter are checked against ours: compare's
category split is the same on db and text, OP State is static/dynamic as the shapes say,
operator_mfu's peak is the measured one, module_statistic finds the model's modules, and
``openmsprof cluster --annotate`` puts our wait split where communication_time_sum reads it.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import orjson
import pytest

from openmsprof.machine.peaks_doc import gemm_peak
from tests.torch.conftest import rank_dirs, read_csv
from tests.torch.ma_jobs import (
    MSPROF_ANALYZE,
    NO_COMM,
    OPENMSPROF,
    OUT,
    SLOW_RANK,
    analyze,
    cluster_db,
    compare_distribution,
    split,
)

pytestmark = pytest.mark.skipif(not Path(MSPROF_ANALYZE).exists(), reason="msprof-analyze not installed")

#: no AI Core clock is measured on a CPU (docs/formats.md decision 13): freq_analysis has nothing
NO_FREQ = ("No aic freq data found", "Mapper data is None, load profiling data failed")
#: operator_mfu maps PyTorch framework ops to kernels: a pyACL / TF job has no framework layer
NO_FRAMEWORK = ("Can not export framework op to kernel mapper", "No kernel data found")

BY_DESIGN: dict[tuple[str, str], tuple[str, ...]] = {
    ("torch_db", "freq_analysis"): NO_FREQ,
    ("torch_db", "slow_link"): ("Unknown dump data type",),      # logged when no link is an outlier
    ("torch_db", "ep_load_balance"): ("Mapper data is None",),   # no MoE GroupedMatmul ops in the run
    ("torch_db", "mstx_sum"): ("Mapper data is None",),          # only device-answered markers count
    ("torch_one", "all"): NO_COMM,  # one process: no collectives
    ("pyacl", "all"): NO_COMM, ("tf", "all"): NO_COMM,
    ("pyacl", "operator_mfu"): NO_FRAMEWORK, ("tf", "operator_mfu"): NO_FRAMEWORK,
    ("pyacl", "hccl_sum"): ("Mapper data is None",), ("tf", "hccl_sum"): ("Mapper data is None",),
    # the recipe reads StepTraceTime (analyze/communication_analyzer.db, written per step) and
    # then splits each step's collectives into wait and transmit: a PROF_ job has no collectives
    ("pyacl", "cluster_time_summary"): ("No valid transmit and wait time",),
    ("tf", "cluster_time_summary"): ("No valid transmit and wait time",),
    ("pyacl", "compare"): ("not collected by PyTorch or Mindspore",),  # compare takes framework dirs only
    ("tf", "compare"): ("not collected by PyTorch or Mindspore",),
}
TORCH_DB_MODES = ["freq_analysis", "slow_link", "ep_load_balance", "mstx_sum", "module_statistic", "operator_mfu",
                  "free_analysis", "slow_rank", "cluster_time_summary"]
PROF_MODES = ["all", "free_analysis", "operator_mfu", "hccl_sum", "compute_op_sum", "cluster_time_summary"]


def _prof_root(request: pytest.FixtureRequest, kind: str) -> Path:
    job: Path = request.getfixturevalue("ma_pyacl" if kind == "pyacl" else "ma_tf")
    return job.parent  # the jobs/ folder holds only this job


@pytest.mark.parametrize("mode", TORCH_DB_MODES)
def test_cluster_mode_on_torchcluster_db(ma_two: dict[str, Path], mode: str, tmp_path: Path) -> None:
    analyze(["cluster", "-d", str(ma_two["db"]), "-m", mode, "-o", str(tmp_path / "c")], tmp_path,
            BY_DESIGN.get(("torch_db", mode), ()))
    if mode == "operator_mfu":
        _check_mfu(ma_two, tmp_path / "c")
    elif mode == "module_statistic":
        with cluster_db(tmp_path / "c") as con:
            modules = {m for (m,) in con.execute("SELECT module FROM ModuleStatistic")}
        assert {"CNN_0", "Conv2d_0", "Linear_0"} <= modules  # Trainer("cnn")'s modules
    elif mode == "cluster_time_summary":
        with cluster_db(tmp_path / "c") as con:
            waits = dict(con.execute("SELECT rank, sum(communicationWaitStageTime) FROM ClusterTimeSummary "
                                     "GROUP BY rank").fetchall())
        # the rank that waited least is the one the others waited for: the slow rank we name
        assert min(waits, key=waits.__getitem__) == _our_slow_rank(ma_two["runs"], tmp_path / "ours")


def _our_slow_rank(runs: Path, out: Path, *extra: str) -> int:
    res = subprocess.run([OPENMSPROF, "cluster", "-d", str(runs), "-m", "slow_rank", "-o", str(out), *extra],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    m = re.search(r"^slow rank: (\d+) made the others wait", res.stdout, re.M)
    assert m, res.stdout
    return int(m.group(1))


def _rank(rank_dir: Path) -> int:
    m = re.search(r"profiler_info_(\d+)", next(p.name for p in rank_dir.glob("profiler_info_*.json")))
    assert m
    return int(m.group(1))


def _check_mfu(ma_two: dict[str, Path], out: Path) -> None:
    """OperatorMFU's chip peak is the one ``openmsprof peaks`` measured into the cache the run saw
    (tests/torch/ma_jobs.py ``peaks_cache``); its MFU = FLOPs / duration / peak."""
    with cluster_db(out) as con:
        rows = con.execute('SELECT rank_id, "kernel_duration(ns)", mfu, chip_peak_tflops, flops FROM OperatorMFU').fetchall()
    assert rows
    (cache,) = ma_two["peaks"].glob("peaks-*.json")
    measured = gemm_peak(orjson.loads(cache.read_bytes()))
    assert measured > 1e8  # a real float32 GEMM rate (≥ 0.1 GFLOP/s even at load 20)
    for d in rank_dirs(ma_two["db"]):
        (info,) = d.glob("device_*/info.json.*")
        peak = orjson.loads(info.read_bytes())["DeviceInfo"][0]["peak_flops"]
        assert peak == pytest.approx(measured, rel=1e-9)
        rank = _rank(d)
        mine = [r for r in rows if r[0] == rank]
        assert mine
        for _r, dur_ns, mfu, chip_tflops, flops in mine:
            assert chip_tflops == pytest.approx(peak / 1e12, abs=0.01)
            assert float(mfu) == pytest.approx(flops / (dur_ns * 1e-9) / peak, abs=1e-3)


@pytest.mark.parametrize("kind", ["pyacl", "tf"])
@pytest.mark.parametrize("mode", PROF_MODES)
def test_cluster_mode_on_prof_jobs(request: pytest.FixtureRequest, kind: str, mode: str, tmp_path: Path) -> None:
    root = _prof_root(request, kind)
    analyze(["cluster", "-d", str(root), "-m", mode, "-o", str(tmp_path / "c")], tmp_path,
            BY_DESIGN.get((kind, mode), ()))
    if mode == "compute_op_sum":
        with cluster_db(tmp_path / "c") as con:
            types = {t for (t,) in con.execute("SELECT DISTINCT TaskType FROM ComputeOpAllRankStats")}
        assert types == {"CPU"}  # the real executor (docs/formats.md decision 1)


def _union_in(spans: list[tuple[int, int]], lo: int, hi: int) -> int:
    """ns covered by ``spans`` inside [lo, hi] (a plain sweep, independent of overlap.merge)."""
    covered, reach = 0, lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in spans if e > lo and s < hi):
        if e > reach:
            covered += e - max(s, reach)
            reach = e
    return covered


@pytest.mark.parametrize("kind", ["pyacl", "tf"])
def test_prof_jobs_have_step_trace_time(request: pytest.FixtureRequest, kind: str) -> None:
    """StepTraceTime in ``analyze/communication_analyzer.db`` (what cluster_time_summary reads):
    one row per STEP_TIME step (TF iterations), or one row with a NULL step (msprof-analyze's step
    -1) when the job has none (pyACL); Computing = the union of task time in the step, µs."""
    job = next(_prof_root(request, kind).glob("PROF_*"))
    (db,) = job.glob("msprof_*.db")
    with sqlite3.connect(db) as con:
        tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        steps = con.execute("SELECT id, startNs, endNs FROM STEP_TIME").fetchall() if "STEP_TIME" in tables else []
        spans = con.execute("SELECT startNs, endNs FROM TASK").fetchall()
    with sqlite3.connect(job / "analyze" / "communication_analyzer.db") as con:
        rows = con.execute("SELECT step, computing, communication, free FROM StepTraceTime").fetchall()
    assert spans and rows
    if kind == "tf":
        assert len(steps) >= 3  # examples/tf_sess_run.py's iterations
        want = {str(i): _union_in(spans, s, e) / 1000 for i, s, e in steps}
    else:
        assert steps == [] and "STEP_TIME" not in tables  # an empty one would make every task stepless
        lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
        want = {None: _union_in(spans, lo, hi) / 1000}
    assert {r[0]: r[1] for r in rows} == {k: pytest.approx(v, abs=0.002) for k, v in want.items()}
    assert all(comm == 0 and comp + free > 0 for _s, comp, comm, free in rows)


@pytest.mark.parametrize("kind", ["pyacl", "tf"])
@pytest.mark.parametrize("what", ["all", "schedule", "compare"])
def test_advisor_and_compare_on_prof_jobs(request: pytest.FixtureRequest, kind: str, what: str,
                                          tmp_path: Path) -> None:
    job = next(_prof_root(request, kind).glob("PROF_*"))
    args = (["compare", "-d", str(job), "-bp", str(job)] if what == "compare" else ["advisor", what, "-d", str(job)])
    log = analyze([*args, "-o", str(tmp_path / "o")], tmp_path, BY_DESIGN.get((kind, what), ()))
    for html in (tmp_path / "o").glob("mstt_advisor_*.html"):
        text = html.read_text(encoding="utf-8")
        assert "动态shape算子" not in text and "Operator Dynamic Shape Issues" not in text  # OP State is measured
    if what == "compare":
        assert "Invalid profiling path" in log


@pytest.mark.parametrize("mode", ["text", "db"])
def test_cluster_all_on_one_torch_rank(ma_one: dict[str, Path], mode: str, tmp_path: Path) -> None:
    """(Two ranks, text and db, and the advisor on every torch kind: tests/torch/test_msprof_analyze.py.)"""
    analyze(["cluster", "-d", str(ma_one[mode]), "-m", "all", "-o", str(tmp_path / "c")], tmp_path,
            BY_DESIGN.get(("torch_one", "all"), ()))
    if mode == "db":
        with cluster_db(tmp_path / "c") as con:
            assert con.execute("SELECT count(*) FROM ClusterStepTraceTime WHERE type = 'rank'").fetchone()[0] == 2
    else:
        _h, rows = read_csv(tmp_path / "c" / "cluster_analysis_output" / "cluster_step_trace_time.csv")
        assert len([r for r in rows if r["Type"] == "rank"]) == 2  # the two active steps


@pytest.mark.parametrize("world", [1, 2])
def test_compare_splits_db_and_text_alike(ma_one: dict[str, Path], ma_two: dict[str, Path], world: int,
                                          tmp_path: Path) -> None:
    trees = ma_one if world == 1 else ma_two
    log = analyze(["compare", "-d", str(rank_dirs(trees["text"])[0]), "-bp", str(rank_dirs(trees["db"])[0]),
                   "-o", str(tmp_path / "cmp")], tmp_path)
    base, new = compare_distribution(log)
    for col in ("Cube Time(Num)", "Vector Time(Num)", "Conv Time(Forward)(Num)", "Conv Time(Backward)(Num)"):
        count = re.search(r"\((\d+)\)", new[col])
        assert count and int(count.group(1)) > 0, (col, new[col])
        assert re.search(r"\((\d+)\)", base[col]).group(1) == count.group(1), col  # type: ignore[union-attr]


def test_task_type_op_state_and_frequency_in_our_files(ma_two: dict[str, Path]) -> None:
    """Task Type names the executor; OP State follows the recorded shapes; no AI Core clock."""
    for d in rank_dirs(ma_two["runs"]):
        _h, rows = read_csv(d / OUT / "kernel_details.csv")
        assert {r["Accelerator Core"] for r in rows} <= {"CPU", "COMMUNICATION", "MEMCPY_ASYNC"}
        shapes: dict[str, set[str]] = {}
        for r in rows:
            if r["Accelerator Core"] != "COMMUNICATION" and r["Input Shapes"] not in ("", "N/A"):
                shapes.setdefault(r["Name"], set()).add(r["Input Shapes"])
        for r in rows:
            want = "N/A" if r["Name"] not in shapes else ("static" if len(shapes[r["Name"]]) == 1 else "dynamic")
            assert r["OP State"] == want, r["Name"]
        assert {"static", "dynamic"} <= {r["OP State"] for r in rows}  # the cnn has both kinds
        db = next((d / OUT).glob("ascend_pytorch_profiler_*.db"))
        con = sqlite3.connect(db)
        try:
            assert con.execute("SELECT count(*) FROM AICORE_FREQ").fetchone()[0] == 0
            states = dict(con.execute("SELECT n.value, s.value FROM COMPUTE_TASK_INFO c JOIN STRING_IDS n "
                                      "ON n.id = c.name JOIN STRING_IDS s ON s.id = c.opState").fetchall())
            assert states == {r["Name"]: r["OP State"] for r in rows
                              if r["Accelerator Core"] not in ("COMMUNICATION", "MEMCPY_ASYNC")}
            marks = {m for (m,) in con.execute("SELECT s.value FROM MSTX_EVENTS m JOIN STRING_IDS s ON s.id = m.message "
                                               "JOIN STRING_IDS d ON d.id = m.domainId WHERE d.value = 'default'")}
            assert "train_step" in marks and any(m.startswith("step ") for m in marks)  # the user's mstx calls
        finally:
            con.close()


def test_annotate_puts_our_wait_where_msprof_analyze_reads_it(ma_two: dict[str, Path], tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(ma_two["runs"], runs)
    before = {d.name: (d / OUT / "communication.json").read_bytes() for d in rank_dirs(runs)}
    slow = _our_slow_rank(runs, tmp_path / "o", "--annotate")
    assert len(list(runs.glob(f"*/{OUT}/.openmsprof_annotate"))) == 2
    _h, split_rows = read_csv(tmp_path / "o" / "cluster_analysis_output" / "slow_rank" / "wait_transfer.csv")
    ours = {(int(r["rank"]), r["step"], r["op"]): float(r["wait_ms"]) for r in split_rows}
    assert sum(w for (rank, _s, _o), w in ours.items() if rank != slow) > 0  # the others waited for it
    trees = split(runs, tmp_path)
    for d in rank_dirs(trees["text"]):
        rank = _rank(d)
        doc = orjson.loads((d / OUT / "communication.json").read_bytes())
        got = {(rank, step, key): op["Communication Time Info"]["Wait Time(ms)"]
               for step, kinds in doc.items() for key, op in kinds["collective"].items() if key != "Total Op Info"}
        assert got == {k: pytest.approx(v, abs=1e-6) for k, v in ours.items() if k[0] == rank}
    analyze(["cluster", "-d", str(trees["db"]), "-m", "communication_time_sum", "-o", str(tmp_path / "m")], tmp_path)
    with cluster_db(tmp_path / "m") as con:
        theirs = dict(con.execute("SELECT rank_id, sum(wait_time) FROM ClusterCommunicationTime "
                                  "WHERE hccl_op_name != 'Total Op Info' GROUP BY rank_id").fetchall())
    for rank in (0, 1):
        assert theirs[rank] == pytest.approx(sum(w for (r, _s, _o), w in ours.items() if r == rank), abs=0.01)
    res = subprocess.run([OPENMSPROF, "cluster", "-d", str(runs), "-m", "slow_rank", "-o", str(tmp_path / "o2"),
                          "--unannotate"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.count("restored") == 2, res.stderr[-2000:]
    for d in rank_dirs(runs):
        assert (d / OUT / "communication.json").read_bytes() == before[d.name]
        assert not (d / OUT / ".openmsprof_annotate").exists()
        con = sqlite3.connect(d / OUT / "analysis.db")
        try:
            assert con.execute("SELECT sum(wait_time) FROM CommAnalyzerTime").fetchone()[0] == 0
        finally:
            con.close()


def test_slow_rank_names_our_slow_rank_on_four_ranks(ma_four: dict[str, Path], tmp_path: Path) -> None:
    """4 ranks, rank ``SLOW_RANK`` planted slow (tests/torch/ma_jobs.py ``TRAIN_FOUR``):
    ``openmsprof cluster --annotate`` names it, and msprof-analyze ``slow_rank`` (Dixon's test over
    each collective's per-rank durations, read from the db) votes for the same rank."""
    runs = tmp_path / "runs"
    shutil.copytree(ma_four["runs"], runs)
    ours = _our_slow_rank(runs, tmp_path / "o", "--annotate")
    assert ours == SLOW_RANK
    assert len(list(runs.glob(f"*/{OUT}/.openmsprof_annotate"))) == 4
    db = split(runs, tmp_path)["db"]
    analyze(["cluster", "-d", str(db), "-m", "slow_rank", "-o", str(tmp_path / "c")], tmp_path)
    with cluster_db(tmp_path / "c") as con:
        votes = dict(con.execute('SELECT "rankId", "slowAffectCount" FROM SlowRank').fetchall())
        ops = con.execute('SELECT "SlowRank", "Count" FROM SlowOpStats').fetchall()
    assert max(votes, key=votes.__getitem__) == ours and votes[ours] >= 2  # one vote per recorded step
    assert (str(ours), 4) in ops  # the all_reduce its lateness made the other three wait in
