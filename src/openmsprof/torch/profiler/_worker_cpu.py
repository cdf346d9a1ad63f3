"""The CPU time of the analysis worker's process tree, read finely enough to judge 50 ms of it.

``Client.cpu_s`` (``_worker_pipe``) asks it; ``_worker_takeover`` polls it every 50 ms to tell a
worker that makes progress from a starved, stopped or wedged one.
"""

from __future__ import annotations

import os

import psutil

__all__ = ["run_s", "tree_cpu_s"]


def tree_cpu_s(pid: int, children_only: bool = False) -> float | None:
    """The CPU time so far of process ``pid`` (the analysis worker), its children's included, live
    or waited for (None once it is gone); ``children_only``: its children's alone (the analysis;
    the worker itself only saves and publishes, at normal priority, so a starved SCHED_IDLE child
    is not hidden behind the worker's own few milliseconds).  Polled every 50 ms by a waiting
    ``stop()``: the children are read from ``/proc/PID/task/PID/children`` (a scan of every
    process, ~2 ms each, where it is missing), the live ones' time from their threads'
    ``schedstat`` (nanoseconds, where the kernel has it: a 50 ms window is told apart exactly, not
    in 10 ms clock ticks)."""
    try:
        total = 0.0
        for p in _tree(psutil.Process(pid))[1 if children_only else 0:]:
            t = p.cpu_times()
            run = run_s(p.pid)
            total += (t.user + t.system if run is None else run) + getattr(t, "children_user", 0.0) \
                + getattr(t, "children_system", 0.0)
        return total
    except psutil.Error:
        return None


def run_s(pid: int) -> float | None:
    """The time on a CPU of ``pid``'s live threads (``/proc/PID/task/*/schedstat``), or None."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    ns = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                ns += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):  # (a thread that just left; no schedstat here)
            if tid == str(pid):
                return None
    return ns / 1e9


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    """``proc`` and its descendants (on Linux those forked by their main threads, which /proc lists)."""
    if not _PROC_CHILDREN:
        return [proc, *proc.children(recursive=True)]
    out, todo = [proc], [proc.pid]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            if pid == proc.pid:
                raise psutil.NoSuchProcess(pid) from None
            continue  # (a child that just left)
        for k in kids:
            try:
                out.append(psutil.Process(k))
                todo.append(k)
            except psutil.NoSuchProcess:
                pass
    return out


_PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
