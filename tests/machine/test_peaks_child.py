"""The first session on a machine without cached peaks does not measure them in the
application: a detached nice-19 child does, after the session, and writes the machine cache
and the job's host/peaks.json; a reader arriving meanwhile waits for it (one measurement)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import orjson
import pytest

import openmsprof
from openmsprof.machine import peaks


def _wait_gone(pid: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # reap it if it is our child
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return False


def test_first_session_measures_peaks_in_a_background_child(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a reader waits up to 20 s for the nice-19 child; at load 20 that child can need minutes
    wait = peaks.wait_for_measurement
    monkeypatch.setattr(peaks, "wait_for_measurement", lambda timeout_s=300.0: wait(timeout_s))
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENMSPROF_PEAKS", raising=False)
    assert peaks.cached(measure_missing=False) is None
    s = openmsprof.start(tmp_path / "out")
    openmsprof.stop()
    job_file = s.root / "host" / peaks.PEAKS_FILE
    log = (s.root / "host" / "collection.log").read_text()
    m = re.search(r"measuring in background process (\d+) \(nice 19\)", log)
    assert m, log
    pid = int(m.group(1))
    assert not job_file.exists()  # stop() did not wait for the measurement
    nice = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    assert nice == 19
    doc = peaks.cached(measure_missing=True)  # waits for the child, does not measure again
    assert doc is not None and doc["source"] == "measured"
    assert _wait_gone(pid, 60), "the peaks child did not finish"
    stored = orjson.loads(job_file.read_bytes())
    assert stored["measured_at"] == doc["measured_at"] and stored["stream"] == doc["stream"]
    s2 = openmsprof.start(tmp_path / "out2")  # now cached: copied at stop, no child
    openmsprof.stop()
    assert orjson.loads((s2.root / "host" / peaks.PEAKS_FILE).read_bytes()) == doc
    assert "background process" not in (s2.root / "host" / "collection.log").read_text()


def test_cache_without_the_runtime_is_refreshed_in_the_background(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache from before ONNX Runtime was used: the job gets it at once, and the background
    child adds ONNX Runtime's class ceilings to the cache and the job's copy."""
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENMSPROF_PEAKS", raising=False)
    old = {"host": "h", "stream": {"copy": {"best": 12.5}}, "gemm": {"numpy float32": 99}}
    peaks.cache_path().parent.mkdir(parents=True)
    peaks.cache_path().write_bytes(orjson.dumps(old))
    assert not peaks.covers(old)
    s = openmsprof.start(tmp_path / "out")
    openmsprof.stop()
    job_file = s.root / "host" / peaks.PEAKS_FILE
    m = re.search(r"background process (\d+)", (s.root / "host" / "collection.log").read_text())
    assert m and orjson.loads(job_file.read_bytes()) == old  # the old figures at once
    assert _wait_gone(int(m.group(1)), 90), "the peaks child did not finish"
    new = peaks.cached(measure_missing=False)
    assert new is not None and peaks.covers(new) and "Conv" in str(new["runtime"])
    assert orjson.loads(job_file.read_bytes()) == new
