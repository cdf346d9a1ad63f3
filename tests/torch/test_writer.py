"""The window's file work runs on a writer thread: files still land soon after the window ends,
at interpreter exit without ``stop()``, and before ``on_trace_ready`` sees the dir."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import orjson
import pytest

import openmsprof.torch.profiler as tp
from openmsprof.recorder import threads
from openmsprof.torch.profiler import _writer
from tests.torch.conftest import Trainer, rank_dirs

REPO = Path(__file__).resolve().parents[2]


def _complete(rd: Path) -> bool:
    return ((rd / "FRAMEWORK" / "torch.kineto_trace.json").is_file() and (rd / "profiler_info_0.json").is_file()
            and (rd / "profiler_metadata.json").is_file())


def test_window_files_land_without_stop(trainer: Trainer, tmp_path: Path) -> None:
    prof = tp.profile(schedule=tp.schedule(wait=0, warmup=0, active=2, repeat=1))
    prof._root = tmp_path
    prof.start()
    for _ in range(2):
        trainer.step()
        prof.step()  # the second step ends (and saves) the only window
    deadline = time.monotonic() + 10
    while not (dirs := rank_dirs(tmp_path)) or not _complete(dirs[0]):
        assert time.monotonic() < deadline, "window files not written 10 s after the window ended"
        time.sleep(0.01)
    assert not list((dirs[0] / "FRAMEWORK").glob(".*.tmp"))
    info = orjson.loads((dirs[0] / "profiler_info_0.json").read_bytes())
    assert info["end_info"]["MonotonicTimeEnd"] > info["start_info"]["start_monotonic"]
    prof.stop()
    assert prof.saved == [dirs[0]]


def test_trace_ready_sees_complete_dir(trainer: Trainer, tmp_path: Path) -> None:
    seen: list[tuple[Path, bool]] = []

    def ready(p: tp.profile) -> None:
        assert p.prof_path is not None
        seen.append((p.prof_path, _complete(p.prof_path)))

    prof = tp.profile(schedule=tp.schedule(wait=1, warmup=1, active=1, repeat=3), on_trace_ready=ready)
    prof._root = tmp_path
    with prof:
        for _ in range(9):
            trainer.step()
            prof.step()
    assert [ok for _p, ok in seen] == [True, True, True]
    assert sorted(p for p, _ok in seen) == rank_dirs(tmp_path)


EXITS = textwrap.dedent("""
    import sys
    sys.path.insert(0, {repo!r})
    from tests.torch.conftest import Trainer
    import openmsprof.torch.profiler as tp
    t = Trainer("mlp")
    prof = tp.profile(schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1))
    from pathlib import Path
    prof._root = Path({out!r})
    prof.start()
    t.step()
    prof.step()  # window ends here; the script exits at once, without prof.stop()
""")


def test_interpreter_exit_waits_for_writes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-c", EXITS.format(repo=str(REPO), out=str(out))], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    (rd,) = rank_dirs(out)
    assert _complete(rd)
    assert tp.analyse(out)


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="no SCHED_BATCH on this OS")
def test_writer_thread_does_not_preempt_the_training_thread() -> None:
    """The window-end hand-off wakes the writer thread: it runs under SCHED_BATCH (its wake does not
    preempt the training thread), the training thread keeps its own policy."""
    seen: list[str] = []
    _writer.submit(lambda: seen.append(threads.policy_name(threading.get_native_id())))
    assert _writer.flush()
    assert seen == ["SCHED_BATCH"]
    assert threads.policy_name(threading.get_native_id()) == "SCHED_OTHER"
