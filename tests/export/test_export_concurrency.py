"""``export timeline`` and ``export summary`` on one job at once (real processes): both finish
with exit 0 and no traceback (they are serialized on the job's export lock), and the layout they
share holds both halves afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")


def _job(tmp_path: Path) -> Path:
    """A synthesized raw job of 60 k records (benchmarks/bench_import.py), imported."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_import

    from openmsprof.parse.importer import import_job

    job: Path = bench_import.synthesize(tmp_path / "raw", 60_000)
    import_job(job, progress=False)
    return job


def _export(verb: str, job: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "openmsprof", "export", verb, "-dir", str(job)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": SRC})


@pytest.mark.timeout(900)
def test_concurrent_timeline_and_summary_exports_of_one_job(tmp_path: Path) -> None:
    job = _job(tmp_path)
    for _ in range(4):
        procs = [_export("timeline", job), _export("summary", job), _export("timeline", job)]
        results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
        for rc, _out, err in results:
            assert rc == 0 and "Traceback" not in err, err[-3000:]
    out = job / "mindstudio_profiler_output"
    names = sorted(p.name for p in out.iterdir())
    assert any(n.startswith("msprof_") and n.endswith(".json") for n in names), names
    assert any(n.startswith("op_summary_") for n in names), names
    assert not [n for n in names if n.endswith(".tmp") or n.startswith(".")], names


def test_an_export_waits_for_the_one_holding_the_job(tmp_path: Path) -> None:
    """While another export holds the job (here: this process), `export summary` waits, says so
    in one line, and finishes once it is released.  The lock is held until the child has said it
    waits (its start can take many seconds on a loaded machine), not for a fixed time."""
    import selectors
    import time

    from openmsprof.export.exportlock import job_lock

    job = _job(tmp_path)
    with job_lock(job):
        p = _export("summary", job)
        assert p.stderr is not None
        sel = selectors.DefaultSelector()
        sel.register(p.stderr, selectors.EVENT_READ)
        said = b""
        deadline = time.monotonic() + 240
        while b"another export of" not in said and p.poll() is None and time.monotonic() < deadline:
            if sel.select(timeout=1.0):
                said += os.read(p.stderr.fileno(), 65536)
        sel.close()
        assert b"waiting for it" in said, said[-3000:]
        assert p.poll() is None  # still waiting
        assert not (job / "mindstudio_profiler_output").exists()
    _out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    waits = [ln for ln in (said.decode() + err).splitlines() if "another export of" in ln]
    assert len(waits) == 1 and "waiting for it" in waits[0]
    assert (job / "mindstudio_profiler_output").is_dir()
