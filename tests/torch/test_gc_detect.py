"""``gc_detect_threshold`` does what it says (torch_npu's GC detection): the Python garbage
collections of a recording window that last at least the threshold are ``GC`` events of a
``Python GC`` process in trace_view.json, inside the window's time range; collections shorter
than the threshold are not."""

from __future__ import annotations

import gc
import itertools
from pathlib import Path

import orjson

import openmsprof.torch.profiler as tp
from tests.torch.conftest import Trainer, rank_dirs

OUT = "ASCEND_PROFILER_OUTPUT"


def _run(trainer: Trainer, root: Path, threshold: float) -> tuple[list[dict], dict]:
    exp = tp._ExperimentalConfig(gc_detect_threshold=threshold, data_simplification=False)
    with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=3, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler(str(root)), experimental_config=exp) as prof:
        for _ in range(3):
            trainer.step()
            junk = [[i] for i in range(200_000)]  # many tracked objects: a full collection takes ms
            for a, b in itertools.pairwise(junk):
                a.append(b)
            del junk
            gc.collect()
            prof.step()
    (rd,) = rank_dirs(root)
    events: list[dict] = orjson.loads((rd / OUT / "trace_view.json").read_bytes())
    return events, orjson.loads((rd / "profiler_info_0.json").read_bytes())


def test_long_collections_are_gc_events_in_trace_view(trainer: Trainer, tmp_path: Path) -> None:
    events, info = _run(trainer, tmp_path / "p", threshold=1.0)
    (pid,) = [e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
              and e["args"]["name"] == "Python GC"]
    gcs = [e for e in events if e.get("pid") == pid and e.get("ph") == "X"]
    assert len(gcs) >= 3 and all(e["name"] == "GC" and float(e["dur"]) >= 1000.0 for e in gcs)
    assert {e["args"]["generation"] for e in gcs} >= {2}  # the explicit full collections
    # inside the window, on the trace's clock: after its first operator, before its end
    first_op = min(float(e["ts"]) for e in events if e.get("ph") == "X" and e.get("pid") != pid)
    end_us = int(info["end_info"]["collectionTimeEnd"]) / 1000
    assert all(first_op - 1e6 <= float(e["ts"]) and float(e["ts"]) + float(e["dur"]) <= end_us for e in gcs)


def test_collections_shorter_than_the_threshold_are_not_recorded(trainer: Trainer, tmp_path: Path) -> None:
    events, _info = _run(trainer, tmp_path / "p", threshold=60_000.0)
    assert not [e for e in events if e.get("name") == "process_name" and e["args"].get("name") == "Python GC"]
    assert not [e for e in events if e.get("name") == "GC"]
