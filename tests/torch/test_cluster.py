"""Two-process torch.distributed (gloo, loopback) → two rank dirs, read by msprof-analyze
``cluster`` and ``compare`` (its exit code is always 0: check files and ``[ERROR]`` lines); the
gloo collectives become communication.json / communication_matrix.json and, re-analysed with
export_type=db, the analysis.db CommAnalyzer* tables."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from tests.collector.conftest import free_port
from tests.torch.conftest import rank_dirs, read_csv

REPO = Path(__file__).resolve().parents[2]
MSPROF_ANALYZE = shutil.which("msprof-analyze") or str(Path(sys.executable).with_name("msprof-analyze"))
pytestmark = pytest.mark.skipif(not Path(MSPROF_ANALYZE).exists(), reason="msprof-analyze not installed")

WORKER = textwrap.dedent("""
    import sys, torch, torch.distributed as dist
    sys.path.insert(0, {repo!r})
    from tests.torch.conftest import Trainer
    import openmsprof.torch.profiler as tp
    dist.init_process_group("gloo")
    t = Trainer("mlp")
    # data_simplification=False keeps FRAMEWORK/: one test re-analyses a copy with export_type db
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, data_simplification=False)
    with tp.profile(schedule=tp.schedule(wait=1, warmup=1, active=2, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler("cluster"), record_shapes=True,
                    experimental_config=exp) as prof:
        for _ in range(5):
            t.step()
            for p in t.model.parameters():
                dist.all_reduce(p.data)
            if dist.get_rank() == 0:
                dist.send(torch.ones(64), 1)
            else:
                dist.recv(torch.zeros(64), 0)
            prof.step()
    dist.barrier()  # both ranks done before gloo tears down (avoids its abort at exit)
    dist.destroy_process_group()
    # torch 2.x gloo can still abort in a C++ static destructor at interpreter exit
    # ("terminate called without an active exception"); everything is written by now, so
    # leave without running those destructors.
    sys.stdout.flush(); sys.stderr.flush()
    import os; os._exit(0)
""")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dist")
    port = str(free_port())
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER.format(repo=str(REPO))], cwd=root, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for p in procs:
        _out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-2000:]
    return root / "cluster"


# all_reduce of the MLP's parameters (Linear(32, 64), Linear(64, 10): weights then biases), fp32
PARAM_BYTES = [64 * 32 * 4, 64 * 4, 10 * 64 * 4, 10 * 4]
GROUP_HASH = str((48 << 32) | 48)  # HCCL double hash of the default group id "0"


def _run(args: list[str], cwd: Path) -> str:
    res = subprocess.run([MSPROF_ANALYZE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    text = res.stdout + res.stderr
    errors = [ln for ln in text.splitlines() if "[ERROR]" in ln]
    assert not errors, errors
    return text


def test_two_ranks_named_and_analysed(cluster: Path) -> None:
    dirs = rank_dirs(cluster)
    assert len(dirs) == 2
    ranks = sorted(next(p.name for p in d.glob("profiler_info_*.json")) for d in dirs)
    assert ranks == ["profiler_info_0.json", "profiler_info_1.json"]
    for d in dirs:
        _h, rows = read_csv(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
        assert [r["Step"] for r in rows] == ["2", "3"]
        assert all(float(r["Communication"]) > 0 for r in rows)  # gloo all_reduce work


def test_msprof_analyze_cluster_matches_ours(cluster: Path, tmp_path: Path) -> None:
    _run(["cluster", "-d", str(cluster), "-o", str(tmp_path / "c")], tmp_path)
    out = tmp_path / "c" / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    with open(out, newline="") as f:
        theirs = list(csv.DictReader(f))
    ours = {}
    for d in rank_dirs(cluster):
        rank = re.search(r"profiler_info_(\d+)", next(p.name for p in d.glob("profiler_info_*.json")))
        assert rank
        for r in read_csv(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")[1]:
            ours[(rank.group(1), r["Step"])] = r
    rank_rows = [r for r in theirs if r.get("Type") == "rank"]
    assert len(rank_rows) == 4
    for r in rank_rows:
        mine = ours[(r["Index"], r["Step"])]
        for col in ("Computing", "Communication(Not Overlapped)", "Free"):
            assert float(r[col]) == pytest.approx(float(mine[col]), abs=0.01), col


def _e2e_s(rank_dir: Path) -> float:
    events = orjson.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_bytes())
    pid = next(e["pid"] for e in events if e.get("name") == "process_name"
               and e["args"]["name"] == "Overlap Analysis")
    ov = [e for e in events if e.get("ph") == "X" and e["pid"] == pid and e["name"] != "Communication"]
    start = min(float(e["ts"]) for e in ov)
    end = max(float(e["ts"]) + e["dur"] for e in ov)
    return (end - start) / 1e6


def test_msprof_analyze_compare_matches_ours(cluster: Path, tmp_path: Path) -> None:
    base, new = rank_dirs(cluster)
    text = _run(["compare", "-d", str(new), "-bp", str(base), "-o", str(tmp_path / "cmp")], tmp_path)
    assert list((tmp_path / "cmp").glob("performance_comparison_result_*.xlsx"))
    e2e = [float(m) for m in re.findall(r"\|\s*([0-9.]+)s\s*\|\s*$", text, re.M)]
    assert len(e2e) == 2
    assert e2e[0] == pytest.approx(_e2e_s(new), abs=0.0015) or e2e[0] == pytest.approx(_e2e_s(base), abs=0.0015)
    assert sorted(e2e) == pytest.approx(sorted([_e2e_s(new), _e2e_s(base)]), abs=0.0015)


def _rank_of(d: Path) -> int:
    m = re.search(r"profiler_info_(\d+)", next(p.name for p in d.glob("profiler_info_*.json")))
    assert m
    return int(m.group(1))


def _numbers_only(obj: object) -> bool:
    if isinstance(obj, dict):
        return all(_numbers_only(v) for v in obj.values())
    if isinstance(obj, list):
        return all(isinstance(v, (int, float)) for v in obj)
    return isinstance(obj, (int, float)) and not isinstance(obj, bool)


def test_communication_json_from_gloo_collectives(cluster: Path) -> None:
    for d in rank_dirs(cluster):
        rank = _rank_of(d)
        doc = orjson.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_bytes())
        assert sorted(doc) == ["step2", "step3"]
        for step in doc.values():
            assert set(step) == {"collective", "p2p"}
            coll, p2p = step["collective"], step["p2p"]
            assert "Total Op Info" in coll and "Total Op Info" in p2p
            ops = {k: v for k, v in coll.items() if k != "Total Op Info"}
            assert len(ops) == 4 and all(k.startswith("hcom_allReduce__") and k.endswith("@" + GROUP_HASH)
                                         for k in ops)
            sizes = [round(v["Communication Bandwidth Info"]["LOCAL"]["Transit Size(MB)"] * 1024 * 1024)
                     for v in sorted(ops.values(), key=lambda v: v["Communication Time Info"]["Start Timestamp(us)"])]
            assert sizes == PARAM_BYTES
            (p2p_name,) = [k for k in p2p if k != "Total Op Info"]
            assert p2p_name.startswith("hcom_send__" if rank == 0 else "hcom_receive__")
            for info in [*coll.values(), *p2p.values()]:
                assert _numbers_only(info)
                t = info["Communication Time Info"]
                assert t["Elapse Time(ms)"] > 0 and t["Transit Time(ms)"] <= t["Elapse Time(ms)"]
            total = coll["Total Op Info"]
            assert total["Communication Time Info"]["Elapse Time(ms)"] == pytest.approx(
                sum(v["Communication Time Info"]["Elapse Time(ms)"] for v in ops.values()))
            assert total["Communication Bandwidth Info"]["LOCAL"]["Transit Size(MB)"] * 1024 * 1024 == \
                pytest.approx(sum(PARAM_BYTES))


def test_communication_matrix_has_self_links(cluster: Path) -> None:
    for d in rank_dirs(cluster):
        rank = _rank_of(d)
        doc = orjson.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_bytes())
        assert sorted(doc) == ["step2", "step3"]
        coll = doc["step2"]["collective"]
        assert {f"allreduce-{k}@{GROUP_HASH}" for k in ("top1", "middle", "bottom1", "bottom2", "bottom3",
                                                          "total")} == set(coll)
        for links in coll.values():
            assert list(links) == [f"{rank}-{rank}"]
            (link,) = links.values()
            assert link["Transport Type"] == "LOCAL"
            assert set(link) == {"Transport Type", "Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)", "Op Name"}
        total = coll[f"allreduce-total@{GROUP_HASH}"][f"{rank}-{rank}"]
        assert total["Transit Size(MB)"] * 1024 * 1024 == pytest.approx(sum(PARAM_BYTES))


def test_trace_view_communication_process(cluster: Path) -> None:
    for d in rank_dirs(cluster):
        out = d / "ASCEND_PROFILER_OUTPUT"
        events = orjson.loads((out / "trace_view.json").read_bytes())
        (pid,) = [e["pid"] for e in events if e.get("name") == "process_name" and e["args"]["name"] == "Communication"]
        threads = [e["args"]["name"] for e in events if e.get("name") == "thread_name" and e["pid"] == pid]
        assert threads == ["Group 0 Communication"]
        ops = [e for e in events if e["pid"] == pid and e["ph"] == "X"]
        assert all(e["name"].split("_")[1] in ("allReduce", "send", "receive", "barrier") for e in ops)
        comm = orjson.loads((out / "communication.json").read_bytes())
        names = {k.split("@")[0] for s in comm.values() for kind in s.values() for k in kind if k != "Total Op Info"}
        assert names <= {e["name"] for e in ops}


def test_msprof_analyze_cluster_communication(cluster: Path, tmp_path: Path) -> None:
    _run(["cluster", "-d", str(cluster), "-o", str(tmp_path / "c")], tmp_path)
    out = tmp_path / "c" / "cluster_analysis_output"
    comm = orjson.loads((out / "cluster_communication.json").read_bytes())
    steps = comm["(0, 1)"]
    assert sorted(steps) == ["step2", "step3"]
    for ops in steps.values():
        reduces = [k for k in ops if k.startswith("hcom_allReduce__")]
        assert len(reduces) == 4
        assert all(set(ops[k]) == {"0", "1"} for k in reduces)  # each collective seen by both ranks
        assert f"Total Op Info@{GROUP_HASH}" in ops
    matrix = orjson.loads((out / "cluster_communication_matrix.json").read_bytes())
    links = matrix["(0, 1)"]["step2"][f"allreduce-total@{GROUP_HASH}"]
    assert set(links) == {"0-0", "1-1"}
    group = orjson.loads((out / "communication_group.json").read_bytes())
    assert group["collective"] == [[0, 1]]
    assert any(g["group_id"] == "0" and g["pg_name"] == "default_pg" for g in group["comm_group_parallel_info"])


def test_db_export_comm_analyzer_tables(cluster: Path, tmp_path: Path) -> None:
    import sqlite3

    from openmsprof.torch.profiler.analysis import analyse_dir

    src = rank_dirs(cluster)[0]
    d = tmp_path / src.name
    shutil.copytree(src, d)
    info_path = next(d.glob("profiler_info_*.json"))
    info = orjson.loads(info_path.read_bytes())
    info["config"]["experimental_config"]["_export_type"] = ["db"]
    info_path.write_bytes(orjson.dumps(info))
    out = analyse_dir(d, parallel=False)
    comm = orjson.loads((src / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_bytes())
    want = sorted((k.split("@")[0], step, kind) for step, s in comm.items() for kind, ops in s.items()
                  for k in ops if k != "Total Op Info")
    con = sqlite3.connect(out / "analysis.db")
    try:
        times = con.execute("SELECT hccl_op_name, step, type, group_name, elapse_time FROM CommAnalyzerTime").fetchall()
        bands = con.execute("SELECT transport_type, transit_size FROM CommAnalyzerBandwidth").fetchall()
        links = con.execute("SELECT DISTINCT src_rank, dst_rank, transport_type FROM CommAnalyzerMatrix").fetchall()
    finally:
        con.close()
    assert sorted(t[:3] for t in times) == want
    assert {t[3] for t in times} == {GROUP_HASH} and all(t[4] > 0 for t in times)
    assert len(bands) == len(times) and {b[0] for b in bands} == {"LOCAL"}
    assert links == [("0", "0", "LOCAL")]
