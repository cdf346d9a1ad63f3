"""``/`` and the other system roots are refused as outputs, in one line, by every entry point:
the Python API, ``import --output``, ``cluster -d`` (its output goes inside), ``collect --output``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import openmsprof
from openmsprof.config.errors import PathError
from openmsprof.config.paths import resolve_output
from openmsprof.recorder import session


@pytest.mark.parametrize("path", ["/", "//", "/./", "/usr", "/usr/", "/etc", "/var/log", "/proc/self",
                                  "/sys/kernel/x", "/dev/zero", "/dev/pts/out", "/boot"])
def test_system_roots_are_refused(path: str) -> None:
    with pytest.raises(PathError, match="is the system directory") as info:
        resolve_output(path, "--output")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("path", ["/tmp/job", "/dev/shm/job", "/usr/local/share/x/out", "/var/tmp/out",
                                  "/procfs_out"])
def test_ordinary_dirs_below_or_beside_them_are_accepted(path: str) -> None:
    assert str(resolve_output(path, "--output")) == path


def test_start_with_output_root_is_refused_and_nothing_runs() -> None:
    with pytest.raises(PathError, match="output path '/' is the system directory '/'"):
        openmsprof.start(output="/")
    assert session.current() is None


@pytest.mark.parametrize("argv", [["import", "--output", "/", "-dir", "{tmp}"], ["cluster", "-d", "/"],
                                  ["cluster", "-d", "{tmp}", "--output", "/usr"]])
def test_cli_refuses_system_roots_in_one_line(argv: list[str], tmp_path: Path) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    stray = Path("/cluster_analysis_output")
    existed = stray.exists()
    r = subprocess.run([sys.executable, "-m", "openmsprof", *args], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "is the system directory" in lines[0], r.stderr
    assert stray.exists() == existed  # cluster -d / wrote its output there before
