"""PyTorch's own flight recorder dumps (``_dump_fr_trace`` pickle, ``_dump_fr_trace_json``) as
cluster reads them: real dumps from a real gloo group; a pickle naming a class is refused."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from openmsprof.cluster.flight_ranks import read_torch_fr
from tests.flight.conftest import run_code

pytest.importorskip("torch.distributed")

DUMP = """
    import os, sys
    os.environ["TORCH_FR_BUFFER_SIZE"] = "50"
    import torch, torch.distributed as dist
    import torch._C._distributed_c10d as c10d
    dist.init_process_group("gloo", rank=0, world_size=1, init_method="tcp://127.0.0.1:" + sys.argv[2])
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    out = sys.argv[1]
    open(os.path.join(out, "nccl_trace_rank_0"), "wb").write(c10d._dump_fr_trace(True, True, False))
    open(os.path.join(out, "gloo_trace_rank_0.json"), "wb").write(c10d._dump_fr_trace_json(True, False))
    dist.destroy_process_group()
"""


def test_real_pickle_and_json_dumps_are_read(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_code(DUMP, tmp_path, str(tmp_path), str(port))
    assert res.returncode == 0, res.stderr
    for name in ("nccl_trace_rank_0", "gloo_trace_rank_0.json"):
        doc = read_torch_fr(tmp_path / name)
        assert doc is not None, name
        seqs = [e["collective_seq_id"] for e in doc["entries"]]
        assert seqs == [1, 2, 3] and all(e["profiling_name"] == "gloo:all_reduce" for e in doc["entries"])


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("executed",))


def test_pickle_naming_a_class_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nccl_trace_rank_1"
    path.write_bytes(pickle.dumps({"entries": [], "x": _Evil()}))
    assert read_torch_fr(path) is None
    assert "executed" not in capsys.readouterr().out
