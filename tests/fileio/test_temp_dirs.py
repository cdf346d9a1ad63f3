"""Private pid-tagged temp dirs: those of a process killed with SIGKILL are swept by the next
``make`` of the same prefix; a live process's, another prefix's and a link are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from openmsprof.fileio import temp_dirs

PREFIX = "omsp-test-tmp-"


def _killed_leaving_a_dir(base: Path) -> Path:
    code = ("import os, signal, sys; from openmsprof.fileio import temp_dirs; "
            "d = temp_dirs.make(sys.argv[1], sys.argv[2]); open(os.path.join(d, 'x'), 'w').write('1'); "
            "print(d, flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    r = subprocess.run([sys.executable, "-c", code, PREFIX, str(base)], capture_output=True, text=True)
    assert r.returncode == -signal.SIGKILL
    left = Path(r.stdout.strip())
    assert left.is_dir() and left.name.startswith(f"{PREFIX}{int(left.name[len(PREFIX):].split('-')[0])}-")
    return left


def test_a_killed_process_dir_is_swept_by_the_next(tmp_path: Path) -> None:
    dead = _killed_leaving_a_dir(tmp_path)
    live = Path(temp_dirs.make(PREFIX, str(tmp_path)))  # this process: alive
    other = tmp_path / "other-prefix-1-x"
    other.mkdir()
    link = tmp_path / f"{PREFIX}1999999999-link"
    link.symlink_to(other)
    assert not dead.exists()
    assert live.is_dir() and live.name.startswith(f"{PREFIX}{os.getpid()}-")
    assert oct(live.stat().st_mode & 0o777) == "0o700"
    gone = temp_dirs.sweep(str(tmp_path), PREFIX)
    assert gone == [] and live.is_dir() and other.is_dir() and link.is_symlink()


def test_the_with_block_dir_is_removed_after_it(tmp_path: Path) -> None:
    with temp_dirs.private_temp_dir(PREFIX, str(tmp_path)) as d:
        (d / "f").write_text("x")
        assert d.is_dir()
    assert not d.exists()
