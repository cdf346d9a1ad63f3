"""``openmsprof export timeline|summary -dir JOB`` (msprof spellings; imports first if needed)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from openmsprof.cli import oneline
from openmsprof.cli.argtypes import finite_float, input_dir
from openmsprof.config.errors import ConfigError, ProfilingError
from openmsprof.export.exportlock import job_lock
from openmsprof.export.jobdb import find_jobs
from openmsprof.export.msprof.msprof_analyze_layout import (
    export_summary_and_layout,
    export_tool_facing,
    prepare_db,
)
from openmsprof.export.msprof.step_timeline import export_step_timeline
from openmsprof.export.msprof.summary_export import FORMATS, export_summary
from openmsprof.export.msprof.timeline import export_timeline


def _add_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("-dir", "--collection-dir", dest="collection_dir", required=True, type=input_dir,
                   metavar="DIR", help="a PROF_* job directory, or a folder holding several")


LAYOUTS = ("msprof", "svp")


def _add_layout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layout", choices=LAYOUTS, default="msprof",
                   help="file set: msprof (default) or svp, seed 002's SVP msprof.pyc files "
                        "(task_time_/acl_{dev}.{model}.{id}.{batch}.json; op_summary_, "
                        "op_statistic_, acl_statistic_ CSVs)")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = oneline.add_parser(subparsers, "export", help="export timeline or summary data of a job",
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
    _add_layout(tl)
    tl.add_argument("--no-tool-facing", action="store_true",
                    help="skip mindstudio_profiler_output/ and msprof_{ts}.db (written by default)")
    tl.set_defaults(func=run_timeline)
    sm = sub.add_parser("summary", help="CSV/JSON summaries -> JOB/summary/{name}_{dev}.csv")
    _add_dir(sm)
    sm.add_argument("--format", choices=FORMATS, default="csv", help="file format (default csv)")
    _add_layout(sm)
    sm.add_argument("--no-tool-facing", action="store_true",
                    help="skip mindstudio_profiler_output/ and msprof_{ts}.db (written by default)")
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
            with job_lock(job):  # one export of a job at a time (they share the tool-facing layout)
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
    if args.layout == "svp":
        from openmsprof.export.msprof.svp_timeline import export_svp_timeline

        return for_each_job(args.collection_dir, export_svp_timeline, "timeline")
    if args.max_size_mb is not None and args.max_size_mb <= 0:
        raise ConfigError(f"--max-size-mb must be > 0, got {args.max_size_mb}")
    def action(job: Path) -> list[Path]:
        paths = export_timeline(
            job, ascend_compat=args.ascend_compat, start_us=args.start_us, end_us=args.end_us,
            max_size_mb=args.max_size_mb,
            # the tool-facing db is copied while the device child renders
            meanwhile=None if getattr(args, "no_tool_facing", False) else lambda: prepare_db(job))
        paths += export_step_timeline(job, start_us=args.start_us, end_us=args.end_us)
        if not paths and (args.start_us is not None or args.end_us is not None):
            print(f"{job.name}: no events in window [{_us(args.start_us)}, {_us(args.end_us)}] us; "
                  "earlier timeline files left as they were")
        return paths + _tool_facing(job, args, "timeline")

    return for_each_job(args.collection_dir, action, "timeline")


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def run_summary(args: argparse.Namespace) -> int:
    if args.layout == "svp":
        from openmsprof.export.msprof.svp_summary import export_svp_summary

        return for_each_job(args.collection_dir, lambda job: export_svp_summary(job, args.format), "summary")
    return for_each_job(args.collection_dir,
                        lambda job: _summary_and_tool_facing(job, args),
                        "summary")


def _summary_and_tool_facing(job: Path, args: argparse.Namespace) -> list[Path]:
    if getattr(args, "no_tool_facing", False):
        return export_summary(job, fmt=args.format)
    written, layout = export_summary_and_layout(job, ("summary",), fmt=args.format)
    _print_tool_facing(job, layout)
    return written


def _tool_facing(job: Path, args: argparse.Namespace, part: str) -> list[Path]:
    """The verb's half of mindstudio_profiler_output/ + msprof_{ts}.db (docs/formats.md §2), unless
    --no-tool-facing; reported on its own line, so the verb's file count stays its own."""
    if not getattr(args, "no_tool_facing", False):
        _print_tool_facing(job, export_tool_facing(job, (part,)))
    return []


def _print_tool_facing(job: Path, paths: list[Path]) -> None:
    print(f"{job.name}: tool-facing layout ({len(paths)} file(s)) in {job / 'mindstudio_profiler_output'} "
          f"and {paths[0].name}")
