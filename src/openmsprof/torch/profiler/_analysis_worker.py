"""One persistent background process that analyses the windows ``tensorboard_trace_handler`` saves.

The training process starts it once (``python -c "…_analysis_worker.main()"``, under SCHED_IDLE
where Linux has it and at nice 19, SIGINT ignored) and hands it each saved rank dir as a line on its stdin; the worker imports the
analysis code once, analyses the dirs in order and answers ``ok|fail <dir>`` on its
stdout.  Nothing of the analysis runs on the training thread, and being a separate process it
neither takes the training process's GIL nor appears in its Kineto trace.  Async and sync
handlers share it; ``wait()`` (``profile.stop()`` of a sync handler) waits for its queue.

The worker's CPU time per window goes into the window's ``profiler_info_{rank}.json`` under
``openmsprof_overhead``.  At exit the training process closes the worker's stdin: the worker
finishes the queued dirs and leaves.  If both are killed, the raw traces stay on disk and
``analyse(path)`` (or ``python -m openmsprof.torch.profiler.analysis``) completes them offline.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from openmsprof.recorder import threads

log = logging.getLogger("openmsprof")
MODULE = "openmsprof.torch.profiler._analysis_worker"
NICE = 19
PRIORITY = f"nice {NICE}"  # what the worker set (``_lower_priority``)
_EXIT_WAIT_S = 120.0
_STOP_WAIT_S = 1800.0


class _Client:
    """The training process's side: the child, its pending dirs, a reader of its answers."""

    def __init__(self) -> None:
        pkg_parent = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen([sys.executable, "-c", f"import {MODULE} as w; w.main()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True)
        self.cond = threading.Condition()
        self.pending: dict[str, bool] = {}  # dir → a sync handler waits for it at exit
        self.failed: list[str] = []
        self.answered = 0
        self.reader = threading.Thread(target=self._read, name="openmsprof-analysis-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        threads.background_policy()  # the worker's answers do not preempt the training thread
        out = self.proc.stdout
        assert out is not None
        for raw in out:
            status, _, path = raw.decode("utf-8", "surrogateescape").rstrip("\n").partition(" ")
            with self.cond:
                self.pending.pop(path, None)
                self.answered += 1
                if status != "ok":
                    self.failed.append(path)
                self.cond.notify_all()
        from openmsprof.torch.profiler import _writer

        with self.cond:  # the worker is gone: what it did not answer goes to the next (or here)
            left, self.pending = dict(self.pending), {}
            for path, sync in left.items():
                _writer.submit(functools.partial(submit, Path(path), sync))
            self.cond.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None and self.reader.is_alive()

    def submit(self, path: str, sync: bool) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        with self.cond:
            self.pending[path] = sync
        stdin.write(os.fsencode(path) + b"\n")
        stdin.flush()

    def wait(self, timeout: float, sync_only: bool = False) -> bool:
        def idle() -> bool:
            return not any(self.pending.values()) if sync_only else not self.pending

        with self.cond:
            return self.cond.wait_for(idle, timeout)

    def close(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass


_client: _Client | None = None
_lock = threading.Lock()


_broken = 0  # workers that died before answering anything
MAX_BROKEN = 2


def start() -> int | None:
    """Start the worker if it is not running; its pid (None when no worker can run here: after
    ``MAX_BROKEN`` workers died before answering, windows are analysed on the writer thread)."""
    global _client, _broken
    with _lock:
        if _client is not None and not _client.alive():
            _broken += not _client.answered
            _client = None
        if _client is None and _broken < MAX_BROKEN:
            try:
                _client = _Client()
            except OSError as exc:
                _broken = MAX_BROKEN
                log.warning("openmsprof: cannot start the analysis worker (%s)", exc)
        return _client.proc.pid if _client is not None else None


def prestart() -> None:
    """``start()`` as a writer-thread job (a handler starts the worker when it is created)."""
    start()


def submit(path: Path, sync: bool) -> None:
    """Queue ``path`` (a saved rank dir) for analysis (a writer-thread job); a dir whose raw trace
    is missing is skipped.  Without a worker the dir is analysed here, on the writer thread."""
    from openmsprof.torch.profiler.kineto_profile import FRAMEWORK_TRACE

    if not (path / "FRAMEWORK" / FRAMEWORK_TRACE).is_file():
        return
    c = _client if start() is not None else None
    if c is not None:
        try:
            c.submit(os.fspath(path), sync)
            return
        except OSError:
            with c.cond:
                c.pending.pop(os.fspath(path), None)
    _analyse_here(path)


def _analyse_here(path: Path) -> None:
    from openmsprof.torch.profiler.analysis import analyse_dir

    log.warning("openmsprof: no analysis worker process; analysing %s on the writer thread", path)
    try:
        analyse_dir(path, parallel=False)
    except Exception as exc:
        log.warning("openmsprof: analysing %s failed: %s", path, exc)


def wait(timeout: float = _STOP_WAIT_S, sync_only: bool = False) -> bool:
    """Wait until every dir submitted so far is analysed (by the worker, or by the writer thread
    when a worker died and its dirs went elsewhere); False on timeout."""
    from openmsprof.torch.profiler import _writer

    deadline = time.monotonic() + timeout
    for _ in range(MAX_BROKEN + 2):
        _writer.flush(max(0.0, deadline - time.monotonic()))
        c = _client
        if c is None or not c.pending:
            if c is None or c.alive():
                return True
            continue  # it died: its dirs went back to the writer thread
        if not c.wait(max(0.0, deadline - time.monotonic()), sync_only):
            log.warning("openmsprof: background analysis still running after %.0f s", timeout)
            return False
    return True


def failed() -> list[str]:
    return list(_client.failed) if _client is not None else []


def _at_exit() -> None:
    from openmsprof.torch.profiler import _writer

    _writer.flush()
    if _client is not None:
        wait(_EXIT_WAIT_S, sync_only=True)
        _client.close()  # the worker finishes what is queued (async windows), then leaves


def _after_fork() -> None:
    """A forked child (a DataLoader worker) drops its copies of the worker's pipes, so that the
    worker still sees end-of-input when the training process closes it."""
    global _client, _lock
    c, _client, _lock = _client, None, threading.Lock()
    for f in (c.proc.stdin, c.proc.stdout) if c is not None else ():
        try:
            if f is not None:
                os.close(f.fileno())
        except OSError:
            pass


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


# -- the worker process ------------------------------------------------------------------------
def _record_overhead(rank_dir: Path, cpu_s: float, wall_s: float) -> None:
    """Add ``openmsprof_overhead`` to the dir's profiler_info (the worker's cost of this window)."""
    import orjson

    from openmsprof.recorder import fs

    for p in rank_dir.glob("profiler_info*.json"):
        info = orjson.loads(p.read_bytes())
        over = info.get("openmsprof_overhead") if isinstance(info.get("openmsprof_overhead"), dict) else {}
        over.update({"analysis_cpu_s": round(cpu_s, 6), "analysis_wall_s": round(wall_s, 6),
                     "analysis_where": f"background worker process (pid {os.getpid()}, {PRIORITY})"})
        info["openmsprof_overhead"] = over
        fs.write_file_atomic(p, orjson.dumps(info, option=orjson.OPT_INDENT_2))


def _serve(lines: IO[bytes], answers: IO[bytes]) -> None:
    import openmsprof.export.ascend_pt.writer  # noqa: F401  (imported once, before the first window)
    from openmsprof.torch.profiler.analysis import analyse_dir

    answering = True
    for raw in lines:
        path = Path(os.fsdecode(raw.rstrip(b"\n")))
        t0, c0 = time.perf_counter(), time.process_time()
        status = "ok"
        try:
            analyse_dir(path, parallel=True)  # a large trace forks its second half (nice 19 too)
            _record_overhead(path, time.process_time() - c0, time.perf_counter() - t0)
        except Exception as exc:
            status = "fail"
            print(f"openmsprof: analysing {path} failed: {exc}", file=sys.stderr, flush=True)
        if answering:
            try:
                answers.write(f"{status} {path}\n".encode("utf-8", "surrogateescape"))
                answers.flush()
            except OSError:  # the training process is gone: finish the queue quietly
                answering = False


def _lower_priority() -> str:
    """SCHED_IDLE where the OS has it, and nice 19 in any case; returns what was set.  At nice 19
    alone, a worker that got a core keeps it for its time slice (~1-3 ms under EEVDF) while a
    training thread that woke up waits; a SCHED_IDLE task is preempted at once by any normal one."""
    global PRIORITY
    done = []
    if threads.idle_policy():
        done.append("SCHED_IDLE")
    try:
        os.nice(NICE)
        done.append(f"nice {NICE}")
    except OSError:
        pass
    PRIORITY = ", ".join(done) or "normal priority"
    return PRIORITY


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops training; queued windows finish
    _lower_priority()
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing else may write into the answer pipe
    _serve(sys.stdin.buffer, answers)
    return 0
