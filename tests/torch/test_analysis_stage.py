"""A window analysed in a staged hard-linked copy and published by one exchange (``_analysis_stage``)
ends byte for byte as one analysed in place; a dir analysed elsewhere first is left untouched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from openmsprof.torch.profiler import _analysis_claim, _analysis_stage, analysis
from tests.torch.conftest import Trainer, file_tree, raw_window, window_variant

SRC = Path(__file__).resolve().parents[2] / "src"
pytestmark = pytest.mark.skipif(not _analysis_stage.supported(), reason="no renameat2 here")


def _staged_window(trainer: Trainer, root: Path) -> tuple[Path, Path]:
    """A raw window and the worker's staged copy of it, made under the window's claim."""
    rd = raw_window(trainer, root)
    with _analysis_claim.claim(rd) as mine:
        assert mine
        staged = _analysis_stage.stage(rd, 4242)
    assert staged is not None
    return rd, staged


def _variant(src: Path, dst: Path, level: str, simplify: bool, stack: bool) -> Path:
    return window_variant(src, dst, level, simplify, with_stack=stack)


@pytest.mark.parametrize(("level", "simplify", "stack"), [("Level0", True, False), ("Level1", False, True),
                                                          ("Level2", True, False)])
def test_staged_analysis_publishes_the_bytes_of_an_in_place_one(trainer: Trainer, tmp_path: Path, level: str,
                                                                simplify: bool, stack: bool) -> None:
    raw = raw_window(trainer, tmp_path / "raw")
    name = raw.name
    here = _variant(raw, tmp_path / "here" / name, level, simplify, stack)
    staged_side = _variant(raw, tmp_path / "staged" / name, level, simplify, stack)
    analysis.analyse_dir(here, parallel=False)  # the path before staging: in place

    with _analysis_claim.claim(staged_side) as mine:
        assert mine
        staged = _analysis_stage.stage(staged_side, 4242)
    assert staged is not None and staged.parent.name == ".openmsprof.4242.stage" and staged.name == name
    analysis.analyse_dir(staged, parallel=False)
    assert not (staged_side / "ASCEND_PROFILER_OUTPUT").exists()  # nothing in the rank dir meanwhile
    assert (staged_side / "FRAMEWORK").is_dir()  # (its raw trace kept: a hard link was simplified away)
    assert _analysis_stage.publish(staged, staged_side) is True
    _analysis_stage.discard(staged)

    assert file_tree(staged_side) == file_tree(here)
    assert "ASCEND_PROFILER_OUTPUT/analyse.done" in file_tree(here)
    assert _analysis_claim.tidy(staged_side.parent)  # no claim left: the claims file goes
    assert sorted(p.name for p in staged_side.parent.iterdir()) == [name]  # no stage dir
    if simplify and not stack:
        assert not (staged_side / "FRAMEWORK").exists()


def test_a_dir_analysed_first_elsewhere_is_left_as_it_is(trainer: Trainer, tmp_path: Path) -> None:
    rd, staged = _staged_window(trainer, tmp_path / "out")
    analysis.analyse_dir(rd, parallel=False)  # stop() took the window over meanwhile
    analysis.analyse_dir(staged, parallel=False)  # the worker's late analysis of its copy
    tv = rd / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    before = (os.lstat(tv).st_ino, file_tree(rd))
    assert _analysis_stage.publish(staged, rd) is False
    _analysis_stage.discard(staged)
    assert (os.lstat(tv).st_ino, file_tree(rd)) == before  # nothing written twice
    assert _analysis_claim.tidy(rd.parent)
    assert sorted(p.name for p in rd.parent.iterdir()) == [rd.name]


def test_a_held_claim_is_not_published_over(trainer: Trainer, tmp_path: Path) -> None:
    """Another holder of the claim (the training process analysing in place) wins."""
    rd, staged = _staged_window(trainer, tmp_path / "out")
    analysis.analyse_dir(staged, parallel=False)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from openmsprof.torch.profiler import _analysis_claim as c\n"
                               "with c.claim(Path(sys.argv[1])) as mine: print('held', mine, flush=True); time.sleep(60)",
                               str(rd)], stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(SRC)})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held True\n"
        assert _analysis_stage.publish(staged, rd) is False
        assert not (rd / "ASCEND_PROFILER_OUTPUT").exists()
        assert not _analysis_claim.tidy(rd.parent)  # a claim is held: the claims file stays
    finally:
        holder.kill()
        holder.wait()
    _analysis_stage.discard(staged)
    assert not staged.parent.exists()


def test_sweep_removes_the_stage_dirs_of_gone_workers_only(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    mine = tmp_path / f".openmsprof.{os.getpid()}.stage"
    dead = tmp_path / f".openmsprof.{gone.pid}.stage"
    other = tmp_path / ".openmsprof.x.stage"
    for d in (mine, dead, other):
        (d / "w_ascend_pt").mkdir(parents=True)
    assert _analysis_stage.sweep(tmp_path) == [dead]
    assert mine.is_dir() and other.is_dir() and not dead.exists()
    assert _analysis_stage.sweep(tmp_path, os.getpid()) == [mine]
    assert not mine.exists() and other.is_dir()


def test_a_published_windows_raw_tree_is_the_next_stage(trainer: Trainer, tmp_path: Path) -> None:
    """The raw tree a publish replaced is emptied and renamed into the next window's stage (no
    mkdir, no rmdir); that window still ends byte for byte as one analysed in place, and a
    skeleton dir its window lacks (logs/ here) is not carried over."""
    raw = raw_window(trainer, tmp_path / "raw")
    first = _variant(raw, tmp_path / "out" / raw.name, "Level0", True, False)
    second_name = raw.name.replace("_ascend_pt", "x_ascend_pt")
    here = _variant(raw, tmp_path / "here" / second_name, "Level1", True, True)  # with its empty logs/
    analysis.analyse_dir(here, parallel=False)
    second = _variant(raw, tmp_path / "out" / second_name, "Level1", True, True)
    shutil.rmtree(second / "logs")

    with _analysis_claim.claim(first) as mine:
        assert mine
        staged = _analysis_stage.stage(first, 4243)
    assert staged is not None
    analysis.analyse_dir(staged, parallel=False)
    raw_tree = {p.name: os.lstat(p).st_ino for p in (first, first / "FRAMEWORK", first / "logs")}
    assert _analysis_stage.publish(staged, first) is True
    _analysis_stage.recycle(staged)  # its place held the raw tree: emptied, kept
    assert not staged.exists()
    (spare,) = staged.parent.iterdir()
    assert {p.name: os.lstat(p).st_ino for p in (spare, *spare.iterdir())} == {
        spare.name: raw_tree[first.name], "FRAMEWORK": raw_tree["FRAMEWORK"], "logs": raw_tree["logs"]}
    assert [p for p in spare.rglob("*") if not p.is_dir()] == []

    with _analysis_claim.claim(second) as mine:
        assert mine
        staged2 = _analysis_stage.stage(second, 4243)
    assert staged2 is not None and os.lstat(staged2).st_ino == raw_tree[first.name]  # renamed, not made
    assert os.lstat(staged2 / "FRAMEWORK").st_ino == raw_tree["FRAMEWORK"]
    assert sorted(p.name for p in staged2.iterdir()) == sorted(p.name for p in second.iterdir())  # no logs/
    analysis.analyse_dir(staged2, parallel=False)
    assert _analysis_stage.publish(staged2, second) is True
    _analysis_stage.recycle(staged2)
    assert file_tree(second) == file_tree(here)
    _analysis_stage.release(staged.parent)
    assert not staged.parent.exists()
