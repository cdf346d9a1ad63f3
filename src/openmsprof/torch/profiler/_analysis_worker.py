"""One persistent background process that saves and analyses the windows ``tensorboard_trace_handler`` ends.

The training process starts it once (``python -c "…_worker_process.main()"``, SIGINT ignored; it
analyses in a forked child under SCHED_IDLE where Linux has it and at nice 19).  At each window end the training thread, having
exported Kineto's raw trace to a temp file, writes one line on the worker's stdin (``hand_off``; the
profiler's static part, its config, goes once per worker, in the same write as its first window):
the worker makes the rank dir, moves the trace in, writes profiler_info / metadata (answering
``saved <dir>``) and then analyses it (``ok|fail <dir>``).  So no file work and no analysis of a
window runs in the training process, whose threads share one GIL with training; being a separate
process, the worker neither takes that GIL nor appears in its Kineto trace.  Async and sync
handlers share it; ``wait()`` (``profile.stop()`` of a sync handler) waits for its queue while the
worker makes progress, ``wait_saved()`` (an async handler's ``stop()``, interpreter exit) for the
saves only.  A SCHED_IDLE worker gets no CPU while every core is busy: a worker that got under
``MIN_SHARE`` of a core for ``STALL_S`` (0.05) seconds (starved, SIGSTOPped, wedged) is not waited for:
the waiting thread analyses the windows itself, at the caller's priority (``_worker_takeover``; the
worker analyses a staged copy holding no claim, ``_analysis_stage``, and discards the windows done
here, ``_analysis_claim``; it is ended only if it holds a window's claim ``HELD_WAIT_S`` or is stopped).  So a sync
``stop()`` costs the analysis CPU it waits for plus at most ``STALL_S`` of waiting.

Fallbacks: without a live worker a window's files are saved on the writer thread and its dir
analysed there (``submit``); saves the worker has not confirmed within ``wait_saved``'s timeout,
and those of a worker that died, are done by the training process itself (saving is idempotent).
The worker's CPU time per window goes into the window's ``profiler_info_{rank}.json`` under
``openmsprof_overhead``.  At exit the training process closes the worker's stdin: the worker
finishes the queued dirs and leaves.  If both are killed, the raw traces saved so far stay on
disk and ``analyse(path)`` (or ``python -m openmsprof.torch.profiler.analysis``) completes them,
adopting the temp traces of windows the worker had not saved (``_orphans``).
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmsprof.torch.profiler import _analysis_claim, _worker_takeover, _writer
from openmsprof.torch.profiler._worker_pipe import Client, Job

log = logging.getLogger("openmsprof")
SAVE_WAIT_S = 5.0  # then the training process saves what the worker has not confirmed


_client: Client | None = None
_lock = threading.Lock()


_broken = 0  # workers that died before answering anything
MAX_BROKEN = 2


def start() -> int | None:
    """Start the worker if it is not running; its pid (None when no worker can run here: after
    ``MAX_BROKEN`` workers died before answering, windows are analysed on the writer thread)."""
    global _client, _broken
    with _lock:
        if _client is not None and not _client.alive():
            _broken += not (_client.answered or _client.ended)
            _client = None
        if _client is None and _broken < MAX_BROKEN:
            try:
                _client = Client(_reroute, lambda path, job: _reroute({path: job}))
            except OSError as exc:
                _broken = MAX_BROKEN
                log.warning("openmsprof: cannot start the analysis worker (%s)", exc)
        return _client.proc.pid if _client is not None else None


def prestart() -> None:
    """``start()`` as a writer-thread job (a handler starts the worker when it is created)."""
    start()


def hand_off(path: Path, tmp: Path, files: dict[str, Any], analyse: bool, sync: bool,
             save: Callable[[], None], out: list[Path], static: dict[str, Any] | None = None) -> bool:
    """Training thread, at a window end: give the window's file work (and its analysis if
    ``analyse``) to the worker in one non-blocking pipe write.  ``save`` saves it here instead;
    ``out`` gets the dir once saved.  ``static``: the part of ``files`` every window of the
    profiler shares (the same dict each time), sent to a worker once (``Client.static_key``).
    False when no worker is running (the caller saves)."""
    import orjson

    c = _client
    if c is None:  # (a dead worker: send() sees its reader gone or EPIPE)
        return False
    try:
        head, key = b"", None
        if static is not None:
            key, head = c.static_key(static)
            files = {n: v for n, v in files.items() if n not in static}
        line = head + orjson.dumps({"dir": os.fspath(path), "tmp": os.fspath(tmp), "static": key, "files": files,
                                    "analyse": analyse}) + b"\n"
    except TypeError:  # a path or a user's metadata JSON cannot carry: saved here
        return False
    if not c.send(os.fspath(path), Job(sync and analyse, analyse, save, out, path), line):
        return False
    if head and static is not None and key is not None:
        c.sent_static(static, key)
    return True


def submit(path: Path, sync: bool) -> None:
    """Queue ``path`` (a saved rank dir) for analysis (a writer-thread job); a dir whose raw trace
    is missing is skipped.  Without a worker the dir is analysed here, on the writer thread."""
    import orjson

    from openmsprof.torch.profiler._window_files import FRAMEWORK_TRACE

    if not (path / "FRAMEWORK" / FRAMEWORK_TRACE).is_file():
        return
    c = _client if start() is not None else None
    if c is not None:
        try:
            line = orjson.dumps({"dir": os.fspath(path), "analyse": True}) + b"\n"
        except TypeError:
            line = b""
        if line and c.send(os.fspath(path), Job(sync, True, None, None), line):
            return
    _analyse_here(path)


def wait_saved(timeout: float = SAVE_WAIT_S) -> None:
    """Wait until the worker confirmed every window handed to it as saved; the training process
    saves those it has not confirmed within ``timeout`` itself (``profile.stop()`` passes 0: it
    saves the last window or two here rather than wait for a worker busy analysing)."""
    c = _client
    if c is None:
        return

    def done() -> bool:
        return all(j.saved for j in c.pending.values())

    if c.wait_for(done, timeout):
        return
    with c.cond:
        c.pump()
        late = [j for j in c.pending.values() if not j.saved and j.save is not None]
        for j in late:
            j.saved = True
    if timeout > 0:
        log.warning("openmsprof: the analysis worker has not saved %d window(s) after %.1f s; saving them here",
                    len(late), timeout)
    for j in late:
        if j.save is not None:
            j.save()


def _analyse_here(path: Path) -> None:
    log.warning("openmsprof: no analysis worker process; analysing %s on the writer thread", path)
    try:
        _worker_takeover.analyse_claimed(path, "writer thread of the training process (no worker)",
                                         wait_s=_worker_takeover.STOP_WAIT_S)
    except Exception as exc:
        log.warning("openmsprof: analysing %s failed: %s", path, exc)


def _reroute(left: dict[str, Job]) -> None:
    """What the worker did not do goes to the writer thread: everything left when it is gone (its
    watcher thread), or one window it could not save (then its analysis is queued again)."""
    for path, job in left.items():
        if not job.saved and job.save is not None:
            job.saved = True
            _writer.submit(job.save)
        if job.analyse:
            _writer.submit(functools.partial(submit, Path(path), job.sync))


def wait(timeout: float = _worker_takeover.STOP_WAIT_S, sync_only: bool = False) -> bool:
    """Wait until every dir submitted so far is analysed (by the worker, by the writer thread when
    a worker died, or, for sync windows of a stalled worker, here); False on timeout."""
    deadline = time.monotonic() + timeout
    for _ in range(MAX_BROKEN + 2):
        _writer.flush(max(0.0, deadline - time.monotonic()))
        c = _client
        if c is None or not c.pending:
            if c is None or c.alive():
                return True
            continue  # it died: its dirs went back to the writer thread
        if not _worker_takeover.wait_progress(c, deadline, sync_only):
            log.warning("openmsprof: background analysis still running after %.0f s", timeout)
            return False
    return True


def analyse_now(path: Path) -> Path:
    """``export_chrome_trace`` of a window not analysed yet: analysed here, unless the worker holds
    it (then it is waited for while it makes progress, else ended and the window analysed here)."""
    where = "training process (export_chrome_trace)"
    marks: list[tuple[float, float, bool]] = []
    started = time.monotonic()
    while not _worker_takeover.analyse_claimed(path, where):
        if time.monotonic() - started >= _worker_takeover.STOP_WAIT_S:
            raise TimeoutError(f"{path} is still being analysed by another process after "
                               f"{_worker_takeover.STOP_WAIT_S:.0f} s")
        c = _client
        if c is not None and c.alive() and _worker_takeover.stalled(c, marks, started, _worker_takeover.END_STALL_S,
                                                                     analysis_only=False):
            _worker_takeover.end(c, [(os.fspath(path), Job(False, False, None, None))])
        time.sleep(_worker_takeover.POLL_S)
    return path / "ASCEND_PROFILER_OUTPUT"


def failed() -> list[str]:
    c = _client
    if c is None:
        return []
    c.pump()
    return list(c.failed)


def _at_exit() -> None:
    _writer.flush()
    if _client is not None:
        wait(_worker_takeover.STOP_WAIT_S, sync_only=True)
        wait_saved()  # the windows' files are on disk before the training process leaves
        _writer.flush()  # (those a dead worker left went to the writer thread)
        _client.close()  # the worker finishes what is queued (async windows), then leaves
    _analysis_claim.tidy_all()  # (a claims file the worker still uses is left to it)


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
    if c is not None:
        c.input.close_wake()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


