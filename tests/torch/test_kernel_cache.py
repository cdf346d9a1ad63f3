"""The torch analysis writes the rank dir's kernel database (``.openmsprof/kernels.db``) from
the columns it writes kernel_details.csv from: ``analyze`` then finds it fresh (no rebuild),
and it holds what a rebuild from the CSV holds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import openmsprof.torch.profiler as tp
from openmsprof.analysis import advisor
from openmsprof.export.ascend_pt import kernel_job
from openmsprof.export.ascend_pt.kernel_job import KERNEL_DB, ensure_kernel_db
from openmsprof.export.ascend_pt.rank_analyse import export
from tests.export.test_kernel_csv import _content
from tests.torch.conftest import rank_dirs

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.fixture(scope="module", params=["Level0", "Level1"])
def rank_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real window of a hand-written Mish with shapes over three steps, not yet analysed."""
    root = tmp_path_factory.mktemp("kcache")
    exp = tp._ExperimentalConfig(profiler_level=getattr(tp.ProfilerLevel, request.param))
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    x = torch.randn(1, 3, 16, 16)
    with torch.no_grad(), tp.profile(
            schedule=tp.schedule(wait=0, active=3, repeat=1), record_shapes=True,
            on_trace_ready=tp.tensorboard_trace_handler(root / "r", analyse_flag=False),
            experimental_config=exp) as prof:
        for _ in range(4):
            y = conv(x)
            y * torch.tanh(F.softplus(y))
            prof.step()
    (rd,) = rank_dirs(root / "r")
    return rd


def test_small_window_keeps_the_seed_layout(rank_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / rank_dir.name
    shutil.copytree(rank_dir, copy)
    export(copy, parallel=False)  # a few dozen kernels: under EAGER_MIN_KERNELS
    assert (copy / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").is_file()
    assert not (copy / ".openmsprof").exists()


def test_analysed_rank_dir_is_a_cache_hit(rank_dir: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_job, "EAGER_MIN_KERNELS", 1)  # this window is small; the rule is the size
    export(rank_dir, parallel=False)
    db = rank_dir / KERNEL_DB
    before = db.stat()
    assert oct(before.st_mode & 0o777) == "0o640"
    assert before.st_mtime_ns >= (rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").stat().st_mtime_ns
    assert ensure_kernel_db(rank_dir) == db
    doc = advisor.report(rank_dir)  # what `openmsprof analyze` runs
    after = db.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns,
                                                                before.st_size)
    written = _content(rank_dir)
    assert {"aten::softplus", "aten::tanh", "aten::mul"} <= {r[3] for r in written["info"]}
    assert {s[0] for s in written["steps"]} >= {1, 2}  # the profiler steps (ids as the CSV's)
    assert any(f["rule"] for f in doc["findings"])
    # the same rows as a rebuild from kernel_details.csv
    copy = tmp_path / rank_dir.name
    shutil.copytree(rank_dir, copy)
    (copy / KERNEL_DB).unlink()
    rebuilt = ensure_kernel_db(copy)
    assert rebuilt == copy / KERNEL_DB
    assert _content(copy) == written
