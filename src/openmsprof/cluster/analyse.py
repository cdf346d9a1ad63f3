"""``openmsprof cluster``: parse ranks into stores (local pool or Dask), then answer each mode
with DuckDB over the stores and write msprof-analyze's files into ``cluster_analysis_output/``.

Files: ``cluster_step_trace_time.csv`` (step_trace); ``cluster_communication.json``,
``cluster_communication_matrix.json``, ``communication_group.json`` (communication);
``compute_op_sum/{all_stats,rank_stats_by_optype,rank_stats_by_opname}.csv`` (compute_op);
``slow_rank/{rank_stats,slow_op_stats}.csv`` plus ``slow_rank/wait_transfer.csv`` and
``slow_rank/slow_rank.json`` (slow_rank: the wait/transfer split, the slow rank and its cause).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import orjson

from openmsprof.cluster import annotate as annotate_mod
from openmsprof.cluster import memcap, opstats, runner, sqlviews, views_comm, views_step, waits
from openmsprof.cluster import rank_deadline as deadlines
from openmsprof.cluster.discover import discover
from openmsprof.cluster.store import restore_small
from openmsprof.config.errors import ConfigError, ProfilingError
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import read_json

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MODES", "ClusterRun", "run_cluster"]

MODES = ("step_trace", "communication", "compute_op", "slow_rank")
OUTPUT = "cluster_analysis_output"
STORE = ".openmsprof_store"


@dataclass
class ClusterRun:
    output: Path
    store: Path
    partials: list[dict[str, Any]]
    problems: list[str]
    files: list[Path] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    slow_rank: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def _csv(path: Path, df: pd.DataFrame, index: bool = False) -> Path:
    fs.write_file_atomic(path, df.to_csv(index=index))
    return path


def _json(path: Path, doc: Any) -> Path:
    fs.write_file_atomic(path, orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS))
    return path


def _metadata(partials: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """``key`` of the first rank's profiler_metadata.json that has it."""
    for p in partials:
        meta = Path(p["path"]) / "profiler_metadata.json"
        try:
            doc = read_json(meta, meta.name) if os.path.lexists(meta) else None
        except ProfilingError:  # refused or unreadable: the rank's own parse reported its files
            continue
        if isinstance(doc, dict) and isinstance(doc.get(key), dict):
            return doc[key]
    return None


def parse_all(root: Path, store: Path, *, scheduler: str | None = None, scheduler_file: str | None = None,
              workers: int | None = None, shared: bool = True, kernels: bool = True,
              deadline: deadlines.RankDeadline | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    found = discover(root)
    fs.make_dir(store)
    if scheduler or scheduler_file:
        partials = runner.run_dask(found.ranks, store, scheduler, scheduler_file, shared=shared, kernels=kernels)
    else:
        partials = runner.run_local(found.ranks, store, workers, kernels=kernels, deadline=deadline)
    for p in partials:
        if p.get("small"):
            restore_small(store, p)
    problems = list(found.problems) + [m for p in partials for m in p.get("problems", [])]
    return partials, problems


def run_cluster(root: Path, modes: list[str], output: Path | None = None, *, scheduler: str | None = None,
                scheduler_file: str | None = None, workers: int | None = None, shared: bool = True,
                memory_limit: str | None = None, annotate: str | None = None,
                rank_timeout: str | None = None) -> ClusterRun:
    """Analyse every rank under ``root``; returns what was written and what went wrong.
    ``memory_limit``: DuckDB's cap (``memcap``; spills beyond it to a directory under the output).
    ``rank_timeout``: seconds a local worker may take over one rank, or ``off`` (``rank_deadline``).
    ``annotate``: ``"on"`` writes the measured wait/transfer split into each torch rank's
    communication files, ``"off"`` restores the exported ones (:mod:`.annotate`)."""
    bad = [m for m in modes if m not in (*MODES, "all")]
    if bad:
        raise ConfigError(f"cluster mode {bad[0]!r}: unknown (choose from {', '.join((*MODES, 'all'))})")
    chosen = list(MODES) if "all" in modes or not modes else modes
    cap = memcap.cap_bytes(memory_limit)
    deadline = deadlines.setting(rank_timeout)
    if rank_timeout is not None and (scheduler or scheduler_file):
        raise ConfigError("--rank-timeout: not supported with a Dask scheduler (the local workers' deadline)")
    # (the environment's setting is often machine-wide: with a scheduler it is reported, not fatal)
    ignored = [f"{deadlines.ENV}: not supported here with a Dask scheduler (the local workers' deadline); "
               "ignored"] if deadline.chosen and rank_timeout is None and (scheduler or scheduler_file) else []
    if not root.is_dir():
        raise ConfigError(f"cluster input {root}: not a directory")
    out = fs.make_dir((output or root) / OUTPUT)
    store = out / STORE
    t0 = time.perf_counter()
    partials, problems = parse_all(root, store, scheduler=scheduler, scheduler_file=scheduler_file, workers=workers,
                                   shared=shared, kernels=bool({"compute_op", "slow_rank"} & set(chosen)),
                                   deadline=deadline)
    run = ClusterRun(out, store, partials, ignored + problems, seconds={"parse": time.perf_counter() - t0})
    ok = [int(p["rank"]) for p in partials if not p.get("failed")]
    con = sqlviews.connect(store, ok, memory_bytes=cap)
    try:
        _views(con, run, chosen, partials, cap, annotate)
    except duckdb.OutOfMemoryException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ProfilingError(f"cluster: DuckDB needs more than its {cap >> 20} MiB cap ({first}); raise "
                             f"--memory-limit or {memcap.ENV}") from None
    finally:
        con.close()
        memcap.remove_spill(out)
    return run


def _views(con: Any, run: ClusterRun, chosen: list[str], partials: list[dict[str, Any]], cap: int,
           annotate: str | None = None) -> None:
    """Write the chosen modes' files (``run.files``) and their times (``run.seconds``)."""
    out = run.output
    t1 = time.perf_counter()
    if "step_trace" in chosen:
        groups = _metadata(partials, "parallel_group_info") or {}
        pipeline = any(isinstance(g, dict) and str(g.get("group_name", "")).lower().startswith("pp")
                       for g in groups.values())
        header, step_rows = views_step.step_trace_rows(con, _metadata(partials, "distributed_args"), pipeline)
        if step_rows:  # (pandas is not imported for step_trace and communication: its import is most of their CPU)
            path = out / "cluster_step_trace_time.csv"
            fs.write_file_atomic(path, views_step.step_trace_csv(header, step_rows))
            run.files.append(path)
    run.seconds["step_trace"] = time.perf_counter() - t1
    if "communication" in chosen:
        comm = views_comm.communication_json(con)
        if comm:
            run.files.append(_json(out / "cluster_communication.json", comm))
            run.files.append(_json(out / "communication_group.json", views_comm.group_json(con, _metadata(partials, "parallel_group_info"))))
        matrix = views_comm.matrix_json(con)
        if matrix:
            run.files.append(_json(out / "cluster_communication_matrix.json", matrix))
    run.seconds["communication"] = time.perf_counter() - t1 - run.seconds["step_trace"]
    if "compute_op" in chosen:
        frames = opstats.compute_op_frames(con, min(opstats.EXACT_LIMIT, memcap.exact_kernel_limit(cap)))
        if frames:
            d = fs.make_dir(out / "compute_op_sum")
            run.files += [_csv(d / f"{name}.csv", df) for name, df in frames.items()]
    t2 = time.perf_counter()
    run.seconds["compute_op"] = t2 - t1 - run.seconds["step_trace"] - run.seconds["communication"]
    if "slow_rank" in chosen:
        run.slow_rank = _slow_rank(con, out, run)
    run.seconds["slow_rank"] = time.perf_counter() - t2
    if annotate == "on":
        rows = (con.execute("SELECT rank, step, op_key, wait_ms, transfer_ms FROM waits").fetchall()
                if sqlviews.has(con, "waits") or waits.build_waits(con) else [])
        run.notes += annotate_mod.annotate_ranks(partials, rows) if rows else [
            "no collective seen by two ranks: nothing to annotate"]
    elif annotate == "off":
        run.notes += annotate_mod.unannotate_ranks(partials)
    run.seconds["analyse"] = time.perf_counter() - t1


def _slow_rank(con: Any, out: Path, run: ClusterRun) -> dict[str, Any]:
    report = waits.slow_rank_report(con)
    d = fs.make_dir(out / "slow_rank")
    report["clock_alignment"] = _alignment(run.partials, report.get("clock_disagreement_us", 0.0))
    run.files.append(_json(d / "slow_rank.json", report))
    if sqlviews.has(con, "waits"):
        run.files.append(_csv(d / "wait_transfer.csv", con.execute(
            "SELECT rank, step, op_key AS op, start_us, end_us, last_rank, wait_ms, transfer_ms FROM waits "
            "ORDER BY start_us, rank").df()))
        votes = con.execute("SELECT last_rank AS rankId, count(DISTINCT (step, op_key)) AS slowAffectCount "
                            "FROM waits GROUP BY last_rank ORDER BY last_rank").df()
        run.files.append(_csv(d / "rank_stats.csv", votes))
        stats = con.execute("""
            SELECT any_value(last_rank)::VARCHAR AS SlowRank, op_key AS OpName, any_value(group_name) AS GroupName,
                   min(start_us) * 1000 AS Timestamp, count(*) AS Count,
                   avg((end_us - start_us) * 1000) AS MeanNs, stddev_samp((end_us - start_us) * 1000) AS StdNs,
                   min((end_us - start_us) * 1000) AS MinNs, median((end_us - start_us) * 1000) AS MedianNs,
                   max((end_us - start_us) * 1000) AS MaxNs, sum((end_us - start_us) * 1000) AS SumNs,
                   sum(wait_ms) AS WaitMs
            FROM waits GROUP BY step, op_key ORDER BY Timestamp""").df()
        run.files.append(_csv(d / "slow_op_stats.csv", stats))
    return report


def _alignment(partials: list[dict[str, Any]], disagreement_us: float) -> dict[str, Any]:
    hosts = sorted({str(p.get("host")) for p in partials})
    return {
        "method": "each rank's timestamps are epoch µs from its own (monotonic, epoch) pair",
        "hosts": hosts,
        "pair_error_us": 1.0,
        "cross_host": "unbounded by the data: add the hosts' wall-clock (NTP/PTP) offset" if len(hosts) > 1 else None,
        "observed_disagreement_us": disagreement_us,
    }
