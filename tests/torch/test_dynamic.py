"""dynamic_profile: template, start within one step of an edit (atomic rename), bad edits logged."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from openmsprof.torch.profiler import dynamic_profile as dp
from tests.torch.conftest import Trainer, rank_dirs, read_csv

POLL = 0.1


@pytest.fixture(autouse=True)
def _shutdown() -> object:
    yield
    dp.shutdown()


def _edit(cfg: Path, obj: object | bytes) -> None:
    """Write like an editor that saves through a temp file and an atomic rename."""
    tmp = cfg.with_name(".profiler_config.json.swp")
    tmp.write_bytes(obj if isinstance(obj, bytes) else orjson.dumps(obj))
    os.replace(tmp, cfg)


def _wait_for(cond: object, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():  # type: ignore[operator]
            return
        time.sleep(POLL / 2)
    raise AssertionError("condition not reached")


def _log(d: Path) -> str:
    return "".join(p.read_text() for p in (d / "log").iterdir())


def test_edit_starts_collection_at_next_step(trainer: Trainer, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "dp_cfg"
    dp.init(d, poll_interval=POLL)
    monkeypatch.chdir(tmp_path)  # prof_dir is relative to the working directory (seed 004)
    cfg = d / "profiler_config.json"
    template = orjson.loads(cfg.read_bytes())
    assert template["active"] == 1 and template["experimental_config"]["profiler_level"] == "Level0"
    for _ in range(3):
        trainer.step()
        dp.step()
    assert dp.monitor().prof is None  # type: ignore[union-attr]
    new = dict(template, active=2, analyse=True, prof_dir="prof", record_shapes=True,
               experimental_config=dict(template["experimental_config"], profiler_level="Level1"))
    _edit(cfg, new)
    _wait_for(lambda: dp.monitor().pending is not None)  # type: ignore[union-attr]
    at = dp.monitor().step_num  # type: ignore[union-attr]
    for _ in range(4):
        trainer.step()
        dp.step()
    (rd,) = rank_dirs(tmp_path / "prof")
    _h, rows = read_csv(rd / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
    assert [int(r["Step"]) for r in rows] == [at + 1, at + 2]  # the very next step, for `active` steps
    assert "collection started" in _log(d)


def test_invalid_json_and_unknown_enums_are_logged(trainer: Trainer, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "dp_cfg"
    dp.init(d, poll_interval=POLL)
    monkeypatch.chdir(d)
    cfg = d / "profiler_config.json"
    _edit(cfg, b"{ not json")
    _wait_for(lambda: "not valid JSON" in _log(d))
    trainer.step()
    dp.step()  # still running
    _edit(cfg, {"activities": ["CPU", "GPU"], "active": 1, "prof_dir": "p",
                "experimental_config": {"profiler_level": "Level7", "aic_metrics": "Fast", "export_type": "pdf"}})
    _wait_for(lambda: dp.monitor().pending is not None)  # type: ignore[union-attr]
    text = _log(d)
    for word in ("GPU", "Level7", "aic_metrics", "export_type"):
        assert word in text, word
    for _ in range(3):
        trainer.step()
        dp.step()
    assert len(rank_dirs(d / "p")) == 1


def test_backstop_stops_a_loop_that_stopped_stepping(trainer: Trainer, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "dp_cfg"
    dp.init(d, poll_interval=POLL, backstop_s=0.3)
    monkeypatch.chdir(d)
    _edit(d / "profiler_config.json", {"active": 50, "prof_dir": "p", "experimental_config": {"mstx": True}})
    _wait_for(lambda: dp.monitor().pending is not None)  # type: ignore[union-attr]
    trainer.step()
    dp.step()
    assert dp.monitor().prof is not None  # type: ignore[union-attr]
    sess = dp.monitor().prof._session  # type: ignore[union-attr]
    assert sess is not None
    _wait_for(lambda: not sess.collecting)
    assert "backstop" in _log(d)
    dp.shutdown()  # what atexit does on the main thread
    (rd,) = rank_dirs(d / "p")
    assert (rd / "FRAMEWORK" / "torch.kineto_trace.json").exists()
    assert "backstop" in _log(d)


def test_start_step_in_the_past_is_rejected(trainer: Trainer, tmp_path: Path) -> None:
    d = tmp_path / "dp_cfg"
    dp.init(d, poll_interval=POLL)
    for _ in range(3):
        dp.step()
    _edit(d / "profiler_config.json", {"active": 1, "start_step": 1})
    _wait_for(lambda: "already past" in _log(d))
    assert dp.monitor().pending is None  # type: ignore[union-attr]


_RACE = textwrap.dedent("""
    import os, signal, sys, time
    import torch
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (a test runner's worker may ignore SIGINT)
    from torch.autograd import _profiler_enabled
    import orjson
    import openmsprof.torch.profiler as tp
    from openmsprof.torch.profiler import dynamic_profile as dp
    from openmsprof.torch.profiler.profile import profile
    d, where = sys.argv[1], sys.argv[2]
    os.chdir(d)
    dp.init(os.path.join(d, "cfg"), poll_interval=0.05)
    cfg = os.path.join(d, "cfg", "profiler_config.json")
    doc = dict(orjson.loads(open(cfg, "rb").read()), active=2, prof_dir="prof")
    with open(cfg + ".tmp", "wb") as f:
        f.write(orjson.dumps(doc))
    os.replace(cfg + ".tmp", cfg)
    end = time.monotonic() + 60
    while dp.monitor().pending is None:
        assert time.monotonic() < end
        time.sleep(0.02)
    # a real Ctrl-C at the worst moment: right after the collection started (before dynamic_profile
    # tracks it), or right before it is stopped (once it no longer does)
    if where == "begin":
        start = profile.start
        def start_then_sigint(self):
            start(self)
            os.kill(os.getpid(), signal.SIGINT)
        profile.start = start_then_sigint
    else:
        finish = dp._Monitor._finish
        def sigint_then_finish(self, prof):
            os.kill(os.getpid(), signal.SIGINT)
            finish(self, prof)
        dp._Monitor._finish = sigint_then_finish
    model = torch.nn.Linear(8, 8)
    interrupts = 0
    for _ in range(12):
        try:
            model(torch.randn(2, 8)).sum().backward()
            dp.step()
        except KeyboardInterrupt:
            interrupts += 1
    print("interrupts", interrupts, "kineto still recording", _profiler_enabled(), flush=True)
    dp.shutdown()
    print("after shutdown", _profiler_enabled(), flush=True)
""")


@pytest.mark.parametrize("where", ["begin", "finish"])
def test_a_ctrl_c_as_a_collection_starts_or_ends_leaves_no_kineto_session_running(tmp_path: Path, where: str) -> None:
    """Kineto has one session per process: a collection started and lost by a Ctrl-C (or one
    whose stop a Ctrl-C pre-empted) would leave it recording for good, and every later profile
    would record nothing (it finds another profiler running)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    r = subprocess.run([sys.executable, "-c", _RACE, str(tmp_path), where], capture_output=True, text=True,
                       env=env, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "interrupts 1 kineto still recording False" in r.stdout, r.stdout + r.stderr[-2000:]
    assert len(rank_dirs(tmp_path / "prof")) == 1
