"""The analysis worker stages a window queued behind another only when its child takes it: a
window the training process analysed meanwhile is answered ``taken`` and never copied; one still
to analyse is copied then (hard links of its files) and handed to the child on its pipe."""

from __future__ import annotations

import collections
import os
import shutil
import threading
from pathlib import Path

import orjson
import pytest

from openmsprof.torch.profiler import (
    _analysis_claim,
    _analysis_stage,
    _window_files,
    _worker_process,
    analysis,
)
from tests.torch.conftest import Trainer, raw_window

pytestmark = pytest.mark.skipif(not _analysis_stage.supported(), reason="no renameat2 here")


def _analyser(jobs_fd: int, answers: list[tuple[str, Path]]) -> _worker_process._Analyser:
    """The worker's end of its child, without the child: its job lines go to ``jobs_fd``."""
    a = _worker_process._Analyser.__new__(_worker_process._Analyser)
    a.pid, a.jobs_fd = -1, jobs_fd
    a.answer = lambda status, path: answers.append((status, path))  # type: ignore[assignment,misc]
    a.lock = threading.Lock()
    a.queue = collections.deque()
    a.current = None
    a.finishing = a.in_place = a.killed = False
    return a


def test_a_queued_window_is_staged_when_the_child_takes_it(trainer: Trainer, tmp_path: Path) -> None:
    raw = raw_window(trainer, tmp_path / "raw")
    root = tmp_path / "out"
    first, second = root / raw.name, root / ("b" + raw.name)
    shutil.copytree(raw, first)
    shutil.copytree(raw, second)
    r, w = os.pipe()
    answers: list[tuple[str, Path]] = []
    a = _analyser(w, answers)
    a.current = (root / "busy_ascend_pt", None)  # the child analyses another window
    assert not a.idle()
    a.send(first, None, later=True)
    a.send(second, None, later=True)
    stage_root = _analysis_stage.stage_root(first, os.getpid())
    assert not stage_root.exists()  # nothing copied while they wait

    (first / "ASCEND_PROFILER_OUTPUT").mkdir()  # the training process analysed the first meanwhile
    (first / "ASCEND_PROFILER_OUTPUT" / "analyse.done").write_bytes(b"")
    a.answered()  # the child is free: the first is answered taken, the second staged and handed over
    assert answers == [("taken", first)]
    line = orjson.loads(os.read(r, 65536))
    staged = stage_root / second.name
    assert line == {"dir": os.fspath(second), "stage": os.fspath(staged)}
    assert a.current == (second, staged)
    trace = Path("FRAMEWORK") / "torch.kineto_trace.json"
    assert os.stat(staged / trace).st_ino == os.stat(second / trace).st_ino  # a hard-linked copy
    assert sorted(p.name for p in stage_root.iterdir()) == [second.name]  # the first was never copied
    for d in (first, second):  # claims released: taken at once here
        with _analysis_claim.claim(d) as mine:
            assert mine is (d is second)
    assert not _analysis_claim.done(second)
    _analysis_stage.discard(staged)
    os.close(r)
    os.close(w)


def test_stage_now_says_what_is_left_to_analyse(trainer: Trainer, tmp_path: Path) -> None:
    raw = raw_window(trainer, tmp_path / "raw")
    gone = tmp_path / "gone_ascend_pt"
    assert _worker_process._stage_now(gone) == (False, None)
    done = tmp_path / "done" / raw.name
    shutil.copytree(raw, done)
    (done / "ASCEND_PROFILER_OUTPUT").mkdir()
    (done / "ASCEND_PROFILER_OUTPUT" / "analyse.done").write_bytes(b"")
    assert _worker_process._stage_now(done) == (False, None)
    assert not _analysis_stage.stage_root(done, os.getpid()).exists()
    todo = tmp_path / "todo" / raw.name
    shutil.copytree(raw, todo)
    left, staged = _worker_process._stage_now(todo)
    assert left is True and staged == _analysis_stage.stage_root(todo, os.getpid()) / todo.name
    assert staged is not None and (staged / "FRAMEWORK" / "torch.kineto_trace.json").is_file()
    _worker_process._discard(staged)  # the worker keeps its (empty) stage dir until it leaves
    assert not staged.exists() and list(staged.parent.iterdir()) == []
    assert staged.parent in _worker_process._roots
    _worker_process._roots.discard(staged.parent)
    staged.parent.rmdir()


def test_a_late_save_of_an_analysed_window_adds_nothing(trainer: Trainer, tmp_path: Path) -> None:
    """The training process saves a window whose save the worker has not confirmed yet (``stop()``
    of an async handler); one the worker saved, analysed and simplified meanwhile is left as it
    is: no logs/ (nor FRAMEWORK/) made again in its analysed dir."""
    rd = raw_window(trainer, tmp_path / "out")
    analysis.analyse_dir(rd, parallel=False)
    before = sorted(p.name for p in rd.iterdir())
    assert "logs" not in before  # simplified (FRAMEWORK/ kept: with_stack)
    assert _window_files.save(rd, tmp_path / "gone.kineto.tmp", {"rank": 0, "notes": ["x"]}, "writer_thread") is False
    assert sorted(p.name for p in rd.iterdir()) == before
