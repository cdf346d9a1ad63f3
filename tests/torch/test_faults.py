"""Bad input and faults: nothing raises into the training loop, flushed data still analyses."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import openmsprof.torch.profiler as tp
from tests.torch.conftest import Trainer, rank_dirs, read_csv

REPO = Path(__file__).resolve().parents[2]


def test_pathlib_dir_name_and_bad_arguments(trainer: Trainer, tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="openmsprof"):
        exp = tp._ExperimentalConfig(profiler_level="Level9", aic_metrics="Bogus", export_type="xml",
                                     data_simplification="yes")  # type: ignore[arg-type]
        with tp.profile(activities=["CPU", "TPU"], schedule="every step",  # type: ignore[arg-type]
                        on_trace_ready=tp.tensorboard_trace_handler(tmp_path / "p" / "q"),
                        record_shapes=1, experimental_config=exp) as prof:  # type: ignore[arg-type]
            trainer.step()
            prof.step()
    text = caplog.text
    for word in ("profiler_level", "aic_metrics", "export_type", "data_simplification", "TPU", "schedule",
                 "record_shapes"):
        assert word in text, word
    (rd,) = rank_dirs(tmp_path / "p" / "q")
    assert (rd / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_output_dir_keeps_training(trainer: Trainer, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with caplog.at_level(logging.WARNING, logger="openmsprof"), \
            tp.profile(on_trace_ready=tp.tensorboard_trace_handler(ro)) as prof:
        for _ in range(2):
            trainer.step()
            prof.step()
    assert "not writable" in caplog.text or "cannot create" in caplog.text
    assert list(ro.iterdir()) == []


def test_read_only_output_dir_as_root_is_refused_cleanly(trainer: Trainer, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    # a regular file where the output dir should be: unusable for everyone, root included
    bad = tmp_path / "file"
    bad.write_text("x")
    with caplog.at_level(logging.WARNING, logger="openmsprof"), \
            tp.profile(on_trace_ready=tp.tensorboard_trace_handler(bad / "sub")) as prof:
        trainer.step()
        prof.step()
    assert "cannot create" in caplog.text
    assert bad.read_text() == "x"


KILLED = textwrap.dedent("""
    import os, sys, time, torch
    sys.path.insert(0, {repo!r})
    from tests.torch.conftest import Trainer
    import openmsprof.torch.profiler as tp
    t = Trainer("mlp")
    prof = tp.profile(schedule=tp.schedule(wait=0, warmup=0, active=2, repeat=2),
                      on_trace_ready=tp.tensorboard_trace_handler("out", analyse_flag=False),
                      experimental_config=tp._ExperimentalConfig(msprof_tx=True))
    prof.start()
    for i in range(100):
        t.step()
        prof.step()
        if i == 2:
            print("second window", flush=True)
            time.sleep(60)
""")


def test_killed_loop_flushed_window_still_analyses(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", KILLED.format(repo=str(REPO))], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert b"second window" in line
    # the first window's framework trace is written after its step returns (~0.6 s idle, several
    # seconds at load 20): wait for it and for the second window's first flushed slice, then kill
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        dirs = rank_dirs(tmp_path / "out") if (tmp_path / "out").is_dir() else []
        if len(dirs) == 2 and any(list(d.glob("FRAMEWORK/*.json")) for d in dirs) \
                and all(list(d.glob("PROF_*/host/data/*.slice_*")) for d in dirs):
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    dirs = rank_dirs(tmp_path / "out")
    assert len(dirs) == 2
    done = tp.analyse(tmp_path / "out")  # the killed window has no framework data: reported, skipped
    assert len(done) == 1
    _h, rows = read_csv(done[0] / "step_trace_time.csv")
    assert [r["Step"] for r in rows] == ["0", "1"]
    killed = next(d for d in dirs if d not in [p.parent for p in done])
    assert list(killed.glob("PROF_*/host/data/*.slice_*"))  # its markers were flushed


def test_analyse_bad_path_errors_name_the_path(tmp_path: Path) -> None:
    from openmsprof.config.errors import PathError

    with pytest.raises(PathError, match="no \\*_ascend_pt"):
        tp.analyse(tmp_path)


@pytest.mark.parametrize("bad", [5, 2.5, object(), ["a"]])
def test_a_handler_dir_name_that_is_not_a_path_is_one_warning_and_the_default(
        bad: object, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="openmsprof"):
        handler = tp.tensorboard_trace_handler(bad)  # type: ignore[arg-type]
    assert handler.root == Path.cwd()  # torch_npu's default: the working directory
    lines = [r.getMessage() for r in caplog.records if "dir_name=" in r.getMessage()]
    assert len(lines) == 1 and lines[0].endswith(f"is not a path; using {Path.cwd()}") and "\n" not in lines[0]


@pytest.mark.parametrize(("name", "default"), [("analyse_flag", True), ("async_mode", False)])
def test_a_handler_switch_that_is_not_a_bool_is_reported(name: str, default: bool,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """``analyse_flag="False"`` (a string) was taken silently as True."""
    with caplog.at_level(logging.WARNING, logger="openmsprof"):
        handler = tp.tensorboard_trace_handler("out", **{name: "False"})  # type: ignore[arg-type]
    assert getattr(handler, name) is default
    assert f"tensorboard_trace_handler {name}='False' is not a bool; using {default}" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="openmsprof"):
        assert getattr(tp.tensorboard_trace_handler("out", **{name: not default}), name) is (not default)
    assert caplog.text == ""
