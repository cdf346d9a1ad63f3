"""``openmsprof show -dir JOB``: statistics as terminal tables, or CSV/JSON on stdout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from openmsprof.cli import oneline
from openmsprof.cli.argtypes import bounded_int, input_dir
from openmsprof.config.errors import ConfigError
from openmsprof.export.jobdb import find_jobs, open_job
from openmsprof.export.msprof.show import (
    render_rich,
    render_text,
    roofline_ceilings,
    roofline_section,
    sections,
)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = oneline.add_parser(subparsers, "show", help="print a job's statistics as tables",
                                   description="Print top operators, op and API statistics, "
                                               "steps and host usage; imports first if needed.")
    parser.add_argument("-dir", "--collection-dir", dest="collection_dir", required=True, type=input_dir,
                        metavar="DIR", help="a PROF_* job directory, or a folder holding several")
    parser.add_argument("--top", type=bounded_int(-(10**9), 10**9), default=20, metavar="N",
                        help="rows per table (default 20)")
    parser.add_argument("--format", choices=("csv", "json"), default=None,
                        help="machine-readable output on stdout instead of tables")
    parser.add_argument("--layout", choices=("msprof", "svp"), default="msprof",
                        help="svp: seed 002's four tables (AI Core metrics, op statistic, acl "
                             "statistic, frequency)")
    parser.add_argument("--roofline", action="store_true",
                        help="only the roofline: each operator's modelled FLOPs/bytes against "
                             "the measured peaks (attainable time, efficiency, bound class)")
    parser.add_argument("--peaks", metavar="FILE",
                        help="with --roofline: a target machine's peaks file instead of the job's")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    if args.top <= 0:
        raise ConfigError(f"--top must be a positive integer, got {args.top}")
    console = console or Console()
    for job in find_jobs(Path(args.collection_dir)):
        with open_job(job) as db:
            if getattr(args, "layout", "msprof") == "svp":
                from openmsprof.export.msprof.svp_show import svp_sections

                secs = svp_sections(db, args.top)
            elif args.roofline:
                sec = roofline_section(db, args.top, args.peaks)
                secs = [sec] if sec is not None else []
                if not args.format:
                    console.print(roofline_ceilings(db, args.peaks))
            else:
                secs = sections(db, args.top)
        if args.format:
            sys.stdout.write(render_text(secs, args.format))
        else:
            render_rich(job.name, secs, console)
    return 0
