"""When the training process stops waiting for the analysis worker and analyses its windows itself.

A SCHED_IDLE worker gets no CPU while every core is busy: one that got under ``MIN_SHARE`` of a
core for ``STALL_S`` seconds (starved, SIGSTOPped, wedged), or ran ``STOP_WAIT_S`` in all, is not
waited for (``stalled``): the waiting thread analyses the windows itself, at the caller's priority
(``take_over``), under each window's claim (``analyse_claimed``, ``_analysis_claim``); the worker is
ended (``end``) only if it holds a window's claim ``HELD_WAIT_S`` or is stopped.  ``_analysis_worker``
drives it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from openmsprof.torch.profiler import _analysis_claim, _analysis_stage
from openmsprof.torch.profiler._worker_pipe import Client, Job

__all__ = ["END_STALL_S", "HELD_WAIT_S", "MIN_SHARE", "POLL_S", "STALL_S", "STOP_WAIT_S", "analyse_claimed", "end",
           "stalled", "take_over", "wait_progress"]

log = logging.getLogger("openmsprof")
#: ``profile.stop()`` (sync) and exit wait for a worker only while it makes progress: one that got
#: less than ``MIN_SHARE`` of a core over the last ``STALL_S`` seconds (starved by busy cores,
#: SIGSTOPped, blocked) or has run ``STOP_WAIT_S`` seconds in all has its windows analysed on the
#: waiting thread, at the caller's priority (a SCHED_IDLE child on busy cores gets ~0 % and one on
#: a free core ~100 %: a short window tells them apart; a wrong verdict costs one window analysed
#: twice, never a wrong result).  ``export_chrome_trace`` ends a worker that holds the window it
#: wants after ``END_STALL_S`` of such stalling.
STALL_S = 0.05
END_STALL_S = 0.5
MIN_SHARE = 0.25
STOP_WAIT_S = 300.0
#: a window's claim held by the worker (saving or publishing it: a few ms at normal priority) is
#: waited for this long before the worker is taken for wedged and ended
HELD_WAIT_S = 10.0
POLL_S = 0.05


def analyse_claimed(path: Path, where: str, job: Job | None = None, wait_s: float = 0.0) -> bool:
    """Save (``job``'s window, if the worker has not) and analyse ``path`` here under its claim
    unless it is done; a claim another process holds is waited for up to ``wait_s``.  False when
    that process still holds it."""
    from openmsprof.torch.profiler.analysis import analyse_dir_info

    t0, c0 = time.perf_counter(), time.thread_time()
    with _analysis_claim.claim(path, wait_s) as mine:
        if mine:
            if job is not None and not job.saved and job.save is not None:
                job.saved = True
                job.save()  # (idempotent: the trace in place already stops it)
            read = analyse_dir_info(path, parallel=False)
            _analysis_claim.record_overhead(path, time.thread_time() - c0, time.perf_counter() - t0, where, read)
        return mine is not None


def stalled(c: Client, marks: list[tuple[float, float, bool]], started: float, stall_s: float = STALL_S,
            analysis_only: bool | None = None) -> bool:
    """Whether the worker made too little progress over the last ``stall_s`` (``marks``: (wall,
    cpu, measure) samples; the first call only takes one).  Progress is its analysing child's CPU alone
    (``analysis_only``; None: when every window it holds is saved, so only the child can finish
    them and the worker's own CPU must not hide a starved child), else the whole tree's."""
    if analysis_only is None:
        with c.cond:
            c.pump()
            analysis_only = all(j.saved for j in c.pending.values())
    if marks and marks[-1][2] != analysis_only:  # (the measure changed: its samples start again)
        marks.clear()
    now, cpu = time.monotonic(), c.cpu_s(analysis_only)
    if cpu is None:
        return False  # gone: the reader re-routes its windows
    marks.append((now, cpu, analysis_only))
    while len(marks) > 2 and marks[1][0] <= now - stall_s:
        marks.pop(0)
    t0, c0, _ = marks[0]
    return (now - t0 >= stall_s and cpu - c0 < MIN_SHARE * (now - t0)) or now - started >= STOP_WAIT_S


def take_over(c: Client, why: str, sync_only: bool) -> None:
    """Analyse the windows still pending (the sync ones if ``sync_only``) on this waiting thread;
    the worker is ended only if it holds one's claim ``HELD_WAIT_S`` (a few ms at normal priority
    while saving or publishing; the whole analysis where it cannot stage).  Windows it has not
    saved are saved here first."""
    c.flush()  # (lines held to be written together: the worker saves, and answers for, every window)
    with c.cond:  # taken out first: ending the worker re-routes only what is left
        c.pump()  # (the answers that arrived: a window analysed meanwhile is not taken)
        mine = [(p, j) for p, j in c.pending.items() if j.analyse and (j.sync or not sync_only)]
        for p, _ in mine:
            del c.pending[p]
    log.warning("openmsprof: the analysis worker (pid %d) %s; analysing %d window(s) here", c.proc.pid, why,
                len(mine))
    where = f"training process, on the thread that waited (the worker {why})"
    if c.stopped():
        end(c, mine)  # it would hold the windows handed to it next, and its pipes, for good
    for path, job in mine:
        try:  # the worker holds a window's claim only a few ms at normal priority (saving, publishing)
            held = HELD_WAIT_S if _analysis_stage.supported() else 0.0
            if not analyse_claimed(Path(path), where, job, wait_s=held):
                end(c, mine)  # wedged while holding it: ending it frees the claim
                if not analyse_claimed(Path(path), where, job, wait_s=5.0):
                    log.warning("openmsprof: %s is still held by another process; left for offline analyse", path)
        except Exception as exc:
            log.warning("openmsprof: analysing %s failed: %s", path, exc)
            with c.cond:
                c.failed.append(path)
        if job.out is not None and Path(path) not in job.out:
            job.out.append(Path(path))
    with c.cond:
        c.cond.notify_all()


def end(c: Client, windows: list[tuple[str, Job]]) -> None:
    """End the worker and remove the stage dirs it left beside ``windows``."""
    c.end()
    for root in {Path(p).parent for p, _ in windows}:
        _analysis_stage.sweep(root, c.proc.pid)
        _analysis_claim.tidy(root)


def wait_progress(c: Client, deadline: float, sync_only: bool) -> bool:
    """Wait for the worker's queue (its sync windows if ``sync_only``) while it makes progress;
    sync windows of a stalled worker are taken over here."""
    marks: list[tuple[float, float, bool]] = []
    started = time.monotonic()
    stalled(c, marks, started)  # (the first sample: a verdict after ``STALL_S``, not one poll more)
    while not c.wait(min(POLL_S, max(0.0, deadline - time.monotonic())), sync_only):
        if not c.alive():
            return True  # the reader re-routed what it left
        if time.monotonic() >= deadline:
            return False
        if stalled(c, marks, started):
            late = time.monotonic() - started >= STOP_WAIT_S
            take_over(c, f"is still busy after {STOP_WAIT_S:.0f} s" if late
                      else f"got under {MIN_SHARE:.0%} of a core for {STALL_S} s", sync_only)
            return True
    return True
