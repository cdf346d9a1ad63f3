"""The columnar, streamed analysis: block-wise reading of Kineto's layout and its whole-file
fallback give the same bytes, the forked trace_view half matches the serial one, nesting rules,
and the µs texts equal orjson's."""

from __future__ import annotations

import pickle
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

import openmsprof.torch.profiler as tp
from openmsprof.config.errors import RawDataError
from openmsprof.export.ascend_pt import split_read, text, trace_split
from openmsprof.export.ascend_pt.columns import Columns
from openmsprof.export.ascend_pt.rank_analyse import export
from openmsprof.sources import kineto_trace
from tests.torch.conftest import Trainer, rank_dirs, read_csv

OUT = "ASCEND_PROFILER_OUTPUT"
TRACE = Path("FRAMEWORK") / "torch.kineto_trace.json"


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real window (shapes, stacks, Level1, text+db), not yet analysed."""
    root = tmp_path_factory.mktemp("cols")
    t = Trainer("mlp")
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, data_simplification=False,
                                 export_type=[tp.ExportType.Text, tp.ExportType.Db])
    with tp.profile(schedule=tp.schedule(wait=0, active=2, repeat=1), record_shapes=True, with_stack=True,
                    on_trace_ready=tp.tensorboard_trace_handler(root / "r", analyse_flag=False),
                    experimental_config=exp) as prof:
        for _ in range(3):
            t.step()
            prof.step()
    (rd,) = rank_dirs(root / "r")
    return rd


def _outputs(rd: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((rd / OUT).iterdir()) if p.suffix in (".json", ".csv")}


def _copy(rd: Path, dst: Path) -> Path:
    shutil.copytree(rd, dst / rd.name)
    return dst / rd.name


def test_block_reading_matches_whole_file_fallback(rank_dir: Path, tmp_path: Path) -> None:
    a = _copy(rank_dir, tmp_path / "a")
    export(a, parallel=False)
    # small blocks: many cuts; compact re-serialisation: the whole-document fallback
    chunks = list(kineto_trace.TraceReader(a / TRACE, block=4096).chunks())
    assert len(chunks) > 10
    whole = kineto_trace.TraceReader(a / TRACE).whole()
    assert [e for c in chunks for e in c] == whole
    b = _copy(rank_dir, tmp_path / "b")
    (b / TRACE).write_bytes(orjson.dumps(orjson.loads((b / TRACE).read_bytes())))
    with pytest.raises(kineto_trace.Restart):
        list(kineto_trace.TraceReader(b / TRACE).chunks())
    export(b, parallel=False)
    assert _outputs(a) == _outputs(b)
    assert len(_outputs(a)) == 6


def test_truncated_trace_is_a_one_line_error(rank_dir: Path, tmp_path: Path) -> None:
    c = _copy(rank_dir, tmp_path / "c")
    data = (c / TRACE).read_bytes()
    (c / TRACE).write_bytes(data[: len(data) // 2])
    with pytest.raises(RawDataError, match=r"torch\.kineto_trace\.json.*not valid JSON"):
        export(c)


def test_forked_half_gives_the_same_trace_view(rank_dir: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    serial = _copy(rank_dir, tmp_path / "s")
    export(serial, parallel=False)
    monkeypatch.setattr(trace_split, "MIN_OPS", 0)
    forked = _copy(rank_dir, tmp_path / "f")
    export(forked, parallel=True)
    assert (forked / OUT / "trace_view.json").read_bytes() == (serial / OUT / "trace_view.json").read_bytes()
    assert not [p.name for p in (forked / OUT).iterdir() if p.name.startswith(".")]
    events = orjson.loads((forked / OUT / "trace_view.json").read_bytes())
    kernels = [e for e in events if e.get("args", {}).get("Executor") == "CPU"]
    _h, rows = read_csv(forked / OUT / "kernel_details.csv")
    assert len(kernels) == len(rows) > 0


def _serial_state(path: Path) -> tuple[object, ...]:
    cols = Columns()
    for chunk in kineto_trace.TraceReader(path).chunks():
        cols.add(chunk)
    return cols.state()


def _two_process_read(trace: Path, out: Path) -> tuple[tuple[object, ...], int | None]:
    """``split_read.read`` in a fresh interpreter: the fork policy (export/fork_worker.py) refuses
    in a process where other threads run, as this test process's torch runs leave some."""
    code = (
        "import pickle, sys\n"
        "from pathlib import Path\n"
        "from openmsprof.export.ascend_pt import split_read\n"
        "split_read.MIN_BYTES = 0\n"
        "done = split_read.read(Path(sys.argv[1]))\n"
        "assert done is not None, 'the two-process read fell back'\n"
        "Path(sys.argv[2]).write_bytes(pickle.dumps((done[0].state(), done[1])))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(trace), str(out)], check=True, timeout=600)
    state, base = pickle.loads(out.read_bytes())
    return state, base


def test_two_process_read_gives_the_serial_columns_and_outputs(rank_dir: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    serial = _copy(rank_dir, tmp_path / "s")
    export(serial, parallel=False)
    split = kineto_trace.TraceReader(serial / TRACE).split_point()
    assert split is not None and (serial / TRACE).read_bytes()[split:split + 9] == b"\n  },\n  {"
    state, base = _two_process_read(serial / TRACE, tmp_path / "state.pickle")
    want = _serial_state(serial / TRACE)
    reader = kineto_trace.TraceReader(serial / TRACE)
    list(reader.chunks())
    assert base == reader.base_ns
    assert state[:6] == want[:6]  # pid, vocabularies in first-seen order
    for mine, theirs in zip(state[7:], want[7:], strict=True):
        assert [np.concatenate(c).tolist() if c else [] for c in mine] == \
            [np.concatenate(c).tolist() if c else [] for c in theirs]
    forked = _copy(rank_dir, tmp_path / "f")
    export(forked, parallel=True)
    assert _outputs(forked) == _outputs(serial)
    assert not [p.name for p in (forked / OUT).iterdir() if p.name.startswith(".")]


def test_two_process_read_falls_back_on_an_odd_layout(rank_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(split_read, "MIN_BYTES", 0)
    c = _copy(rank_dir, tmp_path / "c")
    trace = c / TRACE
    trace.write_bytes(orjson.dumps(orjson.loads(trace.read_bytes())))  # compact: no separator
    assert split_read.read(trace) is None
    data = _copy(rank_dir, tmp_path / "d") / TRACE
    raw = data.read_bytes()
    cut = raw.rfind(b"\n  ]")
    data.write_bytes(raw[:cut] + b",\n  {\"ph\": \"X\", \"cat\": \"cpu_op\"\n  }" + raw[cut:])  # bad event in the second half
    assert split_read.read(data) is None
    with pytest.raises(RawDataError, match="malformed trace event"):
        export(data.parent.parent, parallel=True)


def _kineto_file(path: Path, events: list[dict[str, object]]) -> None:
    """Kineto's own layout: 2-space event blocks inside ``traceEvents``."""
    body = b",\n".join(b"\n".join(b"  " + ln for ln in orjson.dumps(e, option=orjson.OPT_INDENT_2).split(b"\n"))
                       for e in events)
    path.write_bytes(b'{\n  "schemaVersion": 1,\n  "baseTimeNanoseconds": 1000000000000,\n  "traceEvents": [\n'
                     + body + b'\n  ],\n  "traceName": "x"\n}')


def test_nesting_rules_pick_the_computing_leaves(rank_dir: Path, tmp_path: Path) -> None:
    rd = _copy(rank_dir, tmp_path / "n")
    shutil.rmtree(rd / OUT, ignore_errors=True)

    def op(name: str, ts: float, dur: float, tid: int = 1) -> dict[str, object]:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 5, "tid": tid, "ts": ts, "dur": dur, "args": {}}

    _kineto_file(rd / TRACE, [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 5, "tid": 1, "ts": 0.0, "dur": 100.0,
         "args": {}},
        op("aten::linear", 1.0, 50.0), op("aten::addmm", 6.0, 40.0),
        op("aten::t", 2.0, 3.0),                                   # view op beside real work: its own kernel
        op("aten::empty", 7.0, 1.0),                               # allocation inside a computing op: part of it
        op("aten::relu", 60.0, 10.0), op("aten::empty", 70.0, 2.0),  # top-level allocation: a kernel
        op("aten::mul", 5.0, 4.0, tid=2),                          # other thread: never nested in tid 1
    ])
    export(rd, parallel=False)
    _h, rows = read_csv(rd / OUT / "kernel_details.csv")
    assert [r["Name"] for r in rows] == ["aten::t", "aten::mul", "aten::addmm", "aten::relu", "aten::empty"]
    assert [r["Step Id"] for r in rows] == ["7"] * 5
    _h, ops = read_csv(rd / OUT / "operator_details.csv")
    by = {(r["Name"], r["Host Total Duration(us)"]): r for r in ops}
    linear = by[("aten::linear", "50.000")]
    assert linear["Host Self Duration(us)"] == "7.000"           # 50 − (3 + 40)
    assert linear["Device Total Duration(us)"] == "43.000"       # kernels addmm + t in its subtree
    assert by[("aten::empty", "1.000")]["Device Total Duration(us)"] == "0.000"


def test_duration_text_equals_orjson_float() -> None:
    rnd = random.Random(5)
    ns = np.asarray([0, 1, 10, 100, 999, 1000, 1001, 123456789, 10**12 - 1]
                    + [rnd.randrange(0, 10**12) for _ in range(5000)], np.int64)
    piece, cols = text.dur_columns(ns)
    assert piece == b"%d.%b"
    assert text.fill(piece, cols) == [orjson.dumps(v / 1000) for v in ns.tolist()]
    big = np.asarray([-5, 10**13 + 7], np.int64)
    piece, cols = text.dur_columns(big)
    assert text.fill(piece, cols) == [orjson.dumps(v / 1000) for v in big.tolist()]
