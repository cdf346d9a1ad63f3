"""msprof-analyze, the real client, reads every openmsprof output and agrees with us (issue 11).

Inputs: a one-rank and a two-rank (gloo, loopback) torch run, each exported as text and as db
into separate trees (msprof-analyze takes a tree with any db as db-only), and a pyACL PROF_ job
exported with ``openmsprof export`` (tool-facing layout).  Commands: ``cluster -m all``,
``hccl_sum``, ``communication_time_sum``, ``communication_matrix_sum``, ``compute_op_sum``,
``cann_api_sum``, ``cluster_time_summary``, ``communication_bottleneck``, ``compare`` (text vs db
of one run) and ``advisor all``.  msprof-analyze exits 0 even on failure, so every run's log is
parsed for ``[ERROR]`` lines; the few it prints whatever the input (named in ``UPSTREAM``, each
with its reason) are the only ones tolerated.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.torch.conftest import rank_dirs, read_csv
from tests.torch.ma_jobs import (
    MSPROF_ANALYZE,
    NO_COMM,
    OLD_SQLITE,
    analyze,
    cluster_db,
    compare_distribution,
)

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path(MSPROF_ANALYZE).exists(), reason="msprof-analyze not installed")
OUT = "ASCEND_PROFILER_OUTPUT"
RECIPES = ["hccl_sum", "communication_time_sum", "communication_matrix_sum", "compute_op_sum", "cann_api_sum",
           "cluster_time_summary", "communication_bottleneck"]
#: advisor: its DB stack lookup needs SQLite >= 3.44 (its own SQL uses GROUP_CONCAT ... ORDER BY).
#: (Its 6 "Can not convert / to float" errors went with the Ascend engine names: decision 1.)
ADVISOR = OLD_SQLITE


@pytest.fixture(scope="module")
def two(ma_two: dict[str, Path]) -> dict[str, Path]:
    return ma_two  # the session's two-rank run (tests/torch/ma_jobs.py)


@pytest.fixture(scope="module")
def one(ma_one: dict[str, Path]) -> dict[str, Path]:
    return ma_one


def _step_rows(tree: Path) -> dict[tuple[str, str], dict[str, str]]:
    """Our step_trace_time.csv rows (text tree) by (rank, step)."""
    rows = {}
    for d in rank_dirs(tree):
        rank = re.search(r"profiler_info_(\d+)", next(p.name for p in d.glob("profiler_info_*.json")))
        assert rank
        for r in read_csv(d / OUT / "step_trace_time.csv")[1]:
            rows[(rank.group(1), r["Step"])] = r
    return rows


@pytest.mark.parametrize("mode", ["text", "db"])
def test_cluster_all_matches_our_step_times(two: dict[str, Path], mode: str, tmp_path: Path) -> None:
    analyze(["cluster", "-d", str(two[mode]), "-m", "all", "-o", str(tmp_path / "c")], tmp_path)
    if mode == "db":
        with cluster_db(tmp_path / "c") as con:
            theirs = con.execute("SELECT [index], step, computing, communication_not_overlapped, free "
                                 "FROM ClusterStepTraceTime WHERE type = 'rank'").fetchall()
    else:
        _h, rows = read_csv(tmp_path / "c" / "cluster_analysis_output" / "cluster_step_trace_time.csv")
        theirs = [(r["Index"], r["Step"], float(r["Computing"]), float(r["Communication(Not Overlapped)"]),
                   float(r["Free"])) for r in rows if r["Type"] == "rank"]
    ours = _step_rows(two["text"])
    assert len(theirs) == len(ours) == 4
    for rank, step, computing, comm, free in theirs:
        mine = ours[(str(rank), str(step))]
        assert computing == pytest.approx(float(mine["Computing"]), rel=0.01)
        assert comm == pytest.approx(float(mine["Communication(Not Overlapped)"]), rel=0.01)
        assert free == pytest.approx(float(mine["Free"]), rel=0.01, abs=1.0)


@pytest.fixture(scope="module")
def recipes(two: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("recipes")
    for m in RECIPES:
        analyze(["cluster", "-d", str(two["db"]), "-m", m, "-o", str(out / m)], out)
    return {m: out / m for m in RECIPES}


def _kernels(tree: Path) -> list[dict[str, str]]:
    return [r for d in rank_dirs(tree) for r in read_csv(d / OUT / "kernel_details.csv")[1]]


def test_hccl_sum_counts_our_collectives(two: dict[str, Path], recipes: dict[str, Path]) -> None:
    with cluster_db(recipes["hccl_sum"]) as con:
        theirs = dict(con.execute("SELECT OpType, Count FROM HcclAllRankStats").fetchall())
        total = con.execute("SELECT sum(SumNs) FROM HcclAllRankStats").fetchone()[0]
    comm = [r for r in _kernels(two["text"]) if r["Accelerator Core"] == "COMMUNICATION"]
    assert len(comm) % 4 == 0 and theirs == {"hcom_allReduce_": len(comm)}  # 4 parameters per step
    assert total / 1000 == pytest.approx(sum(float(r["Duration(us)"]) for r in comm), rel=0.01)


def test_compute_op_sum_matches_kernel_details(two: dict[str, Path], recipes: dict[str, Path]) -> None:
    with cluster_db(recipes["compute_op_sum"]) as con:
        rows = con.execute("SELECT OpType, TaskType, Count, SumNs FROM ComputeOpAllRankStats").fetchall()
    # memory copies are runtime tasks (no COMPUTE_TASK_INFO row, as in torch_npu's dbs)
    ours = [r for r in _kernels(two["text"]) if r["Accelerator Core"] not in ("COMMUNICATION", "MEMCPY_ASYNC")]
    assert sum(r[2] for r in rows) == len(ours)
    assert sum(r[3] for r in rows) / 1000 == pytest.approx(sum(float(r["Duration(us)"]) for r in ours), rel=0.01)
    types = {(r[0], r[1]) for r in rows}
    assert ("Conv2D", "CPU") in types and ("MatMul", "CPU") in types  # the executor (decision 1)
    assert {t for _o, t in types} == {"CPU"}


def test_cann_api_sum_matches_api_statistic(two: dict[str, Path], recipes: dict[str, Path]) -> None:
    with cluster_db(recipes["cann_api_sum"]) as con:
        total = con.execute("SELECT sum(totalTimeNs), sum(totalCount) FROM CannApiSum").fetchone()
    ours = [r for d in rank_dirs(two["text"]) for r in read_csv(d / OUT / "api_statistic.csv")[1]]
    assert ours and total[1] == sum(int(r["Count"]) for r in ours)
    assert total[0] / 1000 == pytest.approx(sum(float(r["Time(us)"]) for r in ours), rel=0.01)


def test_cluster_time_summary_and_communication_recipes(two: dict[str, Path], recipes: dict[str, Path]) -> None:
    ours = _step_rows(two["text"])
    with cluster_db(recipes["cluster_time_summary"]) as con:
        rows = con.execute("SELECT rank, step, computation, communicationNotOverlapComputation "
                           "FROM ClusterTimeSummary").fetchall()
    assert len(rows) == 4
    for rank, step, computing, comm in rows:
        assert computing == pytest.approx(float(ours[(str(rank), str(step))]["Computing"]), rel=0.01)
        assert comm == pytest.approx(float(ours[(str(rank), str(step))]["Communication(Not Overlapped)"]), rel=0.01)
    with cluster_db(recipes["communication_bottleneck"]) as con:
        assert con.execute("SELECT count(*) FROM CommunicationBottleneck").fetchone()[0] > 0
    with cluster_db(recipes["communication_time_sum"]) as con:
        assert con.execute("SELECT count(*) FROM ClusterCommunicationTime").fetchone()[0] > 0
    with cluster_db(recipes["communication_matrix_sum"]) as con:
        assert con.execute("SELECT count(*) FROM ClusterCommunicationMatrix").fetchone()[0] > 0


def _seconds(cell: str) -> float:
    m = re.match(r"([0-9.]+)s", cell)
    assert m, cell
    return float(m.group(1))


def _count(cell: str) -> int:
    m = re.search(r"\((\d+)\)", cell)
    assert m, cell
    return int(m.group(1))


@pytest.mark.parametrize("world", [1, 2])
def test_compare_text_with_db_of_the_same_run(one: dict[str, Path], two: dict[str, Path], world: int,
                                              tmp_path: Path) -> None:
    trees = one if world == 1 else two
    text_dir, db_dir = rank_dirs(trees["text"])[0], rank_dirs(trees["db"])[0]
    log = analyze(["compare", "-d", str(text_dir), "-bp", str(db_dir), "-o", str(tmp_path / "cmp")], tmp_path)
    base, new = compare_distribution(log)
    for col in ("Computing Time", "Free Time", "E2E Time(Not minimal profiling)"):
        assert _seconds(new[col]) == pytest.approx(_seconds(base[col]), rel=0.01, abs=0.0015), col
    comm = "Uncovered Communication Time(Wait Time)"
    assert _seconds(new[comm]) == pytest.approx(_seconds(base[comm]), rel=0.01, abs=0.0015)
    if world == 2:
        assert _seconds(new[comm]) > 0  # gloo counted as communication, not computing, on both sides
    for row in (base, new):  # matmul/conv/vector work is put in its category, not under Other
        for col in ("Vector Time(Num)", "Conv Time(Forward)(Num)", "Conv Time(Backward)(Num)"):
            count = re.search(r"\((\d+)\)", row[col])
            assert count and int(count.group(1)) > 0, (col, row[col])
    assert _count(new["Vector Time(Num)"]) == pytest.approx(_count(base["Vector Time(Num)"]), rel=0.01)


@pytest.mark.parametrize("mode", ["text", "db"])
def test_advisor_all_on_one_rank(one: dict[str, Path], mode: str, tmp_path: Path) -> None:
    (rank_dir,) = rank_dirs(one[mode])
    analyze(["advisor", "all", "-d", str(rank_dir), "-o", str(tmp_path / "adv")], tmp_path, ADVISOR)
    (html,) = (tmp_path / "adv").glob("mstt_advisor_*.html")
    text = html.read_text(encoding="utf-8")
    assert "Overall Summary" in text  # (its former "computation" section was the false dynamic-shape finding)
    assert "动态shape算子" not in text and "Operator Dynamic Shape Issues" not in text  # OP State is measured


def test_advisor_all_on_the_cluster(two: dict[str, Path], tmp_path: Path) -> None:
    analyze(["advisor", "all", "-d", str(two["text"]), "-o", str(tmp_path / "adv")], tmp_path, ADVISOR)
    assert list((tmp_path / "adv").glob("mstt_advisor_*.html"))


def test_no_openmsprof_footprint_in_what_users_see(one: dict[str, Path]) -> None:
    (text_dir,) = rank_dirs(one["text"])
    events = orjson.loads((text_dir / OUT / "trace_view.json").read_bytes())
    assert any(e.get("cat") == "python_function" for e in events)  # with_stack was on
    ours = [e for e in events if "openmsprof" in orjson.dumps(e).decode()]
    assert not ours, ours[:3]
    threads = {e["tid"] for e in events if e.get("cat") == "python_function"}
    assert 0 not in threads  # the profiler's own writer thread (Python tid 0) is gone
    _h, rows = read_csv(text_dir / OUT / "operator_details.csv")
    assert not [r for r in rows if "openmsprof" in r["Call Stack"]]
    (db_dir,) = rank_dirs(one["db"])
    con = sqlite3.connect(db_dir / OUT / "ascend_pytorch_profiler_0.db")
    try:
        stacks = con.execute("SELECT s.value FROM PYTORCH_CALLCHAINS c JOIN STRING_IDS s ON s.id = c.stack")
        assert not [v for (v,) in stacks if "openmsprof" in v]
    finally:
        con.close()


@pytest.fixture(scope="module")
def pyacl_job(ma_pyacl: Path) -> Path:
    return ma_pyacl


def test_advisor_all_reads_a_pyacl_job(pyacl_job: Path, tmp_path: Path) -> None:
    log = analyze(["advisor", "all", "-d", str(pyacl_job), "-o", str(tmp_path / "adv")], tmp_path, ADVISOR)
    # it reads the job (op_summary, timeline) and finds nothing to suggest: no false dynamic-shape
    # finding (OP State is measured) and no AI Core analysis of CPU work (Task Type CPU)
    assert "Start analysis OperatorBoundAnalyzer" in log and "Start analysis DynamicShapeAnalyzer" in log
    assert "no optimization suggestions" in log and not list((tmp_path / "adv").glob("mstt_advisor_*.html"))


def test_cluster_reads_a_pyacl_job(pyacl_job: Path, tmp_path: Path) -> None:
    root = tmp_path / "jobs"
    shutil.copytree(pyacl_job, root / pyacl_job.name)
    analyze(["cluster", "-d", str(root), "-m", "all", "-o", str(tmp_path / "c")], tmp_path, tolerated=NO_COMM)
    with cluster_db(tmp_path / "c") as con:
        ((computing, free),) = con.execute("SELECT computing, free FROM ClusterStepTraceTime").fetchall()
    db = next(pyacl_job.glob("msprof_*.db"))
    with sqlite3.connect(db) as con:
        starts = con.execute("SELECT startNs, endNs FROM TASK ORDER BY startNs").fetchall()
    busy, end = 0, -1  # union of the task intervals, µs
    for s, e in starts:
        busy += max(0, e - max(s, end)) if e > end else 0
        end = max(end, e)
    assert computing == pytest.approx(busy / 1000, rel=0.01)
    assert free >= 0


def test_overhead_figures_in_trace_view_and_db(one: dict[str, Path], tmp_path: Path) -> None:
    """profiler_info's ``openmsprof_overhead`` (filled by the torch facade) is shown next to the data."""
    from openmsprof.torch.profiler.analysis import analyse_dir

    (src,) = rank_dirs(one["text"])
    d = tmp_path / src.name
    shutil.copytree(src, d)
    for prof in d.glob("PROF_*"):  # the mstx job's recorder figures would be summed in
        shutil.rmtree(prof)
    info_path = next(d.glob("profiler_info_*.json"))
    info = orjson.loads(info_path.read_bytes())
    info["openmsprof_overhead"] = {"records_written": 321, "analysis_cpu_ns": 7_000_000}
    info["config"]["experimental_config"]["_export_type"] = ["text", "db"]
    info_path.write_bytes(orjson.dumps(info))
    out = analyse_dir(d, parallel=False)
    events = orjson.loads((out / "trace_view.json").read_bytes())
    (pid,) = [e["pid"] for e in events if e.get("name") == "process_name"
              and e["args"]["name"] == "Profiling Overhead"]
    counters = {e["name"]: e["args"][e["name"]] for e in events if e.get("ph") == "C" and e["pid"] == pid}
    assert counters == {"records_written": 321, "analysis_cpu_ns": 7_000_000}
    assert not [e for e in events if e["pid"] == pid and e.get("ph") == "X"]  # never counted as work
    con = sqlite3.connect(out / "ascend_pytorch_profiler_0.db")
    try:
        (value,) = con.execute("SELECT value FROM META_DATA WHERE name = 'openmsprof_overhead'").fetchone()
    finally:
        con.close()
    assert orjson.loads(value) == {"records_written": 321, "analysis_cpu_ns": 7_000_000}


def test_viewer_safety_of_trace_view_and_csvs(two: dict[str, Path]) -> None:
    for d in rank_dirs(two["text"]):
        events = orjson.loads((d / OUT / "trace_view.json").read_bytes())
        procs = {e["args"]["name"]: e["pid"] for e in events if e.get("name") == "process_name"}
        kernels = {(e["pid"], e["tid"], e["ts"]) for e in events
                   if e.get("ph") == "X" and e["pid"] == procs["Ascend Hardware"]}
        cann = [e for e in events if e.get("ph") == "X" and e["pid"] == procs["CANN"]]
        assert cann and {e["name"].split("@")[0] for e in cann} == {"Node", "Communication"}
        launches = {e["args"]["connection_id"] for e in cann if e["name"].startswith("Communication@c10d::")}
        comm_ops = [e for e in events if e.get("ph") == "X" and e["pid"] == procs["Communication"]]
        assert comm_ops and all(e["args"]["connection_id"] in launches for e in comm_ops)
        starts = [e for e in events if e.get("ph") == "s"]
        ends = [e for e in events if e.get("ph") == "f"]
        for e in starts + ends:  # strings (as torch_npu writes them) or integers JavaScript keeps exact
            assert isinstance(e["id"], str) or (isinstance(e["id"], int) and abs(e["id"]) < 2**53), e
        keys = [(e["cat"], e["id"]) for e in starts]
        assert len(keys) == len(set(keys)) and sorted(keys) == sorted((e["cat"], e["id"]) for e in ends)
        h2d = [e for e in ends if e["cat"] == "HostToDevice"]
        assert len(h2d) == len(kernels) and all((e["pid"], e["tid"], e["ts"]) in kernels for e in h2d)
        _h, api = read_csv(d / OUT / "api_statistic.csv")
        assert {r["Level"] for r in api} == {"Node", "Communication"}
        for csv_path in (d / OUT).glob("*.csv"):
            _header, rows = read_csv(csv_path)
            for r in rows:
                for col, v in r.items():
                    if csv_path.name == "kernel_details.csv" and col == "Start Time(us)":
                        assert v.endswith("\t")  # the Ascend Excel guard (docs/formats.md §1), stripped by readers
                        v = v[:-1]
                    assert v == v.strip(), (csv_path.name, col, v)
