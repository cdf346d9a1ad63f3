"""An output root removed while the process lives (a user's ``rm -rf result/`` between two runs
of a notebook, a cleanup job between windows): the next window makes it again, as torch's own
``tensorboard_trace_handler`` does.  Before, the root stayed "ready" in this process: Kineto's
export failed into the missing root, the worker could not take the window's claim, and every
later window was lost with an error."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import openmsprof.torch.profiler as tp
from openmsprof.torch.profiler import prof_dir
from tests.torch.conftest import Trainer, analysed_dirs


def _profile(trainer: Trainer, root: Path, steps: int, remove_after: int = -1) -> None:
    """``steps`` windows of one step each, and the one open at ``stop()``; the root is removed
    once the first ``remove_after`` windows are analysed (the worker no longer writes there)."""
    with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1),
                    on_trace_ready=tp.tensorboard_trace_handler(str(root))) as prof:
        for i in range(steps):
            trainer.step()
            prof.step()
            if i + 1 == remove_after:
                deadline = time.monotonic() + 120
                while len(analysed_dirs(root)) < remove_after and time.monotonic() < deadline:
                    time.sleep(0.01)
                shutil.rmtree(root)


def test_a_root_removed_between_two_profiles_is_made_again(trainer: Trainer, tmp_path: Path) -> None:
    root = tmp_path / "result"
    _profile(trainer, root, 2)
    assert len(analysed_dirs(root)) == 3
    shutil.rmtree(root)
    _profile(trainer, root, 2)
    assert len(analysed_dirs(root)) == 3  # every window of the second run: saved and analysed


def test_a_root_removed_between_windows_is_made_again(trainer: Trainer, tmp_path: Path) -> None:
    root = tmp_path / "result"
    _profile(trainer, root, 4, remove_after=2)
    assert len(analysed_dirs(root)) == 3  # the three windows after it


def test_root_ready_checks_the_root_is_still_a_directory(tmp_path: Path) -> None:
    root = tmp_path / "out"
    prof_dir.create_at(root, root / "host_1_20260101000000000_ascend_pt")
    assert prof_dir.root_ready(root)
    shutil.rmtree(root)
    assert not prof_dir.root_ready(root)
    root.mkdir()
    assert not prof_dir.root_ready(root)  # (forgotten: made and checked again by the next window)
