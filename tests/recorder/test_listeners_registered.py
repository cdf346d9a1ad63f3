"""Every module that starts a recorder session registers the sources' listeners itself (markers,
host sampler, emit, gc watch): ``import openmsprof`` imports its entry points lazily, so a session
started by the TensorFlow window, the flight recorder's capture or ``collect``'s autostart must not
rely on another facade having been imported first (the TF seed sample lost its host_sys cpu,mem
CSVs that way).  Each is imported alone in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
STARTERS = ["openmsprof.profile_api", "openmsprof.acl._acl_session", "openmsprof.tensorflow._tf_window",
            "openmsprof.flight.capture", "openmsprof.collector.autostart"]
LISTENERS = ["openmsprof.sources.emit", "openmsprof.sources.gc_watch", "openmsprof.sources.host_sampler",
             "openmsprof.sources.markers"]


@pytest.mark.parametrize("module", STARTERS)
def test_a_session_starter_registers_every_source(module: str) -> None:
    code = ("import importlib, sys\n"
            f"importlib.import_module({module!r})\n"
            "from openmsprof.recorder import session\n"
            "print(sorted({f.__module__ for pair in session._listeners for f in pair}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr[-2000:]
    assert set(LISTENERS) <= set(eval(r.stdout.strip().splitlines()[-1])), (module, r.stdout)
