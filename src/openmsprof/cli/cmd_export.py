"""``openmsprof export timeline|summary -dir JOB`` (msprof spellings; imports first if needed)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from openmsprof.cli.argtypes import finite_float, input_dir
from openmsprof.config.errors import ConfigError, ProfilingError
from openmsprof.export.db import find_jobs
from openmsprof.export.msprof.summary import FORMATS, export_summary
from openmsprof.export.msprof.timeline import export_timeline


def _add_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("-dir", "--collection-dir", dest="collection_dir", required=True, type=input_dir,
                   metavar="DIR", help="a PROF_* job directory, or a folder holding several")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("export", help="export timeline or summary data of a job",
                                   description="Export a job's timeline (Chrome trace JSON) or "
                                               "summaries (CSV/JSON); imports the job first "
                                               "when needed.")
    sub = parser.add_subparsers(dest="export_kind", metavar="{timeline,summary}")
    parser.set_defaults(func=lambda args: _missing_kind(parser))
    tl = sub.add_parser("timeline", help="Chrome trace JSON -> JOB/timeline/msprof_{dev}.json")
    _add_dir(tl)
    tl.add_argument("--ascend-compat", action="store_true",
                    help="Ascend spelling: bare array, absolute string ts, bit-packed pids")
    tl.add_argument("--start-us", type=finite_float(-1e15, 1e15), default=None, metavar="US",
                    help="only events ending at/after this time (µs from the trace base)")
    tl.add_argument("--end-us", type=finite_float(-1e15, 1e15), default=None, metavar="US",
                    help="only events starting before this time (µs from the trace base)")
    tl.add_argument("--max-size-mb", type=finite_float(-1e9, 1e9), default=None, metavar="MB",
                    help="split into msprof_{dev}_slice_{k}.json files of about this size")
    tl.set_defaults(func=run_timeline)
    sm = sub.add_parser("summary", help="CSV/JSON summaries -> JOB/summary/{name}_{dev}.csv")
    _add_dir(sm)
    sm.add_argument("--format", choices=FORMATS, default="csv", help="file format (default csv)")
    sm.add_argument("--s2", action="store_true",
                    help="also write the S2 (SVP) op_statistic layout as op_statistic_s2_*")
    sm.set_defaults(func=run_summary)


def _missing_kind(parser: argparse.ArgumentParser) -> int:
    parser.print_usage(sys.stderr)
    print("openmsprof export: error: choose 'timeline' or 'summary'", file=sys.stderr)
    return 2


def for_each_job(directory: str, action: Callable[[Path], list[Path]], what: str) -> int:
    """Run ``action`` on every job under ``directory``; one job's failure does not stop the rest."""
    jobs = find_jobs(Path(directory))
    failed = 0
    for job in jobs:
        try:
            paths = action(job)
        except ProfilingError as exc:
            if len(jobs) == 1:
                raise
            print(f"openmsprof: error: {job}: {exc}", file=sys.stderr)
            failed += 1
            continue
        where = paths[0].parent if paths else job
        print(f"{job.name}: {len(paths)} {what} file(s) in {where}")
    return 1 if failed else 0


def run_timeline(args: argparse.Namespace) -> int:
    if args.max_size_mb is not None and args.max_size_mb <= 0:
        raise ConfigError(f"--max-size-mb must be > 0, got {args.max_size_mb}")
    return for_each_job(args.collection_dir, lambda job: export_timeline(
        job, ascend_compat=args.ascend_compat, start_us=args.start_us, end_us=args.end_us,
        max_size_mb=args.max_size_mb), "timeline")


def run_summary(args: argparse.Namespace) -> int:
    return for_each_job(args.collection_dir,
                        lambda job: export_summary(job, fmt=args.format, s2=args.s2), "summary")
