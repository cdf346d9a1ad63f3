"""``openmsprof import -dir JOB``: raw job(s) -> ``JOB/sqlite/msprof.db`` (S2 msprof spelling)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from openmsprof.cli import oneline
from openmsprof.cli.argtypes import input_dir
from openmsprof.config.errors import PathError
from openmsprof.config.paths import find_symlink, resolve_output
from openmsprof.parse.importer import import_path


def register(subparsers: Any) -> None:
    p = oneline.add_parser(
        subparsers, "import", help="parse raw profiling data into JOB/sqlite/msprof.db",
        description="Parse the raw data of a job (or of every job in a folder) into an SQLite "
                    "database at JOB/sqlite/msprof.db; re-running rebuilds it.",
    )
    p.add_argument("-dir", "--collection-dir", dest="collection_dir", required=True, metavar="DIR", type=input_dir,
                   help="a PROF_* job directory, an S2 JOB directory, or a folder holding jobs")
    p.add_argument("--output", metavar="DIR", default=None,
                   help="write the database under DIR/sqlite (DIR/<job>/sqlite for several jobs) "
                        "instead of inside the job, e.g. for a read-only job")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    progress = False if args.no_progress else None
    output = resolve_output(args.output, "--output") if args.output else None
    source = Path(os.path.abspath(args.collection_dir))
    link = find_symlink(source)
    if link is not None:
        raise PathError(f"-dir {args.collection_dir!r} goes through a symbolic link at {str(link)!r}; refused")
    results = import_path(source, progress=progress, output=output)
    for r in results:
        total = sum(n for t, n in r.rows.items() if t not in ("STRING_IDS", "META_DATA"))
        print(f"{r.job_dir}: {r.records} records -> {r.db_path} ({total} rows, {r.seconds:.2f} s)")
        for w in r.warnings:
            print(f"openmsprof: warning: {r.job_dir.name}: {w}", file=sys.stderr)
    return 0
