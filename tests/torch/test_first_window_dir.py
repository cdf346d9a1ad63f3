"""The first window under a new root: the writer thread makes its dir while the window may
already be ending.  A window end that finds the root ready hands the dir's creation to whoever
saves the window (the analysis worker), so the root counts as ready only once the whole dir is
made (before: from its first mkdir, and a worker's save could make FRAMEWORK/ first; the writer
then refused it and dropped the window with a warning)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from openmsprof.torch.profiler import prof_dir


def test_the_root_is_ready_only_once_the_first_dir_is_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = prof_dir.fs.make_new_dir
    reached, go = threading.Event(), threading.Event()

    def paused(path: Path) -> Path:  # the creating thread stops between the rank dir and FRAMEWORK/
        if path.name == "FRAMEWORK":
            reached.set()
            assert go.wait(60)
        return real(path)

    monkeypatch.setattr(prof_dir.fs, "make_new_dir", paused)
    root = tmp_path / "out"
    rank = root / "host_1_20260101000000000_ascend_pt"
    t = threading.Thread(target=prof_dir.create_at, args=(root, rank))
    t.start()
    try:
        assert reached.wait(60)
        assert rank.is_dir() and not (rank / "FRAMEWORK").exists()
        assert not prof_dir.root_ready(root)  # a window ending now waits for this creation
    finally:
        go.set()
        t.join(60)
    assert prof_dir.root_ready(root)
    assert (rank / "FRAMEWORK").is_dir() and (rank / "logs").is_dir()
