"""Run ``parse_rank`` over every rank: a local process pool sized by free memory, or the
workers of a Dask distributed cluster (futures API), with a rich progress bar on a terminal.

A worker that dies takes only its rank with it: the local pool (:mod:`.rank_pool`) watches its
workers, reaps a dead one and gives its rank to a replacement (``RETRIES`` more times); Dask
reschedules them itself (``retries``).  A local worker that has not answered its rank by the
rank's deadline (:mod:`.rank_deadline`) is killed and charged the same way.  A rank that still
fails is reported by name, with what ended its workers, never silently missing.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from openmsprof.cluster.discover import RankSource
from openmsprof.cluster.rank_deadline import RankDeadline
from openmsprof.cluster.rank_pool import RETRIES, RankPool, failed_partial
from openmsprof.cluster.store import cached_partial, parse_rank
from openmsprof.config.errors import ConfigError

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = ["RETRIES", "WORKER_BUDGET", "local_workers", "run_dask", "run_local"]

#: Peak memory of one worker process parsing a rank (measured 348 MiB for 1 M kernels), with margin.
WORKER_BUDGET = 400 << 20

Report = Callable[[dict[str, Any]], None]


def local_workers(n_ranks: int, requested: int | None = None) -> int:
    """Processes for the local pool: ``requested``, else min(CPUs, ranks, free memory / budget)."""
    if requested:
        return max(1, min(requested, n_ranks))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    by_mem = max(1, int(psutil.virtual_memory().available * 0.5) // WORKER_BUDGET)
    return max(1, min(cpus, n_ranks, by_mem))


def _advancer(bar: Progress | None) -> Callable[[], None] | None:
    """The progress bar's one step, for the pool (None without a bar)."""
    if bar is None:
        return None
    task = bar.task_ids[0]
    return lambda: bar.advance(task)


def _progress(total: int) -> Progress | None:
    if not sys.stderr.isatty():
        return None
    from rich.progress import Progress  # (on a terminal only: its import is ~80 ms)

    bar = Progress(transient=True)
    bar.start()
    bar.add_task("parsing ranks", total=total)
    return bar


def run_local(ranks: list[RankSource], store: Path, workers: int | None = None,
              kernels: bool = True, deadline: RankDeadline | None = None) -> list[dict[str, Any]]:
    """Parse every rank in a process pool (in this process when one worker suffices, or when no
    kernels are parsed and no worker count is asked for, unless a deadline was chosen: one is
    kept in a worker only); ``deadline``: how long a worker may take over a rank (default: by size)."""
    done: dict[int, dict[str, Any]] = {}
    for src in ranks:  # current stores need no worker
        hit = cached_partial(src, store, kernels=kernels)
        if hit is not None:
            done[src.rank] = hit
    fresh = [s for s in ranks if s.rank not in done]
    # without kernels a rank parses in milliseconds, less than a worker process costs: here, unless asked
    n = local_workers(len(fresh), workers) if kernels or workers else 1
    bar = _progress(len(fresh)) if fresh else None
    try:
        if n == 1 and not (deadline is not None and deadline.chosen):
            for src in fresh:
                done[src.rank] = parse_rank(src, store, kernels=kernels)
                if bar:
                    bar.advance(bar.task_ids[0])
            return [done[s.rank] for s in ranks]
        done.update(RankPool(min(n, len(fresh)), store, kernels, _advancer(bar), deadline).run(fresh))
    finally:
        if bar:
            bar.stop()
    return [done[s.rank] for s in ranks]


def _client(scheduler: str | None, scheduler_file: str | None) -> Any:
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - dask is a dependency
        raise ConfigError("--scheduler needs dask.distributed (pip install 'dask[distributed]')") from exc
    where = scheduler or scheduler_file
    try:
        if scheduler_file:
            return Client(scheduler_file=scheduler_file, timeout="10s")
        return Client(scheduler, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise ConfigError(f"Dask scheduler {where}: unreachable ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:160] if str(exc) else 'no answer'})") from None


def _pin(client: Any, ranks: Iterable[RankSource], shared: bool) -> dict[int, list[str]]:
    """Worker addresses per rank: those on the host holding its files (when files are not shared)."""
    if shared:
        return {}
    by_host: dict[str, list[str]] = {}
    for addr, name in client.run(socket.gethostname).items():
        by_host.setdefault(str(name), []).append(addr)
    pins = {s.rank: by_host[s.host] for s in ranks if s.host in by_host}
    missing = sorted({s.host for s in ranks if s.host not in by_host})
    if missing:
        raise ConfigError(f"no Dask worker runs on host(s) {', '.join(missing)} that hold rank files "
                          "(start one there, or use shared files)")
    return pins


def run_dask(ranks: list[RankSource], store: Path, scheduler: str | None = None, scheduler_file: str | None = None,
             shared: bool = True, kernels: bool = True) -> list[dict[str, Any]]:
    """Parse every rank on the workers of a Dask cluster (``client.submit`` per rank)."""
    from distributed import as_completed

    done: dict[int, dict[str, Any]] = {}
    if shared:  # current stores need no worker
        for src in ranks:
            hit = cached_partial(src, store, kernels=kernels)
            if hit is not None:
                done[src.rank] = hit
    fresh = [s for s in ranks if s.rank not in done]
    if not fresh:
        return [done[s.rank] for s in ranks]
    client = _client(scheduler, scheduler_file)
    bar = _progress(len(fresh))
    try:
        pins = _pin(client, fresh, shared)
        futs = {client.submit(parse_rank, s, store, kernels=kernels, key=f"openmsprof-rank-{s.rank}-{os.getpid()}", pure=False,
                              retries=RETRIES, workers=pins.get(s.rank), allow_other_workers=False): s
                for s in fresh}
        for fut in as_completed(list(futs)):
            src = futs[fut]
            try:
                done[src.rank] = fut.result()
            except Exception as exc:
                done[src.rank] = failed_partial(src, f"failed on the Dask workers ({type(exc).__name__}: "
                                              f"{str(exc).splitlines()[0][:160] if str(exc) else ''})")
            if bar:
                bar.advance(bar.task_ids[0])
        return [done[s.rank] for s in ranks]
    finally:
        if bar:
            bar.stop()
        client.close()
