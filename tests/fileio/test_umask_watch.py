"""New files are 0640 whatever the real umask of the process, set before the process started or
changed mid-run (from another thread, in a forked child), though ``fs`` sets the mode only when
the umask took part of it away (``fileio.umask_watch``).  Each case runs in a fresh interpreter
started with that umask (``subprocess``'s ``umask=``), so the module's first read is real."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(code: str, umask: int, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, umask=umask,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _modes(d: Path) -> dict[str, str]:
    return {p.name: oct(p.stat().st_mode & 0o7777) for p in sorted(d.iterdir())}


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o027, 0o000, 0o077, 0o066, 0o026, 0o266], ids=lambda m: f"umask{m:03o}")
def test_files_are_0640_whatever_the_starting_umask(tmp_path: Path, umask: int) -> None:
    out = _run("""
        from pathlib import Path
        import os
        from openmsprof.fileio import fs, umask_watch
        print(oct(umask_watch.current()[1]))
        fs.write_file_atomic(Path("atomic.txt"), b"x")
        os.close(fs.open_new(Path("new.txt")))
        d = fs.open_dir_fd(Path("."))
        fs.write_file_at(d, "at.txt", b"y")
        os.close(d)
    """, umask, tmp_path)
    assert out.split() == [oct(umask)]  # the umask the process really has, read from /proc
    assert _modes(tmp_path) == {"at.txt": "0o640", "atomic.txt": "0o640", "new.txt": "0o640"}


def test_a_umask_changed_mid_run_still_gives_0640(tmp_path: Path) -> None:
    out = _run("""
        from pathlib import Path
        import os
        from openmsprof.fileio import fs, umask_watch
        fs.write_file_atomic(Path("a0"), b"x")         # read at 022: no fchmod needed
        print(oct(os.umask(0o077)))                    # os.umask keeps its result
        fs.write_file_atomic(Path("a1"), b"x")
        os.close(fs.open_new(Path("a2")))
        print(oct(os.umask(0o060)))
        fs.write_file_atomic(Path("a3"), b"x")
        print(oct(os.umask(0o022)))
        fs.write_file_atomic(Path("a4"), b"x")
        print(oct(umask_watch.current()[1]))
        if os.fork() == 0:                              # a child changing it after the fork
            os.umask(0o177)
            fs.write_file_atomic(Path("c0"), b"x")
            os._exit(0)
        os.wait()
        fs.write_file_atomic(Path("a5"), b"x")
    """, 0o022, tmp_path)
    assert out.split() == ["0o22", "0o77", "0o60", "0o22"]
    assert _modes(tmp_path) == {n: "0o640" for n in ("a0", "a1", "a2", "a3", "a4", "a5", "c0")}


def test_a_umask_flipped_by_another_thread_never_shows(tmp_path: Path) -> None:
    _run("""
        from pathlib import Path
        import os, threading
        from openmsprof.fileio import fs
        stop = threading.Event()
        def flip():
            while not stop.is_set():
                os.umask(0o077)
                os.umask(0o022)
        t = threading.Thread(target=flip)
        t.start()
        try:
            for i in range(1500):
                os.close(fs.open_new(Path(f"f{i}")))
        finally:
            stop.set()
            t.join()
    """, 0o022, tmp_path)
    modes = _modes(tmp_path)
    assert len(modes) == 1500
    assert set(modes.values()) == {"0o640"}
