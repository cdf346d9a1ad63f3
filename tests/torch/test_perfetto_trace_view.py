"""Perfetto's trace_processor_shell v56 (the real checker) reads our torch ``trace_view.json`` with
no error in ``stats``: every X event becomes a slice (none dropped), every torch_to_npu and
HostToDevice flow is one flow (no ``flow_duplicate_id``), and the Kineto trace it came from is
checked the same way as a baseline (docs/formats.md, "Perfetto reads the Ascend spelling")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.refclients import perfetto_errors, query, trace_processor
from tests.torch.conftest import Trainer, rank_dirs

tp = pytest.importorskip("openmsprof.torch.profiler")


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace_processor()  # skip before profiling when the checker is absent
    root = tmp_path_factory.mktemp("pf")
    trainer = Trainer("cnn")
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, export_type=["text"])
    with tp.profile(schedule=tp.schedule(wait=1, warmup=1, active=2, repeat=1), profile_memory=True,
                    record_shapes=True, with_stack=True, on_trace_ready=tp.tensorboard_trace_handler(str(root)),
                    experimental_config=exp) as prof:
        for _ in range(5):
            trainer.step()
            prof.step()
    (rank,) = rank_dirs(root)
    return rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"


def test_trace_view_has_no_perfetto_error(trace: Path) -> None:
    assert perfetto_errors(trace) == {}


def test_every_event_is_a_slice_and_every_flow_a_flow(trace: Path) -> None:
    events = orjson.loads(trace.read_bytes())
    ph = Counter(e["ph"] for e in events)
    names = Counter(e["name"] for e in events if e["ph"] == "X")
    got = {r["name"]: int(r["n"]) for r in query(trace, "select name, count(*) n from slice group by name")}
    assert got == dict(names) and ph["X"] > 500
    flows = int(query(trace, "select count(*) n from flow")[0]["n"])
    assert flows == ph["s"] == ph["f"] > 0
    ids = [e["id"] for e in events if e["ph"] == "s" and e["name"] == "torch_to_npu"]
    assert len(ids) == len(set(ids)) and all(int(i) < 2**53 for i in ids)
    # msprof-analyze's advisor keys flows by id alone: torch_to_npu and HostToDevice ids apart
    h2d = {e["id"] for e in events if e["ph"] == "s" and e["name"].startswith("HostToDevice")}
    assert h2d and not h2d & set(ids)
    # every cpu_op keeps its thread: only Python functions move to an overflow lane
    tids = {e["tid"] for e in events if e["ph"] == "X" and e.get("cat") == "cpu_op"}
    lanes = {e["tid"] for e in events if e["ph"] == "X" and e.get("cat") == "python_function"} - tids
    assert all(t >= 1 << 22 for t in lanes)
