"""Two-process torch.distributed (gloo, loopback) → two rank dirs, read by msprof-analyze
``cluster`` and ``compare`` (its exit code is always 0: check files and ``[ERROR]`` lines)."""

from __future__ import annotations

import csv
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

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
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1)
    with tp.profile(schedule=tp.schedule(wait=1, warmup=1, active=2, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler("cluster"), record_shapes=True,
                    experimental_config=exp) as prof:
        for _ in range(5):
            t.step()
            for p in t.model.parameters():
                dist.all_reduce(p.data)
            prof.step()
    dist.barrier()  # both ranks done before gloo tears down (avoids its abort at exit)
    dist.destroy_process_group()
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dist")
    port = str(_free_port())
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER.format(repo=str(REPO))], cwd=root, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for p in procs:
        _out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-2000:]
    return root / "cluster"


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
