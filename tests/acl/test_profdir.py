"""The ORT profile directory: per process, and the ones of dead processes swept."""

from __future__ import annotations

import os
import subprocess
import sys

from openmsprof.acl import _profdir


def test_sweep_removes_only_dirs_of_dead_processes(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    gone = tmp_path / f"openmsprof-ort-{dead_pid}-abc"
    alive = tmp_path / f"openmsprof-ort-{os.getpid()}-def"
    other = tmp_path / "openmsprof-ort-notapid"
    unrelated = tmp_path / f"something-{dead_pid}-x"
    for d in (gone, alive, other, unrelated):
        d.mkdir()
        (d / "p.json").write_bytes(b"[]")
    _profdir.sweep(str(tmp_path))
    assert not gone.exists()
    assert alive.exists() and other.exists() and unrelated.exists()


def test_profile_dir_is_per_process_and_private():
    p = _profdir.path()
    assert os.path.basename(p).startswith(f"openmsprof-ort-{os.getpid()}-")
    assert os.stat(p).st_mode & 0o077 == 0
    assert _profdir.path() == p
