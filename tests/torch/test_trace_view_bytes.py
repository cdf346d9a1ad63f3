"""trace_view.json's events are formatted by ``%`` templates over columns (export/ascend_pt/
trace_view.py): on a real torch window whose ranges have awkward names (``%`` signs, brackets,
empty, long), with Python functions, a range ending inside another and the CANN level, the file
is byte for byte ``orjson.dumps`` of the events it holds, and every name comes back as given."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.torch.conftest import Trainer, rank_dirs

tp = pytest.importorskip("openmsprof.torch.profiler")
torch = pytest.importorskip("torch")

#: Kineto writes range names unescaped (a quote or a control character makes its own trace invalid
#: JSON, a backslash becomes ``/``; a non-ASCII range was absent from it here), so these are the
#: awkward names a real trace can hold
NAMES = ["", "%d %b %% %s %(x)s", "{}", "[1, 2]", "a" * 300, "ProfilerStep", "sp ace"]


def _window(root: Path) -> Path:
    trainer = Trainer("mlp")
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, export_type=["text"],
                                 data_simplification=False)

    with tp.profile(schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1), record_shapes=True,
                    with_stack=True, on_trace_ready=tp.tensorboard_trace_handler(str(root)),
                    experimental_config=exp) as prof:
        for name in NAMES:
            with torch.profiler.record_function(name):
                trainer.step()
        outer = torch.profiler.record_function("outer")  # ends after the inner range started
        outer.__enter__()
        inner = torch.profiler.record_function("inner partial")
        inner.__enter__()
        torch.relu(torch.ones(4, 4))
        outer.__exit__(None, None, None)
        torch.relu(torch.ones(4, 4))
        inner.__exit__(None, None, None)
        prof.step()
    (rank,) = rank_dirs(root)
    return rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"


def test_trace_view_is_orjson_of_its_events(tmp_path: Path) -> None:
    raw = _window(tmp_path).read_bytes()
    events = orjson.loads(raw)
    assert raw == b"[" + b",".join(orjson.dumps(e) for e in events) + b"]"
    x = [e for e in events if e["ph"] == "X"]
    names = {e["name"] for e in x}
    assert set(NAMES) <= names, sorted(set(NAMES) - names)
    cats = {e.get("cat") for e in x}
    assert {"cpu_op", "python_function"} <= cats
    assert any("@" in e["name"] for e in x)  # the CANN process (Level1)
    assert {"outer", "inner partial"} <= names
    assert all(isinstance(e["ts"], str) for e in events if e["ph"] != "M")
