"""The analysis worker process itself (``_analysis_worker`` is the training process's side).

It reads one JSON line per job on its stdin: ``{"dir", "tmp", "files", "analyse"}`` for a window
whose files it saves (``_window_files.save``: rank dir, raw trace moved in, profiler_info,
metadata), then analyses if asked; ``{"dir", "analyse": true}`` for a dir already saved.  A
reader thread saves each window as soon as its line arrives (``saved|unsaved <dir>`` answered at
once), so the raw traces land within milliseconds even while the main thread analyses an earlier
window (``ok|fail <dir>`` when done; ``taken <dir>`` for one the training process analysed, see
``_analysis_claim``).  Runs under SCHED_IDLE and nice 19, SIGINT ignored; at the
end of its input it finishes the queued analyses and leaves.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO

import orjson

from openmsprof.recorder import threads
from openmsprof.torch.profiler import _analysis_claim, analysis

NICE = 19
PRIORITY = f"nice {NICE}"  # what the worker set (``_lower_priority``)


class _Answers:
    """The answer pipe, shared by the saving and the analysing thread."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.lock, self.open = out, threading.Lock(), True

    def __call__(self, status: str, path: Path) -> None:
        with self.lock:
            if not self.open:
                return
            try:
                self.out.write(f"{status} {os.fspath(path)}\n".encode("utf-8", "surrogateescape"))
                self.out.flush()
            except OSError:  # the training process is gone: finish the queue quietly
                self.open = False


def _save_jobs(lines: IO[bytes], answer: _Answers, todo: queue.SimpleQueue[Path | None]) -> None:
    """Save each window as its line arrives; queue its analysis."""
    from openmsprof.torch.profiler import _window_files

    try:
        for raw in lines:
            try:
                job = orjson.loads(raw)
                path = Path(job["dir"])
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                print(f"openmsprof: analysis worker: bad job line ({exc})", file=sys.stderr, flush=True)
                continue
            if "tmp" in job:
                try:  # (under the dir's claim: the training process may have taken the window over)
                    with _analysis_claim.claim(path, wait_s=float("inf")) as todo_here:
                        if todo_here:
                            _window_files.save(path, Path(job["tmp"]), job["files"], "worker")
                except Exception as exc:
                    print(f"openmsprof: saving {path} failed: {exc}", file=sys.stderr, flush=True)
                    answer("unsaved", path)
                    continue
                answer("saved", path)
            if job.get("analyse"):
                todo.put(path)
    finally:
        todo.put(None)


def _serve(lines: IO[bytes], answers: IO[bytes]) -> None:
    answer = _Answers(answers)
    todo: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
    saver = threading.Thread(target=_save_jobs, args=(lines, answer, todo), name="openmsprof-window-saver")
    saver.start()
    analysis.preload()  # imported once, before the first window
    where = f"background worker process (pid {os.getpid()}, {PRIORITY})"
    while (path := todo.get()) is not None:
        t0, c0 = time.perf_counter(), time.process_time()
        status = "ok"
        try:
            with _analysis_claim.claim(path) as mine:  # the training process may have taken it over
                if mine:
                    analysis.analyse_dir(path, parallel=True)  # a large trace forks its second half
                    _analysis_claim.record_overhead(path, time.process_time() - c0, time.perf_counter() - t0,
                                                    where)
            status = "ok" if mine else "taken"
        except Exception as exc:
            status = "fail"
            print(f"openmsprof: analysing {path} failed: {exc}", file=sys.stderr, flush=True)
        answer(status, path)
    saver.join()


def _lower_priority() -> str:
    """SCHED_IDLE where the OS has it, and nice 19 in any case; returns what was set.  At nice 19
    alone, a worker that got a core keeps it for its time slice (~1-3 ms under EEVDF) while a
    training thread that woke up waits; a SCHED_IDLE task is preempted at once by any normal one.
    Threads started afterwards inherit both."""
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
