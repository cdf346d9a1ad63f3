"""``openmsprof compare -dir BASE -dir NEW``: a statistically sound before/after comparison.

Exit codes: 0, or 3 with ``--fail-on-regression`` when the new job is significantly slower
overall (total device time per iteration); 1 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from openmsprof.analysis import stats
from openmsprof.analysis.compare import compare_jobs
from openmsprof.analysis.render import FORMATS, render_rich, render_text
from openmsprof.cli.argtypes import input_dir
from openmsprof.config.errors import ConfigError, PathError
from openmsprof.config.paths import resolve_output
from openmsprof.fileio import fs

REGRESSION_EXIT = 3


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "compare", help="compare two jobs (before/after) with significance tests",
        description="Compare job NEW against job BASE: total device/API time, operator types, "
                    "operators and APIs, each with a Mann-Whitney U test over iterations.")
    p.add_argument("-dir", "--collection-dir", dest="dirs", action="append", default=[], type=input_dir,
                   metavar="DIR", help="give twice: the base job, then the new job")
    p.add_argument("--base", metavar="JOB", help="the base (before) job")
    p.add_argument("--new", metavar="JOB", help="the new (after) job")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of the tests (default 0.05)")
    p.add_argument("--threshold", default="5%", metavar="PCT",
                   help="minimum change of the median to call a row faster/slower "
                        "(default 5%%; '0.05' also means 5%%)")
    p.add_argument("--top", type=int, default=15, metavar="N", help="rows per table (default 15)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="machine-readable output instead of tables")
    p.add_argument("--output", metavar="FILE", help="write the CSV/JSON to FILE instead of stdout")
    p.add_argument("--fail-on-regression", action="store_true",
                   help=f"exit {REGRESSION_EXIT} when the new job is significantly slower")
    p.set_defaults(func=run)


def parse_threshold(text: str) -> float:
    """``"5%"`` → 0.05; ``"0.05"`` → 0.05; bad text → ConfigError."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ConfigError(f"--threshold must be a percentage like 5% or a fraction like 0.05, "
                          f"got {text!r}") from None
    if not 0.0 <= value < 10.0:
        raise ConfigError(f"--threshold must be between 0% and 1000%, got {text!r}")
    return value


def _jobs(args: argparse.Namespace) -> tuple[str, str]:
    dirs = list(args.dirs)
    if args.base or args.new:
        if not (args.base and args.new) or dirs:
            raise ConfigError("compare takes --base JOB --new JOB, or -dir BASE -dir NEW")
        return args.base, args.new
    if len(dirs) != 2:
        raise ConfigError(f"compare needs two jobs (-dir BASE -dir NEW), got {len(dirs)}")
    return dirs[0], dirs[1]


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    base, new = _jobs(args)
    threshold = parse_threshold(args.threshold)
    if args.top <= 0:
        raise ConfigError(f"--top must be a positive integer, got {args.top}")
    fmt = args.format
    out = resolve_output(args.output, "--output") if args.output else None
    if out is not None and not out.parent.is_dir():
        raise PathError(f"--output {args.output!r}: directory {str(out.parent)!r} does not exist")
    if out is not None and fmt is None:
        fmt = "json" if out.suffix.lower() == ".json" else "csv"
    cmp = compare_jobs(Path(base), Path(new), alpha=args.alpha, threshold=threshold)
    if fmt is None:
        render_rich(cmp, console or Console())
    elif out is None:
        sys.stdout.write(render_text(cmp, fmt))
    else:
        fs.write_file_atomic(out, render_text(cmp, fmt))
        print(f"openmsprof compare: {cmp.verdict}; {fmt.upper()} written to {out}")
    if args.fail_on_regression and cmp.verdict == stats.SLOWER:
        print(f"openmsprof compare: regression — the new job is significantly slower "
              f"(exit {REGRESSION_EXIT})", file=sys.stderr)
        return REGRESSION_EXIT
    return 0
