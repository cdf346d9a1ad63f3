"""Offline ``analyse`` is repeatable: on a rank dir that was analysed and then simplified
(data_simplification removed FRAMEWORK/) it says so in one line, exits 0 and leaves the output as
it is; with data_simplification=False, analysing twice writes the same files byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import openmsprof.torch.profiler as tp
from tests.torch.conftest import Trainer, rank_dirs

OUT = "ASCEND_PROFILER_OUTPUT"
SRC = str(Path(tp.__file__).resolve().parents[3])


def _profile(trainer: Trainer, root: Path, simplify: bool) -> Path:
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, data_simplification=simplify)
    with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=2, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler(str(root)), experimental_config=exp) as prof:
        for _ in range(3):
            trainer.step()
            prof.step()
    (rd,) = rank_dirs(root)
    assert (rd / OUT / "analyse.done").is_file()
    return rd


def _analyse(path: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from openmsprof.torch.profiler.analysis import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, str(path)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": SRC})


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_analyse_on_a_simplified_rank_dir_is_one_line_and_exit_0(trainer: Trainer, tmp_path: Path) -> None:
    rd = _profile(trainer, tmp_path / "p", simplify=True)
    assert not (rd / "FRAMEWORK").exists()
    before = _files(rd / OUT)
    r = _analyse(tmp_path / "p")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "removed by data_simplification" in lines[0] and rd.name in lines[0], r.stderr
    assert r.stdout.strip() == str(rd / OUT)
    assert _files(rd / OUT) == before


def test_analyse_twice_without_simplification_writes_the_same_files(trainer: Trainer, tmp_path: Path) -> None:
    rd = _profile(trainer, tmp_path / "p", simplify=False)
    assert (rd / "FRAMEWORK").is_dir()
    first = _analyse(rd)
    assert first.returncode == 0, first.stderr
    once = _files(rd / OUT)
    second = _analyse(rd)
    assert second.returncode == 0, second.stderr
    twice = _files(rd / OUT)
    assert set(once) == set(twice) and {"trace_view.json", "kernel_details.csv", "analyse.done"} <= set(once)
    assert [n for n in once if once[n] != twice[n]] == []


_KILLED_IN_SIMPLIFY = """
import os, signal, sys
from openmsprof.export.ascend_pt import rank_analyse
from openmsprof.torch.profiler.analysis import main
real = rank_analyse.simplify
def simplify(rank_dir, keep_framework=False, names=None):
    real(rank_dir, keep_framework=keep_framework, names=names)  # FRAMEWORK/ is gone now
    os.kill(os.getpid(), signal.SIGKILL)  # a worker ended by stop() at this instant
rank_analyse.simplify = simplify
sys.exit(main(sys.argv[1:]))
"""


def test_an_analysis_killed_while_simplifying_leaves_a_finished_window(trainer: Trainer, tmp_path: Path) -> None:
    """A worker killed by stop() (or any SIGKILL) right after data_simplification removed FRAMEWORK/:
    the window reads as analysed (analyse.done is written before the simplification), so whoever
    takes it over finds it done, instead of a window whose raw data is gone and that reads as unfinished
    (seen under load: trace_view.json there, analyse.done missing, FRAMEWORK/ gone)."""
    rd = _profile(trainer, tmp_path / "p", simplify=False)  # saved and analysed, FRAMEWORK/ kept
    exp = rd / "profiler_info_0.json"
    info = exp.read_text().replace('"_data_simplification": false', '"_data_simplification": true')
    assert '"_data_simplification": true' in info
    exp.write_text(info)  # the window as data_simplification=True would have saved it
    r = subprocess.run([sys.executable, "-c", _KILLED_IN_SIMPLIFY, str(rd)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == -9, r.stderr
    assert not (rd / "FRAMEWORK").exists()
    assert (rd / OUT / "analyse.done").is_file()  # written before the raw data went
    again = _analyse(rd)  # what a take-over or offline analyse then does: one line, exit 0
    assert again.returncode == 0 and "removed by data_simplification" in again.stderr, again.stderr
