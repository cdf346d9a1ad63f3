"""setup.py builds the native core with the system compiler and falls back cleanly without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _build(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
                           "--build-temp", str(tmp_path / "tmp")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env})


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler here")
def test_builds_the_native_core_with_a_compiler(tmp_path: Path) -> None:
    r = _build(tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert list((tmp_path / "lib").rglob("_ring*.so")), r.stderr[-2000:]
    assert list((tmp_path / "lib").rglob("_task_lines*.so")), r.stderr[-2000:]
    assert list((tmp_path / "lib").rglob("_bulk_insert*.so")), r.stderr[-2000:]
    assert list((tmp_path / "lib").rglob("_ort_scan*.so")), r.stderr[-2000:]


def test_without_a_compiler_the_install_goes_on_with_the_fallback(tmp_path: Path) -> None:
    r = _build(tmp_path, CC="/nonexistent/cc", LDSHARED="/nonexistent/cc -shared")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "native recorder not built" in r.stderr and "native export task loop not built" in r.stderr
    assert "native import writer not built" in r.stderr
    assert "native ONNX Runtime profile scan not built" in r.stderr
    assert not list((tmp_path / "lib").rglob("*.so"))
    # and the package then records through the pure-Python path
    code = ("import openmsprof.recorder.core as c, openmsprof.sources.markers as m; "
            "print(c.BACKEND, m.mark is m.py_mark)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "OPENMSPROF_RECORDER": "python"})
    assert r.stdout.split() == ["python", "True"]
