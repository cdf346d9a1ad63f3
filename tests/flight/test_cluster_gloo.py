"""Two real gloo ranks; rank 1 stalls at step 3 while rank 0 waits in all_reduce: ``openmsprof
cluster`` names rank 1, its last completed step and collective, and the frame it waits in."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.flight.conftest import PROGS, child_env, cli, info, jobs

pytest.importorskip("torch.distributed")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_rank_gloo_stall_is_diagnosed_by_cluster(out: Path) -> None:
    res = subprocess.run([sys.executable, str(PROGS / "gloo_stall.py"), str(out), str(_port())],
                         env=child_env(), capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr
    dumps = jobs(out)
    assert sorted(info(j)["rank_id"] for j in dumps) == [0, 1]
    assert all(info(j)["flight"]["trigger"]["kind"] == "hang" for j in dumps)
    assert all((j / "host" / "torch_fr.json").is_file() for j in dumps)  # PyTorch's FR, joined
    res = cli("cluster", "-d", str(out))
    assert res.returncode == 0, res.stderr
    head = res.stdout.splitlines()[0]
    assert head.startswith("flight: rank 1 stalled first: last completed step 2")
    assert "all_reduce" in head and "waits in stall (gloo_stall.py:" in head
    rank0 = next(line for line in res.stdout.splitlines() if line.strip().startswith("rank 0:"))
    assert "waits in all_reduce from train_step" in rank0 and "gloo:all_reduce" in rank0
    diag = orjson.loads((out / "cluster_analysis_output" / "flight_diagnosis.json").read_bytes())
    assert diag["stalled_first"]["rank"] == 1
    r0 = next(r for r in diag["ranks"] if r["rank"] == 0)
    assert r0["torch_fr"]["pending"][0][0] == r0["torch_fr"]["last_completed_seq"] + 1
    # PyTorch's dumps as TORCH_NCCL_DEBUG_INFO_TEMP_FILE writes them (*trace_rank_N), beside ours
    traces = out / "traces"
    traces.mkdir()
    for j in dumps:
        (j / "host" / "torch_fr.json").rename(traces / f"nccl_trace_rank_{info(j)['rank_id']}")
    again = cli("cluster", "-d", str(out))
    assert again.returncode == 0, again.stderr
    rank0 = next(line for line in again.stdout.splitlines() if line.strip().startswith("rank 0:"))
    assert "torch FR pending [[" in rank0 and "gloo:all_reduce" in rank0
