"""A mutated *_ascend_pt dir: every file the exporter reads is opened as a regular file of
plausible size and parsed with a bounded depth, so FIFOs, /dev/zero links and deep nesting end
in one RawDataError line, promptly."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

import openmsprof.torch.profiler as tp
from openmsprof.config.errors import RawDataError
from openmsprof.export.ascend_pt.communication import group_of
from openmsprof.export.ascend_pt.rank_analyse import export
from openmsprof.fileio.read_guard import MAX_JSON_DEPTH, check_depth, read_json
from tests.torch.conftest import Trainer, rank_dirs

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def rank_dir(trainer: Trainer, tmp_path: Path) -> Path:
    keep = tp._ExperimentalConfig(data_simplification=False)  # FRAMEWORK/ stays for re-export
    with tp.profile(on_trace_ready=tp.tensorboard_trace_handler(tmp_path / "p"), experimental_config=keep) as prof:
        for _ in range(2):
            trainer.step()
            prof.step()
    (rd,) = rank_dirs(tmp_path / "p")
    return rd


def _refused(rd: Path, needle: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(RawDataError) as err:
        export(rd, parallel=False)
    assert time.monotonic() - t0 < 30
    text = str(err.value)
    assert needle in text and "\n" not in text, text


def test_fifo_or_link_as_kineto_trace_is_refused_not_waited_on(rank_dir: Path, tmp_path: Path) -> None:
    trace = rank_dir / "FRAMEWORK" / "torch.kineto_trace.json"
    elsewhere = tmp_path / "elsewhere.json"
    trace.rename(elsewhere)
    os.mkfifo(trace)
    _refused(rank_dir, "torch.kineto_trace.json")
    trace.unlink()
    trace.symlink_to(elsewhere)  # a link to a regular file: still refused (O_NOFOLLOW)
    _refused(rank_dir, "symbolic link; refused")


def test_dev_zero_link_as_profiler_info_is_refused(rank_dir: Path) -> None:
    info = rank_dir / "profiler_info_0.json"
    info.unlink()
    info.symlink_to("/dev/zero")
    _refused(rank_dir, "symbolic link; refused")


def test_deeply_nested_trace_and_metadata_are_refused(rank_dir: Path) -> None:
    deep = b'{"traceEvents": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    meta = rank_dir / "profiler_metadata.json"
    meta.write_bytes(b"{}")
    plain = dataclasses.astuple(group_of(rank_dir, 0))  # (read now: the group is read at its first use)
    meta.write_bytes(b'{"parallel_group_info": ' + b"[" * 300 + b"]" * 300 + b"}")
    assert dataclasses.astuple(group_of(rank_dir, 0)) == plain  # refused metadata: the default group, as with none
    with pytest.raises(RawDataError, match="nested deeper"):
        read_json(meta, "profiler metadata", error=RawDataError)
    (rank_dir / "FRAMEWORK" / "torch.kineto_trace.json").write_bytes(deep)
    _refused(rank_dir, f"JSON nested deeper than {MAX_JSON_DEPTH} levels; refused")


def test_depth_bound_counts_structure_not_brackets_in_strings(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_bytes(b'{"text": "' + b"[" * 1000 + b'", "list": [[1], [2]]}')
    assert read_json(p, "x") == {"text": "[" * 1000, "list": [[1], [2]]}
    assert check_depth(b"[" * 129 + b"]" * 129) == -1
    assert 0 < check_depth(b"[" * 128 + b"]" * 128) <= MAX_JSON_DEPTH
