"""Measuring the peaks outside the profiled application's critical path.

The first session on a machine has no cached peaks.  Measuring them in the application at its
stop (up to ~4 s of STREAM and GEMM) would hold the application; measuring them while it runs
would distort what is being profiled.  So :func:`spawn` starts a detached child process at nice
19 after the session's data is written: it measures once, writes the machine's cache and the
job's ``host/peaks.json``, and exits.  The measurement holds an exclusive lock
(:func:`measuring`) so that a reader arriving meanwhile (``analyze`` right after the run) waits
for this measurement rather than starting a second one (:func:`wait_for_measurement`).

    python -m openmsprof.recorder.peaks_child JOB_HOST_DIR [--torch] [--onnxruntime]
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from openmsprof.recorder import fs
from openmsprof.recorder import peaks as P

__all__ = ["measuring", "spawn", "wait_for_measurement"]

#: Environment that would profile the child itself or shadow its start-up.
_DROP_ENV = ("OPENMSPROF_AUTOSTART", "OPENMSPROF_BOOTSTRAP_DIR", "PROFILING_MODE",
             "PROFILING_OPTIONS")


def _lock_path() -> Path:
    return P.cache_path().with_suffix(".lock")


@contextmanager
def measuring(block: bool = True) -> Iterator[bool]:
    """Hold the machine's measurement lock; yields False when ``block`` is False and another
    process holds it."""
    path = _lock_path()
    fs.make_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, fs.FILE_MODE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def wait_for_measurement(timeout_s: float = 20.0) -> None:
    """Return once no other process is measuring (or after ``timeout_s``)."""
    path = _lock_path()
    if not path.exists():
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(0.05)
    finally:
        os.close(fd)


def spawn(job_host: Path) -> subprocess.Popen[bytes]:
    """Start the detached, nice-19 measurement for ``job_host`` (returns at once); it times
    torch and ONNX Runtime when this process has imported them."""
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    argv = [sys.executable, "-m", "openmsprof.recorder.peaks_child", str(job_host)]
    argv += [f"--{m}" for m in ("torch", "onnxruntime") if m in sys.modules]
    return subprocess.Popen(argv, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def main(argv: list[str]) -> int:
    os.nice(19)
    job_host = Path(argv[0])
    with measuring():
        doc = P.cached(measure_missing=False)  # another child may have finished first
        if doc is None:
            doc = P.measure(import_torch="--torch" in argv,
                            import_ort="--onnxruntime" in argv)
            fs.write_file_atomic(P.cache_path(), orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    if job_host.is_dir():
        fs.write_file_atomic(job_host / P.PEAKS_FILE, orjson.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
