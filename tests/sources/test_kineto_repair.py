"""Kineto writes ``record_function`` names as given: a ``"`` in one makes torch's own trace invalid
JSON.  The reader repairs such ``"key": "value"`` lines (``kineto_trace._repair``), says so in one
line, and the window's views carry the name; a file broken otherwise still fails in one line."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest

import openmsprof.torch.profiler as tp
import torch
from openmsprof.config.errors import RawDataError
from openmsprof.sources.kineto_trace import TraceReader, _repair
from openmsprof.torch.profiler.analysis import analyse_dir
from tests.torch.conftest import read_csv, saved_window, trace

NAMES = ('we"ird', 'two "quoted" words')

_DOC = b"""{
  "schemaVersion": 1,
  "traceEvents": [
  {
    "ph": "X", "cat": "user_annotation",
    "name": "%s",
    "pid": 1, "tid": 1, "ts": 10.5, "dur": 2
  },
  {
    "ph": "X",
    "name": "plain",
    "pid": 1, "tid": 1, "ts": 20.0, "dur": 1
  }
  ]
}"""


def test_unescaped_quotes_are_repaired_and_counted() -> None:
    fixed, count = _repair(_DOC % b'a "b" c')
    assert count == 1
    events = orjson.loads(fixed)["traceEvents"]
    assert [e["name"] for e in events] == ['a "b" c', "plain"]
    assert _repair(_DOC % b"clean")[1] == 0  # valid lines are left as they are
    fixed, count = _repair(_DOC % b"tab\there")
    assert count == 1 and orjson.loads(fixed)["traceEvents"][0]["name"] == "tab\there"


def test_a_file_broken_otherwise_still_fails_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_bytes((_DOC % b'a "b"').replace(b'"pid": 1, "tid": 1, "ts": 20.0', b'"pid": 1 "tid": 1'))
    with pytest.raises(RawDataError) as err:
        TraceReader(bad).whole()
    assert "is not valid JSON" in str(err.value) and "\n" not in str(err.value)


def test_a_real_window_with_quoted_record_function_names(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "out"
    with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler(str(root), analyse_flag=False)) as prof:
        for name in NAMES:
            with torch.autograd.profiler.record_function(name):
                torch.ones(8) + 1
        prof.step()
    rd = saved_window(root)
    raw = (rd / "FRAMEWORK" / "torch.kineto_trace.json").read_bytes()
    with pytest.raises(orjson.JSONDecodeError):  # torch's own file, as Kineto wrote it
        orjson.loads(raw)
    with caplog.at_level(logging.WARNING, logger="openmsprof"):
        out = analyse_dir(rd, parallel=False)
    assert any("repaired 2 string(s)" in r.getMessage() for r in caplog.records)
    names = {e.get("name") for e in trace(out)}
    assert set(NAMES) <= names
    _, rows = read_csv(out / "operator_details.csv")
    assert set(NAMES) <= {r["Name"] for r in rows}
