"""Measuring the peaks outside the profiled application's critical path.

The first session on a machine has no cached peaks.  Measuring them in the application at its
stop (up to ~4 s of STREAM and GEMM) would hold the application; measuring them while it runs
would distort what is being profiled.  So :func:`spawn` starts a detached child process at nice
19 after the session's data is written: it measures once, writes the machine's cache and the
job's ``host/peaks.json``, and exits.  The measurement holds an exclusive lock
(:func:`measuring`) so that a reader arriving meanwhile (``analyze`` right after the run) waits
for this measurement rather than starting a second one (:func:`wait_for_measurement`).

    python -m openmsprof.machine.peaks_child JOB_HOST_DIR [--torch] [--onnxruntime] [--lock-fd=N]
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import orjson

from openmsprof.config.errors import PathError
from openmsprof.fileio import fs
from openmsprof.machine import peaks as P
from openmsprof.machine.peaks_cache import measuring, open_lock, wait_for_measurement

__all__ = ["measuring", "spawn", "wait_for_measurement"]

#: Environment that would profile the child itself or shadow its start-up.
_DROP_ENV = ("OPENMSPROF_AUTOSTART", "OPENMSPROF_BOOTSTRAP_DIR", "PROFILING_MODE",
             "PROFILING_OPTIONS")


def spawn(job_host: Path, host_fd: int | None = None) -> subprocess.Popen[bytes]:
    """Start the detached, nice-19 measurement for ``job_host`` (returns at once); it times
    torch and ONNX Runtime when this process has imported them.  The lock is taken here and
    handed to the child, so a reader arriving before the child runs already waits for it.
    ``host_fd`` (the session's directory fd of ``job_host``) is handed over too: the child
    writes peaks.json into that directory, never through a link swapped in for its path."""
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    fd = open_lock()
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = True
        except BlockingIOError:  # another measurement runs: the child waits for it
            locked = False
        argv = [sys.executable, "-m", "openmsprof.machine.peaks_child", str(job_host)]
        argv += [f"--{m}" for m in ("torch", "onnxruntime") if m in sys.modules]
        argv += [f"--lock-fd={fd}"] if locked else []
        argv += [f"--host-fd={host_fd}"] if host_fd is not None else []
        passed = ((fd,) if locked else ()) + ((host_fd,) if host_fd is not None else ())
        child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True, pass_fds=passed)
    finally:
        os.close(fd)  # the child's copy keeps the lock
    try:
        os.setpriority(os.PRIO_PROCESS, child.pid, 19)  # from its first instruction
    except OSError:
        pass  # it lowers itself in main()
    return child


def main(argv: list[str]) -> int:
    os.setpriority(os.PRIO_PROCESS, 0, 19)
    job_host = Path(argv[0])
    fds = [int(a.split("=", 1)[1]) for a in argv if a.startswith("--lock-fd=")]
    with measuring(fds[0] if fds else None):
        doc = P.cached(measure_missing=False)  # another child may have finished first
        if doc is None or ("--onnxruntime" in argv and "onnxruntime" not in (
                doc.get("runtime") or {})):  # a cache from before the runtime was used
            doc = P.measure(import_torch="--torch" in argv,
                            import_ort="--onnxruntime" in argv)
            fs.write_file_atomic(P.cache_path(), orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        # the job's file under the lock: a waiter (a board's collect) finds it once the lock is free
        host_fds = [int(a.split("=", 1)[1]) for a in argv if a.startswith("--host-fd=")]
        try:  # through the directory fd: a host/ swapped for a link is never written through
            host_fd = host_fds[0] if host_fds else fs.open_dir_fd(job_host)
        except PathError:
            return 1
        try:
            fs.write_file_at(host_fd, P.PEAKS_FILE, orjson.dumps(doc))
        finally:
            os.close(host_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
